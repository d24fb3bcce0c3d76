"""Synthetic microdata from certified marginals (issue 38): the user-facing pipeline.

A spec with a ``synthesize`` block (:mod:`dpopt.spec.synthesis`) is measured with dpopt's certified
marginal designs (:mod:`dpopt.synthesis.measure`; MST-style adaptive selection:
:mod:`dpopt.synthesis.adaptive`, budget: :mod:`dpopt.synthesis.budget`), turned into records by
:func:`dpopt.synth.synthesize_records` (post-processing), certified (:mod:`dpopt.synthesis.certificate`),
reported (:mod:`dpopt.synthesis.report`) and written (:mod:`dpopt.synthesis.pipeline`).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "SynthesisRelease": "dpopt.synthesis.pipeline",
    "is_synthesis_certificate": "dpopt.synthesis.kind",
    "synthesize": "dpopt.synthesis.pipeline",
    "verify_synthesis": "dpopt.synthesis.certificate",
})
