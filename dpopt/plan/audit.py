"""The empirical audit of a plan: the composed release, sampled on neighbouring datasets.

A plan's queries see the *same* neighbouring pair, so the audit samples the concatenated
release (φ_1(X) + Z_1, …, φ_k(X) + Z_k) against the one on a neighbour, whose difference is
(φ_1(X) − φ_1(X′), …, φ_k(X) − φ_k(X′)) for one record added or removed (add/remove) or
changed (replace-one), and tests them with the log-likelihood ratio of the product of the
queries' stated noise laws (:func:`dpopt.audit.empirical.audit_mechanism`, which turns the
test's error rates into a lower confidence bound on the plan's ε or μ). A plan whose
composition was under-counted (every query given the whole budget, say) is refuted; a
correct one is not, up to the audit's 5% failure probability. The levels of a hierarchical release are
audited the same way (:func:`audit_hierarchy_certificate`).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.linalg import block_diag

from dpopt.audit.empirical import AUDIT_DRAWS, AUDIT_SEED, AuditResult, _target, audit_mechanism
from dpopt.certificate.model import Certificate
from dpopt.certificate.verify import rebuild_mechanism
from dpopt.domain.queries import compile_query
from dpopt.noise.law import PostProcessedLaw, ProductLaw
from dpopt.plan.spec import load_plan
from dpopt.sensitivity.derive import derive
from dpopt.spec.load import load_spec
from dpopt.spec.models import NumericAttribute, Plan, Privacy

MAX_RECORDS = 12
"""Records (or replaced pairs) whose differences are audited."""


class ComposedRelease:
    """The concatenated noise of a plan's mechanisms (what the audit samples), with its law."""

    family = "plan"

    def __init__(self, mechanisms):
        self.mechanisms = list(mechanisms)
        self.dimension = sum(m.dimension for m in self.mechanisms)
        self.needs_integer_answers = any(getattr(m, "needs_integer_answers", False) for m in self.mechanisms)

    def sample(self, size: int, rng: np.random.Generator | None = None) -> np.ndarray:
        return np.hstack([m.sample(size, rng) for m in self.mechanisms])

    def release(self, true_value, rng: np.random.Generator | None = None) -> np.ndarray:
        """Each query's part of the answer (shape (d,), or (m, d) for m answers) through its family's release."""
        value = np.asarray(true_value, dtype=float)
        parts = np.split(value, np.cumsum([m.dimension for m in self.mechanisms])[:-1], axis=-1)
        return np.concatenate([m.release(p, rng) for m, p in zip(self.mechanisms, parts)], axis=-1)

    def noise_law(self):
        """The product of the queries' laws (block-diagonal basis), or why there is none."""
        laws = []
        for m in self.mechanisms:
            law = m.noise_law()
            law = law.inner if isinstance(law, PostProcessedLaw) else law
            if not isinstance(law, ProductLaw):
                return f"{m.family} states no product noise law"
            laws.append(law)
        bases = [np.eye(law.dimension) if law.basis is None else np.asarray(law.basis, dtype=float) for law in laws]
        observed = np.concatenate([law._observed() for law in laws])
        return ProductLaw(tuple(mk for law in laws for mk in law.marginals), self.dimension, block_diag(*bases),
                          observed, "product of the plan's noise laws")


class _Differences:
    """The joint neighbouring differences, in the shape the audit reads (``extreme_vectors()``)."""

    def __init__(self, vectors: np.ndarray):
        self._vectors = vectors

    def extreme_vectors(self) -> np.ndarray:
        return self._vectors


def _records(plan: Plan) -> list[dict]:
    """Up to MAX_RECORDS records of the domain: categorical cells in order, numeric attributes at their bounds."""
    attributes = plan.data.attributes
    choices = [[(a, v) for v in (dom if not isinstance(dom, NumericAttribute) else (dom.max, dom.min))]
               for a, dom in attributes.items()]
    return [dict(c) for c in itertools.islice(itertools.product(*choices), MAX_RECORDS)]


def joint_differences(plan: Plan, specs) -> np.ndarray | str:
    """(φ_i(X) − φ_i(X′))_i for one record added (add/remove) or replaced (replace-one), or why not."""
    if plan.invariants:
        return "not audited: differences under invariants are not single-record changes"
    queries = [compile_query(s) for s in specs]

    def contribution(q, records: list[dict]) -> np.ndarray:
        if getattr(q, "kind", None) == "mean":  # a record moves the mean of n records by its value / n
            return np.array([sum(float(r[q.attribute]) for r in records) / q.n])
        return q.evaluate(records)

    def answer(records: list[dict]) -> np.ndarray:
        return np.concatenate([contribution(q, records) for q in queries])

    records = _records(plan)
    if plan.adjacency.kind == "add_remove":
        return np.array([answer([r]) for r in records])
    if plan.adjacency.kind == "replace_one":
        return np.array([answer([r]) - answer([s]) for r, s in itertools.combinations(records, 2)])
    return f"not audited: {plan.adjacency.kind} adjacency"


def audit_composed(plan: Plan, specs, mechanisms, draws: int = AUDIT_DRAWS, seed: int = AUDIT_SEED,
                   profile: dict | None = None) -> AuditResult:
    """Audit the composition of ``mechanisms`` (one per query of ``plan``) against the plan's target (``profile``:
    the plan's composed ε by δ, ``guarantee.epsilon_at_delta`` of its certificate)."""
    differences = joint_differences(plan, specs)
    if isinstance(differences, str):
        parameter, certified, delta, certified_from = _target(plan.privacy, profile)
        return AuditResult(parameter, certified, -np.inf, 0.95, 0, seed, [], differences, delta, certified_from)
    return audit_mechanism(ComposedRelease(mechanisms), _Differences(differences), plan.privacy, draws=draws,
                           seed=seed, profile=profile or {})


def audit_plan(solution, draws: int = AUDIT_DRAWS, seed: int = AUDIT_SEED) -> AuditResult:
    """Audit a solved plan (:class:`dpopt.plan.solve.PlanSolution`): its separate designs, or its
    joint release (every query is post-processing of it, so auditing it bounds them all)."""
    profile = solution.certificate["guarantee"].get("epsilon_at_delta")
    if solution.joint is not None:
        return audit_composed(solution.plan, [solution.joint.spec], [solution.joint.mechanism], draws, seed, profile)
    return audit_composed(solution.plan, [d.spec for d in solution.designs], [d.mechanism for d in solution.designs],
                          draws, seed, profile)


def audit_plan_certificate(certificate: Certificate, draws: int = AUDIT_DRAWS, seed: int = AUDIT_SEED) -> AuditResult:
    """Audit a plan certificate as written: the plan and each query's spec re-read from it, each mechanism
    rebuilt from its recorded family and parameters (the joint release's, for a joint design), as
    :func:`dpopt.audit.audit` does for a single certificate."""
    plan = load_plan(certificate["spec"])
    data = certificate.data
    subs = [data["joint"]["certificate"]] if data.get("design") == "joint" else [q["certificate"] for q in data["queries"]]
    specs = [load_spec(sub["spec"]) for sub in subs]
    mechanisms = [rebuild_mechanism(sub, derive(spec)) for sub, spec in zip(subs, specs)]
    return audit_composed(plan, specs, mechanisms, draws, seed, data["guarantee"].get("epsilon_at_delta"))


def audit_hierarchy_certificate(certificate: Certificate, draws: int = AUDIT_DRAWS,
                                seed: int = AUDIT_SEED) -> AuditResult:
    """Audit a hierarchical release's certificate (:mod:`dpopt.certificate.hierarchy_release`) as written: the
    levels' mechanisms rebuilt from their certificates, composed as for a plan. A record lies in one unit per
    level, so a neighbouring dataset moves the table of one unit of every level by the same difference v: the
    composed release's difference is (v, …, v), tested against the whole release's guarantee and its ε per δ."""
    data = certificate.data
    subs = list(data["levels"].values())
    spec = load_spec(subs[0]["spec"])
    space = derive(spec)
    mechanisms = [rebuild_mechanism(sub, derive(load_spec(sub["spec"]))) for sub in subs]
    g = data["guarantee"]
    whole = Privacy.model_validate({g["definition"]: {k: g[k] for k in spec.privacy.parameters}})
    return audit_mechanism(ComposedRelease(mechanisms), _Differences(np.hstack([space.vectors()] * len(subs))),
                           whole, draws=draws, seed=seed, profile=g.get("epsilon_at_delta") or {})
