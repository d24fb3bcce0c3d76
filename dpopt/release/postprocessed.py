"""Post-processing of an ungrouped release (``dpopt release`` on a spec with ``postprocess:``).

The release document keeps the raw noisy answer (``release``) and adds the post-processed one
(``postprocessed``) with the method and its exact checks; the certificate gains a
``postprocess`` block (the guarantee is unchanged, the method, and the error before and after
by Monte Carlo at the published table).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dpopt.certificate.model import Certificate
from dpopt.errors import UnsupportedSpecError
from dpopt.postprocess import PostprocessResult, postprocess_release, spec_structure
from dpopt.postprocess.evaluation import table_errors
from dpopt.postprocess.marginals import noise_free_sets, postprocess_marginals, uses_marginal_space
from dpopt.postprocess.monte_carlo import monte_carlo_bounds
from dpopt.postprocess.table import certificate_block, mechanism_covariance
from dpopt.release import sources
from dpopt.solve import Solution
from dpopt.spec.models import Postprocess

ERROR_SEED = 20260103
"""Seed of the Monte Carlo error estimate (a simulation at the published table, not a release)."""


def invariant_values(solution: Solution, data: str | Path) -> np.ndarray | None:
    """t = C h of the confidential table (published exactly), counted in SQL; None without invariants.

    Raises
    ------
    UnsupportedSpecError
        Invariants on a query that is not the full table (its cells cannot be read off φ(X)).
    """
    structure = spec_structure(solution.problem)
    if not solution.spec.invariants:
        return None
    if structure.queries.shape[0] != structure.cells or not np.array_equal(structure.queries, np.eye(structure.cells)):
        raise UnsupportedSpecError(
            "postprocess", "with invariants, the command-line release post-processes a full table (histogram or "
            "contingency_table over the invariants' attributes); use dpopt.postprocess from Python otherwise"
        )
    value, _ = sources.answer(sources.connect(), sources.open_source(data), solution.spec,
                              query=solution.problem.query)
    return structure.invariant_values(value)


def published_bounds(solution: Solution, post, data: str | Path) -> tuple | None:
    """The intervals of ``intervals: {method: monte_carlo}`` for the published answers of ``post``
    (:func:`dpopt.postprocess.monte_carlo.monte_carlo_bounds`, at the invariants' public values), or None for the
    default noise-stage intervals (computed from the release by :mod:`dpopt.release.cells`)."""
    block = solution.certificate["utility"]["per_cell"].get("intervals") or {}
    if "monte_carlo" not in block:
        return None
    values = None if uses_marginal_space(solution.problem.query) else invariant_values(solution, data)
    return monte_carlo_bounds(solution, post.answers, values)


def postprocess_once(
    solution: Solution, noisy: np.ndarray, data: str | Path, error_draws: int = 0
) -> tuple[PostprocessResult, Certificate]:
    """The post-processed release and the certificate with its ``postprocess`` block.

    A ``marginals`` query over a large histogram is post-processed in marginal space
    (:mod:`dpopt.postprocess.marginals`); its error is not simulated (``error_draws`` is not
    used): the certificate states the bound that holds for every release instead.
    """
    options = solution.spec.postprocess or Postprocess()
    if uses_marginal_space(solution.problem.query):
        exact = noise_free_sets(solution.mechanism)
        if solution.spec.invariants and not exact:
            raise UnsupportedSpecError("postprocess", f"invariants with a {solution.mechanism.family} release of "
                                       "marginals: marginal-space post-processing keeps the margins marginal_gaussian "
                                       "releases without noise")
        result = postprocess_marginals(solution.problem.query.workload, noisy, options, exact, solution.spec.data.n)
        data_ = json.loads(solution.certificate.to_json())
        data_["postprocess"] = certificate_block(result)
        return result, Certificate(data_)
    values = invariant_values(solution, data)
    result = postprocess_release(solution, noisy, values=values, options=options)
    block = certificate_block(result)
    if error_draws:
        covariance = mechanism_covariance(solution.mechanism)[0]
        structure = spec_structure(solution.problem)
        t = values if values is not None else structure.invariant_values(result.table) if structure.constraints.shape[0] else None
        block["error"] = {
            "method": f"Monte Carlo, {error_draws} releases simulated at the published table (parametric bootstrap), "
                      f"seed {ERROR_SEED}",
            "levels": table_errors(result.table, solution.mechanism, structure, t, error_draws,
                                   np.random.default_rng(ERROR_SEED), covariance, options),
        }
    data_ = json.loads(solution.certificate.to_json())
    data_["postprocess"] = block
    return result, Certificate(data_)


def document_block(result: PostprocessResult, labels) -> dict:
    """The release document's ``postprocess`` entry: method and exact checks of the output."""
    return {
        "values": dict(zip(labels, result.answers.tolist())),
        "method": result.method,
        "checks": [c.to_dict() for c in result.checks],
    }
