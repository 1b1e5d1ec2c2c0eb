"""Compatibility knowledge base: TF GPU builds, CUDA driver floors, compute capabilities."""

from __future__ import annotations

import enum
import functools
import logging
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = [
    "COMPAT_FILE",
    "Architecture",
    "CcProblem",
    "CcSupport",
    "CcVerdict",
    "Compat",
    "CudaDriverRow",
    "DriverReq",
    "EnvVarFact",
    "KnowledgeError",
    "MinorCompat",
    "Platform",
    "TfBuild",
    "load",
    "load_from",
]

logger = logging.getLogger(__name__)

COMPAT_FILE = "compat.toml"
SCHEMA_VERSION = 1

Platform = Literal["linux", "windows", "wsl"]

_CC_RE = re.compile(r"^(\d{1,2})\.(\d{1,2})$")
_MAJOR_MINOR_RE = re.compile(r"^\d+\.\d+$")
_RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")
_CUDA_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")
_DRIVER_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")
_URL_RE = re.compile(r"^https?://\S+$")


class KnowledgeError(ValueError):
    """The knowledge file is unreadable, not valid TOML, or breaks a validation rule."""


# --------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TfBuild:
    """One TensorFlow minor release as built and tested for Linux GPUs.

    Attributes:
        tf_version: The release the row describes, e.g. ``'2.16.1'``.
        python_min: Lowest tested Python, ``'X.Y'``.
        python_max: Highest tested Python, ``'X.Y'``.
        cuda: Tested CUDA toolkit, ``'X.Y'``.
        cudnn: Tested cuDNN, ``'X.Y'``.
        build_cuda: ``cuda_version`` from the wheel's build_info (exact, e.g. ``'12.5.1'``).
        build_cudnn: ``cudnn_version`` from the wheel's build_info (major only, e.g. ``'9'``).
        sass_ccs: Compute capabilities with ready-made cubins (SASS) in the wheel.
        ptx_ccs: Compute capabilities with PTX in the wheel.
        min_cc: Lowest compiled compute capability; TF ignores GPUs below it.
        and_cuda_install: The ``tensorflow[and-cuda]`` install command, when the extra exists.
        source: Where the tested configuration comes from.
        requires_python: The wheel's Requires-Python, when recorded.
        and_cuda_cuda: CUDA toolkit release whose components the ``[and-cuda]`` extra pins.
        wheel_source: Where the wheel-derived columns come from.
        and_cuda_source: Where the ``[and-cuda]`` pin comes from.
    """

    tf_version: str
    python_min: str
    python_max: str
    cuda: str
    cudnn: str
    build_cuda: str
    build_cudnn: str
    sass_ccs: tuple[str, ...]
    ptx_ccs: tuple[str, ...]
    min_cc: str
    and_cuda_install: str | None
    source: str
    requires_python: str | None = None
    and_cuda_cuda: str | None = None
    wheel_source: str | None = None
    and_cuda_source: str | None = None

    @property
    def series(self) -> str:
        """The ``'major.minor'`` series this row answers for, e.g. ``'2.16'``."""
        release = Version(self.tf_version).release
        return f"{release[0]}.{release[1]}"

    @property
    def build_info_ccs(self) -> tuple[str, ...]:
        """The CCs as build_info's ``cuda_compute_capabilities`` spells them.

        A CC with PTX is listed once as ``compute_XY`` (which also embeds its cubin); the others
        as ``sm_XY``, e.g. ``('sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90')``.
        """
        ccs = sorted(set(self.sass_ccs) | set(self.ptx_ccs), key=_cc_key)
        return tuple(
            ("compute_" if cc in self.ptx_ccs else "sm_") + cc.replace(".", "") for cc in ccs
        )


@dataclass(frozen=True)
class CudaDriverRow:
    """One row of NVIDIA's Table 3: the driver packaged with a CUDA toolkit release."""

    label: str
    version: str
    ga: bool
    linux: str
    windows: str | None
    source: str

    def driver(self, column: str) -> str | None:
        """Return the driver for ``'linux'`` or ``'windows'`` (None where NVIDIA lists N/A)."""
        return self.linux if column == "linux" else self.windows


@dataclass(frozen=True)
class MinorCompat:
    """The minor-version-compatibility driver floor of one CUDA major family."""

    cuda_major: int
    linux: str
    windows: str | None
    note: str | None
    source: str

    def driver(self, column: str) -> str | None:
        """Return the floor for ``'linux'`` or ``'windows'`` (None when NVIDIA gives none)."""
        return self.linux if column == "linux" else self.windows


@dataclass(frozen=True)
class Architecture:
    """Compute capabilities that belong to one NVIDIA GPU architecture."""

    ccs: tuple[str, ...]
    name: str
    products: str | None
    source: str


@dataclass(frozen=True)
class CcProblem:
    """A known problem for GPUs of some CC majors that run TF only through PTX JIT."""

    id: str
    cc_majors: tuple[int, ...]
    summary: str
    issues: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class EnvVarFact:
    """Which values a TensorFlow environment variable understands.

    Attributes:
        name: The variable, e.g. ``'TF_FORCE_GPU_ALLOW_GROWTH'``.
        values: The values TF acts on.
        case_sensitive: Whether TF compares the value exactly (``strcmp``).
        value_since: ``(value, 'X.Y')`` pairs: the first TF minor that understands the value.
        note: What happens with any other value.
        source: Where the facts come from.
    """

    name: str
    values: tuple[str, ...]
    case_sensitive: bool
    value_since: tuple[tuple[str, str], ...]
    note: str | None
    source: str

    def since(self, value: str) -> str | None:
        """Return the first TF ``'X.Y'`` that understands ``value`` (None: always, or unknown)."""
        return dict(self.value_since).get(value)


@dataclass(frozen=True)
class DriverReq:
    """What NVIDIA driver a CUDA toolkit release needs.

    Attributes:
        cuda_version: The CUDA version that was asked about.
        platform: ``'linux'``, ``'windows'`` or ``'wsl'`` (WSL uses the Windows driver).
        minimum: The lowest driver that runs it: the minor-version-compatibility floor of its
            major where one exists (or the packaged driver, if that is lower), else the packaged
            driver.
        packaged: The driver NVIDIA packaged with that exact toolkit release (Table 3), if known.
        packaged_label: The Table 3 row matched, e.g. ``'12.2 Update 2'``.
        minor_compat_floor: The floor of the CUDA major family, if it has one.
        note: A caveat about running at ``minimum`` (e.g. limited feature set), if any.
        source: Where ``minimum`` comes from.
    """

    cuda_version: str
    platform: str
    minimum: str
    packaged: str | None
    packaged_label: str | None
    minor_compat_floor: str | None
    note: str | None
    source: str


class CcVerdict(enum.StrEnum):
    """Whether a TF build can run kernels on a GPU of a given compute capability."""

    NATIVE = "native"  # a cubin of the same major and same-or-lower minor ships in the wheel
    PTX_JIT = "ptx_jit"  # only PTX of a lower CC: the driver JIT-compiles it (slow first start)
    UNSUPPORTED = "unsupported"  # below the build's minimum CC: TF ignores the GPU
    UNKNOWN = "unknown"  # TF version (or CC) not known


@dataclass(frozen=True)
class CcSupport:
    """The verdict of :meth:`Compat.cc_support`, with the reason in plain language.

    Attributes:
        verdict: See :class:`CcVerdict`.
        cc: The compute capability asked about.
        tf_version: The table row used (e.g. ``'2.17.0'``), None when the TF version is unknown.
        via: The code that runs: ``'sm_80'`` (cubin) or ``'compute_90'`` (PTX); None otherwise.
        min_cc: The build's minimum CC, when the TF version is known.
        known_problems: Issue URLs of known failures for this combination.
        explanation: What this means for the user.
        source: Where the build's CC list comes from.
    """

    verdict: CcVerdict
    cc: str
    tf_version: str | None
    via: str | None
    min_cc: str | None
    known_problems: tuple[str, ...]
    explanation: str
    source: str | None


# --------------------------------------------------------------------------------------------
# Query API
# --------------------------------------------------------------------------------------------


class Compat:
    """The loaded, validated knowledge base. Build it with :func:`load` or :func:`load_from`.

    Query methods never raise on malformed versions from the field (a probe may report anything):
    they answer None / ``CcVerdict.UNKNOWN`` instead, because a fact we cannot read is unknown,
    not false.
    """

    def __init__(
        self,
        *,
        origin: str,
        tf_builds: Iterable[TfBuild],
        windows_native_last_tf: str | None,
        windows_native_source: str | None,
        cuda_drivers: Iterable[CudaDriverRow],
        minor_compat: Iterable[MinorCompat],
        architectures: Iterable[Architecture],
        cc_problems: Iterable[CcProblem],
        env_vars: Iterable[EnvVarFact],
    ) -> None:
        self.origin = origin
        self.tf_builds: tuple[TfBuild, ...] = tuple(
            sorted(tf_builds, key=lambda b: Version(b.tf_version), reverse=True)
        )
        self.windows_native_last_tf = windows_native_last_tf
        self.windows_native_source = windows_native_source
        self.cuda_drivers: tuple[CudaDriverRow, ...] = tuple(cuda_drivers)
        self.minor_compat: tuple[MinorCompat, ...] = tuple(minor_compat)
        self.architectures: tuple[Architecture, ...] = tuple(architectures)
        self.cc_problems: tuple[CcProblem, ...] = tuple(cc_problems)
        self.env_vars: tuple[EnvVarFact, ...] = tuple(env_vars)

        self._tf_by_series = {_series_key(b.tf_version): b for b in self.tf_builds}
        self._drivers_by_minor: dict[tuple[int, int], list[CudaDriverRow]] = {}
        for row in self.cuda_drivers:
            release = Version(row.version).release
            self._drivers_by_minor.setdefault((release[0], release[1]), []).append(row)
        self._floor_by_major = {m.cuda_major: m for m in self.minor_compat}
        self._arch_by_cc = {cc: a for a in self.architectures for cc in a.ccs}
        self._env_by_name = {e.name: e for e in self.env_vars}

    def __repr__(self) -> str:
        return (
            f"Compat(origin={self.origin!r}, tf_builds={len(self.tf_builds)}, "
            f"cuda_drivers={len(self.cuda_drivers)})"
        )

    # ---- TensorFlow builds -----------------------------------------------------------------

    def tf_build(self, tf_version: str) -> TfBuild | None:
        """Find the build row for a TensorFlow version, matching on major.minor.

        ``'2.16.2'`` answers with the 2.16 row (2.16.1), ``'2.21.0rc1'`` with the 2.21 row.

        Args:
            tf_version: ``tf.__version__`` of the target, e.g. ``'2.17.1'``.

        Returns:
            The row, or None for a version the table does not know (a future release, a
            pre-2.4 release) or cannot parse.
        """
        key = _series_key(tf_version)
        return None if key is None else self._tf_by_series.get(key)

    def python_supported(self, tf_version: str, python_version: str) -> bool | None:
        """Say whether a Python version is in the tested range of a TF release.

        Args:
            tf_version: ``tf.__version__``, e.g. ``'2.15.0'``.
            python_version: The interpreter version, e.g. ``'3.12.4'`` or ``'3.12'``.

        Returns:
            True or False, or None when the TF version is unknown or either version is
            unreadable.
        """
        build = self.tf_build(tf_version)
        py = _release(python_version)
        if build is None or py is None or len(py) < 2:
            return None
        lo = _release(build.python_min)
        hi = _release(build.python_max)
        assert lo is not None and hi is not None  # validated at load time
        return lo[:2] <= py[:2] <= hi[:2]

    def and_cuda_install(self, tf_version: str) -> str | None:
        """Return the ``pip install 'tensorflow[and-cuda]==...'`` command for a TF version.

        For a final release of a series that has the extra (2.14+), the command pins that very
        version, so the fix never silently up- or downgrades TF; for a pre-release it pins the
        series' tested release.

        Args:
            tf_version: ``tf.__version__``, e.g. ``'2.16.2'``.

        Returns:
            The command, or None when the series has no ``[and-cuda]`` extra (<= 2.13) or the
            version is unknown.
        """
        build = self.tf_build(tf_version)
        if build is None or build.and_cuda_install is None:
            return None
        wanted = Version(tf_version.strip())
        if wanted.is_prerelease or wanted.is_devrelease or wanted.local is not None:
            return build.and_cuda_install
        return build.and_cuda_install.replace(f"=={build.tf_version}", f"=={wanted}")

    def windows_native_gpu(self, tf_version: str) -> bool | None:
        """Say whether a TF release still supports the GPU on native Windows (not WSL2).

        Args:
            tf_version: ``tf.__version__``.

        Returns:
            True up to 2.10, False from 2.11, None when unknown or unreadable.
        """
        key = _series_key(tf_version)
        if key is None or self.windows_native_last_tf is None:
            return None
        last = _series_key(self.windows_native_last_tf)
        assert last is not None  # validated at load time
        return key <= last

    # ---- CUDA toolkit -> driver ------------------------------------------------------------

    def min_driver_for_cuda(
        self, cuda_version: str, platform: Platform = "linux"
    ) -> DriverReq | None:
        """Find the NVIDIA driver a CUDA toolkit release needs.

        ``'12.5.1'`` matches "12.5 Update 1", ``'12.5'`` matches "12.5 GA"; a third component
        that is not an update number (a component version such as cudart's ``'12.5.82'``)
        matches the newest listed update at or below it.

        Args:
            cuda_version: The toolkit version, e.g. build_info's ``cuda_version``.
            platform: ``'linux'``, ``'windows'`` or ``'wsl'`` (uses the Windows driver).

        Returns:
            The requirement, or None when neither a Table 3 row nor a minor-version floor is
            known for that version and platform (e.g. CUDA 14, CUDA 13 on Windows).

        Raises:
            ValueError: ``platform`` is not one of the three names (a programming error).
        """
        column = _platform_column(platform)
        release = _release(cuda_version)
        if release is None or len(release) < 2:
            return None
        row = self._driver_row(release)
        floor = self._floor_by_major.get(release[0])
        packaged = row.driver(column) if row is not None else None
        floor_driver = floor.driver(column) if floor is not None else None
        if (
            floor is not None
            and floor_driver is not None
            and (packaged is None or Version(floor_driver) <= Version(packaged))
        ):
            minimum, source, note = floor_driver, floor.source, floor.note
            if packaged is not None and Version(floor_driver) == Version(packaged):
                note = None  # the release's own driver: no compatibility mode involved
        elif row is not None and packaged is not None:
            # No floor (CUDA 10.x), or the release predates its family floor (CUDA 11.0.x ran
            # on its own 450.51 driver before 450.80.02 became the 11.x floor).
            minimum, source, note = packaged, row.source, None
        else:
            return None
        return DriverReq(
            cuda_version=cuda_version,
            platform=platform,
            minimum=minimum,
            packaged=packaged,
            packaged_label=row.label if row is not None and packaged is not None else None,
            minor_compat_floor=floor_driver,
            note=note,
            source=source,
        )

    def min_driver_for_tf(self, tf_version: str, platform: Platform = "linux") -> DriverReq | None:
        """Find the NVIDIA driver a TF release needs with its recommended CUDA libraries.

        Uses the toolkit release pinned by ``tensorflow[and-cuda]`` where the series has the
        extra (TF 2.15 -> CUDA 12.2 Update 2), else the wheel's build CUDA version.

        Args:
            tf_version: ``tf.__version__``.
            platform: ``'linux'``, ``'windows'`` or ``'wsl'``.

        Returns:
            The requirement, or None when the TF version or its CUDA release is unknown.

        Raises:
            ValueError: ``platform`` is not one of the three names.
        """
        build = self.tf_build(tf_version)
        if build is None:
            _platform_column(platform)
            return None
        return self.min_driver_for_cuda(build.and_cuda_cuda or build.build_cuda, platform)

    def driver_supports(
        self, driver_version: str, cuda_version: str, platform: Platform = "linux"
    ) -> bool | None:
        """Say whether an installed NVIDIA driver can run a CUDA toolkit release.

        Args:
            driver_version: The driver, e.g. ``'535.104.05'`` (NVML / nvidia-smi).
            cuda_version: The toolkit release, e.g. ``'12.5.1'``.
            platform: ``'linux'``, ``'windows'`` or ``'wsl'``.

        Returns:
            True when the driver is at or above :attr:`DriverReq.minimum`, False below it,
            None when the requirement is unknown or the driver version is unreadable.

        Raises:
            ValueError: ``platform`` is not one of the three names.
        """
        req = self.min_driver_for_cuda(cuda_version, platform)
        driver = driver_version.strip()
        if req is None or not _DRIVER_RE.match(driver):
            return None
        return Version(driver) >= Version(req.minimum)

    def _driver_row(self, release: tuple[int, ...]) -> CudaDriverRow | None:
        rows = self._drivers_by_minor.get((release[0], release[1]))
        if not rows:
            return None
        ga = next(r for r in rows if r.ga)  # exactly one per minor, validated at load time
        if len(release) == 2:
            return ga
        wanted = release[:3]
        for row in rows:
            if Version(row.version).release[:3] == wanted:
                return row
        lower = [r for r in rows if Version(r.version).release[:3] <= wanted]
        return max(lower, key=lambda r: Version(r.version)) if lower else ga

    # ---- compute capability ----------------------------------------------------------------

    def cc_support(self, tf_version: str, cc: str) -> CcSupport:
        """Judge whether a TF build has GPU code for a compute capability.

        NVIDIA's rule: a cubin for CC X.y runs on CC X.z with z >= y (same major only); any
        newer GPU needs PTX, which the driver JIT-compiles on first use.

        Args:
            tf_version: ``tf.__version__``, e.g. ``'2.17.0'``.
            cc: The GPU's compute capability, ``'X.Y'`` (e.g. ``'8.6'``).

        Returns:
            The verdict with the cubin/PTX that would run and a plain-language explanation.
        """
        cc = cc.strip()
        build = self.tf_build(tf_version)
        cc_key = _cc_tuple(cc)
        if build is None:
            return CcSupport(
                verdict=CcVerdict.UNKNOWN,
                cc=cc,
                tf_version=None,
                via=None,
                min_cc=None,
                known_problems=(),
                explanation=(
                    f"TensorFlow {tf_version} is not in tfdoctor's table, so we could not check "
                    f"which GPUs its build supports."
                ),
                source=None,
            )
        source = build.wheel_source or build.source
        if cc_key is None:
            return CcSupport(
                verdict=CcVerdict.UNKNOWN,
                cc=cc,
                tf_version=build.tf_version,
                via=None,
                min_cc=build.min_cc,
                known_problems=(),
                explanation=f"'{cc}' is not a compute capability of the form X.Y.",
                source=source,
            )
        if cc_key < _cc_key(build.min_cc):
            return CcSupport(
                verdict=CcVerdict.UNSUPPORTED,
                cc=cc,
                tf_version=build.tf_version,
                via=None,
                min_cc=build.min_cc,
                known_problems=(),
                explanation=(
                    f"TensorFlow {build.series} needs a GPU with compute capability "
                    f"{build.min_cc} or newer. It will ignore this GPU (compute capability {cc}) "
                    f"and run everything on the CPU. Use an older TensorFlow or a newer GPU."
                ),
                source=source,
            )
        sass = [s for s in build.sass_ccs if _cc_key(s)[0] == cc_key[0] and _cc_key(s) <= cc_key]
        if sass:
            best = max(sass, key=_cc_key)
            return CcSupport(
                verdict=CcVerdict.NATIVE,
                cc=cc,
                tf_version=build.tf_version,
                via="sm_" + best.replace(".", ""),
                min_cc=build.min_cc,
                known_problems=(),
                explanation=(
                    f"TensorFlow {build.series} ships ready-made GPU code (sm_"
                    f"{best.replace('.', '')}) that runs on compute capability {cc}."
                ),
                source=source,
            )
        ptx = [p for p in build.ptx_ccs if _cc_key(p) <= cc_key]
        if ptx:
            best = max(ptx, key=_cc_key)
            problems = [p for p in self.cc_problems if cc_key[0] in p.cc_majors]
            urls = tuple(url for p in problems for url in p.issues)
            text = (
                f"TensorFlow {build.series} has no ready-made GPU code for compute capability "
                f"{cc}. The driver must compile its compute_{best.replace('.', '')} PTX on first "
                f"use, which can take 30 minutes or more (it is cached afterwards; raise "
                f"CUDA_CACHE_MAXSIZE so the cache holds it)."
            )
            if problems:
                text += " " + " ".join(p.summary for p in problems)
            return CcSupport(
                verdict=CcVerdict.PTX_JIT,
                cc=cc,
                tf_version=build.tf_version,
                via="compute_" + best.replace(".", ""),
                min_cc=build.min_cc,
                known_problems=urls,
                explanation=text,
                source=source,
            )
        return CcSupport(
            verdict=CcVerdict.UNSUPPORTED,
            cc=cc,
            tf_version=build.tf_version,
            via=None,
            min_cc=build.min_cc,
            known_problems=(),
            explanation=(
                f"TensorFlow {build.series} has neither GPU code nor PTX that can run on compute "
                f"capability {cc}, so its GPU kernels will fail to load."
            ),
            source=source,
        )

    def architecture(self, cc: str) -> str | None:
        """Name the GPU architecture of a compute capability (``'8.6'`` -> ``'Ampere'``).

        Args:
            cc: ``'X.Y'``.

        Returns:
            The architecture name, or None for a CC the table does not list.
        """
        arch = self._arch_by_cc.get(cc.strip())
        return None if arch is None else arch.name

    # ---- environment variables -------------------------------------------------------------

    def env_var(self, name: str) -> EnvVarFact | None:
        """Return what is known about a TF environment variable (None if nothing)."""
        return self._env_by_name.get(name)

    def env_value_accepted(
        self, name: str, value: str, tf_version: str | None = None
    ) -> bool | None:
        """Say whether TensorFlow acts on a value of an environment variable.

        Args:
            name: The variable, e.g. ``'TF_FORCE_GPU_ALLOW_GROWTH'``.
            value: Its value as the target process sees it.
            tf_version: ``tf.__version__``; when given, values newer than the release are
                rejected (``TF_GPU_ALLOCATOR=cuda_malloc_async`` needs 2.5+).

        Returns:
            True or False, or None when the variable is not in the table or ``tf_version`` is
            unreadable.
        """
        fact = self._env_by_name.get(name)
        if fact is None:
            return None
        if fact.case_sensitive:
            matched = value if value in fact.values else None
        else:
            matched = next((v for v in fact.values if v.casefold() == value.casefold()), None)
        if matched is None:
            return False
        since = fact.since(matched)
        if since is None or tf_version is None:
            return True
        key = _series_key(tf_version)
        if key is None:
            return None
        since_key = _series_key(since)
        assert since_key is not None  # validated at load time
        return key >= since_key


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def load() -> Compat:
    """Load the packaged ``compat.toml`` once and return the validated knowledge base.

    Returns:
        The shared :class:`Compat` (cached: later calls return the same object).

    Raises:
        KnowledgeError: The packaged file is missing (a broken install that left out package
            data), is not valid TOML, or fails validation (a bad edit to compat.toml).
    """
    resource = resources.files(__name__).joinpath(COMPAT_FILE)
    try:
        text = resource.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnowledgeError(f"cannot read the packaged {COMPAT_FILE}: {exc}") from exc
    return _parse(text, origin=str(resource))


def load_from(path: str | os.PathLike[str]) -> Compat:
    """Load and validate a compatibility file from a path (not cached).

    Args:
        path: A TOML file with the same layout as the packaged ``compat.toml``.

    Returns:
        The validated knowledge base.

    Raises:
        KnowledgeError: The file cannot be read, is not valid TOML, or breaks a rule: a
            duplicate TF series / CUDA release / CC / name, a row without an http(s)
            ``source``, a malformed version, an unknown field, or inconsistent columns.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnowledgeError(f"cannot read {file}: {exc}") from exc
    return _parse(text, origin=str(file))


def _parse(text: str, origin: str) -> Compat:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(f"{origin}: not valid TOML: {exc}") from exc

    top = _Row(
        data,
        origin,
        {
            "schema",
            "tf_build",
            "windows_native_gpu",
            "minor_compat",
            "cuda_driver",
            "architecture",
            "cc_problem",
            "env_var",
        },
    )
    schema = top.req_int("schema")
    if schema != SCHEMA_VERSION:
        raise KnowledgeError(f"{origin}: schema {schema} is not supported (want {SCHEMA_VERSION})")

    tf_builds = _parse_tf_builds(top.tables("tf_build"), origin)
    last_tf: str | None = None
    last_tf_source: str | None = None
    if "windows_native_gpu" in data:
        win = _Row(
            data["windows_native_gpu"], f"{origin}: [windows_native_gpu]", {"last_tf", "source"}
        )
        last_tf = win.req_str("last_tf", pattern=_MAJOR_MINOR_RE)
        last_tf_source = win.source()
    compat = Compat(
        origin=origin,
        tf_builds=tf_builds,
        windows_native_last_tf=last_tf,
        windows_native_source=last_tf_source,
        cuda_drivers=_parse_cuda_drivers(top.tables("cuda_driver"), origin),
        minor_compat=_parse_minor_compat(top.tables("minor_compat"), origin),
        architectures=_parse_architectures(top.tables("architecture"), origin),
        cc_problems=_parse_cc_problems(top.tables("cc_problem"), origin),
        env_vars=_parse_env_vars(top.tables("env_var"), origin),
    )
    logger.debug("loaded %r", compat)
    return compat


def _parse_tf_builds(rows: list[Any], origin: str) -> list[TfBuild]:
    fields = {
        "tf_version",
        "python_min",
        "python_max",
        "cuda",
        "cudnn",
        "build_cuda",
        "build_cudnn",
        "sass_ccs",
        "ptx_ccs",
        "min_cc",
        "and_cuda_install",
        "and_cuda_cuda",
        "requires_python",
        "source",
        "wheel_source",
        "and_cuda_source",
    }
    builds: list[TfBuild] = []
    seen: dict[tuple[int, int], str] = {}
    for i, raw in enumerate(rows, 1):
        row = _Row(raw, f"{origin}: [[tf_build]] #{i}", fields)
        version = row.req_str("tf_version", pattern=_RELEASE_RE)
        row.where += f" (tf_version {version})"
        key = _series_key(version)
        assert key is not None  # the pattern guarantees it parses
        if key in seen:
            raise KnowledgeError(
                f"{row.where}: duplicate TF version {key[0]}.{key[1]} "
                f"(already given by {seen[key]}); keep one row per minor release"
            )
        seen[key] = version
        python_min = row.req_str("python_min", pattern=_MAJOR_MINOR_RE)
        python_max = row.req_str("python_max", pattern=_MAJOR_MINOR_RE)
        if Version(python_min) > Version(python_max):
            raise KnowledgeError(f"{row.where}: python_min {python_min} > python_max {python_max}")
        sass = row.cc_list("sass_ccs")
        ptx = row.cc_list("ptx_ccs")
        if not sass and not ptx:
            raise KnowledgeError(f"{row.where}: sass_ccs and ptx_ccs are both empty")
        min_cc = row.req_str("min_cc", pattern=_CC_RE)
        lowest = min((*sass, *ptx), key=_cc_key)
        if _cc_key(min_cc) != _cc_key(lowest):
            raise KnowledgeError(
                f"{row.where}: min_cc {min_cc} is not the lowest compiled CC ({lowest})"
            )
        requires_python = row.opt_str("requires_python")
        if requires_python is not None:
            try:
                SpecifierSet(requires_python)
            except InvalidSpecifier as exc:
                raise KnowledgeError(
                    f"{row.where}: requires_python {requires_python!r} is not a specifier"
                ) from exc
        install = row.opt_str("and_cuda_install")
        and_cuda_source = (
            row.source("and_cuda_source")
            if install is not None
            else row.opt_source("and_cuda_source")
        )
        if install is not None and f"tensorflow[and-cuda]=={version}" not in install:
            raise KnowledgeError(
                f"{row.where}: and_cuda_install must pin tensorflow[and-cuda]=={version}"
            )
        builds.append(
            TfBuild(
                tf_version=version,
                python_min=python_min,
                python_max=python_max,
                cuda=row.req_str("cuda", pattern=_MAJOR_MINOR_RE),
                cudnn=row.req_str("cudnn", pattern=_MAJOR_MINOR_RE),
                build_cuda=row.req_str("build_cuda", pattern=_CUDA_RE),
                build_cudnn=row.req_str("build_cudnn", pattern=re.compile(r"^\d+$")),
                sass_ccs=sass,
                ptx_ccs=ptx,
                min_cc=min_cc,
                and_cuda_install=install,
                source=row.source(),
                requires_python=requires_python,
                and_cuda_cuda=row.opt_str("and_cuda_cuda", pattern=_CUDA_RE),
                wheel_source=row.opt_source("wheel_source"),
                and_cuda_source=and_cuda_source,
            )
        )
    return builds


def _parse_cuda_drivers(rows: list[Any], origin: str) -> list[CudaDriverRow]:
    fields = {"label", "version", "ga", "linux", "windows", "source"}
    drivers: list[CudaDriverRow] = []
    seen: set[tuple[int, ...]] = set()
    ga_count: dict[tuple[int, int], int] = {}
    for i, raw in enumerate(rows, 1):
        row = _Row(raw, f"{origin}: [[cuda_driver]] #{i}", fields)
        version = row.req_str("version", pattern=_RELEASE_RE)
        row.where += f" (version {version})"
        release = Version(version).release
        if release in seen:
            raise KnowledgeError(f"{row.where}: duplicate CUDA release {version}")
        seen.add(release)
        ga = row.req_bool("ga")
        ga_count[(release[0], release[1])] = ga_count.get((release[0], release[1]), 0) + int(ga)
        drivers.append(
            CudaDriverRow(
                label=row.req_str("label"),
                version=version,
                ga=ga,
                linux=row.req_str("linux", pattern=_DRIVER_RE),
                windows=row.opt_str("windows", pattern=_DRIVER_RE),
                source=row.source(),
            )
        )
    for (major, minor), count in ga_count.items():
        if count != 1:
            raise KnowledgeError(
                f"{origin}: CUDA {major}.{minor} has {count} rows with ga = true (want exactly 1)"
            )
    return drivers


def _parse_minor_compat(rows: list[Any], origin: str) -> list[MinorCompat]:
    fields = {"cuda_major", "linux", "windows", "note", "source"}
    floors: list[MinorCompat] = []
    seen: set[int] = set()
    for i, raw in enumerate(rows, 1):
        row = _Row(raw, f"{origin}: [[minor_compat]] #{i}", fields)
        major = row.req_int("cuda_major")
        if major in seen:
            raise KnowledgeError(f"{row.where}: duplicate cuda_major {major}")
        seen.add(major)
        floors.append(
            MinorCompat(
                cuda_major=major,
                linux=row.req_str("linux", pattern=_DRIVER_RE),
                windows=row.opt_str("windows", pattern=_DRIVER_RE),
                note=row.opt_str("note"),
                source=row.source(),
            )
        )
    return floors


def _parse_architectures(rows: list[Any], origin: str) -> list[Architecture]:
    archs: list[Architecture] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(rows, 1):
        row = _Row(raw, f"{origin}: [[architecture]] #{i}", {"ccs", "name", "products", "source"})
        name = row.req_str("name")
        ccs = row.cc_list("ccs")
        if not ccs:
            raise KnowledgeError(f"{row.where}: ccs is empty")
        for cc in ccs:
            if cc in seen:
                raise KnowledgeError(f"{row.where}: CC {cc} already belongs to {seen[cc]}")
            seen[cc] = name
        archs.append(
            Architecture(ccs=ccs, name=name, products=row.opt_str("products"), source=row.source())
        )
    return archs


def _parse_cc_problems(rows: list[Any], origin: str) -> list[CcProblem]:
    fields = {"id", "cc_majors", "summary", "issues", "source"}
    problems: list[CcProblem] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows, 1):
        row = _Row(raw, f"{origin}: [[cc_problem]] #{i}", fields)
        pid = row.req_str("id")
        if pid in seen:
            raise KnowledgeError(f"{row.where}: duplicate id {pid!r}")
        seen.add(pid)
        issues = row.str_list("issues")
        for url in issues:
            if not _URL_RE.match(url):
                raise KnowledgeError(f"{row.where}: issue {url!r} is not an http(s) URL")
        problems.append(
            CcProblem(
                id=pid,
                cc_majors=row.int_list("cc_majors"),
                summary=row.req_str("summary"),
                issues=issues,
                source=row.source(),
            )
        )
    return problems


def _parse_env_vars(rows: list[Any], origin: str) -> list[EnvVarFact]:
    fields = {"name", "values", "case_sensitive", "since", "note", "source"}
    facts: list[EnvVarFact] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows, 1):
        row = _Row(raw, f"{origin}: [[env_var]] #{i}", fields)
        name = row.req_str("name")
        if name in seen:
            raise KnowledgeError(f"{row.where}: duplicate env var {name}")
        seen.add(name)
        values = row.str_list("values")
        if not values:
            raise KnowledgeError(f"{row.where}: values is empty")
        since_raw = row.data.get("since", {})
        if not isinstance(since_raw, dict):
            raise KnowledgeError(f"{row.where}: since must be a table of value = 'X.Y'")
        since: list[tuple[str, str]] = []
        for value, tf in since_raw.items():
            if value not in values:
                raise KnowledgeError(f"{row.where}: since names unknown value {value!r}")
            if not isinstance(tf, str) or not _MAJOR_MINOR_RE.match(tf):
                raise KnowledgeError(f"{row.where}: since.{value} must be a 'X.Y' TF version")
            since.append((value, tf))
        facts.append(
            EnvVarFact(
                name=name,
                values=values,
                case_sensitive=row.req_bool("case_sensitive"),
                value_since=tuple(since),
                note=row.opt_str("note"),
                source=row.source(),
            )
        )
    return facts


class _Row:
    """Typed, located access to one TOML table; every failure names the row."""

    def __init__(self, data: Any, where: str, allowed: set[str]) -> None:
        if not isinstance(data, dict):
            raise KnowledgeError(f"{where}: expected a table, got {type(data).__name__}")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise KnowledgeError(f"{where}: unknown field(s) {', '.join(unknown)}")
        self.data: dict[str, Any] = data
        self.where = where

    def tables(self, key: str) -> list[Any]:
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise KnowledgeError(f"{self.where}: {key} must be an array of tables ([[{key}]])")
        return value

    def req_str(self, key: str, pattern: re.Pattern[str] | None = None) -> str:
        value = self.opt_str(key, pattern)
        if value is None:
            raise KnowledgeError(f"{self.where}: missing {key}")
        return value

    def opt_str(self, key: str, pattern: re.Pattern[str] | None = None) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise KnowledgeError(f"{self.where}: {key} must be a non-empty string")
        if pattern is not None:
            if not pattern.match(value):
                raise KnowledgeError(f"{self.where}: malformed {key} {value!r}")
            try:
                Version(value)
            except InvalidVersion as exc:  # pragma: no cover - the patterns are stricter
                raise KnowledgeError(f"{self.where}: malformed {key} {value!r}") from exc
        return value

    def req_int(self, key: str) -> int:
        value = self.data.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise KnowledgeError(f"{self.where}: {key} must be an integer")
        return value

    def req_bool(self, key: str) -> bool:
        value = self.data.get(key)
        if not isinstance(value, bool):
            raise KnowledgeError(f"{self.where}: {key} must be true or false")
        return value

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise KnowledgeError(f"{self.where}: {key} must be a list of strings")
        if len(set(value)) != len(value):
            raise KnowledgeError(f"{self.where}: {key} lists a value twice")
        return tuple(value)

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self.data.get(key)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise KnowledgeError(f"{self.where}: {key} must be a list of integers")
        return tuple(value)

    def cc_list(self, key: str) -> tuple[str, ...]:
        ccs = self.str_list(key)
        for cc in ccs:
            if not _CC_RE.match(cc):
                raise KnowledgeError(f"{self.where}: malformed compute capability {cc!r} in {key}")
        return ccs

    def source(self, key: str = "source") -> str:
        value = self.opt_source(key)
        if value is None:
            raise KnowledgeError(f"{self.where}: missing {key} (every fact needs a source URL)")
        return value

    def opt_source(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not _URL_RE.match(value):
            raise KnowledgeError(f"{self.where}: {key} {value!r} is not an http(s) URL")
        return value


# --------------------------------------------------------------------------------------------
# Small parsing helpers (tolerant: None for anything unreadable)
# --------------------------------------------------------------------------------------------


def _release(text: str) -> tuple[int, ...] | None:
    try:
        return Version(text.strip()).release
    except InvalidVersion:
        return None


def _series_key(text: str) -> tuple[int, int] | None:
    release = _release(text)
    if release is None or len(release) < 2:
        return None
    return release[0], release[1]


def _cc_tuple(cc: str) -> tuple[int, int] | None:
    match = _CC_RE.match(cc)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def _cc_key(cc: str) -> tuple[int, int]:
    key = _cc_tuple(cc)
    if key is None:
        raise ValueError(f"not a compute capability: {cc!r}")
    return key


def _platform_column(platform: str) -> str:
    if platform == "linux":
        return "linux"
    if platform in ("windows", "wsl"):
        return "windows"
    raise ValueError(f"platform must be 'linux', 'windows' or 'wsl', not {platform!r}")
