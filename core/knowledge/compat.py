"""Compatibility knowledge: TF GPU builds, CUDA driver floors, compute capabilities (queries)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from packaging.version import Version

from tfdoctor.core.knowledge.compat_types import (
    Architecture,
    CcProblem,
    CcSupport,
    CcVerdict,
    CudaDriverRow,
    DriverReq,
    EnvVarFact,
    GpuModel,
    MinorCompat,
    TfBuild,
    TfTested,
)
from tfdoctor.core.knowledge.versions import (
    DRIVER_RE,
    cc_order,
    parse_cc,
    parse_release,
    platform_column,
    series_of,
)

Platform = Literal["linux", "windows", "wsl"]


# --------------------------------------------------------------------------------------------
# Query API
# --------------------------------------------------------------------------------------------


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


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
        tf_tested: Iterable[TfTested] = (),
        gpu_models: Iterable[GpuModel] = (),
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
        self.gpu_models: tuple[GpuModel, ...] = tuple(gpu_models)
        self.cc_problems: tuple[CcProblem, ...] = tuple(cc_problems)
        self.env_vars: tuple[EnvVarFact, ...] = tuple(env_vars)

        self._tf_by_series = {series_of(b.tf_version): b for b in self.tf_builds}
        self.tf_tested: tuple[TfTested, ...] = tuple(tf_tested)
        self._tested_by_series = {series_of(t.tf_version): t for t in self.tf_tested}
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
        key = series_of(tf_version)
        return None if key is None else self._tf_by_series.get(key)

    def tested_cuda(self, tf_version: str) -> tuple[str, str] | None:
        """The CUDA and cuDNN a TF release was built and tested with, from 1.0 on.

        ``'1.15.2'`` answers ``('10.0', '7.4')``, ``'1.8.0'`` ``('9', '7')`` (the docs give a
        bare major for 1.5 - 1.12), ``'2.16.2'`` the 2.16 build row's ``('12.3', '8.9')``.

        Returns:
            (cuda, cudnn), or None for a release neither table knows.
        """
        build = self.tf_build(tf_version)
        if build is not None:
            return build.cuda, build.cudnn
        key = series_of(tf_version)
        old = None if key is None else self._tested_by_series.get(key)
        return None if old is None else (old.cuda, old.cudnn)

    def tf_series_with_cudnn(self, major: int) -> list[tuple[int, int]]:
        """The TF release series built and tested with this cuDNN major, oldest first: ``6``
        answers ``[(1, 3), (1, 4)]``, a major no tested build used ``[]``."""
        found: set[tuple[int, int]] = set()
        rows: list[tuple[str, str]] = [(b.tf_version, b.cudnn) for b in self.tf_builds]
        rows += [(t.tf_version, t.cudnn) for t in self.tf_tested]
        for tf_version, cudnn in rows:
            series = series_of(tf_version)
            if series is not None and cudnn.split(".")[0] == str(major):
                found.add(series)
        return sorted(found)

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
        py = parse_release(python_version)
        if build is None or py is None or len(py) < 2:
            return None
        lo = parse_release(build.python_min)
        hi = parse_release(build.python_max)
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
        key = series_of(tf_version)
        if key is None or self.windows_native_last_tf is None:
            return None
        last = series_of(self.windows_native_last_tf)
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
        column = platform_column(platform)
        release = parse_release(cuda_version)
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
        extra (TF 2.15 -> CUDA 12.2 Update 2), else the wheel's build CUDA version; before 2.4,
        the GA release of the CUDA TensorFlow's docs list as tested (TF 1.8 -> CUDA 9.0).

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
            platform_column(platform)
            tested = self.tested_cuda(tf_version)  # before 2.4: the tested CUDA's GA driver
            if tested is None:
                return None
            cuda = tested[0] if "." in tested[0] else f"{tested[0]}.0"
            return self.min_driver_for_cuda(cuda, platform)
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
        if req is None or not DRIVER_RE.match(driver):
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
        cc_key = parse_cc(cc)
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
        if cc_key < cc_order(build.min_cc):
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
        sass = [s for s in build.sass_ccs if cc_order(s)[0] == cc_key[0] and cc_order(s) <= cc_key]
        if sass:
            best = max(sass, key=cc_order)
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
        ptx = [p for p in build.ptx_ccs if cc_order(p) <= cc_key]
        if ptx:
            best = max(ptx, key=cc_order)
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

    def cc_of_model(self, name: str) -> str | None:
        """The compute capability of a GPU product name as a log writes it (``'GeForce RTX
        3090'`` -> ``'8.6'``), or None for a name the table does not list or lists twice."""
        ccs = {m.cc for m in self.gpu_models if m.names.search(name)}
        return ccs.pop() if len(ccs) == 1 else None

    def first_cuda_for_cc(self, cc: str) -> tuple[str, str] | None:
        """The oldest CUDA toolkit whose libraries can run native code on a compute capability,
        with the architecture's name: ``'8.6'`` -> ``('11.0', 'Ampere')``.

        By the cubin rule a GPU runs code built for its own major at a minor at or below its
        own, so the first toolkit of any such architecture counts (``'8.9'`` -> 11.0).

        Args:
            cc: ``'X.Y'``.

        Returns:
            (CUDA version, architecture name), or None for a CC the table does not list.
        """
        key = parse_cc(cc.strip())
        arch = self._arch_by_cc.get(cc.strip())
        if key is None or arch is None:
            return None
        firsts = [
            a.first_cuda
            for a in self.architectures
            for c in a.ccs
            if a.first_cuda and (k := parse_cc(c)) is not None and k[0] == key[0] and k <= key
        ]
        if not firsts:
            return None
        return min(firsts, key=_version_key), arch.name

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
        key = series_of(tf_version)
        if key is None:
            return None
        since_key = series_of(since)
        assert since_key is not None  # validated at load time
        return key >= since_key

    def env_value_known(self, name: str, value: str) -> bool | None:
        """Say whether a value is one TF acts on, or a harmless one (see EnvVarFact.harmless).

        Returns:
            True or False, or None when the variable is not in the table.
        """
        fact = self._env_by_name.get(name)
        if fact is None:
            return None
        return bool(self.env_value_accepted(name, value)) or value in fact.harmless

    def allocator_unsupported(
        self, allocator: str, *, cuda_build: bool | None, build_cuda: str | None
    ) -> str | None:
        """Say why a TensorFlow build cannot use a ``TF_GPU_ALLOCATOR`` value.

        The async allocator needs a CUDA 11.2+ build (``cuda_since`` in compat.toml); the
        benchmark and the fix suggestions both ask here.

        Args:
            allocator: The value, e.g. ``'cuda_malloc_async'``.
            cuda_build: Whether TF is a CUDA build; None when unknown (then the CUDA version
                alone decides).
            build_cuda: The CUDA version TF was built with (build_info's ``cuda_version``).

        Returns:
            The reason in plain language, or None when the value needs no particular CUDA,
            the build's CUDA is new enough, or its version is unreadable.
        """
        fact = self._env_by_name.get("TF_GPU_ALLOCATOR")
        need = fact.cuda_since(allocator) if fact is not None else None
        if need is None:
            return None
        if cuda_build is False:
            return "this TensorFlow build has no CUDA: the GPU allocator setting does nothing"
        cuda = build_cuda or ""
        try:
            major, minor = (int(x) for x in cuda.split(".")[:2])
        except ValueError:
            return None
        floor = series_of(need)
        assert floor is not None  # validated at load time
        if (major, minor) < floor:
            return (
                f"{allocator} needs CUDA {need} or newer; this TensorFlow was built with "
                f"CUDA {cuda}, so TensorFlow keeps its BFC allocator"
            )
        return None
