"""Run folders: one fresh folder per run for its files, the oldest beyond RUNS_KEPT removed."""

from __future__ import annotations

import datetime
import logging
import os
import shutil
from pathlib import Path

from tfdoctor.core.experiments import runs_root

__all__ = ["RUNS_KEPT", "make_run_dir", "runs_root"]

log = logging.getLogger(__name__)

RUNS_KEPT = 20


def make_run_dir(root: Path | None = None) -> Path | None:
    """A fresh folder for one run's files; old runs beyond RUNS_KEPT are removed."""
    root = root or runs_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        for n in range(1000):
            d = root / f"{stamp}-{os.getpid()}-{n}"
            try:
                d.mkdir(mode=0o700)  # private: the worker's output may hold paths and secrets
                break
            except FileExistsError:
                continue
        else:
            return None
        old = sorted(p for p in root.iterdir() if p.is_dir())
        for p in old[:-RUNS_KEPT]:
            shutil.rmtree(p, ignore_errors=True)
        return d
    except OSError as exc:
        log.warning("cannot keep run files under %s: %s", root, exc)
        return None
