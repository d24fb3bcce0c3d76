"""The trees a benchmark times in one run: this checkout and, optionally, a git revision extracted beside it."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def trees(baseline: str, folder: Path) -> dict[str, Path]:
    """{"this tree": ROOT}, plus ``baseline`` (a git revision, when given) extracted by ``git archive`` into
    ``folder``: both are timed in the same run, on the same machine and load."""
    out = {"this tree": ROOT}
    if baseline:
        archive = Path(folder) / "baseline.tar"
        subprocess.run(["git", "archive", "-o", str(archive), baseline], cwd=ROOT, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(folder) / "baseline", filter="data")
        out[baseline] = Path(folder) / "baseline"
    return out
