"""One BLAS thread for dpopt's linear algebra (threadpoolctl, and the libraries' own variables).

OpenBLAS, as numpy and scipy ship it, starts one thread per core and lets idle threads spin while they
wait for work. On a machine whose cores are busy with other jobs, a thread that spins takes a core from
the one that computes: ``specs/range_marginals_age_prefix_zcdp.yaml``, thousands of small and
medium products, took 35.8 s of CPU and 199 s of wall time with OpenBLAS's two default threads at load
14 on two cores, and 3.6 s of CPU and 17 s of wall time with one thread
(``benchmarks/bench_blas_threads.py``).
dpopt's matrices are at most a few thousand wide, where a second thread gains little even on an idle
machine, so :func:`one_blas_thread` caps every BLAS library at one thread for the duration of a solve or
a verification. threadpoolctl (BSD-3, pure Python, no dependencies; the way scikit-learn limits its
BLAS) does this through each library's own API for the libraries loaded when the body starts; a library
first loaded *during* the body reads ``OPENBLAS_NUM_THREADS`` (and MKL's, BLIS's variables) when it loads,
so those are set to 1 for the duration. That matters: scipy ships its own OpenBLAS, separate from numpy's,
and dpopt imports scipy.optimize and scipy.linalg only when a solve needs them — inside the body. The L-BFGS-B
restarts of ``specs/marginals_5attr_2way_pure.yaml`` took 3.5 s of CPU with scipy's OpenBLAS at two threads
and 1.2 s at one (load 5–10, issue 36).

A limit the caller set lower stays, and a variable the caller set is left as it is. On exit the previous
limits of the libraries loaded before are restored, the variables set here are removed, and a library
first loaded during the body is given the threads it would have started with (one per core available to
the process, OpenBLAS's and BLIS's default).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
"""Read by OpenBLAS, MKL and BLIS when the library loads."""


def _cores() -> int:
    """Cores available to this process (OpenBLAS's default thread count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with every BLAS library, loaded before or during it, limited to one thread (then restored)."""
    from threadpoolctl import ThreadpoolController  # third-party, imported when a solve starts

    controller = ThreadpoolController().select(user_api="blas")
    loaded = {info["filepath"] for info in controller.info()}
    added = [name for name in THREAD_VARIABLES if name not in os.environ]
    os.environ.update({name: "1" for name in added})  # read by a BLAS library that loads in the body
    try:
        with controller.limit(limits=1):
            yield
    finally:
        for name in added:
            os.environ.pop(name, None)
        later = [info["filepath"] for info in ThreadpoolController().select(user_api="blas").info()
                 if info["filepath"] not in loaded]
        if later and not set(THREAD_VARIABLES) - set(added):  # as they would have started: no variable of the caller's
            ThreadpoolController().select(filepath=later).limit(limits=_cores())
