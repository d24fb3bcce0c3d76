"""``kronecker_laplace`` on the lattice when a term sums over an ordered attribute: the block design
(dpopt.mechanisms.kronecker_laplace_blocks).

Expected values are computed here densely from the certificate's record, by the definitions: each block's integer
strategy as the Kronecker product of its parts (the recorded whole factor Ã; the part beside the total built from the
definition Ã(nI − J)/gcd or Ã with the reference column set to 0; the total as a row of ones) and the marginal
matrix M_S', weighted by θ'; the privacy loss of every add/remove move (every cell) and every replace-one move (every
pair of cells) as Σ ‖A_B δ‖₁/t_B in exact rationals; the released noise's covariance as W B⁺ D B⁺ᵀ Wᵀ (B the stacked
weighted blocks, D the weighted noise's variances θ'² Var η, the discrete Laplace variance written
1/(2 sinh²(1/(2t)))), whatever least squares the code runs.
"""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS

ATTRIBUTES = {"age": ["a0", "a1", "a2", "a3"], "income": ["i0", "i1", "i2"], "sex": ["f", "m"]}
"""Two ordered attributes (each summed by a term) and one plain attribute, cells row-major (age, income, sex)."""

CASES = {
    # age summed by the income term (income is then plain): the components ∅ and sex are read by the age term, so
    # served by a whole-age block; income only by the term that sums age: a total block
    "age_summed": [{"age": "prefix", "sex": "identity"}, {"income": "identity"}],
    # two ordered attributes, each summed by the other's term: totals and parts beside them
    "two_summed": [{"age": "prefix", "sex": "identity"}, {"income": "prefix", "sex": "identity"}],
}


def _spec(terms: list, adjacency: str = "add_remove") -> dict:
    data = {"attributes": ATTRIBUTES} | ({} if adjacency == "add_remove" else {"n": 40})
    return {"dpopt": 1, "name": "blocks", "data": data, "query": {"kind": "kronecker", "terms": terms},
            "adjacency": adjacency, "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "kronecker_laplace",
            "utility": "l2"}


@pytest.fixture(scope="module")
def solved():
    return {(name, adj): dpopt.solve(_spec(terms, adj)) for name, terms in CASES.items()
            for adj in ("add_remove", "replace_one")}


def _factor(kind: str, n: int) -> np.ndarray:
    return {"prefix": np.tril(np.ones((n, n))), "identity": np.eye(n)}[kind]


def dense_workload(terms: list) -> np.ndarray:
    """W: per term the Kronecker product over (age, income, sex) of its factor or a row of ones."""
    rows = []
    for term in terms:
        mats = [_factor(term[a], len(levels)) if a in term else np.ones((1, len(levels)))
                for a, levels in ATTRIBUTES.items()]
        rows.append(np.kron(np.kron(mats[0], mats[1]), mats[2]))
    return np.vstack(rows)


def _beside(whole: np.ndarray, reference) -> np.ndarray:
    """The part beside the total, from its definition: Ã(nI − J) over the gcd of its entries, or Ã with the
    reference column set to 0."""
    n = whole.shape[1]
    if reference is None:
        out = whole @ (n * np.eye(n, dtype=np.int64) - np.ones((n, n), dtype=np.int64))
        return out // math.gcd(*(int(v) for v in out.reshape(-1)))
    out = whole.copy()
    out[:, reference] = 0
    return out


def dense_blocks(parameters: dict) -> list[tuple[np.ndarray, float, Fraction]]:
    """(A_B ⊗ M_S' (integer), θ', t) per measured block and marginal, from the record."""
    lattice = parameters["lattice"]
    whole = {f["attribute"]: np.array(f["matrix"], dtype=np.int64) for f in lattice["factors"]}
    references = {r["attribute"]: r["reference"] for r in lattice["references"]}
    out = []
    for entry in lattice["blocks"]:
        mats = []
        for a, levels in ATTRIBUTES.items():
            if a in whole:  # ordered
                if a in entry["whole"] or a not in references:
                    mats.append(whole[a])
                elif a in entry["beside"]:
                    mats.append(_beside(whole[a], references[a]))
                else:
                    mats.append(np.ones((1, len(levels)), dtype=np.int64))
            else:  # plain: the marginal matrix
                mats.append(np.eye(len(levels), dtype=np.int64) if a in entry["marginal"]
                            else np.ones((1, len(levels)), dtype=np.int64))
        out.append((np.kron(np.kron(mats[0], mats[1]), mats[2]), entry["weight"], Fraction(entry["scale"])))
    return out


def _loss(blocks, delta: np.ndarray) -> Fraction:
    return sum((Fraction(int(np.abs(a @ delta).sum())) / t for a, _, t in blocks), Fraction(0))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_epsilon_by_enumerating_every_move(solved, name, adjacency):
    """The certified ε against the privacy loss Σ_B ‖A_B δ‖₁/t_B of every neighbouring move in rationals: δ = e_j
    (add/remove: equal when the bound is attained, which the privacy claim says) or e_i − e_j (replace-one: at most the
    certified ε, which doubles the add/remove bound); and ≤ the target."""
    cert = solved[(name, adjacency)].certificate
    parameters = cert["mechanism"]["parameters"]
    assert parameters["sampler"] == "exact" and "blocks" in parameters["lattice"]
    blocks = dense_blocks(parameters)
    cells = blocks[0][0].shape[1]
    eye = np.eye(cells, dtype=np.int64)
    moves = [eye[j] for j in range(cells)] if adjacency == "add_remove" else \
        [eye[i] - eye[j] for i, j in itertools.combinations(range(cells), 2)]
    brute = max(_loss(blocks, d) for d in moves)
    certified = Fraction(cert["mechanism"]["privacy"]["epsilon_exact"])
    claim = next(c for c in dpopt.verify(cert).checks if c.claim == "privacy")
    assert brute <= certified <= 1
    if adjacency == "add_remove" and "attained" in claim.method:
        assert brute == certified


@pytest.mark.parametrize("name", list(CASES))
def test_certificate_is_exact_and_verifies(solved, name):
    cert = solved[(name, "add_remove")].certificate
    assert IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    assert any("measured in" in n and "block" in n for n in cert["mechanism"]["notes"])
    assert dpopt.verify(cert).passed
    ratio = cert["mechanism"]["parameters"]["design"]["lattice_error_ratio"]
    assert ratio == pytest.approx(cert["utility"]["value"] / cert["mechanism"]["parameters"]["design"]["expected_l2"],
                                  rel=1e-9)


@pytest.mark.parametrize("forge", ["scale", "factor"])
def test_forged_records_fail_the_privacy_claim(solved, forge):
    cert = solved[("two_summed", "add_remove")].certificate
    forged = copy.deepcopy(cert.data)
    lattice = forged["mechanism"]["parameters"]["lattice"]
    if forge == "scale":  # a halved scale doubles that block's loss
        lattice["blocks"][0]["scale"] = str(Fraction(lattice["blocks"][0]["scale"]) / 2)
    else:  # a doubled factor doubles the l1 norm of every block that measures it whole or beside its total
        lattice["factors"][0]["matrix"] = (2 * np.array(lattice["factors"][0]["matrix"])).tolist()
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}


def _served(terms: list, whole: dict) -> dict[tuple, list[tuple]]:
    """The components T (sets of plain attributes) each block (whole, beside) serves, by the module docstring's rule:
    the ordered attributes kept by the terms that read T (T ⊆ the term's plain support), A_T the intersection of the
    maximal such sets, blocks (A_T, U) for U ⊆ K ∖ A_T, K maximal."""
    ordered = list(whole)
    plain = [a for a in ATTRIBUTES if a not in whole]
    summed = [a for a in ordered if any(a not in term for term in terms)]
    served: dict[tuple, list[tuple]] = {}
    for size in range(len(plain) + 1):
        for t in itertools.combinations(plain, size):
            if not all(len(ATTRIBUTES[a]) > 1 for a in t):
                continue
            kept = {frozenset(a for a in summed if a in term) for term in terms if set(t) <= set(term)}
            if not kept:
                continue
            maximal = [k for k in kept if not any(k < o for o in kept)]
            fixed = frozenset.intersection(*maximal)
            for u in {frozenset(c) for k in maximal for r in range(len(k - fixed) + 1)
                      for c in itertools.combinations(sorted(k - fixed), r)}:
                served.setdefault((tuple(sorted(fixed)), tuple(sorted(u))), []).append(t)
    return served


def _projector(entry: dict, components: list[tuple], whole: dict, references: dict) -> np.ndarray:
    """Q_B: along each ordered attribute the block's part (I whole; I − v1ᵀ/(1ᵀv) beside the total; v1ᵀ/(1ᵀv) for the
    total, v = 1 or e_reference), times the sum of the ANOVA projectors E_T of the served components on the plain
    attributes."""
    mats = []
    for a, levels in ATTRIBUTES.items():
        if a not in whole:
            continue
        n = len(levels)
        v = np.ones(n) if references.get(a) is None else np.eye(n)[references[a]]
        on_v = np.outer(v, np.ones(n)) / v.sum()
        mats.append(np.eye(n) if a in entry["whole"] or a not in references else
                    np.eye(n) - on_v if a in entry["beside"] else on_v)
    plain = [a for a in ATTRIBUTES if a not in whole]
    ptotal = 0
    for t in components:
        e = np.ones((1, 1))
        for a in plain:
            n = len(ATTRIBUTES[a])
            e = np.kron(e, np.eye(n) - 1.0 / n if a in t else np.full((n, n), 1.0 / n))
        ptotal = ptotal + e
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return np.kron(out, ptotal)


def _dense_covariance(parameters: dict, terms: list) -> np.ndarray:
    """Cov of W x̂, x̂ = Σ_B Q_B (B_B)⁺ θ' y_B: each block's own least squares of its stacked weighted marginals θ'A_B
    (any solution: Q_B keeps only what the block identifies), projected on the part and the components it serves;
    D = θ'² Var η per row."""
    lattice = parameters["lattice"]
    whole = {f["attribute"]: None for f in lattice["factors"]}
    references = {r["attribute"]: r["reference"] for r in lattice["references"]}
    served = _served(terms, whole)
    blocks = dense_blocks(parameters)
    by_block: dict[tuple, list] = {}
    for entry, block in zip(lattice["blocks"], blocks):
        by_block.setdefault((tuple(entry["whole"]), tuple(entry["beside"])), []).append((entry, block))
    assert set(by_block) == set(served)
    w_mat = dense_workload(terms)
    estimator, var = [], []
    for key, members in by_block.items():
        stacked = np.vstack([w * a.astype(float) for _, (a, w, _) in members])
        q = _projector(members[0][0], served[key], whole, references)
        estimator.append(w_mat @ q @ np.linalg.pinv(stacked))
        var.extend(np.full(a.shape[0], w * w / (2.0 * math.sinh(1.0 / (2.0 * float(t))) ** 2))
                   for _, (a, w, t) in members)
    k = np.hstack(estimator)
    rows = np.vstack([np.vstack([w * a.astype(float) for _, (a, w, _) in members]) for members in by_block.values()])
    assert np.allclose(k @ rows, w_mat, atol=1e-8)  # unbiased: W x̂ = W x when there is no noise
    return (k * np.concatenate(var)) @ k.T


@pytest.mark.parametrize("name", list(CASES))
def test_closed_form_errors_equal_the_dense_covariance(solved, name):
    sol = solved[(name, "add_remove")]
    cov = _dense_covariance(sol.certificate["mechanism"]["parameters"], CASES[name])
    assert sol.certificate["utility"]["value"] == pytest.approx(np.trace(cov), rel=1e-9)
    assert np.allclose(sol.mechanism._variances(), np.diag(cov), rtol=1e-9)


@pytest.mark.parametrize("name", list(CASES))
def test_released_noise_covariance_matches_the_closed_form(solved, name):
    """Releases of fixed counts by the exact sampler: the mean of z_i z_j (z = release − answers, centred: the least
    squares is unbiased) within 5 of its standard errors (estimated from the draws) of the dense covariance, for every
    pair of answers; the means within 5 standard errors of 0. 20,000 draws, fixed seed."""
    sol = solved[(name, "add_remove")]
    terms = CASES[name]
    cells = np.random.default_rng(3).integers(0, 30, size=math.prod(len(v) for v in ATTRIBUTES.values()))
    answers = dense_workload(terms) @ cells
    draws = 20_000
    released = sol.mechanism.release(np.tile(answers, (draws, 1)), rng=np.random.default_rng(11))
    z = released - answers
    cov = _dense_covariance(sol.certificate["mechanism"]["parameters"], terms)
    se_mean = np.sqrt(np.diag(cov) / draws)
    assert np.all(np.abs(z.mean(axis=0)) <= 5 * se_mean)
    products = z[:, :, None] * z[:, None, :]
    se = products.std(axis=0, ddof=1) / math.sqrt(draws)
    assert np.all(np.abs(products.mean(axis=0) - cov) <= 5 * se + 1e-12)


def test_release_refuses_answers_that_are_not_counts(solved):
    sol = solved[("age_summed", "add_remove")]
    answers = dense_workload(CASES["age_summed"]) @ np.arange(24)
    answers[0] += 0.5  # not a count
    with pytest.raises(dpopt.DataError):
        sol.mechanism.release(answers, rng=np.random.default_rng(0))


@pytest.mark.parametrize("reference", [None, 0, 2])
def test_part_beside_the_total_and_its_estimator(reference):
    """For an integer factor of full column rank (a p-Identity-like 5 × 3 matrix): P̃ has kernel span(v) (v = 1 or
    e_reference) and rank n − 1, its estimator E reproduces every w ∈ 1^⊥ from P̃w and maps into 1^⊥ (1ᵀE = 0), and
    the total's estimator is v/(1ᵀv)."""
    from dpopt.mechanisms.kronecker_laplace_blocks import _parts

    a = np.array([[5, 0, 0], [0, 5, 0], [0, 0, 5], [2, 3, 0], [0, 1, 4]], dtype=np.int64)
    v = np.ones(3) if reference is None else np.eye(3)[reference]
    total, beside = _parts((a,), {0: reference}, ((), ()))[0], _parts((a,), {0: reference}, ((), (0,)))[0]
    assert np.all(beside.integer @ v == 0) and np.linalg.matrix_rank(beside.integer.astype(float)) == 2
    basis = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    assert np.allclose(beside.estimator @ beside.integer @ basis, basis)
    assert np.allclose(np.ones(3) @ beside.estimator, 0.0)
    assert np.allclose(total.estimator[:, 0], v / v.sum()) and np.array_equal(total.integer, np.ones((1, 3)))
