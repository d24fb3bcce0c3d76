"""Post-processing of noisy releases into consistent, non-negative, integer tables.

The three steps of the Census TopDown algorithm (Abowd et al. 2022) on one release
(:func:`consistent_table`) or down a geographic hierarchy (:func:`topdown`):

* :mod:`~dpopt.postprocess.structure` — which cells make which released numbers, the invariants;
* :mod:`~dpopt.postprocess.least_squares` — generalised least squares in the mechanism's metric;
* :mod:`~dpopt.postprocess.nonnegative` — the closest non-negative table;
* :mod:`~dpopt.postprocess.rounding` — controlled rounding keeping every published sum;
* :mod:`~dpopt.postprocess.certify` — exact integer checks of the output;
* :mod:`~dpopt.postprocess.hierarchy` — TopDown level by level;
* :mod:`~dpopt.postprocess.evaluation` — bias and RMSE before and after, by Monte Carlo.

Post-processing reads only the release and the published invariants, so it keeps the
release's guarantee.
"""

from dpopt.postprocess.certify import POSTPROCESSING_THEOREM, cell_checks, hierarchy_checks, table_checks
from dpopt.postprocess.hierarchy import TopDownResult, topdown
from dpopt.postprocess.structure import Structure, spec_structure, table_structure
from dpopt.postprocess.table import PostprocessResult, consistent_table, postprocess_release

__all__ = [
    "POSTPROCESSING_THEOREM",
    "PostprocessResult",
    "Structure",
    "TopDownResult",
    "cell_checks",
    "consistent_table",
    "hierarchy_checks",
    "postprocess_release",
    "spec_structure",
    "table_checks",
    "table_structure",
    "topdown",
]
