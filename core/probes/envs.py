"""Find target interpreters: this one, Jupyter kernelspecs, conda envs, running kernels."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tfdoctor.core import jsonio
from tfdoctor.core.model import Target

log = logging.getLogger(__name__)

_BARE_PYTHONS = {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"}


def kernelspec_python(argv0: str, resource_dir: str, env: Mapping[str, str]) -> str:
    """The interpreter a kernelspec really starts.

    A spec that says just `python` means the Python of the Jupyter install that owns it
    (jupyter_client substitutes its own sys.executable), so resolve it from the spec's prefix
    (`<prefix>/share/jupyter/kernels/<name>`), then from the spec's PATH, then from ours.
    """
    if os.path.isabs(argv0):
        return argv0
    parts = Path(resource_dir).parts
    if (
        argv0 in _BARE_PYTHONS
        and len(parts) >= 4
        and parts[-4:-1] == ("share", "jupyter", "kernels")
    ):
        prefix = Path(*parts[:-4])
        for cand in (prefix / "bin" / argv0, prefix / "bin" / "python3", prefix / "python.exe"):
            if cand.exists():
                return str(cand)
    found = shutil.which(argv0, path=env.get("PATH") or os.environ.get("PATH"))
    return found or argv0


def read_kernelspecs() -> tuple[dict[str, tuple[str, dict[str, Any]]], dict[str, str]]:
    """Every kernelspec Jupyter would list: ({name: (folder, spec)}, {name: why it is broken}).

    Each kernel.json is read here, not by jupyter_client's get_all_specs (which prints a
    traceback for each broken one): a spec that is no JSON object, nests too deep, is no
    UTF-8, is a folder, or has no argv list or a malformed env is named with the reason.
    """
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        log.info("jupyter_client is not installed: no kernelspecs listed")
        return {}, {}
    try:
        found: dict[str, str] = KernelSpecManager(ensure_native_kernel=False).find_kernel_specs()
    except Exception as exc:  # a broken JUPYTER_* setting must not stop the listing
        log.warning("could not list Jupyter kernelspecs: %s", exc)
        log.debug("listing Jupyter kernelspecs failed", exc_info=True)
        return {}, {}
    specs: dict[str, tuple[str, dict[str, Any]]] = {}
    broken: dict[str, str] = {}
    for name, folder in sorted(found.items()):
        path = Path(folder) / "kernel.json"
        try:
            spec = jsonio.loads(path.read_bytes())
        except OSError as exc:
            broken[name] = f"cannot read {path}: {exc.strerror or exc}"
            continue
        except ValueError as exc:  # not JSON, not UTF-8, nested too deeply
            broken[name] = f"{path} is not valid JSON ({' '.join(str(exc).split())[:120]})"
            continue
        why = _kernelspec_problem(spec)
        if why:
            broken[name] = f"{path}: {why}"
        else:
            specs[name] = (folder, spec)
    return specs, broken


def _kernelspec_problem(spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return "not a kernelspec (a JSON object with an argv list)"
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return "its argv is not a list of strings"
    if not isinstance(spec.get("env") or {}, dict):
        return "its env is not a JSON object"
    return None


def kernelspec_targets() -> list[Target]:
    """Every installed Jupyter kernelspec whose argv starts a Python (broken ones are left
    out: `read_kernelspecs` says why)."""
    specs, broken = read_kernelspecs()
    for name, why in broken.items():
        log.info("kernelspec %s left out: %s", name, why)
    out = []
    for name, (folder, spec) in specs.items():
        argv = spec["argv"]
        language = str(spec.get("language") or "python").lower()  # often left out
        if language != "python":
            continue
        env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
        python = kernelspec_python(str(argv[0]), folder, env)
        label = f"Jupyter kernel '{spec.get('display_name') or name}' ({name})"
        out.append(
            Target(python=python, label=label, kind="kernelspec", env=tuple(env.items()), name=name)
        )
    return out


def conda_env_dirs(home: Path | None = None, run_conda: bool = True) -> list[Path]:
    """Conda environment prefixes from environments.txt, `conda env list`, and usual places."""
    home = home or Path.home()
    dirs: list[Path] = []
    envs_txt = home / ".conda" / "environments.txt"
    if envs_txt.is_file():
        dirs += [Path(line.strip()) for line in envs_txt.read_text().splitlines() if line.strip()]
    conda = shutil.which("conda") if run_conda else None
    if conda:
        try:
            proc = subprocess.run(
                [conda, "env", "list", "--json"], capture_output=True, text=True, timeout=10
            )
            dirs += [Path(p) for p in json.loads(proc.stdout).get("envs", [])]
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            log.info("conda env list failed: %s", exc)
    for base in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda"):
        root = home / base
        if (root / "conda-meta").is_dir():
            dirs.append(root)
        if (root / "envs").is_dir():
            dirs += sorted((root / "envs").iterdir())
    for root in (Path("/opt/conda"),):
        if (root / "conda-meta").is_dir():
            dirs.append(root)
            if (root / "envs").is_dir():
                dirs += sorted((root / "envs").iterdir())
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(Path(os.environ["CONDA_PREFIX"]))
    return _unique_paths(d for d in dirs if (d / "conda-meta").is_dir())


def conda_targets(home: Path | None = None, run_conda: bool = True) -> list[Target]:
    out = []
    for prefix in conda_env_dirs(home, run_conda):
        py = prefix / "bin" / "python"
        if not py.exists():
            py = prefix / "python.exe"
        if py.exists():
            out.append(
                Target(
                    python=str(py), label=f"conda env {prefix.name}", kind="conda", name=prefix.name
                )
            )
    return out


def running_kernel_targets() -> list[Target]:
    """The interpreters (and virtualenvs) of Jupyter kernels running now."""
    try:
        from tfdoctor.core.probes.jupyter import running_kernels
    except ImportError:  # pragma: no cover - the module ships with core
        return []
    out = []
    for k in running_kernels():
        python = str(k.get("python") or "")
        if not python:
            continue
        where = k.get("notebook_path") or k.get("kernel_id") or ""
        label = f"running kernel pid {k.get('pid')}" + (f" ({where})" if where else "")
        out.append(Target(python=python, label=label, kind="running-kernel", pid=k.get("pid")))
    return out


def find_targets(include_conda_cli: bool = True) -> list[Target]:
    """All candidate targets, the current interpreter first, duplicates removed.

    Two entries are the same target when they are of the same kind and run the same
    interpreter with the same extra environment (a kernelspec that runs this very Python is
    still listed: its name is what the user recognises).
    """
    from tfdoctor.core.probes.targetrun import app_is_bundle, current_target

    found = [] if app_is_bundle() else [current_target()]
    for finder in (kernelspec_targets, running_kernel_targets):
        found += finder()
    found += conda_targets(run_conda=include_conda_cli)
    seen: set[tuple[str, str, tuple[tuple[str, str], ...], int | None]] = set()
    out = []
    for t in found:
        key = (t.kind, _real(t.python), t.env, t.pid)
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
    return out


def _real(path: str) -> str:
    # venv pythons are symlinks to the base interpreter: compare the link's folder, not its target
    p = Path(path)
    try:
        return str(p.parent.resolve() / p.name)
    except OSError:
        return path


def _unique_paths(paths: Iterable[Path]) -> list[Path]:
    seen: set[str] = set()
    out = []
    for p in paths:
        key = str(p.resolve()) if p.exists() else str(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
