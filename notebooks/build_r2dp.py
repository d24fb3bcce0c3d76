"""Build ``notebooks/r2dp.ipynb`` (R²DP, Mohammady et al. CCS 2020, reproduced with dpopt) with nbformat.

Run ``python notebooks/build_r2dp.py``; ``tests/test_notebooks.py`` executes the notebook.
"""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell
from notebook_writer import INLINE_FIGURES, comparison_cells, reference_cell, write_notebook

CELLS = [
    new_markdown_cell(
        "# R²DP with exact privacy accounting\n\n"
        "Mohammady et al. (below) "
        "add Laplace noise whose scale b is itself random; t = 1/b has a *second-fold* law with MGF M, the noise "
        "density is ½M'(−|x|) and the exact privacy is ε = ln(E[t] / M'(−Δ)) (Thm 4.1).\n\n"
        "This notebook reproduces the paper's deterministic lemmas and examples with dpopt, and the "
        "comparisons that survive exact accounting. Expected values come from the digest (§3), which computed "
        "them independently; several of the paper's claims do not survive (Thm B.2, the gains of Figs 3/4/11) "
        "and the notebook shows why. The table at the end sets the paper's printed numbers against dpopt's."
    ),
    reference_cell(
        "Meisam Mohammady, Mengyuan Zhang, Shangyu Xie, Lingyu Wang, Yuan Hong, Makan Pourzandi and Mourad "
        "Debbabi, *R²DP: A Universal and Automated Approach to Optimizing the Randomization Mechanisms of "
        "Differential Privacy for Utility Metrics with No Known Optimal Distributions*, Proceedings of the 2020 "
        "ACM SIGSAC Conference on Computer and Communications Security (CCS '20), 2020."
    ),
    new_code_cell(
        "import math\n"
        "import numpy as np\n"
        + INLINE_FIGURES +
        "import matplotlib.pyplot as plt\n"
        "from scipy import optimize\n"
        "import dpopt\n"
        "from dpopt.noise.second_folds import (DiscreteFold, GammaFold, UniformFold, TruncatedNormalFold,\n"
        "                                       NoncentralChi2Fold, RayleighFold, SumFold)\n"
        "from dpopt.privacy.r2dp import r2dp_epsilon_mp, density_ratio_sup, usefulness_gain_possible\n"
        "from dpopt.optimize.r2dp_objectives import usefulness_objective, l1_objective, l2_objective\n"
        "from dpopt.optimize.r2dp_lp import optimize_mixture, laplace_optimality\n"
        "from dpopt.optimize.r2dp_parametric import optimize_family\n"
        "from dpopt.mechanisms.staircase import l1_optimal_g, l2_optimal_g\n"
        "from dpopt.noise.staircase import StaircaseNoise\n"
        "from dpopt.noise.prior_metrics import (R2DPNoise, laplace_noise, kl_divergence, mallows_distance,\n"
        "                                           kl_divergence_monte_carlo, mallows_monte_carlo)"
    ),
    new_markdown_cell(
        "## Appendix B: the closed forms and lemmas (digest §3.1)\n\n"
        "Thm 4.1 evaluated in 60-digit arithmetic against the paper's closed forms (Thm B.3 for Gamma, "
        "Thm B.5 for the uniform) and a brute-force supremum of the density ratio over 200,001 outputs: the "
        "theorem is tight (attained at the true answer)."
    ),
    new_code_cell(
        "rows = [\n"
        "    ('Gamma(2, 0.5), Δ=1', GammaFold(2, 0.5), 1.0, 3 * math.log(1.5)),\n"
        "    ('Gamma(1, 3), Δ=1', GammaFold(1, 3), 1.0, 2 * math.log(4)),\n"
        "    ('Gamma(5, 0.2), Δ=0.6', GammaFold(5, 0.2), 0.6, 6 * math.log(1.12)),\n"
        "    ('U(0.5, 9), Δ=1.2 (Lemma B.6)', UniformFold(0.5, 9), 1.2, 4.193124),\n"
        "    ('U(0.1, 2), Δ=1', UniformFold(0.1, 2), 1.0, 1.219438),\n"
        "    ('N^T(0.5223, 1.5454, 0.5223), Δ=0.6 (Lemma B.8)', TruncatedNormalFold(0.5223, 1.5454, 0.5223), 0.6, 1.180112),\n"
        "]\n"
        "print(f\"{'second fold':48s} {'Thm 4.1':>10s} {'brute force':>12s} {'ln M(Δ)':>9s}  eq.8\")\n"
        "for name, fold, d, expected in rows:\n"
        "    eps = float(r2dp_epsilon_mp(fold, d))\n"
        "    brute = density_ratio_sup(fold, d)\n"
        "    lnm = float(fold.log_mgf(d))\n"
        "    print(f'{name:48s} {eps:10.6f} {brute:12.6f} {lnm:9.4f}  {usefulness_gain_possible(fold, d)}')\n"
        "    assert abs(eps - expected) < 1e-6 and abs(brute - eps) < 1e-9\n"
        "k_star = optimize.brentq(lambda k: float(r2dp_epsilon_mp(GammaFold(k, 0.5), 1)) - float(GammaFold(k, 0.5).log_mgf(1)), 1, 2)\n"
        "print('Lemma B.4 threshold k* =', round(k_star, 7), '(paper: 1.4094)')\n"
        "assert abs(k_star - math.log(1.5) / math.log(4 / 3)) < 1e-9\n"
        "print('Lemma B.8: ln M(0.6) =', round(float(rows[5][1].log_mgf(0.6)), 6), '(paper 1.2417); exact ε =',\n"
        "      round(float(r2dp_epsilon_mp(rows[5][1], 0.6)), 6), '(the paper states 1.1703)')"
    ),
    new_markdown_cell(
        "## Thm B.2 (Bernoulli second fold) is wrong\n\n"
        "B.2 gives ε = ln[p e^{Δ/b₀} + (1−p) e^{Δ/b₁}], the *average* of the Laplace leakages; its proof drops "
        "the 1/b factors of the densities. It can understate the privacy loss, so dpopt never uses it "
        "(digest P1)."
    ),
    new_code_cell(
        "for t, p in (([0.01, 5.0], 0.99), ([0.1, 10.0], 0.5)):\n"
        "    fold = DiscreteFold(t, [p, 1 - p])\n"
        "    exact = float(r2dp_epsilon_mp(fold, 1.0))\n"
        "    b2 = math.log(p * math.exp(t[0]) + (1 - p) * math.exp(t[1]))\n"
        "    print(f't = {t}, p = {p}: exact ε = {exact:.6f}, brute force {density_ratio_sup(fold, 1.0):.6f}, Thm B.2 {b2:.6f}')\n"
        "assert abs(float(r2dp_epsilon_mp(DiscreteFold([0.01, 5], [0.99, 0.01]), 1.0)) - 1.776347) < 1e-6"
    ),
    new_markdown_cell(
        "## Figure 3 with exact accounting: usefulness of the global R²DP optimum, Laplace and the staircase\n\n"
        "Every Table-1 metric and the exact constraint are linear in the law of t, so the best R²DP mechanism "
        "is an LP over mixture weights (2,000 rates, HiGHS) — its optimum is a two-point law. Γ* is the best "
        "Gamma fold (the paper's parametric search). The staircase with step g = γ/Δ is the optimal ε-DP "
        "additive noise for usefulness (Geng & Viswanath), and it beats every R²DP mechanism; the staircases "
        "tuned for l1 / l2 (probably the paper's baselines) can lose."
    ),
    new_code_cell(
        "digest = {(3, 0.1): 0.310562, (5, 0.1): 0.660051, (8, 0.1): 0.954360, (5, 0.4): 0.893514}\n"
        "print(f\"{'ε':>4s} {'γ/Δ':>5s} {'Laplace':>9s} {'Γ*':>9s} {'R²DP*':>9s} {'St(l1)':>9s} {'St(l2)':>9s} {'St(γ)':>9s}\")\n"
        "for (eps, r), expected in digest.items():\n"
        "    lap = -math.expm1(-r * eps)\n"
        "    gam = optimize_family('gamma', usefulness_objective(r), eps, 1.0, starts=3).value\n"
        "    opt = optimize_mixture(usefulness_objective(r), eps, 1.0)\n"
        "    st = [StaircaseNoise(eps, 1.0, g).usefulness(r) for g in (l1_optimal_g(eps), l2_optimal_g(eps), r)]\n"
        "    print(f'{eps:4g} {r:5g} {lap:9.6f} {gam:9.6f} {opt.value:9.6f} ' + ' '.join(f'{v:9.6f}' for v in st))\n"
        "    assert abs(opt.value - expected) < 1e-5 and st[2] > opt.bound\n"
        "opt = optimize_mixture(usefulness_objective(0.1), 5.0, 1.0)\n"
        "print('T13 optimal second fold: atoms', np.round(opt.fold.atoms, 4), 'weights', np.round(opt.fold.weights, 4))"
    ),
    new_code_cell(
        "eps_grid = np.linspace(0.5, 10, 8)\n"
        "fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))\n"
        "for ax, r in zip(axes, (0.1, 0.4)):\n"
        "    r2 = [optimize_mixture(usefulness_objective(r), e, 1.0).value for e in eps_grid]\n"
        "    ax.plot(eps_grid, -np.expm1(-r * eps_grid), label='Laplace')\n"
        "    ax.plot(eps_grid, r2, label='R²DP* (LP)')\n"
        "    ax.plot(eps_grid, [StaircaseNoise(e, 1, l1_optimal_g(e)).usefulness(r) for e in eps_grid], '--', label='staircase, l1 g')\n"
        "    ax.plot(eps_grid, [StaircaseNoise(e, 1, r).usefulness(r) for e in eps_grid], label='staircase, g = γ/Δ')\n"
        "    ax.set_title(f'usefulness, γ/Δ = {r}'); ax.set_xlabel('ε'); ax.set_ylabel('P(|noise| ≤ γ)')\n"
        "axes[0].legend(); plt.show()"
    ),
    new_markdown_cell(
        "## l1 and l2 (the paper's Fig. 4): Laplace is optimal among R²DP mechanisms below ε ≈ 3.84 (l1) and 4.91 (l2)\n\n"
        "The dual certificate at the point mass t₀ = ε/Δ: λ* = −c'(t₀)/r'(t₀); Laplace is the global R²DP "
        "optimum iff c + λ* r ≥ c(t₀) everywhere. The thresholds do not depend on Δ (scale invariance), so the "
        "paper's Δ-dependent l1/l2 gains and its 'significantly improved l2 for ε < 3' cannot hold (digest P3–P5)."
    ),
    new_code_cell(
        "def threshold(objective):\n"
        "    return optimize.brentq(lambda e: laplace_optimality(objective, e, 1.0).margin + 1e-9, 0.5, 30, xtol=1e-5)\n"
        "th = {'l1': threshold(l1_objective()), 'l2': threshold(l2_objective()),\n"
        "      'usefulness γ/Δ=0.1': threshold(usefulness_objective(0.1)), 'usefulness γ/Δ=0.4': threshold(usefulness_objective(0.4))}\n"
        "print({k: round(v, 4) for k, v in th.items()})\n"
        "for k, v in zip(th, (3.8395, 4.9070, 1.6879, 3.2886)):\n"
        "    assert abs(th[k] - v) < 1e-3\n"
        "print(f\"{'ε':>4s} {'l1 Laplace':>11s} {'l1 R²DP*':>9s} {'l1 stair':>9s} {'l2 Laplace':>11s} {'l2 R²DP*':>9s} {'l2 stair':>9s}\")\n"
        "for eps in (1, 3, 5, 8, 10):\n"
        "    a = optimize_mixture(l1_objective(), eps, 1.0).value\n"
        "    b = optimize_mixture(l2_objective(), eps, 1.0).value ** 0.5\n"
        "    s1 = StaircaseNoise(eps, 1, l1_optimal_g(eps)).abs_moment(1)\n"
        "    s2 = StaircaseNoise(eps, 1, l2_optimal_g(eps)).abs_moment(2) ** 0.5\n"
        "    print(f'{eps:4g} {1/eps:11.6f} {a:9.6f} {s1:9.6f} {math.sqrt(2)/eps:11.6f} {b:9.6f} {s2:9.6f}')"
    ),
    new_markdown_cell(
        "## The paper's parametric families against the global optimum (ε = 5, γ/Δ = 0.1)\n\n"
        "Multi-start searches over each family's shape, with the scale solved from the exact constraint and the "
        "result re-checked in 60 digits. None reaches the LP's two-point law (0.660051); the paper's "
        "three-family ensemble (Alg. 1, 0.5415 in the digest's runs) is omitted here for time — see "
        "`benchmarks/bench_r2dp.py`."
    ),
    new_code_cell(
        "lp = optimize_mixture(usefulness_objective(0.1), 5.0, 1.0)\n"
        "for fam in ('gamma', 'uniform', 'truncated_normal', 'noncentral_chi2', 'rayleigh', 'bernoulli'):\n"
        "    res = optimize_family(fam, usefulness_objective(0.1), 5.0, 1.0, starts=4, seed=0)\n"
        "    print(f'{fam:18s} U = {res.value:.6f}   ε (60 digits) = {res.epsilon_certified:.12f}')\n"
        "    assert res.value <= lp.value + 1e-9\n"
        "print(f'{\"LP (all laws)\":18s} U = {lp.value:.6f}   bound for every R²DP mechanism: {lp.bound:.6f}')"
    ),
    new_markdown_cell(
        "## Appendix E (the paper's Fig. 11): ε needed for usefulness 0.8 at γ/Δ = 0.1\n\n"
        "Digest T16: R²DP* 5.9463, Laplace 10 ln 5 = 16.0944, staircase 3.7136."
    ),
    new_code_cell(
        "need_r2dp = optimize.brentq(lambda e: optimize_mixture(usefulness_objective(0.1), e, 1.0).value - 0.8, 5.5, 6.5, xtol=1e-4)\n"
        "need_stair = optimize.brentq(lambda e: StaircaseNoise(e, 1.0, 0.1).usefulness(0.1) - 0.8, 1, 10)\n"
        "print(f'R²DP* {need_r2dp:.4f}, Laplace {10 * math.log(5):.4f}, staircase {need_stair:.4f}')\n"
        "assert abs(need_r2dp - 5.9463) < 1e-3 and abs(need_stair - 3.7136) < 1e-3"
    ),
    new_markdown_cell(
        "## Prior-dependent metrics (Table 1): KL of a noisy histogram, Mallows of a degree sequence\n\n"
        "Released counts are clipped at a floor (the explicit post-processing policy, digest P13); the metrics "
        "are integrals of the noise tail ½M(−x), checked here against Monte Carlo. The Mallows distance is the "
        "standard Wasserstein-p between the true and the released value distributions (the paper's printed "
        "formula misplaces the exponent and equals E|Z|^p, an upper bound)."
    ),
    new_code_cell(
        "prior = [190, 290, 200, 180, 140]\n"
        "for name, noise in (('Laplace b=1/6', laplace_noise(1 / 6)), ('R²DP two atoms', R2DPNoise(DiscreteFold([3.54, 10.81], [0.22, 0.78]))),\n"
        "                    ('staircase', StaircaseNoise(6.0, 1.0, l2_optimal_g(6.0)))):\n"
        "    value = kl_divergence(noise, prior, 0.5)\n"
        "    mc = kl_divergence_monte_carlo(noise, prior, 0.5, 200_000, np.random.default_rng(0))\n"
        "    print(f'KL {name:15s}: quadrature {value:.4e}, Monte Carlo {mc.value:.4e} ± {mc.standard_error:.1e}')\n"
        "    assert abs(mc.value - value) < 4 * mc.standard_error\n"
        "rng = np.random.default_rng(7)\n"
        "degrees = np.minimum(rng.zipf(2.2, 400), 60)  # a synthetic heavy-tailed degree sequence\n"
        "for name, noise in (('Laplace b=1/4', laplace_noise(0.25)), ('staircase ε=4', StaircaseNoise(4.0, 1.0, l1_optimal_g(4.0)))):\n"
        "    w1 = mallows_distance(noise, degrees, 1.0)\n"
        "    mc = mallows_monte_carlo(noise, degrees, 1.0, 500, np.random.default_rng(1))\n"
        "    print(f'Mallows W1 {name:15s}: {w1:.5f} (Monte Carlo {mc:.5f}; paper form E|Z| = {noise.abs_moment(1):.5f})')"
    ),
    *comparison_cells(
        "b8 = TruncatedNormalFold(0.5223, 1.5454, 0.5223)\n"
        "ln_m, eps_b8 = float(b8.log_mgf(0.6)), float(r2dp_epsilon_mp(b8, 0.6))\n"
        "rows = [\n"
        "    ('Lemma B.4: Gamma(k, 0.5) threshold k*, Δ = 1', '1.4094', f'{k_star:.4f}', 'yes' if abs(k_star - 1.4094) < 1e-4 else 'NO'),\n"
        "    ('Lemma B.8: ln M(0.6) of N^T(0.5223, 1.5454)', '1.2417', f'{ln_m:.4f}', 'yes' if abs(ln_m - 1.2417) < 1e-4 else 'NO'),\n"
        "    ('Lemma B.8: ε of that second fold, Δ = 0.6 (Thm 4.1)', '1.1703', f'{eps_b8:.4f}',\n"
        "     'NO: the paper’s 1.1703 understates ε (60-digit Thm 4.1 and brute force agree on 1.1801)'),\n"
        "]"
    ),
    new_markdown_cell(
        "## End to end: specs with `mechanism: r2dp`\n\n"
        "With `sampler: floating_point` the family is the paper's: the certificate carries only the second fold's "
        "law (never a sampled scale), the exact ε re-derived in 60 digits, the brute-force density-ratio check, "
        "and the comparison with Laplace and the staircase at the same ε. By default, on counts, it releases a "
        "mixture of discrete Laplace laws sampled exactly, its ε in ball arithmetic "
        "(`docs/concepts/exact-noise.md`, R²DP on counts)."
    ),
    new_code_cell(
        "for path in ('../specs/r2dp_count_usefulness.yaml', '../specs/r2dp_histogram_kl.yaml'):\n"
        "    document = dpopt.load_spec(path).model_dump(mode='json', by_alias=True, exclude_none=True)\n"
        "    for sampler in ('floating_point', 'exact'):\n"
        "        sol = dpopt.solve({**document, 'sampler': sampler})\n"
        "        p = sol.mechanism.parameters\n"
        "        print(sol.spec.name, f'({sampler})')\n"
        "        print('  law:', p.get('second_fold', p.get('mixture')))\n"
        "        print('  ', sol.mechanism.notes()[-1])\n"
        "        print('  verified:', dpopt.verify(sol.certificate).passed)"
    ),
]


if __name__ == "__main__":
    print(f"wrote {write_notebook(CELLS, 'r2dp')}")
