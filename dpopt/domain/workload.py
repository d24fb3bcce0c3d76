"""The workload matrix W of an ``l2`` utility (the queries whose error is measured)."""

from __future__ import annotations

import numpy as np

from dpopt.spec.models import Utility


def workload_matrix(utility: Utility) -> np.ndarray | None:
    """W of an ``l2`` utility: the ``workload``, Diag(√w) for ``weights`` w (Σ w_i E Z_i² =
    E‖Diag(√w) Z‖²), or None for the identity."""
    if utility.weights is not None:
        return np.diag(np.sqrt(np.asarray(utility.weights, dtype=float)))
    return None if utility.workload is None else np.asarray(utility.workload, dtype=float)
