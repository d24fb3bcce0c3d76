"""Releases at scale: many groups, large files (DuckDB, Dask) and secure randomness.

* :func:`release_groups` — the query for every group of one or more columns, one certificate;
* :func:`solve_hierarchy` — the design and certificate of a hierarchical release (``geography``), which
  :func:`dpopt.release.hierarchy.release_hierarchy` then releases;
* :mod:`dpopt.release.sources` — CSV and Parquet through DuckDB, counts in SQL;
* :mod:`dpopt.release.distributed` — the same release on Dask (imported on demand);
* :mod:`dpopt.rng` — AES-CTR CSPRNG streams, seeds refused unless insecure seeding is asked for.
"""

from dpopt.release.batch import GroupRelease, ReleasedLevel, release_groups, release_once
from dpopt.release.blocks import BLOCK_GROUPS
from dpopt.release.hierarchy_design import HierarchySolution, solve_hierarchy
from dpopt.rng import InsecureSeedError, RandomSource, random_source, secure_generator

__all__ = [
    "BLOCK_GROUPS",
    "GroupRelease",
    "HierarchySolution",
    "InsecureSeedError",
    "RandomSource",
    "ReleasedLevel",
    "random_source",
    "release_groups",
    "release_once",
    "secure_generator",
    "solve_hierarchy",
]
