"""Target discovery: kernelspecs (with their env blocks), conda envs, the current interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tfdoctor.core.probes import envs


def test_kernelspec_with_env_block_is_a_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bare_python: str
) -> None:
    spec_dir = tmp_path / "kernels" / "tf-gpu"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [bare_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "TF GPU",
                "language": "python",
                "env": {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    found = {t.label: t for t in envs.kernelspec_targets()}
    t = found["Jupyter kernel 'TF GPU' (tf-gpu)"]
    assert t.python == bare_python and t.kind == "kernelspec"
    assert dict(t.env) == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}


def test_bare_python_in_a_spec_means_the_owning_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    res = prefix / "share" / "jupyter" / "kernels" / "python3"
    res.mkdir(parents=True)
    assert envs.kernelspec_python("python", str(res), {}) == str(prefix / "bin" / "python")
    assert envs.kernelspec_python("/abs/python", str(res), {}) == "/abs/python"


def test_conda_envs_from_environments_txt_and_envs_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = home / "miniconda3"
    for prefix in (base, base / "envs" / "tf215"):
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "bin").mkdir()
        (prefix / "bin" / "python").symlink_to(sys.executable)
    other = tmp_path / "elsewhere" / "proj"
    (other / "conda-meta").mkdir(parents=True)
    (other / "bin").mkdir()
    (other / "bin" / "python").symlink_to(sys.executable)
    (home / ".conda").mkdir()
    (home / ".conda" / "environments.txt").write_text(f"{other}\n{tmp_path / 'gone'}\n")
    targets = envs.conda_targets(home=home, run_conda=False)
    labels = [t.label for t in targets]
    assert labels == ["conda env proj", "conda env miniconda3", "conda env tf215"]
    assert all(t.kind == "conda" for t in targets)


def test_find_targets_starts_with_this_interpreter_without_duplicates() -> None:
    targets = envs.find_targets(include_conda_cli=False)
    assert targets[0].python == sys.executable and targets[0].kind == "current"
    keys = [(t.kind, t.python, t.env, t.pid) for t in targets]
    assert len(keys) == len(set(keys))
