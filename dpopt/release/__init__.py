"""Releases at scale: many groups, large files (DuckDB, Dask) and secure randomness.

* :func:`release_groups` — the query for every group of one or more columns, one certificate;
* :mod:`dpopt.release.sources` — CSV and Parquet through DuckDB, counts in SQL;
* :mod:`dpopt.release.distributed` — the same release on Dask (imported on demand);
* :mod:`dpopt.rng` — AES-CTR CSPRNG streams, seeds refused unless insecure seeding is asked for.
"""

from dpopt.release.batch import GroupRelease, ReleasedLevel, release_groups, release_once
from dpopt.release.blocks import BLOCK_GROUPS
from dpopt.rng import InsecureSeedError, RandomSource, random_source, secure_generator

__all__ = [
    "BLOCK_GROUPS",
    "GroupRelease",
    "InsecureSeedError",
    "RandomSource",
    "ReleasedLevel",
    "random_source",
    "release_groups",
    "release_once",
    "secure_generator",
]
