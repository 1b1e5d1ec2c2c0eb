"""CUDA installs probe: ldconfig cache, LD_LIBRARY_PATH, extra lib dirs, toolkits, nvcc, ptxas."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tfdoctor.core import jsonio
from tfdoctor.core.model import Fact, FactValue, ProbeResult, ProbeStatus
from tfdoctor.core.probes.system import CmdResult, RunFn, run_command

log = logging.getLogger(__name__)

PROBE = "cudalibs"
COMMAND_TIMEOUT_S = 2.0

# Library stems we report. libcudnn* covers the split cuDNN 8/9 libraries (libcudnn_ops_infer,
# libcudnn_cnn, libcudnn_graph, ...), which all carry the cuDNN major in their soname.
CUDA_LIB_NAMES = frozenset(
    {
        "libcuda",
        "libcudart",
        "libcublas",
        "libcublasLt",
        "libcufft",
        "libcurand",
        "libcusolver",
        "libcusparse",
        "libnccl",
        "libnvrtc",
        "libnvinfer",
        "libnvidia-ml",
        "libnvJitLink",
    }
)
CUDA_LIB_PREFIXES = ("libcudnn",)

_LDCONFIG_LINE = re.compile(r"^\s*(?P<soname>\S+)\s+\((?P<arch>[^)]*)\)\s+=>\s+(?P<path>\S.*?)\s*$")
_LIB_FILE = re.compile(r"^(?P<name>lib[A-Za-z0-9_\-+]+?)\.so(?:\.(?P<version>\d+(?:\.\d+)*))?$")
_NVCC_VERSION = re.compile(r"release (?P<release>\d+\.\d+)(?:, V(?P<full>\d+(?:\.\d+)+))?")
# ldconfig tags each entry with its ABI; only this machine's 64-bit libraries can be loaded by
# a 64-bit Python (drivers also install i386 copies of libcuda).
_ARCH_TAGS = {"x86_64": "x86-64", "aarch64": "AArch64", "ppc64le": "64bit", "arm64": "AArch64"}


def is_cuda_lib(name: str) -> bool:
    """True for a library stem (``libcudnn_ops_infer``) of the CUDA family we report."""
    return name in CUDA_LIB_NAMES or name.startswith(CUDA_LIB_PREFIXES)


def split_lib_filename(filename: str) -> tuple[str, str | None] | None:
    """Split ``libcudnn.so.8.9.7`` into ('libcudnn', '8.9.7'); None for a non-library name."""
    m = _LIB_FILE.match(filename)
    if not m:
        return None
    return m.group("name"), m.group("version")


def lib_version(path: Path | str, soname: str | None = None) -> str | None:
    """The version of a library from the real file behind its symlinks.

    ``libcudnn.so.8 -> libcudnn.so.8.9.7`` gives '8.9.7'. When the real file carries no more
    than the soname (pip wheels ship ``libcudart.so.12`` as a plain file) the soname's major is
    used; None when neither has a version.

    Args:
        path: the library path as found (often a symlink).
        soname: the soname, when known (ldconfig gives it).

    Returns:
        A dotted version string or None.
    """
    p = Path(path)
    candidates: list[str] = []
    with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: a symlink loop
        candidates.append(p.resolve().name)
    candidates.append(p.name)
    if soname:
        candidates.append(soname)
    best: str | None = None
    for name in candidates:
        split = split_lib_filename(name)
        if split and split[1] and (best is None or split[1].count(".") > best.count(".")):
            best = split[1]
    return best


def major_of(version: str | None) -> str | None:
    """'8.9.7' -> '8'."""
    if not version:
        return None
    head = version.split(".", 1)[0]
    return head if head.isdigit() else None


def parse_ldconfig(text: str, machine: str | None = None) -> list[dict[str, Any]]:
    """CUDA-family libraries in ``ldconfig -p`` output.

    Args:
        text: the output of ``ldconfig -p``.
        machine: ``platform.machine()`` of the target (default: this one); entries for another
            ABI (i386 copies of libcuda) are left out.

    Returns:
        ``{name, soname, path, version}`` records in ldconfig's order, one per real file (the
        unversioned ``libcudart.so`` development link is folded into ``libcudart.so.13``).
    """
    tag = _ARCH_TAGS.get(machine if machine is not None else platform.machine())
    rows: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if not m:
            continue
        soname, arch, path = m.group("soname"), m.group("arch"), m.group("path")
        if tag and tag not in arch:
            continue
        split = split_lib_filename(soname)
        if split is None or not is_cuda_lib(split[0]):
            continue
        rows.append((split[0], soname, path))
    return _dedupe(rows)


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _dedupe(rows: Iterable[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """One record per (name, real file), named by its most soname-like alias."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for name, soname, path in rows:
        groups.setdefault((name, _real(path)), []).append((soname, path))

    def rank(item: tuple[str, str]) -> tuple[int, int]:
        version = (split_lib_filename(item[0]) or ("", None))[1]
        if version is None:
            return (2, 0)  # libfoo.so: the development link
        return (0 if version.count(".") == 0 else 1, version.count("."))

    out: list[dict[str, Any]] = []
    for (name, _), aliases in groups.items():
        soname, path = min(aliases, key=rank)
        out.append(
            {"name": name, "soname": soname, "path": path, "version": lib_version(path, soname)}
        )
    return out


def scan_lib_dirs(dirs: Iterable[Path | str]) -> list[dict[str, Any]]:
    """CUDA-family libraries found directly in each directory (not recursive).

    Missing or unreadable directories are skipped.

    Returns:
        ``{name, soname, path, version}`` records, directory order kept.
    """
    rows: list[tuple[str, str, str]] = []
    seen_dirs: set[str] = set()
    for d in dirs:
        if not str(d):
            continue
        key = _real(str(d))
        if key in seen_dirs:
            continue
        seen_dirs.add(key)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for filename in names:
            split = split_lib_filename(filename)
            if split is None or not is_cuda_lib(split[0]):
                continue
            path = os.path.join(d, filename)
            if os.path.isfile(path):  # follows links: a dangling link is not a library
                rows.append((split[0], filename, path))
    return _dedupe(rows)


def parse_nvcc_version(text: str) -> str | None:
    """'Cuda compilation tools, release 13.0, V13.0.88' -> '13.0.88' (or '13.0' without V)."""
    m = _NVCC_VERSION.search(text)
    if not m:
        return None
    return m.group("full") or m.group("release")


def find_toolkits(roots: Sequence[Path] = (Path("/usr/local"), Path("/opt"))) -> list[Path]:
    """CUDA toolkit directories: ``cuda``, ``cuda-*`` (and ``cuda*``) directly under each root.

    A directory counts when it holds ``bin/nvcc``, a version file or a ``lib64``/``lib`` dir.

    Returns:
        Paths as found (symlinks not resolved), per root ``cuda`` first, then by name.
    """
    found: list[Path] = []
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in sorted(names, key=lambda n: (n != "cuda", n)):
            if not name.startswith("cuda"):
                continue
            p = root / name
            markers = ("bin/nvcc", "version.json", "version.txt", "lib64", "lib")
            if p.is_dir() and any((p / m).exists() for m in markers):
                found.append(p)
    return found


def toolkit_version_from_files(toolkit: Path) -> tuple[str | None, str | None]:
    """A toolkit's version from ``version.json`` (CUDA 11.1+) or ``version.txt`` (older).

    Returns:
        (version, 'version.json' | 'version.txt'), or (None, None) when neither says.
    """
    text = _read(toolkit / "version.json")
    if text:
        try:
            data = jsonio.loads(text)
            version = data.get("cuda", {}).get("version")
            if isinstance(version, str) and version:
                return version, "version.json"
        except (ValueError, AttributeError):
            log.debug("unreadable %s", toolkit / "version.json")
    text = _read(toolkit / "version.txt")
    if text:
        m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", text)
        if m:
            return m.group(1), "version.txt"
    return None, None


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8", "replace")
    except OSError:
        return None


def _which_all(program: str, path_var: str) -> list[str]:
    """Every executable called `program` in PATH order."""
    out: list[str] = []
    for d in path_var.split(os.pathsep):
        if not d:
            continue
        candidate = os.path.join(d, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK) and candidate not in out:
            out.append(candidate)
    return out


def _tool_versions(paths: Sequence[str], run: RunFn) -> dict[str, str | None]:
    """Run `<tool> --version` for each path concurrently (each one starts a process)."""
    if not paths:
        return {}

    def one(p: str) -> tuple[str, str | None]:
        res: CmdResult = run([p, "--version"], COMMAND_TIMEOUT_S)
        if not res.ok:
            log.debug("%s --version failed: %s", p, res.error or res.stderr.strip()[-200:])
            return p, None
        return p, parse_nvcc_version(res.stdout)

    with ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
        return dict(pool.map(one, paths))


def _dedupe_by_real(paths: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for p in paths:
        key = _real(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _majors(libs: Iterable[dict[str, Any]], name_test: Callable[[str], bool]) -> list[str]:
    majors = {m for lib in libs if name_test(lib["name"]) and (m := major_of(lib["version"]))}
    return sorted(majors, key=int)


def collect(
    env: Mapping[str, str] | None = None,
    extra_lib_dirs: Sequence[Path | str] = (),
    *,
    ldconfig_text: str | None = None,
    toolkit_roots: Sequence[Path] = (Path("/usr/local"), Path("/opt")),
    run: RunFn = run_command,
    machine: str | None = None,
) -> ProbeResult:
    """Collect what CUDA libraries and tools a process started with `env` could reach.

    Never raises for absent things: no ldconfig, no toolkit, no nvcc are simply not reported
    (ldconfig) or reported empty (toolkits, ptxas).

    Args:
        env: the target's environment (PATH, LD_LIBRARY_PATH); default os.environ.
        extra_lib_dirs: more library directories the target loads from, such as the lib dirs
            of its pip ``nvidia-*`` wheels; they count towards the reachable majors.
        ldconfig_text: ``ldconfig -p`` output to use instead of running ldconfig.
        toolkit_roots: where to look for ``cuda``/``cuda-*`` toolkit directories.
        run: runs a command with a timeout (ldconfig, nvcc, ptxas).
        machine: the target's ``platform.machine()`` for ldconfig ABI filtering.

    Returns:
        A ProbeResult named ``cudalibs``; status OK, the message naming what was missing.

    Raises:
        Nothing: no ldconfig (non-glibc systems), a hung or broken nvcc/ptxas (timeout 2 s,
        wrong architecture) and unreadable directories are reported as missing values.
    """
    t0 = time.monotonic()
    environ: Mapping[str, str] = os.environ if env is None else env
    facts: list[Fact] = []
    notes: list[str] = []

    def add(name: str, value: FactValue, source: str) -> None:
        facts.append(Fact(name, value, source))

    path_var = environ.get("PATH", os.defpath)
    reachable: list[dict[str, Any]] = []

    # ldconfig cache
    if ldconfig_text is None:
        # /sbin is missing from many users' PATH, and ldconfig lives there.
        ldconfig = shutil.which("ldconfig", path=os.pathsep.join([path_var, "/sbin", "/usr/sbin"]))
        if ldconfig is None:
            notes.append("ldconfig not found")
        else:
            res = run([ldconfig, "-p"], COMMAND_TIMEOUT_S)
            if res.ok:
                ldconfig_text = res.stdout
            else:
                notes.append(f"ldconfig -p failed: {res.error or res.stderr.strip()[-200:]}")
    if ldconfig_text is not None:
        ld_libs = parse_ldconfig(ldconfig_text, machine)
        add("cuda.ldconfig_libs", ld_libs, "ldconfig -p")
        reachable += ld_libs

    # LD_LIBRARY_PATH
    raw_llp = environ.get("LD_LIBRARY_PATH")
    llp = raw_llp.split(os.pathsep) if raw_llp else []
    add("cuda.ld_library_path", llp, "LD_LIBRARY_PATH")
    llp_libs = scan_lib_dirs(llp)
    add("cuda.ld_library_path_libs", llp_libs, "LD_LIBRARY_PATH")
    reachable += llp_libs

    if extra_lib_dirs:
        extra_libs = scan_lib_dirs(extra_lib_dirs)
        add("cuda.extra_libs", extra_libs, "extra lib dirs")
        reachable += extra_libs

    # Toolkits, nvcc and ptxas. Every `--version` starts a process, so they all run at once.
    toolkits = find_toolkits(toolkit_roots)
    tk_bins = [str(tk / "bin") for tk in toolkits]
    file_versions = {str(tk): toolkit_version_from_files(tk) for tk in toolkits}
    tk_nvccs = [
        str(tk / "bin" / "nvcc")
        for tk in toolkits
        if file_versions[str(tk)][0] is None and (tk / "bin" / "nvcc").is_file()
    ]
    # on PATH first, then in each toolkit; one entry per real file
    nvcc_paths = _dedupe_by_real(
        _which_all("nvcc", path_var) + _which_all("nvcc", os.pathsep.join(tk_bins))
    )
    ptxas_paths = _dedupe_by_real(
        _which_all("ptxas", path_var) + _which_all("ptxas", os.pathsep.join(tk_bins))
    )
    versions = _tool_versions(_dedupe_by_real(nvcc_paths + ptxas_paths + tk_nvccs), run)
    by_real = {_real(p): v for p, v in versions.items()}

    tk_records: list[dict[str, Any]] = []
    tk_lib_dirs: list[Path] = []
    for tk in toolkits:
        version, version_source = file_versions[str(tk)]
        if version is None:
            version = by_real.get(_real(str(tk / "bin" / "nvcc")))
            version_source = "nvcc" if version else None
        tk_records.append(
            {
                "path": str(tk),
                "version": version,
                "version_source": version_source,
                "target": _real(str(tk)),
                "is_symlink": tk.is_symlink(),
            }
        )
        tk_lib_dirs += [tk / "lib64", tk / "lib", *sorted(tk.glob("targets/*/lib"))]
    add("cuda.toolkits", tk_records, "filesystem")
    reachable += scan_lib_dirs(tk_lib_dirs)

    nvcc_found = [{"path": p, "version": by_real.get(_real(p))} for p in nvcc_paths]
    nvcc = next((n for n in nvcc_found if n["version"]), nvcc_found[0] if nvcc_found else None)
    add("cuda.nvcc", nvcc, "PATH, toolkits")
    ptxas = [{"path": p, "version": by_real.get(_real(p))} for p in ptxas_paths]
    add("cuda.ptxas", ptxas, "PATH, toolkits")

    libdevice = _dedupe_by_real(
        str(p) for tk in toolkits if (p := tk / "nvvm" / "libdevice" / "libdevice.10.bc").is_file()
    )
    add("cuda.libdevice", libdevice, "toolkits")

    add("cuda.runtime_majors", _majors(reachable, lambda n: n == "libcudart"), "all reachable")
    add(
        "cuda.cudnn_majors",
        _majors(reachable, lambda n: n.startswith("libcudnn")),
        "all reachable",
    )

    return ProbeResult(
        probe=PROBE,
        status=ProbeStatus.OK,
        facts=tuple(facts),
        message="; ".join(notes),
        duration_s=time.monotonic() - t0,
    )
