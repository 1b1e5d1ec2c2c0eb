"""Load and validate compat.toml into a :class:`Compat` (every row checked, every fact sourced)."""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from tfdoctor.core.knowledge.compat import Compat
from tfdoctor.core.knowledge.compat_types import (
    Architecture,
    CcProblem,
    CudaDriverRow,
    EnvVarFact,
    GpuModel,
    MinorCompat,
    TfBuild,
    TfTested,
)
from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR, URL_RE, KnowledgeError, Row, read_toml
from tfdoctor.core.knowledge.versions import (
    CC_RE,
    CUDA_RE,
    DRIVER_RE,
    MAJOR_MINOR_RE,
    RELEASE_RE,
    cc_order,
    series_of,
)

logger = logging.getLogger(__name__)

COMPAT_FILE = "compat.toml"
SCHEMA_VERSION = 1


@functools.lru_cache(maxsize=1)
def load() -> Compat:
    """Load the packaged ``compat.toml`` once and return the validated knowledge base.

    Returns:
        The shared :class:`Compat` (cached: later calls return the same object).

    Raises:
        KnowledgeError: The packaged file is missing (a broken install that left out package
            data), is not valid TOML, or fails validation (a bad edit to compat.toml).
    """
    return load_from(KNOWLEDGE_DIR / COMPAT_FILE)


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
    return _parse(read_toml(path), origin=str(Path(path)))


def _parse(data: dict[str, Any], origin: str) -> Compat:
    top = Row(
        data,
        origin,
        {
            "schema",
            "tf_build",
            "tf_tested",
            "windows_native_gpu",
            "minor_compat",
            "cuda_driver",
            "architecture",
            "gpu_model",
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
        win = Row(
            data["windows_native_gpu"], f"{origin}: [windows_native_gpu]", {"last_tf", "source"}
        )
        last_tf = win.req_str("last_tf", pattern=MAJOR_MINOR_RE)
        last_tf_source = win.source()
    compat = Compat(
        origin=origin,
        tf_builds=tf_builds,
        tf_tested=_parse_tf_tested(top.tables("tf_tested"), origin, tf_builds),
        windows_native_last_tf=last_tf,
        windows_native_source=last_tf_source,
        cuda_drivers=_parse_cuda_drivers(top.tables("cuda_driver"), origin),
        minor_compat=_parse_minor_compat(top.tables("minor_compat"), origin),
        architectures=(archs := _parse_architectures(top.tables("architecture"), origin)),
        gpu_models=_parse_gpu_models(top.tables("gpu_model"), origin, archs),
        cc_problems=_parse_cc_problems(top.tables("cc_problem"), origin),
        env_vars=_parse_env_vars(top.tables("env_var"), origin),
    )
    logger.debug("loaded %r", compat)
    return compat


def _tf_row(
    raw: Any, where: str, fields: set[str], seen: dict[tuple[int, int], str]
) -> tuple[Row, str]:
    """A row of one TF minor release (either table): its version, the only row of its series."""
    row = Row(raw, where, fields)
    version = row.req_str("tf_version", pattern=RELEASE_RE)
    row.where += f" (tf_version {version})"
    key = series_of(version)
    assert key is not None  # the pattern guarantees it parses
    if key in seen:
        raise KnowledgeError(
            f"{row.where}: duplicate TF version {key[0]}.{key[1]} "
            f"(already given by {seen[key]}); keep one row per minor release"
        )
    seen[key] = version
    return row, version


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
        row, version = _tf_row(raw, f"{origin}: [[tf_build]] #{i}", fields, seen)
        python_min = row.req_str("python_min", pattern=MAJOR_MINOR_RE)
        python_max = row.req_str("python_max", pattern=MAJOR_MINOR_RE)
        if Version(python_min) > Version(python_max):
            raise KnowledgeError(f"{row.where}: python_min {python_min} > python_max {python_max}")
        sass = row.cc_list("sass_ccs")
        ptx = row.cc_list("ptx_ccs")
        if not sass and not ptx:
            raise KnowledgeError(f"{row.where}: sass_ccs and ptx_ccs are both empty")
        min_cc = row.req_str("min_cc", pattern=CC_RE)
        lowest = min((*sass, *ptx), key=cc_order)
        if cc_order(min_cc) != cc_order(lowest):
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
                cuda=row.req_str("cuda", pattern=MAJOR_MINOR_RE),
                cudnn=row.req_str("cudnn", pattern=MAJOR_MINOR_RE),
                build_cuda=row.req_str("build_cuda", pattern=CUDA_RE),
                build_cudnn=row.req_str("build_cudnn", pattern=re.compile(r"^\d+$")),
                sass_ccs=sass,
                ptx_ccs=ptx,
                min_cc=min_cc,
                and_cuda_install=install,
                source=row.source(),
                requires_python=requires_python,
                and_cuda_cuda=row.opt_str("and_cuda_cuda", pattern=CUDA_RE),
                wheel_source=row.opt_source("wheel_source"),
                and_cuda_source=and_cuda_source,
            )
        )
    return builds


_MAJOR_OR_MINOR_RE = re.compile(r"^\d+(?:\.\d+)?$")


def _parse_tf_tested(rows: list[Any], origin: str, builds: list[TfBuild]) -> list[TfTested]:
    fields = {"tf_version", "cuda", "cudnn", "source"}
    tested: list[TfTested] = []
    seen = {k: b.tf_version for b in builds if (k := series_of(b.tf_version)) is not None}
    for i, raw in enumerate(rows, 1):
        row, version = _tf_row(raw, f"{origin}: [[tf_tested]] #{i}", fields, seen)
        tested.append(
            TfTested(
                tf_version=version,
                cuda=row.req_str("cuda", pattern=_MAJOR_OR_MINOR_RE),
                cudnn=row.req_str("cudnn", pattern=_MAJOR_OR_MINOR_RE),
                source=row.source(),
            )
        )
    return tested


def _parse_cuda_drivers(rows: list[Any], origin: str) -> list[CudaDriverRow]:
    fields = {"label", "version", "ga", "linux", "windows", "source"}
    drivers: list[CudaDriverRow] = []
    seen: set[tuple[int, ...]] = set()
    ga_count: dict[tuple[int, int], int] = {}
    for i, raw in enumerate(rows, 1):
        row = Row(raw, f"{origin}: [[cuda_driver]] #{i}", fields)
        version = row.req_str("version", pattern=RELEASE_RE)
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
                linux=row.req_str("linux", pattern=DRIVER_RE),
                windows=row.opt_str("windows", pattern=DRIVER_RE),
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
        row = Row(raw, f"{origin}: [[minor_compat]] #{i}", fields)
        major = row.req_int("cuda_major")
        if major in seen:
            raise KnowledgeError(f"{row.where}: duplicate cuda_major {major}")
        seen.add(major)
        floors.append(
            MinorCompat(
                cuda_major=major,
                linux=row.req_str("linux", pattern=DRIVER_RE),
                windows=row.opt_str("windows", pattern=DRIVER_RE),
                note=row.opt_str("note"),
                source=row.source(),
            )
        )
    return floors


def _parse_architectures(rows: list[Any], origin: str) -> list[Architecture]:
    archs: list[Architecture] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(rows, 1):
        row = Row(
            raw,
            f"{origin}: [[architecture]] #{i}",
            {"ccs", "name", "products", "first_cuda", "source"},
        )
        name = row.req_str("name")
        ccs = row.cc_list("ccs")
        if not ccs:
            raise KnowledgeError(f"{row.where}: ccs is empty")
        for cc in ccs:
            if cc in seen:
                raise KnowledgeError(f"{row.where}: CC {cc} already belongs to {seen[cc]}")
            seen[cc] = name
        archs.append(
            Architecture(
                ccs=ccs,
                name=name,
                products=row.opt_str("products"),
                first_cuda=row.opt_str("first_cuda", pattern=CUDA_RE),
                source=row.source(),
            )
        )
    return archs


def _parse_gpu_models(rows: list[Any], origin: str, archs: list[Architecture]) -> list[GpuModel]:
    known = {cc for a in archs for cc in a.ccs}
    models: list[GpuModel] = []
    for i, raw in enumerate(rows, 1):
        row = Row(raw, f"{origin}: [[gpu_model]] #{i}", {"names", "cc", "source"})
        cc = row.req_str("cc")
        if cc not in known:
            raise KnowledgeError(f"{row.where}: CC {cc!r} belongs to no [[architecture]]")
        try:
            names = re.compile(row.req_str("names"), re.IGNORECASE)
        except re.error as e:
            raise KnowledgeError(f"{row.where}: names is not a regular expression: {e}") from e
        models.append(GpuModel(names=names, cc=cc, source=row.source()))
    return models


def _parse_cc_problems(rows: list[Any], origin: str) -> list[CcProblem]:
    fields = {"id", "cc_majors", "summary", "issues", "source"}
    problems: list[CcProblem] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows, 1):
        row = Row(raw, f"{origin}: [[cc_problem]] #{i}", fields)
        pid = row.req_str("id")
        if pid in seen:
            raise KnowledgeError(f"{row.where}: duplicate id {pid!r}")
        seen.add(pid)
        issues = row.str_list("issues")
        for url in issues:
            if not URL_RE.match(url):
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
    fields = {
        "name",
        "values",
        "harmless",
        "case_sensitive",
        "since",
        "cuda_since",
        "note",
        "source",
    }
    facts: list[EnvVarFact] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows, 1):
        row = Row(raw, f"{origin}: [[env_var]] #{i}", fields)
        name = row.req_str("name")
        if name in seen:
            raise KnowledgeError(f"{row.where}: duplicate env var {name}")
        seen.add(name)
        values = row.str_list("values")
        if not values:
            raise KnowledgeError(f"{row.where}: values is empty")
        facts.append(
            EnvVarFact(
                name=name,
                values=values,
                case_sensitive=row.req_bool("case_sensitive"),
                value_since=_value_versions(row, "since", values, "TF"),
                value_cuda=_value_versions(row, "cuda_since", values, "CUDA"),
                harmless=row.str_list("harmless", required=False),
                note=row.opt_str("note"),
                source=row.source(),
            )
        )
    return facts


def _value_versions(
    row: Row, key: str, values: tuple[str, ...], what: str
) -> tuple[tuple[str, str], ...]:
    """A table of value = 'X.Y' (the first TF / CUDA version a value needs)."""
    raw = row.data.get(key, {})
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{row.where}: {key} must be a table of value = 'X.Y'")
    out: list[tuple[str, str]] = []
    for value, version in raw.items():
        if value not in values:
            raise KnowledgeError(f"{row.where}: {key} names unknown value {value!r}")
        if not isinstance(version, str) or not MAJOR_MINOR_RE.match(version):
            raise KnowledgeError(f"{row.where}: {key}.{value} must be a 'X.Y' {what} version")
        out.append((value, version))
    return tuple(out)
