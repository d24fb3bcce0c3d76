"""One BLAS thread for dpopt's linear algebra (threadpoolctl).

OpenBLAS, as numpy and scipy ship it, starts one thread per core and lets idle threads spin while they
wait for work. On a machine whose cores are busy with other jobs, a thread that spins takes a core from
the one that computes: ``specs/range_marginals_age_prefix_zcdp.yaml``, thousands of small and
medium products, took 35.8 s of CPU and 199 s of wall time with OpenBLAS's two default threads at load
14 on two cores, and 3.6 s of CPU and 17 s of wall time with one thread
(``benchmarks/bench_blas_threads.py``).
dpopt's matrices are at most a few thousand wide, where a second thread gains little even on an idle
machine, so :func:`one_blas_thread` caps every BLAS library loaded at the time at one thread for the
duration of a solve or a verification (a limit the caller set lower stays; the previous limits are
restored on exit). threadpoolctl (BSD-3, pure Python, no dependencies; the way scikit-learn limits its
BLAS) does this through each library's own API: environment variables such as
``OPENBLAS_NUM_THREADS`` are read only when a library loads, which is before dpopt runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with every loaded BLAS library limited to one thread (then restored)."""
    from threadpoolctl import threadpool_limits  # third-party, imported when a solve starts

    with threadpool_limits(limits=1, user_api="blas"):
        yield
