r"""Design and certificate of person-level releases with private keys and quantiles (:mod:`dpopt.spec.selection`).

Every release is calibrated from the spec alone (never from the data) and re-checked by an independent
evaluation (:func:`release_checks`); the releases compose by basic composition, ε = Σ ε_i and δ = Σ δ_i
(each reads the records once, with its own contribution bounding and its own randomness).

Person-level bounds of a release over m cells (keys or groups), from :func:`dpopt.sensitivity.person.most_rows`:
R rows in all, t in one cell, g cells, g ≤ R (a cell holds a row at least). Unknown keys: m unbounded.

- **count** (private keys): row counts, l1 sensitivity R and l2² of the greedy filling
  (:func:`dpopt.sensitivity.person.table_norms`); a person's rows make ≤ g keys appear, and change the
  user count of ≤ g keys by one. ``optimal``: the selection spends ``selection_share``·ε with δ
  (:mod:`dpopt.privacy.partition_selection`), the counts (1 − share)·ε with discrete Laplace noise of
  scale R/ε_c (exact: ε written in decimal is a rational). ``laplace_threshold``: discrete Laplace of
  scale R/ε, threshold for δ. ``gaussian_threshold``: discrete Gaussian N_ℤ(0, σ²) whose effective
  variance 1/m² (the certified GDP slope) is at least the Gaussian σ² for (ε, δ/2) on l2, integer threshold for δ/2.
- **quantile**: λ = ε_q/(2RD) per q on the integer scores (β = λc per rank, :mod:`dpopt.privacy.quantile`), ε split
  equally over the q's, sampled exactly.
- **mean** per private key over [a, b] (m = (a + b)/2, h = (b − a)/2): the pair (S_j, n_j) = (Σ(x − m), rows)
  of every released key j, stacked. A person's bounded rows put n_j rows in key j with
  :math:`|S_j| \le n_j h`, Σ_j n_j ≤ R, so the stacked vector moves by at most
  :math:`\sum_j |S_j| \le Rh` (sums) and :math:`\sum_j n_j \le R` (counts), both attained together
  (R rows at b, in any keys): l1 = R(h + 1), whatever the number of keys. On the lattice: each centred
  value is rounded to 2^{−k}ℤ and clamped to ±H steps, H = ⌈2^k h⌉ (h rounded outward: the rounding charged to
  the sensitivity, :func:`mean_lattice`), so the integer sums move by ≤ RH. Noise: discrete Laplace of scale
  b_S = RH/ε_S (lattice units) on each integer sum and of scale b_n = R/ε_n on each count, privacy loss
  ≤ RH/b_S + R/b_n = ε_S + ε_n; the equal split ε_S = ε_n = ε/2 minimises the worst first-order variance of
  the mean, (2b_S² + h²·Var n)/n² ∝ 1/ε_S² + 1/ε_n² (as for the mean pair of
  :mod:`dpopt.sensitivity.person`). The keys are those the count release with the same ``by`` released
  (public once released: basic composition covers the adaptive choice).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpopt._lazy import lazy_module
from dpopt._version import __version__
from dpopt.certificate.build import output_block
from dpopt.certificate.model import Certificate
from dpopt.core.checks import Check
from dpopt.core.decimals import float_below, float_written_above, written
from dpopt.mechanisms.lattice import discrete_variance
from dpopt.privacy import partition_selection as ps
from dpopt.privacy import quantile as qm
from dpopt.sensitivity.person import describe_unit, most_rows, table_norms
from dpopt.spec.load import canonical_json
from dpopt.spec.models import MAX_COUNT, PrivacyUnit
from dpopt.selection.gaussian_counts import ROUTES, counts_noise, counts_noise_check
from dpopt.selection.kind import KIND
from dpopt.selection.timing import TIMING
from dpopt.spec.selection import (
    CountRelease,
    MeanRelease,
    QuantileRelease,
    SelectionSpec,
    keys_from,
    load_selection_spec,
    spent,
)

mpmath = lazy_module("mpmath")


NUMERICS = ("exact: every random choice is drawn in integer arithmetic — the keep decisions (uniform 64-bit words "
            "against the binary expansion of the rational π_n), the discrete Laplace noise (on the counts and on the "
            "means' integer sums of lattice-rounded values), the discrete Gaussian noise, and the quantiles' "
            "exponential mechanism (integer scores, rational scale, uniform proposals accepted with "
            "Bernoulli(exp(−γ))) (Canonne, Kamath & Steinke 2020, Algorithms 1–3); the released means are "
            "post-processing of integers. Not covered: timing beyond the draw stage's padding (the rejection "
            "loops' running time depends on the noise drawn and on the quantiles' scores)")


@dataclass(frozen=True)
class Bounds:
    """A person's most rows in all (R), in one cell (t), and the most cells (g ≤ R)."""

    rows: int
    per_cell: int
    cells: int


def person_bounds(unit: PrivacyUnit, cells: int) -> Bounds:
    """:func:`~dpopt.sensitivity.person.most_rows` on ``cells`` cells, g capped at R."""
    rows, per_cell, groups = most_rows(unit, cells)
    return Bounds(rows, per_cell, min(groups, rows))


def _laplace_sd(scale: Fraction) -> float:
    """Standard deviation of the discrete Laplace of scale b: √(2r)/(1 − r), r = e^{−1/b}."""
    r = math.exp(-1 / float(scale))
    return math.sqrt(2 * r) / (1 - r)


def _count_block(spec: SelectionSpec, release: CountRelease) -> dict:
    unit = spec.data.privacy_unit
    b = person_bounds(unit, MAX_COUNT)
    l2sq = table_norms(unit, MAX_COUNT, replace=False)[1]
    eps, delta = written(release.epsilon), release.delta
    block = {
        "name": release.name, "kind": "count", "by": release.by,
        "declared": list(spec.data.attributes[release.by].declared),
        "sensitivity": {"rows": b.rows, "per_key": b.per_cell, "keys": b.cells, "l1": b.rows, "l2_squared": str(l2sq),
                        "how": f"person-level: ≤ {b.rows} rows in all, ≤ {b.per_cell} per key, in ≤ {b.cells} keys"},
        "guarantee": {"definition": "approx", "epsilon": release.epsilon, "delta": delta},
    }
    if release.selection == "optimal":
        eps_sel = eps * written(release.share)
        eps_one, delta_one = ps.per_partition_budget(eps_sel, delta, b.cells)
        pis, design_delta = ps.certified_keep_probabilities(eps_one, delta_one)
        half = next(n for n, p in enumerate(pis) if p >= 0.5)
        scale = b.rows / (eps - eps_sel)
        block["partition_selection"] = {
            "method": "optimal: Desfontaines, Voss, Gipson & Mandayam (PoPETs 2022), Thm. 1, on the users per key",
            "epsilon": float(eps_sel), "delta": delta, "keys_per_person": b.cells,
            "epsilon_per_key": eps_one, "delta_per_key": delta_one, "design_delta": design_delta,
            "keep_probabilities": pis.tolist(),
        }
        block["noise"] = {"family": "discrete_laplace", "scale": str(scale), "epsilon": str(eps - eps_sel)}
        kept = {"metric": "users_for_even_chance", "value": half,
                "method": f"least n with π_n ≥ 1/2; a key with ≥ {len(pis) - 1} users is always kept"}
    elif release.selection == "laplace_threshold":
        scale = b.rows / eps
        tau = ps.laplace_threshold(mpmath.mpf(scale.numerator) / scale.denominator, float_below(delta), b.rows,
                                   b.per_cell, b.cells)
        block["partition_selection"] = {"method": "thresholded discrete Laplace: a key is kept when its noisy row "
                                                  "count is ≥ the threshold, and that noisy count is released",
                                        "threshold": tau, "delta": delta}
        block["noise"] = {"family": "discrete_laplace", "scale": str(scale), "epsilon": str(eps)}
        kept = {"metric": "rows_for_even_chance", "value": tau, "method": "P[c + Z ≥ τ] ≥ 1/2 iff c ≥ τ (Z symmetric)"}
    else:
        half = float_below(delta) / 2  # δ split between the noise and the new keys, under the decimal written
        noise = counts_noise(release.name, l2sq, release.epsilon, half)
        sigma2 = Fraction(noise["sigma2"])
        tau = ps.discrete_gaussian_threshold(sigma2, half, b.rows, b.per_cell, b.cells)
        block["partition_selection"] = {"method": "thresholded discrete Gaussian: a key is kept when its noisy row "
                                                  "count is ≥ the threshold, and that noisy count is released",
                                        "threshold": tau, "delta": half}
        block["noise"] = noise | {"epsilon": str(eps), "delta": half}
        kept = {"metric": "rows_for_even_chance", "value": tau, "method": "P[c + Z ≥ τ] ≥ 1/2 iff c ≥ τ (Z symmetric)"}
    block["timing"] = dict(TIMING)  # what the release's running time reveals of the number of keys
    noise = block["noise"]
    sd = (math.sqrt(discrete_variance(Fraction(noise["sigma2"]))) if "sigma2" in noise
          else _laplace_sd(Fraction(noise["scale"])))
    block["utility"] = {"metric": "count_standard_deviation", "value": sd,
                        "method": "closed form (discrete Laplace: √(2r)/(1 − r), r = e^{−1/b}; discrete Gaussian: "
                                  "√Var N_ℤ(0, σ²), the series)",
                        "selection": kept}
    return block


def _quantile_block(spec: SelectionSpec, release: QuantileRelease) -> dict:
    domain = spec.data.attributes[release.attribute]
    groups = None if release.by is None else list(spec.data.attributes[release.by])
    b = person_bounds(spec.data.privacy_unit, 1 if groups is None else len(groups))
    points = qm.grid(domain.min, domain.max, release.grid.step, release.grid.points)
    share = written(release.epsilon) / len(release.q)  # Σ_q ε_q = ε exactly (the scales λ are rationals)
    per_q = [{"q": q, "epsilon": float(share), "beta": qm.rank_scale(qm.scale_for(share, b.rows, q), q),
              "row_sensitivity": qm.row_sensitivity(q),
              "exact": {"q": str(qm.exact_q(q)), "score_sensitivity": qm.score_sensitivity(q),
                        "scale": str(qm.scale_for(share, b.rows, q))}} for q in release.q]
    return {
        "name": release.name, "kind": "quantile", "attribute": release.attribute, "by": release.by, "groups": groups,
        "grid": {"low": float(points[0]), "high": float(points[-1]), "size": len(points)}
                | ({"step": release.grid.step} if release.grid.step is not None else {"points": points.tolist()}),
        "sensitivity": {"rows": b.rows, "how": f"person-level: ≤ {b.rows} rows in all over "
                                               + ("one group" if groups is None else f"the {len(groups)} groups")
                                               + ", each moving a score by ≤ max(q, 1 − q)"},
        "per_q": per_q,
        "guarantee": {"definition": "pure", "epsilon": release.epsilon, "delta": 0.0},
        "utility": {"metric": "expected_rank_error_beyond_best",
                    "value": [qm.rank_error_bound(p["beta"], len(points)) for p in per_q],
                    "method": "bound (ln G + 1)/β per q, data-independent "
                              "(McSherry & Talwar 2007, Thm. 6, integrated)"},
    }


def _half_width(spec: SelectionSpec, release: MeanRelease) -> Fraction:
    """h = (b − a)/2 of the attribute, exactly (its bounds as written in decimal)."""
    domain = spec.data.attributes[release.attribute]
    return (written(domain.max) - written(domain.min)) / 2


LATTICE_BITS = 20
"""A mean's centred values are measured on the lattice 2^{−k}ℤ with k chosen so that the half-width h is
between 2^{19} and 2^{20} steps (:func:`mean_lattice`): the rounding moves a row by ≤ h·2^{−20}."""


def mean_lattice(h: Fraction) -> tuple[int, Fraction, int]:
    """(k, step = 2^{−k}, H = ⌈h/step⌉) for a half-width h > 0: the lattice of the centred values and their bound on
    it (h rounded outward: H·step ≥ h, the rounding charged to the sensitivity). k is a public function of h."""
    k = LATTICE_BITS - math.ceil(math.log2(float(h)))
    step = Fraction(1, 2**k) if k >= 0 else Fraction(2 ** -k)
    return k, step, math.ceil(h / step)


def _mean_block(spec: SelectionSpec, i: int, release: MeanRelease) -> dict:
    b = person_bounds(spec.data.privacy_unit, MAX_COUNT)
    h, eps = _half_width(spec, release), written(release.epsilon)
    _, step, top = mean_lattice(h)
    domain = spec.data.attributes[release.attribute]
    scale_sum, scale_count = b.rows * top / (eps / 2), b.rows / (eps / 2)
    sd = math.sqrt((_laplace_sd(scale_sum) * float(step)) ** 2 + float(h) ** 2 * _laplace_sd(scale_count) ** 2)
    return {
        "name": release.name, "kind": "mean", "attribute": release.attribute, "by": release.by,
        "keys_from": keys_from(spec, i).name, "bounds": [domain.min, domain.max],
        "midpoint": str(written(domain.min) + h),
        "sensitivity": {"rows": b.rows, "half_width": str(h), "lattice_step": str(step), "lattice_half_width": top,
                        "l1_sums": b.rows * top, "l1_counts": b.rows, "l1": str(b.rows * (top * step + 1)),
                        "how": f"person-level: ≤ {b.rows} rows in all over the keys, each moving its key's centred sum "
                               f"by ≤ H = ⌈h/step⌉ = {top} lattice steps of {step} (h = (b − a)/2 = {h}; the value "
                               "rounded to the lattice and clamped to ±H in integers) and its count by 1"},
        "noise": {"centred_sum": {"family": "discrete_laplace", "step": str(step), "scale": str(scale_sum),
                                  "epsilon": str(eps / 2)},
                  "count": {"family": "discrete_laplace", "scale": str(scale_count), "epsilon": str(eps / 2)}},
        "guarantee": {"definition": "pure", "epsilon": release.epsilon, "delta": 0.0},
        "utility": {"metric": "mean_standard_deviation_times_rows", "value": sd,
                    "method": "first order, worst case over the true mean: √(Var Y_S·step² + h²·Var n)/n for a key "
                              "with n rows (the value is that times n; discrete Laplace variances √(2r)/(1 − r))"},
    }


def design_blocks(spec: SelectionSpec) -> list[dict]:
    """Every release calibrated from the spec (see the module)."""
    return [_count_block(spec, r) if isinstance(r, CountRelease)
            else _mean_block(spec, i, r) if isinstance(r, MeanRelease) else _quantile_block(spec, r)
            for i, r in enumerate(spec.releases)]


def spec_document(spec: SelectionSpec) -> dict:
    """The spec as a plain JSON-ready dict (defaults filled in)."""
    return spec.model_dump(mode="json", exclude_none=True)


def spec_sha256(spec: SelectionSpec) -> str:
    """SHA-256 of the canonical JSON of the validated spec."""
    return hashlib.sha256(canonical_json(spec_document(spec)).encode()).hexdigest()


def guarantee(spec: SelectionSpec) -> dict:
    """The composed guarantee (basic composition) and its scope."""
    exact_epsilon, exact_delta = spent(spec)
    epsilon, delta = float_written_above(exact_epsilon), float_written_above(exact_delta)
    pure = delta == 0 and spec.privacy.definition == "pure"
    return {"definition": "pure" if pure else "approx", "epsilon": epsilon} | ({} if pure else {"delta": delta}) | {
        "target": {spec.privacy.definition: spec.privacy.parameters},
        "composition": "basic: ε = Σ ε_i, δ = Σ δ_i over the releases (each bounds and reads the records on its own)",
        "scope": {"adjacency": describe_unit(spec), "invariants": [], "semi_adjacent_parameter": None},
    }


def certificate_body(spec: SelectionSpec) -> dict:
    """Everything of the certificate but its checks."""
    unit = spec.data.privacy_unit
    return {
        "kind": KIND, "dpopt_version": __version__, "spec_sha256": spec_sha256(spec), "spec": spec_document(spec),
        "guarantee": guarantee(spec),
        "sensitivity": {"privacy_unit": unit.model_dump(exclude_none=True), "per_release": "releases[i].sensitivity"},
        "mechanism": {"family": "private_keys_and_quantiles",
                      "parameters": {"releases": [r.name for r in spec.releases]}},
        "utility": {"metric": "per_release", "value": None, "method": "releases[i].utility"},
        "releases": design_blocks(spec), "numerics": NUMERICS,
    } | ({} if spec.output is None else {"output": output_block(spec)})


def certify(spec: SelectionSpec | str | Path | Mapping[str, Any]) -> Certificate:
    """The certificate of a spec (or its file or mapping, :func:`~dpopt.spec.selection.load_selection_spec`): the
    design and its independent checks (a check that fails is recorded as failed).

    Raises
    ------
    SpecError
        A bad spec, naming the field.
    CalibrationError
        A target out of numeric range.
    """
    spec = load_selection_spec(spec)
    body = certificate_body(spec)
    return Certificate(body | {"checks": [c.to_dict() for c in release_checks(spec, body["releases"])]})


# ------------------------------------------------------------------------------ checks
def _count_checks(spec: SelectionSpec, release: CountRelease, block: dict, at: str) -> list[Check]:
    b = person_bounds(spec.data.privacy_unit, MAX_COUNT)
    sens = block["sensitivity"]
    checks = [Check(f"{at}.sensitivity", "person_bounds re-derived from the privacy unit (R, t, g ≤ R)",
                    (sens["rows"], sens["per_key"], sens["keys"]) == (b.rows, b.per_cell, b.cells),
                    f"R = {b.rows}, t = {b.per_cell}, g = {b.cells}")]
    sel, noise, eps = block["partition_selection"], block["noise"], written(release.epsilon)
    if release.selection == "optimal":
        eps_one, delta_one, pis = sel["epsilon_per_key"], sel["delta_per_key"], sel["keep_probabilities"]
        exact = ps.pair_delta(pis, eps_one)
        design = sel["design_delta"]
        closed = max(abs(p - ps.keep_probability(n, eps_one, design)) for n, p in enumerate(pis))
        composed = ps.composed_delta(delta_one, b.cells)
        eps_sel, eps_noise = eps * written(release.share), Fraction(noise["epsilon"])
        checks += [
            Check(f"{at}.selection.delta", "exact δ of the keep-probability table (its doubles, the probabilities the "
                  "exact sampler keeps with) over every neighbouring pair of user counts (n, n + 1), both outcomes "
                  "and directions, in rationals with a rigorous lower bound on e^ε′ (Arb)",
                  exact <= delta_one, f"δ = {exact:.6g} ≤ δ per key = {delta_one:.6g} at ε per key = {eps_one:.6g}"),
            Check(f"{at}.selection.optimal", "the table against the closed form of google/differential-privacy "
                  "(PreaggPartitionSelection::ProbabilityOfKeep) at the δ it was built for, ≥ (1 − 10⁻³)·δ per key",
                  closed <= 1e-12 and delta_one * (1 - 1e-3) <= design <= delta_one,
                  f"largest difference {closed:.3g} at δ = {design:.6g}"),
            Check(f"{at}.selection.composition", "g keys per person: (g·ε′, 1 − (1 − δ′)^g) (Kairouz, Oh & "
                  "Viswanath 2015, Thm. 3.3) within (share·ε, δ) as written, both in rationals",
                  b.cells * Fraction(eps_one) <= eps_sel and composed <= written(release.delta),
                  f"{b.cells} × {eps_one!r} ≤ {eps_sel}; δ = {float(composed):.17g} ≤ {release.delta!r}"),
            Check(f"{at}.noise", "ε of the counts' discrete Laplace = R/b exactly (rationals); selection + counts = ε "
                  "as written",
                  Fraction(b.rows) / Fraction(noise["scale"]) == eps_noise and eps_sel + eps_noise == eps,
                  f"{b.rows}/({noise['scale']}) = {eps_noise}; {eps_sel} + {eps_noise} = {eps}"),
        ]
        return checks
    rows, per_key, keys = b.rows, b.per_cell, b.cells
    if release.selection == "laplace_threshold":
        scale = Fraction(noise["scale"])
        mp_scale = mpmath.mpf(scale.numerator) / scale.denominator
        new, how = ps.new_keys_delta(lambda v: ps.discrete_laplace_tail(sel["threshold"] - v, mp_scale),
                                     rows, per_key, keys)
        noise_delta, noise_holds = mpmath.mpf(0), Fraction(rows) / scale == eps
        noise_how = f"ε = R/b = {rows}/({noise['scale']}) exactly"
    else:
        sigma2 = Fraction(noise["sigma2"])
        new, how = ps.new_keys_delta(lambda v: ps.discrete_gaussian_tail(sel["threshold"] - v, sigma2),
                                     rows, per_key, keys)
        noise_holds, noise_delta, noise_how = counts_noise_check(Fraction(sens["l2_squared"]), noise, release.epsilon)
        noise_holds = noise_holds and isinstance(sel["threshold"], int) and noise["route"] in ROUTES
    with mpmath.workdps(60):
        total = noise_delta + new
    checks += [
        Check(f"{at}.noise", "the counts' noise on the keys both data sets have", bool(noise_holds), noise_how),
        Check(f"{at}.selection.delta", "δ_new: probability that a key only the added person holds passes the "
              f"threshold ({how}); total δ_noise + δ_new in 60 digits against the largest double not above δ "
              "as written", bool(total <= float_below(release.delta)),
              f"δ_new = {new:.6g}, δ_noise = {mpmath.nstr(noise_delta, 6)}, target {release.delta!r}"),
    ]
    return checks


def _quantile_checks(spec: SelectionSpec, release: QuantileRelease, block: dict, at: str) -> list[Check]:
    groups = None if release.by is None else len(spec.data.attributes[release.by])
    b = person_bounds(spec.data.privacy_unit, 1 if groups is None else groups)
    total = sum(qm.epsilon_of(Fraction(p["exact"]["scale"]), b.rows, p["q"]) for p in block["per_q"])
    scales_hold = all(p["exact"]["score_sensitivity"] == qm.score_sensitivity(p["q"])
                      and Fraction(p["exact"]["q"]) == qm.exact_q(p["q"])
                      and Fraction(p["beta"]) <= Fraction(p["exact"]["scale"]) * qm.exact_q(p["q"]).denominator
                      for p in block["per_q"])
    return [
        Check(f"{at}.sensitivity", "person_bounds re-derived from the privacy unit",
              block["sensitivity"]["rows"] == b.rows, f"R = {b.rows}"),
        Check(f"{at}.epsilon", "ε = Σ_q 2λ_qRD_q (exponential mechanism on the integer scores −|c·rank − a·n|, "
              "q = a/c as written, D_q = max(a, c − a), person with ≤ R rows) in rationals, against ε as written; "
              "the utility's β ≤ λc",
              total <= written(release.epsilon) and [p["q"] for p in block["per_q"]] == list(release.q)
              and scales_hold, f"Σ ε = {total} ≤ {release.epsilon!r}; β = {[p['beta'] for p in block['per_q']]}"),
    ]


def _mean_checks(spec: SelectionSpec, i: int, release: MeanRelease, block: dict, at: str) -> list[Check]:
    b = person_bounds(spec.data.privacy_unit, MAX_COUNT)
    h = _half_width(spec, release)
    _, step, top = mean_lattice(h)
    sens, noise = block["sensitivity"], block["noise"]
    loss = b.rows * top / Fraction(noise["centred_sum"]["scale"]) + b.rows / Fraction(noise["count"]["scale"])
    return [
        Check(f"{at}.sensitivity", "person_bounds re-derived from the privacy unit; the lattice of the centred values "
              "(H = ⌈h/step⌉ ≥ h/step, integers clamped to ±H); l1 = RH of the lattice sums, R of the counts",
              (sens["rows"], Fraction(sens["lattice_step"]), sens["lattice_half_width"], sens["l1_sums"])
              == (b.rows, step, top, b.rows * top) and top * step >= h,
              f"R = {b.rows}, h = {h}, step = {step}, H = {top}"),
        Check(f"{at}.epsilon", "privacy loss RH/b_S + R/b_n of the two discrete Laplace noises (on the lattice sums "
              "and the counts, both integers), exact rationals",
              loss <= written(release.epsilon) and block["keys_from"] == keys_from(spec, i).name
              and Fraction(noise["centred_sum"]["step"]) == step,
              f"{loss} ≤ {written(release.epsilon)}; keys of {block['keys_from']}"),
    ]


def release_checks(spec: SelectionSpec, blocks: list[dict]) -> list[Check]:
    """Independent checks of recorded blocks: each release's guarantee re-evaluated, then the composition."""
    checks = []
    for i, (release, block) in enumerate(zip(spec.releases, blocks)):
        at = f"releases[{i}]"
        if isinstance(release, CountRelease):
            checks += _count_checks(spec, release, block, at)
        elif isinstance(release, MeanRelease):
            checks += _mean_checks(spec, i, release, block, at)
        else:
            checks += _quantile_checks(spec, release, block, at)
    epsilon, delta = spent(spec)
    target = spec.privacy.parameters
    checks.append(Check("privacy", "basic composition of the releases against the target, exact on the decimals "
                                   "written",
                        len(blocks) == len(spec.releases) and epsilon <= written(target["epsilon"])
                        and delta <= written(target.get("delta", 0)),
                        f"ε = {float(epsilon):.6g} ≤ {target['epsilon']:.6g}, "
                        f"δ = {float(delta):.6g} ≤ {target.get('delta', 0.0):.6g}"))
    return checks
