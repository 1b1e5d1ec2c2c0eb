"""Facts a log states about its machine, judged against the compatibility tables.

A log often says which TensorFlow it ran (a pip line, a docker tag), on which platform (Windows
paths, a WSL kernel), with which GPU (its compute capability) and which driver (nvidia-smi's
header). None of these is a symptom alone; together with ``core/knowledge/compat.toml`` they
decide causes no single line names: TF 2.11+ on native Windows has no GPU, a GPU below the
build's minimum compute capability is ignored, a driver below the build's CUDA floor is too old.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.version import InvalidVersion, Version

from tfdoctor.core.knowledge.compat import Compat, Platform
from tfdoctor.core.knowledge.compat_load import load as load_compat
from tfdoctor.core.knowledge.compat_types import CcVerdict
from tfdoctor.core.knowledge.loader import KnowledgeError
from tfdoctor.core.knowledge.versions import parse_cc

Line = tuple[str, int, str]
# what a fact rule is handed: add(cause, weight, lines) and note(cause, sentence)
Add = Callable[[str, float, list[Line]], None]
Note = Callable[[str, str], None]

# the version in a CUDA library's file name: libcudart.so.11.0, libcublas.so.9.0,
# cudart64_110.dll, cublas64_80.dll, cudart64_12.dll, libcudart.8.0.dylib
_SONAME = re.compile(r"\.so\.(\d+)(?:\.(\d+))?|64_(\d+)\.dll|\.(\d+)\.(\d+)\.dylib", re.I)


# libraries named after the CUDA release (cuFFT, cuRAND, ... carry their own numbers from 11 on)
TOOLKIT_LIB = re.compile(r"cu(?:dart|blas|fft|rand|solver|sparse|pti)|nvrtc", re.I)
RUNTIME_LIB = re.compile(r"cudart|cublas(?!Lt)", re.I)
_CUDNN_LIB = re.compile(r"cudnn", re.I)
# cuDNN 7 was built for CUDA 8.0 to 10.2 only (libcudnn.so.7, cudnn64_7.dll)
_CUDNN7_LIB = re.compile(r"cudnn(?:\.so\.|64_)7(?:\.|$)", re.I)
CUDNN7_LAST_CUDA = (10, 2)
# a cuDNN / cuBLAS failure on a GPU the build's CUDA has no code for is explained by it: more
# than the handle failure's usual reading (another process holding the memory) is worth
ARCH_EXPLAINS_LIBRARY = 2.5


def cuda_soname(lib: str) -> tuple[int, int | None] | None:
    """(major, minor) that a CUDA library's file name asks for; minor None where the name
    carries only the major (cudart64_12.dll, libcufft.so.10)."""
    m = _SONAME.search(lib)
    if m is None:
        return None
    so, so_minor, dll, dy, dy_minor = m.groups()
    if dll is not None:
        # 110 / 101 / 100 -> 11.0 / 10.1 / 10.0; 90 / 80 -> 9.0 / 8.0; 12 / 11 / 10 -> major only
        if len(dll) >= 3:
            return int(dll[:-1]), int(dll[-1])
        if len(dll) == 2 and dll.endswith("0") and dll[0] != "1":
            return int(dll[0]), 0
        return int(dll), None
    if so is not None:
        return int(so), None if so_minor is None else int(so_minor)
    return int(dy), int(dy_minor)


# a cuDNN major that this many TF release series or fewer were built with, and a later major
# replaced, was a short-lived requirement: cuDNN 5.1 (TF 1.0 - 1.2) and 6 (TF 1.3 - 1.4)
CUDNN_BRIEF_SERIES = 3


def brief_cudnn(lib: str, want: tuple[int, int | None] | None) -> str | None:
    """What a cuDNN library's file name (`want`: its `cuda_soname`) pins down when only a few
    TF releases, long since replaced, were built with its major (the tested-build table):
    most who lack it have another cuDNN installed. None for any other library, or a major
    many releases used."""
    if want is None or not _CUDNN_LIB.search(lib):
        return None
    try:
        compat = load_compat()
    except KnowledgeError:
        return None
    series = compat.tf_series_with_cudnn(want[0])
    if (
        not series
        or len(series) > CUDNN_BRIEF_SERIES
        or not compat.tf_series_with_cudnn(want[0] + 1)
    ):
        return None
    first, last = series[0], series[-1]
    return (
        f": only TensorFlow {first[0]}.{first[1]} to {last[0]}.{last[1]} were built with cuDNN "
        f"{want[0]}, and another cuDNN is likely installed. Install cuDNN {want[0]} for this "
        "TensorFlow, or a TensorFlow built for the cuDNN you have."
    )


@dataclass(frozen=True)
class Stated:
    """What the log states about the machine (None: not stated)."""

    tf_version: str | None
    tf_line: Line | None
    windows: Line | None  # native Windows (WSL overrides)
    cc: str | None
    cc_line: Line | None
    driver: str | None
    driver_line: Line | None
    no_gpu_symptom: Line | None
    cuda: str | None = None  # the CUDA toolkit installed, "11.2"
    cuda_line: Line | None = None
    cudnn: int | None = None  # the cuDNN major installed
    cudnn_line: Line | None = None
    wanted: tuple[tuple[Line, str], ...] = ()  # (line, library) TensorFlow failed to load
    cc_newest: str | None = None  # of several GPUs, the one TensorFlow would be likeliest to use
    cc_newest_line: Line | None = None
    gpu_created: bool = False  # TensorFlow created a GPU device: the GPU it has is supported
    runs_cuda: tuple[Line, str] | None = None  # a CUDA runtime / cuBLAS it loaded: (line, lib)
    runs_cudnn7: tuple[Line, str] | None = None  # a cuDNN 7 it loaded (built for CUDA <= 10.2)
    models: tuple[tuple[Line, str], ...] = ()  # GPU product names the log gives: (line, name)


def read_stated(
    found: Mapping[str, tuple[Sequence[Line], Sequence[Mapping[str, str]]]],
    wanted: Sequence[tuple[Line, str]] = (),
) -> Stated:
    """Collect the stated facts from the hits of the fact signatures (by signature id), and the
    libraries TensorFlow failed to load (``wanted``: line and file name)."""

    def hits(sid: str) -> list[tuple[Line, Mapping[str, str]]]:
        lines, groups = found.get(sid, ((), ()))
        return list(zip(lines, groups, strict=False))

    tf = [(ln, g["tfv"]) for ln, g in hits("tf_version_stated") if g.get("tfv")]
    windows = hits("windows_platform")
    wsl = hits("wsl_platform")
    ccs: list[tuple[Line, str]] = []
    for ln, g in hits("cc_stated"):
        cc = (
            g.get("cc")
            or g.get("cc2")  # deviceQuery's
            or (f"{g['major']}.{g['minor']}" if g.get("major") else None)
        )
        if cc and parse_cc(cc) is not None:
            ccs.append((ln, cc))
    drivers = [
        (ln, g.get("driver") or g["driver2"])
        for ln, g in hits("nvsmi_versions")
        if g.get("driver") or g.get("driver2")
    ]
    # the kernel module's version, else (its line cut from the paste) libcuda's: one driver
    for which in ("kernel", "libcuda"):
        drivers += [
            (ln, g["version"])
            for ln, g in hits("driver_reported_versions")
            if g.get("which") == which and g.get("version")
        ]
    driver = drivers[0] if drivers else None
    symptom = hits("gpu_list_empty")
    cuda: tuple[Line, str] | None = None
    cudnn: tuple[Line, int] | None = None
    for ln, g in hits("cuda_installed_stated"):
        c = next((g[k].replace("-", ".") for k in _CUDA_KEYS if g.get(k)), None)
        d = next((g[k] for k in _CUDNN_KEYS if g.get(k)), None)
        if c and cuda is None:
            cuda = (ln, c)
        if d and cudnn is None:
            cudnn = (ln, int(d[0]))
    newest = max(ccs, key=lambda lc: parse_cc(lc[1]) or (0, 0), default=None)
    loaded = [
        (ln, g["lib"])
        for ln, g in hits("cuda_lib_opened")
        if g.get("lib") and _BUILD_CUDA_LIB.search(g["lib"]) and cuda_soname(g["lib"])
    ]
    cudnn7 = [
        (ln, g["lib"])
        for ln, g in hits("cuda_lib_opened")
        if g.get("lib") and _CUDNN7_LIB.search(g["lib"])
    ]
    return Stated(
        runs_cuda=loaded[0] if loaded else None,
        runs_cudnn7=cudnn7[0] if cudnn7 else None,
        models=tuple((ln, g["model"]) for ln, g in hits("gpu_model_named") if g.get("model")),
        cuda=cuda[1] if cuda else None,
        cuda_line=cuda[0] if cuda else None,
        cudnn=cudnn[1] if cudnn else None,
        cudnn_line=cudnn[0] if cudnn else None,
        wanted=tuple(wanted),
        cc_newest=newest[1] if newest else None,
        cc_newest_line=newest[0] if newest else None,
        gpu_created=any("GPU" in ln[2] for ln, _ in hits("created_device_memory")),
        tf_version=tf[-1][1] if tf else None,
        tf_line=tf[-1][0] if tf else None,
        windows=windows[0][0] if windows and not wsl else None,
        cc=ccs[0][1] if ccs else None,
        cc_line=ccs[0][0] if ccs else None,
        driver=driver[1] if driver else None,
        driver_line=driver[0] if driver else None,
        no_gpu_symptom=symptom[0][0] if symptom else None,
    )


# the libraries whose file name carries the CUDA release the build was made with
_BUILD_CUDA_LIB = re.compile(r"(?i)cudart|cublas(?!lt)")
# an installed runtime's file (ls, find, ldconfig -p) names the major only from CUDA 11 on
_CUDA_KEYS = (
    "cuda",
    "cuda_conda",
    "cuda_path",
    "cuda_win",
    "cuda_tpl",
    "cuda_banner",
    "cuda_file",
    "cuda_ldconfig",
    "cuda_apt",
    "cuda_said",
)
_CUDNN_KEYS = ("cudnn_tpl", "cudnn_conda", "cudnn_pip", "cudnn_apt", "cudnn_ver", "cudnn_hdr")


def _older(a: str, b: str) -> bool | None:
    try:
        return Version(a) < Version(b)
    except InvalidVersion:
        return None


LISTED_MISMATCH = 1.2  # versions a user listed, with no failure in the log to go with them

# No TensorFlow GPU build ever ran below 3.0; the prebuilt packages have needed 3.5 or more
# since TF 1.x (TF's install guide), so with the version unknown 3.0 is very likely too old.
EVERY_BUILD_MIN_CC = (3, 0)
PREBUILT_MIN_CC = (3, 5)
# what a GPU below the prebuilt packages' minimum adds when TensorFlow also shows no GPU: the
# age of the card explains the missing device
OLD_GPU_EXPLAINS_NO_GPU = 1.5


def _cc_without_version(
    stated: Stated,
    add: Add,
    note: Note,
    *,
    gpu_symptom: bool = False,
) -> None:
    """A GPU too old for any TensorFlow, when the log does not say which TensorFlow. When the
    log also shows TensorFlow without a GPU, that age is why (no other cause need be assumed)."""
    key = parse_cc(stated.cc_newest) if stated.cc_newest else None
    if key is None or stated.gpu_created:
        return
    where = [stated.cc_newest_line] if stated.cc_newest_line else []
    no_gpu = gpu_symptom or stated.no_gpu_symptom is not None
    if stated.no_gpu_symptom is not None:
        where.append(stated.no_gpu_symptom)
    if key < EVERY_BUILD_MIN_CC:
        add("unsupported_gpu_arch", 4.0, where)
        note(
            "unsupported_gpu_arch",
            f"The GPU has compute capability {stated.cc_newest}: no TensorFlow release supports "
            "a GPU below 3.0, so TensorFlow runs on the CPU.",
        )
    elif key < PREBUILT_MIN_CC:
        add("unsupported_gpu_arch", 2.5 + (OLD_GPU_EXPLAINS_NO_GPU if no_gpu else 0.0), where)
        note(
            "unsupported_gpu_arch",
            f"The GPU has compute capability {stated.cc_newest}: TensorFlow's prebuilt packages "
            "need 3.5 or newer (only a build from source can still target it).",
        )


def _another_release(have: str, need: str, cuda: bool) -> bool:
    """Another major; for CUDA up to 10, another minor too (no minor-version compatibility
    then: a build for 10.1 looks for libcudart.so.10.1)."""
    h, n = have.split("."), need.split(".")
    if h[0] != n[0]:
        return True
    return (
        cuda and h[0].isdigit() and int(h[0]) <= 10 and len(h) > 1 and len(n) > 1 and h[1] != n[1]
    )


def fact_rules(
    stated: Stated,
    add: Add,
    note: Note,
    *,
    gpu_symptom: bool,
    library_failed: bool = False,
) -> None:
    """Add the causes the stated facts imply (``gpu_symptom``: the log shows no GPU in use;
    ``library_failed``: a GPU library, cuDNN or cuBLAS, failed to start or to run)."""
    try:
        compat = load_compat()
    except KnowledgeError:
        return  # a broken install: the signatures still work without the tables
    stated = _cc_from_model(stated, compat)
    _installed_rules(stated, add, note)
    _driver_for_wanted(stated, compat, add, note)
    _cuda_older_than_gpu(stated, compat, add, note, library_failed=library_failed)
    tf = stated.tf_version
    if tf is None:
        _cc_without_version(stated, add, note, gpu_symptom=gpu_symptom)
        _driver_below_every_tf2(stated, compat, add, note)
        return
    tf_line = [stated.tf_line] if stated.tf_line else []

    # TF 2.11+ on native Windows is a CPU-only build.
    if stated.windows is not None and compat.windows_native_gpu(tf) is False:
        symptom = gpu_symptom or stated.no_gpu_symptom is not None
        lines = [*tf_line, stated.windows]
        if stated.no_gpu_symptom is not None:
            lines.append(stated.no_gpu_symptom)
        add("no_gpu_visible", 4.0 if symptom else 2.5, lines)
        last = compat.windows_native_last_tf or "2.10"
        note(
            "no_gpu_visible",
            f"This is TensorFlow {tf} on native Windows: {last} was the last release with GPU "
            f"support there, so it runs on the CPU only. Use WSL2, or TensorFlow {last}.",
        )

    # The CUDA / cuDNN installed is not the one the build was tested with, and GPU libraries
    # failed to load (or no GPU is in use).
    tested = compat.tested_cuda(tf)
    no_gpu = gpu_symptom or stated.no_gpu_symptom is not None
    build = compat.tf_build(tf)
    # before tensorflow[and-cuda] (2.14) TF used the system's CUDA: another one explains a GPU
    # TF does not use; from then on pip brings its own and a system CUDA may be idle
    system_cuda = build is None or build.and_cuda_install is None
    # With no sign of trouble in the log (no library looked for, no GPU missing), the versions
    # a user listed still explain a GPU that TensorFlow does not use, while it used the
    # system's CUDA: one weaker cause for all the mismatches listed.
    symptom = bool(stated.wanted) or no_gpu
    if tested is not None and (symptom or system_cuda):
        listed = False
        for have, line, need, what in (
            (stated.cuda, stated.cuda_line, tested[0], "CUDA"),
            (str(stated.cudnn) if stated.cudnn else None, stated.cudnn_line, tested[1], "cuDNN"),
        ):
            if have and line and need and _another_release(have, need, what == "CUDA"):
                weight = 3.5 if no_gpu and system_cuda else 2.5
                if not symptom:  # one finding for all: the others add their line only
                    weight = 0.0 if listed else LISTED_MISMATCH
                    listed = True
                add("cuda_cudnn_version_mismatch", weight, [*tf_line, line])
                note(
                    "cuda_cudnn_version_mismatch",
                    f"TensorFlow {tf} is built and tested with {what} {need}; the log shows "
                    f"{what} {have} installed.",
                )
        if listed:
            note(
                "cuda_cudnn_version_mismatch",
                "The log lists these versions but shows no failure that goes with them: if "
                "TensorFlow finds and uses the GPU (tf.config.list_physical_devices('GPU')), "
                "the CUDA it uses is another one and this is not the cause.",
            )

    # A GPU below the build's minimum compute capability is ignored.
    if stated.cc is not None:
        verdict = compat.cc_support(tf, stated.cc)
        if verdict.verdict is CcVerdict.UNSUPPORTED:
            where = [stated.cc_line] if stated.cc_line else []
            add("unsupported_gpu_arch", 4.0, tf_line + where)
            note("unsupported_gpu_arch", verdict.explanation)
        elif verdict.verdict is CcVerdict.UNKNOWN:  # a release older than the table
            _cc_without_version(stated, add, note, gpu_symptom=gpu_symptom)

    # A driver below what the build's CUDA needs.
    if stated.driver is not None:
        req = compat.min_driver_for_tf(tf, _platform(stated))
        if req is not None and _older(stated.driver, req.minimum):
            where = [stated.driver_line] if stated.driver_line else []
            add("driver_too_old", 4.0, tf_line + where)
            note(
                "driver_too_old",
                f"The NVIDIA driver is {stated.driver}; TensorFlow {tf} is built for CUDA "
                f"{req.cuda_version}, which needs driver {req.minimum} or newer.",
            )


def _platform(stated: Stated) -> Platform:
    """The platform whose driver table applies: Windows when the log shows its paths."""
    return "windows" if stated.windows is not None else "linux"


# the oldest TensorFlow 2 GPU build: its CUDA sets the lowest driver any TF 2 runs on
FIRST_TF2 = "2.0"


def _driver_below_every_tf2(
    stated: Stated,
    compat: Compat,
    add: Add,
    note: Note,
) -> None:
    """With no TensorFlow version in the log, a driver too old for even the first TensorFlow 2
    GPU build (CUDA 10.0) is too old for whatever TensorFlow a thread of the last six years is
    about: a candidate, which the TF version, when the log tells it, replaces."""
    if stated.driver is None:
        return
    req = compat.min_driver_for_tf(FIRST_TF2, _platform(stated))
    if req is None or not _older(stated.driver, req.minimum):
        return
    add("driver_too_old", 1.2, [stated.driver_line] if stated.driver_line else [])
    note(
        "driver_too_old",
        f"The NVIDIA driver is {stated.driver}, older than even TensorFlow {FIRST_TF2}'s CUDA "
        f"{req.cuda_version} needs ({req.minimum}); every later release needs a newer one.",
    )


def _cc_from_model(stated: Stated, compat: Compat) -> Stated:
    """A log that names its GPU but states no compute capability: the product's, when every
    GPU it names has the same one (two GPUs of different CCs leave it unknown)."""
    if stated.cc is not None or not stated.models:
        return stated
    ccs = {(cc, ln) for ln, name in stated.models if (cc := compat.cc_of_model(name))}
    if len({cc for cc, _ in ccs}) != 1:
        return stated
    cc, line = min(ccs, key=lambda c: (c[1][0], c[1][1]))
    return replace(stated, cc=cc, cc_line=line, cc_newest=cc, cc_newest_line=line)


@dataclass(frozen=True)
class _GpuUnderCuda:
    """The GPU's compute capability against the CUDA this TensorFlow runs on."""

    need: tuple[int, ...]  # the first CUDA with code for the GPU
    first: tuple[str, str]  # that CUDA, and the GPU generation
    have: tuple[int, ...]  # the CUDA it runs on (major only from CUDA 11 on)
    runs: str  # that CUDA in words, with where it was read
    line: Line  # where it was read
    weight: float  # how surely: a library it loaded, or only its tested build

    @property
    def covered(self) -> bool:
        return self.have >= self.need[: len(self.have)]


def _gpu_under_cuda(stated: Stated, compat: Compat) -> _GpuUnderCuda | None:
    """What the log states of the GPU and of the CUDA TensorFlow runs on, when it states both.

    The CUDA it runs on is read, surest first, from the CUDA runtime or cuBLAS it loaded, from
    a cuDNN 7 it loaded (never built past CUDA 10.2), or from the release the TensorFlow
    version the log states was built and tested with (a build from source may differ)."""
    if stated.cc_newest is None:
        return None
    first = compat.first_cuda_for_cc(stated.cc_newest)
    if first is None:
        return None
    need = tuple(int(p) for p in first[0].split("."))
    have: tuple[int, ...]
    if stated.runs_cuda is not None:
        line, lib = stated.runs_cuda
        want = cuda_soname(lib)
        if want is None:
            return None
        # from CUDA 11 on the file name carries the major only (libcudart.so.11.0 is every 11.x)
        have = (want[0], want[1] or 0) if want[0] <= 10 else (want[0],)
        release = f"{want[0]}.{want[1] or 0}" if want[0] <= 10 else f"{want[0]}.x"
        runs, weight = f"{release} ({lib})", 3.5
    elif stated.runs_cudnn7 is not None:
        line, lib = stated.runs_cudnn7
        have, weight = CUDNN7_LAST_CUDA, 3.5
        runs = f"10.2 at most (it loaded {lib}, a cuDNN 7: no cuDNN 7 was built for CUDA 11)"
    elif stated.tf_version is not None and stated.tf_line is not None:
        tested = compat.tested_cuda(stated.tf_version)
        if tested is None or not tested[0]:
            return None
        try:
            have = tuple(int(p) for p in tested[0].split(".")[:2])
        except ValueError:
            return None
        line, weight = stated.tf_line, 3.0
        runs = f"{tested[0]} (TensorFlow {stated.tf_version}'s tested build)"
    else:
        return None
    return _GpuUnderCuda(need, first, have, runs, line, weight)


def cuda_covers_gpu(stated: Stated) -> bool | None:
    """Whether the CUDA this TensorFlow runs on has code for the GPU, as far as the log states
    both (None: it does not, or the tables are unreadable)."""
    try:
        compat = load_compat()
    except KnowledgeError:
        return None
    found = _gpu_under_cuda(_cc_from_model(stated, compat), compat)
    return None if found is None else found.covered


def _cuda_older_than_gpu(
    stated: Stated,
    compat: Compat,
    add: Add,
    note: Note,
    *,
    library_failed: bool = False,
) -> None:
    """A GPU newer than the CUDA this TensorFlow runs on: that CUDA's libraries (cuBLAS, cuDNN)
    have no code for it (an RTX 30 card under a CUDA 10 build, an RTX 50 under CUDA 11). A
    cuDNN or cuBLAS failure on such a GPU is what that looks like: it counts as explained."""
    found = _gpu_under_cuda(stated, compat)
    if found is None or found.covered:
        return
    where = [found.line, stated.cc_newest_line] if stated.cc_newest_line else [found.line]
    bonus = ARCH_EXPLAINS_LIBRARY if library_failed else 0
    add("unsupported_gpu_arch", found.weight + bonus, where)
    note(
        "unsupported_gpu_arch",
        f"The GPU has compute capability {stated.cc_newest} ({found.first[1]}), which needs "
        f"CUDA {found.first[0]} or newer; this TensorFlow runs on CUDA {found.runs}, whose "
        "libraries have no code for it. Use a TensorFlow built for a newer CUDA.",
    )


def _driver_for_wanted(
    stated: Stated,
    compat: Compat,
    add: Add,
    note: Note,
) -> None:
    """A CUDA runtime TensorFlow looks for, or loaded, against the driver the log shows: a
    driver older than that CUDA needs stops the GPU even once the library is installed."""
    if stated.driver is None:
        return
    platform = _platform(stated)
    loaded = [stated.runs_cuda] if stated.runs_cuda is not None else []
    for line, lib in [*stated.wanted, *loaded]:
        want = cuda_soname(lib)
        if want is None or not RUNTIME_LIB.search(lib):
            continue
        cuda = f"{want[0]}.{want[1] if want[0] <= 10 and want[1] is not None else 0}"
        req = compat.min_driver_for_cuda(cuda, platform)
        if req is None or not _older(stated.driver, req.minimum):
            continue
        where = [line, stated.driver_line] if stated.driver_line else [line]
        runs = (line, lib) in loaded  # what the build uses, as sure as its version stated
        add("driver_too_old", 4.0 if runs else 3.0, where)
        family = cuda if want[0] <= 10 else f"{want[0]}.x"
        verb = "loaded" if runs else "looks for"
        note(
            "driver_too_old",
            f"TensorFlow {verb} {lib} (CUDA {family}), which needs NVIDIA driver "
            f"{req.minimum} or newer; the log shows driver {stated.driver}. Installing that CUDA "
            "alone will not do: update the driver first.",
        )
        return


def _installed_rules(stated: Stated, add: Add, note: Note) -> None:
    """A library TensorFlow failed to load, against the CUDA / cuDNN the log says is installed:
    another version installed is a mismatch; the same version means it is not on the path."""
    for line, lib in stated.wanted:
        want = cuda_soname(lib)
        if want is None:
            continue
        if _CUDNN_LIB.search(lib):
            if stated.cudnn is None or stated.cudnn_line is None:
                continue
            have, said = str(stated.cudnn), f"cuDNN {stated.cudnn}"
            same = stated.cudnn == want[0]
            lines = [line, stated.cudnn_line]
            asked = f"cuDNN {want[0]}"
        elif stated.cuda is not None and stated.cuda_line is not None and TOOLKIT_LIB.search(lib):
            if want[0] >= 11 and not RUNTIME_LIB.search(lib):
                continue  # cuFFT & co. number themselves from CUDA 11 on
            parts = [int(p) for p in stated.cuda.split(".")[:2]]
            major, minor = parts[0], (parts[1] if len(parts) > 1 else None)
            same = want[0] == major and (
                want[1] is None or want[0] >= 11 or minor is None or want[1] == minor
            )
            have, said = stated.cuda, f"CUDA {stated.cuda}"
            lines = [line, stated.cuda_line]
            asked = (
                f"CUDA {want[0]}.{want[1]}"
                if want[0] <= 10 and want[1] is not None
                else (f"CUDA {want[0]}.x")
            )
        else:
            continue
        if same:
            add("missing_cuda_libs", 2.0, lines)
            note(
                "missing_cuda_libs",
                f"The log shows {said} installed, the version {lib} belongs to, yet it was not "
                "found: its library folder is not on the loader path (LD_LIBRARY_PATH, or PATH "
                "on Windows).",
            )
        else:
            add("cuda_cudnn_version_mismatch", 3.0, lines)
            note(
                "cuda_cudnn_version_mismatch",
                f"The log shows {said} installed, but this TensorFlow build looks for {lib} "
                f"({asked}): install the version the build needs (or the TensorFlow built for "
                f"{have}).",
            )
