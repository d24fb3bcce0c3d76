r"""Synthetic records from published marginal tables (post-processing only).

:func:`synthesize_records` turns published tables (e.g. dpopt's consistent, non-negative, whole-number
release of every two-way marginal) into a record file, reading nothing but those tables and public
facts (the domain, the number of records). It never forms the domain's :math:`\prod_k n_k` cells: every
step works on the tables' cells and the records, so its cost grows with the workload's cliques and
the number of records.

Method, and why. Exact inference over all two-way cliques of 14 or more attributes is infeasible (their
graph is complete), and Private-PGM's approximate inference did not finish on 8 attributes in 25 minutes
here; PrivSyn (Zhang et al., USENIX Security 2021) showed that updating *records* toward many marginals
(its Gradually Update Method) scales with the tables instead. The steps:

1. a Chow–Liu spanning tree of the published two-way tables, and records dealt along it by controlled
   allocation, exact on its edges and on every one-way margin (:mod:`dpopt.synth.tree`);
2. record-level coordinate descent of the weighted squared misfit to *every* table, a greedy form of
   PrivSyn's update (:mod:`dpopt.synth.search`), stopped early (:data:`SWEEPS`): it removes noise the
   published tables carry, since the true tables are those of a record file and the published ones are
   generally not, until it starts fitting that noise;
3. a repair along a second spanning tree, of the smallest (least noisy) two-way tables, that restores exact
   agreement with its edges and the one-way margins at the least cost to the other tables, then swaps of
   levels between records that keep it exact and lower the other tables' misfit (:mod:`dpopt.synth.repair`).

The price of exact agreement. Published tables carry noise, their one-way margins included (a
non-negative projection also adds mass: adult's published total is 49,521 for 48,842 records), and exact
agreement puts the records in those noisy cells: on adult at ρ = 0.1 the average two-way TVD from the true
data is 0.0327 after the search and 0.037 after the repair (benchmarks/bench_synthesize.py). ``exact=False``
skips step 3. Better still when exactness is not needed: ``targets``, tables fitted in place of the published
ones, such as the *noisy* tables before post-processing shrunk toward the independence of their attributes
(:mod:`dpopt.synth.denoise`: they keep the release's unbiased total and threshold the cells the noise
explains): 0.028 on adult, against 0.0327 for the published tables (same benchmark).
Between the two, ``exact`` may name a few given one- and two-way tables (a forest of pairs): the records fitted
to the targets are repaired to those tables and their attributes' one-way margins only
(:func:`dpopt.synth.tree.held_tree`). Exact agreement with *every* published one-way margin has a floor: a
pair's TVD is at least either one-way margin's, and adult's published one-way margins (lifted by the
non-negative projection) put the average two-way TVD of any file matching them at 0.021 or more; the 7 smallest
tables over the attributes of at most 16 levels cost 0.0304, sex × income alone 0.0282 (same benchmark).
``dpopt synthesize`` fits the shrunk noisy tables by default and then publishes the records' own tables in place
of the release's (:func:`dpopt.synth.tables.tabulations`: consistent, non-negative, whole, matched exactly).

What holds. When the given tables are whole numbers that agree on shared attributes and sum to ``n``,
the records tabulate **exactly** to every one-way margin the tables imply and to the d − 1 two-way
tables of the spanning tree (d − c for c connected components of the pairs the tables cover). The other
tables are fitted, not matched: all two-way tables of a release need not admit any record file (they
are the marginals of a real table, which may be negative somewhere), and deciding whether they do is
NP-hard; ``residual`` gives each table's L1 gap. Tables that disagree with each other, or whose totals
differ from ``n`` (they are scaled to ``n`` for the fit), are fitted as closely as the search gets, and
their residuals say so.

References
----------
.. [1] Zhang, Wang, Li, He, Chen, Chen. "PrivSyn: Differentially Private Data Synthesis." USENIX Security 2021.
.. [2] Chow, Liu. "Approximating discrete probability distributions with dependence trees." IEEE Trans.
   Inf. Theory 14(3), 1968.
.. [3] McKenna, Miklau, Sheldon. "Winning the NIST Contest: A scalable and general approach to
   differentially private synthetic data." Journal of Privacy and Confidentiality 11(3), 2021 (MST).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpopt.errors import SpecError
from dpopt.synth.repair import polish, repair
from dpopt.synth.search import Fit, search
from dpopt.synth.tables import layout, residuals, tabulations
from dpopt.synth.tree import held_tree, sample_tree, spanning_tree

__all__ = ["SynthesisResult", "synthesize_records", "tabulations"]

SWEEPS = 3
"""Sweeps of the record search over every attribute (it also stops when a sweep gains < 0.1%). Few on
purpose: records can fit the published tables far closer than the true data does (on adult at ρ = 0.1,
all 91 two-way tables, unweighted: a squared misfit of 1.9·10⁶ after 3 sweeps, against 7.2·10⁶ for the
true records), and past that they fit the noise. The average two-way TVD from the true data after 1, 2, 3,
6, 15 sweeps was 0.034, 0.032, 0.0325, 0.0339, 0.0349 (weights 1/se, before the repair; one seed): an
early stop is the regulariser, chosen on that one data set."""


@dataclass(frozen=True)
class SynthesisResult:
    """Synthetic records and how well they agree with the tables they were drawn from.

    Attributes
    ----------
    records : numpy.ndarray of int32, shape (n, d)
        Level indices, one column per attribute in domain order.
    residual : dict
        Table key → L1 distance between the records' tabulation and the given table (0 where they agree
        exactly; a whole number for whole tables).
    method : str
        One sentence naming the method and what it matches exactly.
    """

    records: np.ndarray
    residual: dict[tuple[str, ...], int | float]
    method: str


def synthesize_records(
    domain: Mapping[str, int],
    marginals: Mapping[tuple[str, ...], np.ndarray],
    n: int,
    rng: np.random.Generator,
    weights: Mapping[tuple[str, ...], float] | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    exact: bool | Sequence[tuple[str, ...]] = True,
    targets: Mapping[tuple[str, ...], np.ndarray] | None = None,
) -> SynthesisResult:
    """``n`` records whose tabulations fit the published ``marginals`` (module docstring).

    Parameters
    ----------
    domain : mapping
        Attribute → number of levels, in column order.
    marginals : mapping
        Key (attributes in domain order) → table (non-negative counts; axes in the key's order). One-way
        tables may be among them.
    n : int
        Number of records to draw (the published total).
    rng : numpy.random.Generator
        The only source of randomness: the same seed gives the same records.
    weights : mapping, optional
        Key → confidence in that table (e.g. 1 / its standard error); 1 for each by default.
    progress : callable, optional
        Called with one line per step.
    exact : bool or sequence of keys, default True
        Restore exact agreement with the one-way margins and the spanning tree's tables after the search
        (step 3). False leaves the records as the search left them: closer to the true data when the
        published tables are noisy (their one-way margins carry the noise too), exact on nothing. A sequence of
        keys of given one- and two-way tables whose pairs hold no cycle: exact on those tables and the one-way
        margins of their attributes only (:func:`dpopt.synth.tree.held_tree`), every other attribute left as the
        search left it.
    targets : mapping, optional
        Key → the table the dealing and the search fit instead of that key's given table (non-negative; scaled
        to ``n``), e.g. the release's tables shrunk toward independence (:func:`dpopt.synth.denoise.shrink`).
        The repair (``exact``) and the residuals still use the given ``marginals``.

    Returns
    -------
    SynthesisResult

    Raises
    ------
    dpopt.errors.SpecError
        One line naming the offending argument (:func:`dpopt.synth.tables.layout`).

    Examples
    --------
    >>> import numpy as np
    >>> from dpopt.synth import synthesize_records
    >>> out = synthesize_records({"a": 2, "b": 2}, {("a", "b"): np.array([[3, 1], [0, 2]])}, 6,
    ...                          np.random.default_rng(0))
    >>> out.records.shape, out.residual
    ((6, 2), {('a', 'b'): 0})
    """
    say = progress or (lambda line: None)
    sizes, tables = layout(domain, marginals, n, weights)
    fitted = tables
    if targets is not None:
        unknown = [k for k in targets if tuple(k) not in {t.key for t in tables}]
        if unknown:
            raise SpecError("targets", f"a target for {unknown[0]!r}, which is not a given table")
        keyed = {tuple(k): v for k, v in targets.items()}
        _, fitted = layout(domain, {t.key: keyed.get(t.key, t.given.reshape(t.shape)) for t in tables}, n, weights)
    tree = spanning_tree(sizes, fitted)
    if exact is True or exact is False:
        tree_exact = spanning_tree(sizes, tables, smallest=True)
    else:
        held = [tuple(k) for k in exact]
        keyed = {t.key: t for t in tables}
        unknown = [k for k in held if k not in keyed]
        if unknown or any(len(k) > 2 for k in held):
            raise SpecError("exact", f"{(unknown or [k for k in held if len(k) > 2])[0]!r} is not a given one- or "
                                     "two-way table")
        try:
            tree_exact = held_tree(sizes, [keyed[k] for k in held])
        except ValueError as exc:
            raise SpecError("exact", str(exc)) from None
    matched = "" if exact is False else f"; {len(tree_exact.edges)} two-way tables to match exactly (fewest cells first)"
    say(f"synthesis: {len(tables)} tables over {len(sizes)} attributes; a spanning tree of {len(tree.edges)} two-way "
        f"tables of most mutual information (to start from){matched}")
    records = sample_tree(tree, sizes, n, rng)
    say(f"synthesis: {n:,} records dealt along the tree (exact on its tables)")
    if targets is not None:
        say(f"synthesis: fitting {len(targets)} given target tables in place of the published ones")
    fit = Fit(fitted, sizes, records)
    if n:
        search(fit, rng, SWEEPS, say)
    if n and exact is not False:
        moved = repair(fit, tree_exact, rng)
        say(f"synthesis: {len(tree_exact.edges)} tree tables and the one-way margins of "
            f"{len(tree_exact.ones) + len(tree_exact.edges)} attributes restored exactly ({moved:,} level changes); "
            f"weighted squared misfit {fit.loss():,.0f}")
        swaps = polish(fit, tree_exact, rng)
        say(f"synthesis: {swaps:,} swaps that keep them exact; weighted squared misfit {fit.loss():,.0f}")
    residual = residuals(tables, records)
    say(f"synthesis: {sum(1 for v in residual.values() if v == 0)} of {len(residual)} given tables matched exactly")
    fitted_to = ("the target tables given in their place (e.g. the noisy tables shrunk toward independence)"
                 if targets is not None else "every table")
    if exact is True:
        repaired = ("then repaired to match a spanning tree of the smallest given two-way tables and every one-way "
                    "margin exactly when the tables are consistent whole numbers; other tables are fitted, not matched "
                    "(residual per table)")
    elif exact is False:
        repaired = "matching no given table exactly (residual per table)"
    else:
        repaired = (f"then repaired to match the {len(exact)} given tables held exact and the one-way margins of their "
                    "attributes exactly when the tables are consistent whole numbers; other tables are fitted, not "
                    "matched (residual per table)")
    method = ("records dealt along a Chow-Liu spanning tree of the fitted two-way tables by controlled "
              f"allocation and fitted to {fitted_to} by record-level coordinate descent of the weighted squared "
              "misfit (a greedy form of PrivSyn's Gradually Update Method), " + repaired)
    return SynthesisResult(records, residual, method)
