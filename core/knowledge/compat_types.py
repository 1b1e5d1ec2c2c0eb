"""Value types of the compatibility knowledge: the table rows and the answers to queries."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from packaging.version import Version

from tfdoctor.core.knowledge.versions import cc_order

# --------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TfTested:
    """A TensorFlow release before 2.4 as TensorFlow's docs list its tested GPU build: only the
    CUDA and cuDNN it was built against (no wheel was inspected for these).

    Attributes:
        tf_version: The release, e.g. ``'1.15.0'``.
        cuda: Tested CUDA toolkit, ``'X.Y'`` or a bare major (``'9'``) as the docs give it.
        cudnn: Tested cuDNN, ``'X.Y'`` or a bare major.
        source: Where the row comes from.
    """

    tf_version: str
    cuda: str
    cudnn: str
    source: str


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
        ccs = sorted(set(self.sass_ccs) | set(self.ptx_ccs), key=cc_order)
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
    first_cuda: str | None = None  # the first CUDA toolkit that builds code for it ("11.0")


@dataclass(frozen=True)
class GpuModel:
    """GPU product names that all have one compute capability (``RTX 30x0`` -> 8.6)."""

    names: re.Pattern[str]  # matched against a product name as a log writes it
    cc: str
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
        value_cuda: ``(value, 'X.Y')`` pairs: the oldest CUDA a TF build needs for the value.
        harmless: Values TF does not compare against but that ask for what TF does anyway
            (e.g. the default allocator by name): not worth a warning.
    """

    name: str
    values: tuple[str, ...]
    case_sensitive: bool
    value_since: tuple[tuple[str, str], ...]
    note: str | None
    source: str
    value_cuda: tuple[tuple[str, str], ...] = ()
    harmless: tuple[str, ...] = ()

    def since(self, value: str) -> str | None:
        """Return the first TF ``'X.Y'`` that understands ``value`` (None: always, or unknown)."""
        return dict(self.value_since).get(value)

    def cuda_since(self, value: str) -> str | None:
        """Return the oldest CUDA ``'X.Y'`` a build needs for ``value`` (None: any)."""
        return dict(self.value_cuda).get(value)


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
