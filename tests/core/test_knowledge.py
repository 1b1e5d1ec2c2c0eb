"""Tests for the compatibility knowledge base (tfdoctor.core.knowledge)."""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from packaging.version import Version

from tfdoctor.core.knowledge import (
    COMPAT_FILE,
    CcVerdict,
    Compat,
    KnowledgeError,
    TfBuild,
    load,
    load_from,
)

KNOWLEDGE_DIR = Path(__file__).resolve().parents[2] / "core" / "knowledge"
# The research notes the table was built from (a copy kept with the tests; see its README).
FACTS_JSON = Path(__file__).resolve().parents[1] / "fixtures" / "facts" / "compat_facts.json"

BLACKWELL_ISSUES = (
    "https://github.com/tensorflow/tensorflow/issues/89272",
    "https://github.com/tensorflow/tensorflow/issues/97387",
    "https://github.com/tensorflow/tensorflow/issues/99592",
    "https://github.com/tensorflow/tensorflow/issues/101746",
)


@pytest.fixture(scope="module")
def compat() -> Compat:
    return load()


def _build(compat: Compat, tf_version: str) -> TfBuild:
    build = compat.tf_build(tf_version)
    assert build is not None, tf_version
    return build


# ------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------


def test_load_is_cached(compat: Compat) -> None:
    assert load() is compat


def test_load_from_packaged_file_matches_load(compat: Compat) -> None:
    again = load_from(KNOWLEDGE_DIR / COMPAT_FILE)
    assert again is not compat
    assert again.tf_builds == compat.tf_builds
    assert again.cuda_drivers == compat.cuda_drivers


def test_table_sizes(compat: Compat) -> None:
    # 2.4 ... 2.21, one row per minor; NVIDIA Table 3 from 13.2 Update 2 down to 7.0.28.
    assert [b.series for b in compat.tf_builds] == [f"2.{m}" for m in range(21, 3, -1)]
    assert [t.tf_version for t in compat.tf_tested] == [
        *(f"2.{m}.0" for m in range(3, -1, -1)),
        "1.15.0",
        "1.14.0",
        "1.13.1",
        *(f"1.{m}.0" for m in range(12, -1, -1)),
    ]
    assert len(compat.cuda_drivers) == 64
    assert {m.cuda_major for m in compat.minor_compat} == {11, 12, 13}


# ------------------------------------------------------------------------------------------
# TF builds
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tf_version", "row"),
    [
        ("2.16.2", "2.16.1"),  # there is no 2.16.0; 2.16.x all answer with the 2.16.1 row
        ("2.16.0", "2.16.1"),
        ("2.21.0rc1", "2.21.0"),
        ("2.15.0.post1", "2.15.0"),
        ("2.4.0", "2.4.0"),
        (" 2.17.1 ", "2.17.0"),
        ("2.22.0", None),  # a future release is unknown, not guessed
        ("2.3.1", None),
        ("3.0.0", None),
        ("not-a-version", None),
        ("2", None),
    ],
)
def test_tf_build_matches_major_minor(compat: Compat, tf_version: str, row: str | None) -> None:
    build = compat.tf_build(tf_version)
    assert (build.tf_version if build else None) == row


@pytest.mark.parametrize(
    ("tf", "python", "cuda", "cudnn", "build_cuda", "build_cudnn", "sass", "ptx", "min_cc"),
    [
        (
            "2.21",
            ("3.10", "3.13"),
            "12.5",
            "9.3",
            "12.5.1",
            "9",
            "6.0 7.0 8.0 8.9 9.0",
            "9.0",
            "6.0",
        ),
        (
            "2.18",
            ("3.9", "3.12"),
            "12.5",
            "9.3",
            "12.5.1",
            "9",
            "6.0 7.0 8.0 8.9 9.0",
            "9.0",
            "6.0",
        ),
        ("2.17", ("3.9", "3.12"), "12.3", "8.9", "12.3", "8", "6.0 7.0 8.0 8.9 9.0", "9.0", "6.0"),
        ("2.16", ("3.9", "3.12"), "12.3", "8.9", "12.3", "8", "5.0 6.0 7.0 8.0 9.0", "9.0", "5.0"),
        ("2.15", ("3.9", "3.11"), "12.2", "8.9", "12.2", "8", "5.0 6.0 7.0 7.5 8.0", "8.0", "5.0"),
        (
            "2.14",
            ("3.9", "3.11"),
            "11.8",
            "8.7",
            "11.8",
            "8",
            "3.5 5.0 6.0 7.0 7.5 8.0",
            "8.0",
            "3.5",
        ),
        (
            "2.11",
            ("3.7", "3.10"),
            "11.2",
            "8.1",
            "11.2",
            "8",
            "3.5 5.0 6.0 7.0 7.5 8.0",
            "8.0",
            "3.5",
        ),
        (
            "2.4",
            ("3.6", "3.8"),
            "11.0",
            "8.0",
            "11.0",
            "8",
            "3.5 5.0 6.0 7.0 7.5 8.0",
            "8.0",
            "3.5",
        ),
    ],
)
def test_tf_build_values(
    compat: Compat,
    tf: str,
    python: tuple[str, str],
    cuda: str,
    cudnn: str,
    build_cuda: str,
    build_cudnn: str,
    sass: str,
    ptx: str,
    min_cc: str,
) -> None:
    # Expected values copied from compat_facts.md sections 1a and 4a.
    build = compat.tf_build(tf + ".0")
    assert build is not None
    assert (build.python_min, build.python_max) == python
    assert (build.cuda, build.cudnn) == (cuda, cudnn)
    assert (build.build_cuda, build.build_cudnn) == (build_cuda, build_cudnn)
    assert build.sass_ccs == tuple(sass.split())
    assert build.ptx_ccs == tuple(ptx.split())
    assert build.min_cc == min_cc


@pytest.mark.parametrize(
    ("tf", "python", "expected"),
    [
        ("2.15.0", "3.11.9", True),
        ("2.15.0", "3.9", True),
        ("2.15.0", "3.12.1", False),
        ("2.15.0", "3.8.18", False),
        ("2.21.0", "3.9.0", False),
        ("2.21.0", "3.13.1", True),
        ("2.20.0", "3.9.0", True),
        ("9.9.0", "3.11", None),
        ("2.15.0", "three", None),
        ("2.15.0", "3", None),
    ],
)
def test_python_supported(compat: Compat, tf: str, python: str, expected: bool | None) -> None:
    assert compat.python_supported(tf, python) is expected


@pytest.mark.parametrize(
    ("tf", "expected"),
    [
        ("2.13.1", None),  # the extra arrived in 2.14.0
        ("2.14.0", "pip install 'tensorflow[and-cuda]==2.14.0'"),
        ("2.16.2", "pip install 'tensorflow[and-cuda]==2.16.2'"),  # never a silent downgrade
        ("2.15.0.post1", "pip install 'tensorflow[and-cuda]==2.15.0.post1'"),
        ("2.21.0rc1", "pip install 'tensorflow[and-cuda]==2.21.0'"),
        ("2.22.0", None),
    ],
)
def test_and_cuda_install(compat: Compat, tf: str, expected: str | None) -> None:
    assert compat.and_cuda_install(tf) == expected


def test_and_cuda_row_values(compat: Compat) -> None:
    build = compat.tf_build("2.20.0")
    assert build is not None
    assert build.and_cuda_install == "pip install 'tensorflow[and-cuda]==2.20.0'"
    assert build.requires_python == ">=3.9"
    assert _build(compat, "2.21.0").requires_python == ">=3.10"
    assert _build(compat, "2.13.0").and_cuda_install is None


@pytest.mark.parametrize(
    ("tf", "expected"),
    [("2.10.1", True), ("2.4.0", True), ("2.11.0", False), ("2.99", False), ("junk", None)],
)
def test_windows_native_gpu(compat: Compat, tf: str, expected: bool | None) -> None:
    # 2.10 was the last release with GPU support on native Windows (tensorflow.org/install/pip).
    assert compat.windows_native_gpu(tf) is expected


def test_build_info_ccs_spelling(compat: Compat) -> None:
    assert _build(compat, "2.21.0").build_info_ccs == (
        "sm_60",
        "sm_70",
        "sm_80",
        "sm_89",
        "compute_90",
    )
    assert _build(compat, "2.14.0").build_info_ccs == (
        "sm_35",
        "sm_50",
        "sm_60",
        "sm_70",
        "sm_75",
        "compute_80",
    )


# ------------------------------------------------------------------------------------------
# Drivers
# ------------------------------------------------------------------------------------------


def test_tf_215_driver(compat: Compat) -> None:
    build = compat.tf_build("2.15.0")
    assert build is not None
    assert (build.cuda, build.cudnn) == ("12.2", "8.9")
    req = compat.min_driver_for_tf("2.15.0")
    assert req is not None
    # The [and-cuda] extra pins CUDA 12.2 Update 2 components; minor-version compat needs less.
    assert req.packaged == "535.104.05"
    assert req.packaged_label == "12.2 Update 2"
    assert req.minimum == "525.60.13"
    assert req.minor_compat_floor == "525.60.13"
    assert req.source.startswith("https://docs.nvidia.com/")


@pytest.mark.parametrize(
    ("cuda", "platform", "label", "packaged", "minimum"),
    [
        ("12.5.1", "linux", "12.5 Update 1", "555.42.06", "525.60.13"),
        ("12.5", "linux", "12.5 GA", "555.42.02", "525.60.13"),
        ("12.5.0", "linux", "12.5 GA", "555.42.02", "525.60.13"),
        ("12.5.82", "linux", "12.5 Update 1", "555.42.06", "525.60.13"),  # cudart component
        ("12.2", "linux", "12.2 GA", "535.54.03", "525.60.13"),
        ("12.3.2", "linux", "12.3 Update 1", "545.23.08", "525.60.13"),  # no 12.3U2 row
        ("12.0", "linux", "12.0 GA", "525.60.13", "525.60.13"),
        ("12.8.1", "windows", "12.8 Update 1", "572.61", "528.33"),
        ("12.0", "windows", "12.0 GA", "527.41", "527.41"),  # its own driver is below the floor
        ("12.2.2", "wsl", "12.2 Update 2", "537.13", "528.33"),
        ("11.8", "linux", "11.8 GA", "520.61.05", "450.80.02"),
        ("11.2", "linux", "11.2.0 GA", "460.27.03", "450.80.02"),
        ("11.2.2", "windows", "11.2.2 Update 2", "461.33", "452.39"),
        # CUDA 11.0 shipped before 450.80.02 became the 11.x floor: its own driver suffices.
        ("11.0", "linux", "11.0.2 GA", "450.51.05", "450.51.05"),
        ("10.2", "linux", "10.2.89", "440.33", "440.33"),  # 10.x: no minor-version compat
        ("10.1.243", "windows", "10.1 (10.1.105 general release, and updates)", "418.96", "418.96"),
        ("13.0", "linux", "13.0 GA", "580.65.06", "580.65.06"),
        ("13.2.2", "linux", "13.2 Update 2", "595.71.05", "580.65.06"),
    ],
)
def test_min_driver_for_cuda(
    compat: Compat, cuda: str, platform: Any, label: str, packaged: str, minimum: str
) -> None:
    req = compat.min_driver_for_cuda(cuda, platform)
    assert req is not None
    assert (req.packaged_label, req.packaged, req.minimum) == (label, packaged, minimum)
    assert req.cuda_version == cuda
    assert req.platform == platform


def test_min_driver_without_table3_row(compat: Compat) -> None:
    req = compat.min_driver_for_cuda("12.7")  # Table 3 has no 12.7 row; the 12.x floor holds
    assert req is not None
    assert (req.packaged, req.packaged_label, req.minimum) == (None, None, "525.60.13")


@pytest.mark.parametrize(
    ("cuda", "platform"),
    [("14.0", "linux"), ("10.3", "linux"), ("13.0", "windows"), ("12", "linux"), ("x", "linux")],
)
def test_min_driver_unknown(compat: Compat, cuda: str, platform: Any) -> None:
    assert compat.min_driver_for_cuda(cuda, platform) is None


def test_min_driver_bad_platform(compat: Compat) -> None:
    bad: Any = "macos"  # outside the Platform literal on purpose
    with pytest.raises(ValueError, match="platform"):
        compat.min_driver_for_cuda("12.2", bad)
    with pytest.raises(ValueError, match="platform"):
        compat.driver_supports("550.54.14", "12.2", bad)


@pytest.mark.parametrize(
    ("driver", "cuda", "platform", "expected"),
    [
        ("525.60.13", "12.5.1", "linux", True),
        ("525.60.12", "12.5.1", "linux", False),
        ("570.26", "12.5.1", "linux", True),
        ("470.82.01", "12.2", "linux", False),
        ("535.54.03", "11.8", "linux", True),
        ("450.80.02", "11.2", "linux", True),
        ("450.51.05", "11.2", "linux", False),
        ("450.51.05", "11.0", "linux", True),
        ("575.57.08", "13.0", "linux", False),
        ("580.65.06", "13.1.1", "linux", True),
        ("528.33", "12.4", "wsl", True),
        ("527.41", "12.4", "windows", False),
        ("440.33", "10.2", "linux", True),
        ("440.32", "10.2", "linux", False),
        ("garbage", "12.2", "linux", None),
        ("550.54.14", "14.0", "linux", None),
        ("600.0", "13.0", "windows", None),
    ],
)
def test_driver_supports(
    compat: Compat, driver: str, cuda: str, platform: Any, expected: bool | None
) -> None:
    assert compat.driver_supports(driver, cuda, platform) is expected


_CUDA12_RELEASES = [row.version for row in load().cuda_drivers if row.version.startswith("12.")] + [
    "12.7",
    "12.5",
    "12.5.82",
]


@given(
    cuda=st.sampled_from(_CUDA12_RELEASES),
    major=st.integers(min_value=525, max_value=999),
    minor=st.integers(min_value=0, max_value=300),
    patch=st.integers(min_value=0, max_value=99),
)
def test_any_driver_at_or_above_the_12x_floor_is_accepted(
    cuda: str, major: int, minor: int, patch: int
) -> None:
    driver = f"{major}.{minor}.{patch:02d}"
    assume(Version(driver) >= Version("525.60.13"))
    assert load().driver_supports(driver, cuda, "linux") is True


@given(
    cuda=st.sampled_from(_CUDA12_RELEASES),
    major=st.integers(min_value=300, max_value=525),
    minor=st.integers(min_value=0, max_value=300),
    patch=st.integers(min_value=0, max_value=99),
)
def test_any_driver_below_the_12x_floor_is_rejected(
    cuda: str, major: int, minor: int, patch: int
) -> None:
    driver = f"{major}.{minor}.{patch:02d}"
    assume(Version(driver) < Version("525.60.13"))
    assert load().driver_supports(driver, cuda, "linux") is False


@given(
    row=st.sampled_from(load().cuda_drivers),
    bump=st.tuples(st.integers(0, 50), st.integers(0, 200), st.integers(0, 99)),
)
def test_driver_supports_is_monotonic(row: Any, bump: tuple[int, int, int]) -> None:
    # Whatever the floor, a newer driver never stops working (backward compatibility).
    compat = load()
    req = compat.min_driver_for_cuda(row.version)
    assert req is not None
    base = (*Version(req.minimum).release, 0)[:3]
    newer = f"{base[0] + bump[0]}.{base[1] + bump[1]}.{base[2] + bump[2]:02d}"
    assert compat.driver_supports(req.minimum, row.version) is True
    assert compat.driver_supports(newer, row.version) is True


def test_every_tf_build_cuda_has_a_driver_requirement(compat: Compat) -> None:
    for build in compat.tf_builds:
        for cuda in filter(None, (build.build_cuda, build.and_cuda_cuda)):
            req = compat.min_driver_for_cuda(cuda)
            assert req is not None, (build.tf_version, cuda)
            assert req.packaged is not None, (build.tf_version, cuda)


# ------------------------------------------------------------------------------------------
# Compute capability
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tf", "cc", "verdict", "via"),
    [
        ("2.17.0", "5.2", CcVerdict.UNSUPPORTED, None),  # CC 5.x removed in 2.17
        ("2.17.0", "8.6", CcVerdict.NATIVE, "sm_80"),
        ("2.17.0", "8.9", CcVerdict.NATIVE, "sm_89"),
        ("2.17.0", "9.0", CcVerdict.NATIVE, "sm_90"),
        ("2.17.0", "7.5", CcVerdict.NATIVE, "sm_70"),
        ("2.17.0", "6.1", CcVerdict.NATIVE, "sm_60"),
        ("2.17.0", "12.0", CcVerdict.PTX_JIT, "compute_90"),
        ("2.21.0", "10.0", CcVerdict.PTX_JIT, "compute_90"),
        ("2.16.1", "5.2", CcVerdict.NATIVE, "sm_50"),
        ("2.16.1", "8.9", CcVerdict.NATIVE, "sm_80"),
        ("2.15.0", "9.0", CcVerdict.PTX_JIT, "compute_80"),  # Hopper on 2.15: only PTX
        ("2.15.0", "3.7", CcVerdict.UNSUPPORTED, None),
        ("2.14.0", "3.7", CcVerdict.NATIVE, "sm_35"),
        ("2.14.0", "3.0", CcVerdict.UNSUPPORTED, None),
        ("2.99.0", "8.6", CcVerdict.UNKNOWN, None),
        ("2.17.0", "sm_86", CcVerdict.UNKNOWN, None),
    ],
)
def test_cc_support(compat: Compat, tf: str, cc: str, verdict: CcVerdict, via: str | None) -> None:
    support = compat.cc_support(tf, cc)
    assert support.verdict is verdict
    assert support.via == via
    assert support.explanation


def test_blackwell_ptx_jit_has_known_problems(compat: Compat) -> None:
    support = compat.cc_support("2.17.0", "12.0")
    assert support.verdict is CcVerdict.PTX_JIT
    assert support.known_problems == BLACKWELL_ISSUES
    assert "30 minutes" in support.explanation


def test_hopper_ptx_jit_has_no_known_problems(compat: Compat) -> None:
    assert compat.cc_support("2.15.0", "9.0").known_problems == ()


def test_unsupported_explains_the_minimum(compat: Compat) -> None:
    support = compat.cc_support("2.17.0", "5.2")
    assert support.min_cc == "6.0"
    assert "6.0" in support.explanation and "CPU" in support.explanation


_ALL_CCS = [cc for arch in load().architectures for cc in arch.ccs]


@given(tf=st.sampled_from([b.tf_version for b in load().tf_builds]), cc=st.sampled_from(_ALL_CCS))
def test_cc_verdict_follows_the_cubin_rule(tf: str, cc: str) -> None:
    compat = load()
    build = compat.tf_build(tf)
    assert build is not None
    support = compat.cc_support(tf, cc)
    major, minor = (int(x) for x in cc.split("."))
    if support.verdict is CcVerdict.NATIVE:
        # NVIDIA: a cubin runs on the same major and a same-or-higher minor only.
        assert support.via is not None and support.via in build.build_info_ccs + tuple(
            "sm_" + s.replace(".", "") for s in build.sass_ccs
        )
        code = support.via.removeprefix("sm_")
        assert int(code[:-1]) == major and int(code[-1]) <= minor
    elif support.verdict is CcVerdict.PTX_JIT:
        assert support.via is not None and support.via.startswith("compute_")
        code = support.via.removeprefix("compute_")
        assert (int(code[:-1]), int(code[-1])) <= (major, minor)
        assert not any(s.split(".")[0] == str(major) for s in build.sass_ccs if s <= cc)
    else:
        assert support.verdict is CcVerdict.UNSUPPORTED
        min_major, min_minor = (int(x) for x in build.min_cc.split("."))
        assert (major, minor) < (min_major, min_minor)


@pytest.mark.parametrize(
    ("cc", "arch"),
    [
        ("3.7", "Kepler"),
        ("5.2", "Maxwell"),
        ("6.1", "Pascal"),
        ("7.0", "Volta"),
        ("7.5", "Turing"),
        ("8.0", "Ampere"),
        ("8.6", "Ampere"),
        ("8.9", "Ada Lovelace"),
        ("9.0", "Hopper"),
        ("10.0", "Blackwell"),
        ("12.0", "Blackwell"),
        ("4.0", None),
        ("", None),
    ],
)
def test_architecture(compat: Compat, cc: str, arch: str | None) -> None:
    assert compat.architecture(cc) == arch


@pytest.mark.parametrize(
    ("cc", "first"),
    [
        ("8.6", ("11.0", "Ampere")),  # NVIDIA's matrix (a secondary copy says 11.1)
        ("8.9", ("11.0", "Ada Lovelace")),  # sm_80 code runs on 8.9: CUDA 11.0 serves it
        ("9.0", ("11.8", "Hopper")),
        ("12.0", ("12.8", "Blackwell")),
        ("7.5", ("9.0", "Turing")),  # Volta's sm_70 code runs on Turing
        ("4.0", None),
    ],
)
def test_first_cuda_that_has_code_for_a_gpu(
    compat: Compat, cc: str, first: tuple[str, str] | None
) -> None:
    assert compat.first_cuda_for_cc(cc) == first


# ------------------------------------------------------------------------------------------
# Environment variables
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "tf", "expected"),
    [
        ("TF_FORCE_GPU_ALLOW_GROWTH", "true", None, True),
        ("TF_FORCE_GPU_ALLOW_GROWTH", "false", None, True),
        ("TF_FORCE_GPU_ALLOW_GROWTH", "True", None, False),  # strcmp: case-sensitive
        ("TF_FORCE_GPU_ALLOW_GROWTH", "1", None, False),
        ("TF_GPU_ALLOCATOR", "cuda_malloc_async", "2.4.0", False),
        ("TF_GPU_ALLOCATOR", "cuda_malloc_async", "2.5.0", True),
        ("TF_GPU_ALLOCATOR", "cuda_malloc_async", None, True),
        ("TF_GPU_ALLOCATOR", "cuda_malloc_async", "junk", None),
        ("TF_GPU_ALLOCATOR", "bfc", "2.17.0", False),
        ("TF_SOMETHING_ELSE", "1", None, None),
    ],
)
def test_env_value_accepted(
    compat: Compat, name: str, value: str, tf: str | None, expected: bool | None
) -> None:
    assert compat.env_value_accepted(name, value, tf) is expected


def test_env_var_facts(compat: Compat) -> None:
    fact = compat.env_var("TF_GPU_ALLOCATOR")
    assert fact is not None
    assert fact.since("cuda_malloc_async") == "2.5"
    assert fact.since("cuda_malloc") is None
    assert compat.env_var("NOPE") is None


# ------------------------------------------------------------------------------------------
# Sources and cross-checks against the research notes
# ------------------------------------------------------------------------------------------


def _rows(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every table below the top level: array-of-tables rows and plain sub-tables."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and key != "since":
                found.append((f"{path}{key}", value))
            elif isinstance(value, list):
                found.extend(
                    (f"{path}{key}[{i}]", item)
                    for i, item in enumerate(value)
                    if isinstance(item, dict)
                )
    return found


def test_every_row_has_an_http_source() -> None:
    data = tomllib.loads((KNOWLEDGE_DIR / COMPAT_FILE).read_text(encoding="utf-8"))
    rows = _rows(data)
    assert len(rows) > 80
    for where, row in rows:
        assert isinstance(row.get("source"), str), where
        assert row["source"].startswith(("https://", "http://")), where
        for key, value in row.items():
            if key.endswith("_source"):
                assert value.startswith(("https://", "http://")), (where, key)


def test_every_loaded_object_has_an_http_source(compat: Compat) -> None:
    objects: list[Any] = [
        *compat.tf_builds,
        *compat.tf_tested,
        *compat.cuda_drivers,
        *compat.minor_compat,
        *compat.architectures,
        *compat.cc_problems,
        *compat.env_vars,
    ]
    for obj in objects:
        assert obj.source.startswith(("https://", "http://")), obj
    assert (compat.windows_native_source or "").startswith("https://")


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FACTS_JSON.read_text(encoding="utf-8"))
    return data


def test_tf_rows_match_research_notes(compat: Compat, facts: dict[str, Any]) -> None:
    rows = facts["table1_tf_gpu_builds_linux"]
    assert len(rows) == len(compat.tf_builds)
    for row in rows:
        build = compat.tf_build(row["tf_version"])
        assert build is not None and build.tf_version == row["tf_version"]
        tested = row["tested_config_linux"]
        assert f"{build.python_min}-{build.python_max}" == tested["python"]
        assert (build.cuda, build.cudnn) == (tested["cuda"], tested["cudnn"])
        info = row["wheel_build_info"]
        assert (build.build_cuda, build.build_cudnn) == (
            info["cuda_version"],
            info["cudnn_version"],
        )
        assert list(build.build_info_ccs) == info["cuda_compute_capabilities"]
        assert list(build.sass_ccs) == row["wheel_sass_compute_capabilities"]
        assert list(build.ptx_ccs) == row["wheel_ptx_compute_capabilities"]
        assert build.min_cc == row["wheel_min_compute_capability"]
        extra = row.get("pip_extra_and_cuda") or {}
        assert build.and_cuda_install == extra.get("install")
        assert build.requires_python == extra.get("requires_python")


def test_driver_rows_match_research_notes(compat: Compat, facts: dict[str, Any]) -> None:
    rows = facts["table3_cuda_toolkit_min_driver"]["rows"]
    ours = {r.version: r for r in compat.cuda_drivers}
    # the notes stop at 10.0.130; CUDA 7.0 - 9.2 come from an older edition of the same table
    older = {v: r for v, r in ours.items() if int(v.split(".")[0]) < 10}
    assert len(rows) == len(ours) - len(older) and len(older) == 8
    assert all("archive/11.4.0/cuda-toolkit-release-notes" in r.source for r in older.values())
    for row in rows:
        mine = ours[row["cuda_version"]]
        assert mine.label == row["cuda_label"]
        assert mine.linux == row["linux_x86_64_min_driver"]
        assert mine.windows == row["windows_x86_64_min_driver"]


def test_minor_compat_floors_match_research_notes(compat: Compat, facts: dict[str, Any]) -> None:
    rules = facts["table3_cuda_toolkit_min_driver"]["minor_version_compatibility"]["rules"]
    expected = {
        r["cuda_major"]: r.get("exact_min_linux") or r.get("exact_min_linux_from_table3_GA")
        for r in rules
        if r["cuda_major"] != 10  # 10.x has no minor-version compatibility
    }
    assert {m.cuda_major: m.linux for m in compat.minor_compat} == expected


# ------------------------------------------------------------------------------------------
# Validation of malformed files (load_from)
# ------------------------------------------------------------------------------------------

_TF_ROW = """
[[tf_build]]
tf_version = "{version}"
python_min = "3.9"
python_max = "3.12"
cuda = "12.3"
cudnn = "8.9"
build_cuda = "12.3"
build_cudnn = "8"
sass_ccs = ["5.0", "6.0", "7.0", "8.0", "9.0"]
ptx_ccs = ["9.0"]
min_cc = "5.0"
and_cuda_install = "pip install 'tensorflow[and-cuda]=={version}'"
and_cuda_source = "https://pypi.org/project/tensorflow/{version}/"
source = "https://www.tensorflow.org/install/source#gpu"
"""

_DRIVER_ROWS = """
[[cuda_driver]]
label = "12.3 GA"
version = "12.3.0"
ga = true
linux = "545.23.06"
windows = "545.84"
source = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"

[[minor_compat]]
cuda_major = 12
linux = "525.60.13"
source = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"

[[architecture]]
ccs = ["8.0", "8.6"]
name = "Ampere"
source = "https://developer.nvidia.com/cuda-gpus"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "compat.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _valid(version: str = "2.16.1") -> str:
    return "schema = 1\n" + _TF_ROW.format(version=version) + _DRIVER_ROWS


@pytest.mark.parametrize(
    ("tf", "tested", "driver"),
    [
        ("1.15.2", ("10.0", "7.4"), "410.48"),
        ("1.13.1", ("10.0", "7.4"), "410.48"),
        ("1.8.0", ("9", "7"), "384.81"),  # the docs give a bare major: its GA row
        ("1.2.0", ("8", "5.1"), "367.48"),
        ("2.3.1", ("10.1", "7.6"), "418.39"),
        ("2.16.2", ("12.3", "8.9"), "525.60.13"),  # a full build row answers too
        ("0.12.1", None, None),
    ],
)
def test_tested_cuda_from_1_0_on(
    compat: Compat, tf: str, tested: tuple[str, str] | None, driver: str | None
) -> None:
    assert compat.tested_cuda(tf) == tested
    req = compat.min_driver_for_tf(tf)
    assert (req.minimum if req else None) == driver


@pytest.mark.parametrize(
    ("major", "series"),
    [(5, [(1, 0), (1, 1), (1, 2)]), (6, [(1, 3), (1, 4)]),
     (9, [(2, 18), (2, 19), (2, 20), (2, 21)]), (4, [])],
)  # fmt: skip
def test_releases_built_with_a_cudnn_major(
    compat: Compat, major: int, series: list[tuple[int, int]]
) -> None:
    assert compat.tf_series_with_cudnn(major) == series
    assert (2, 16) in compat.tf_series_with_cudnn(8) and (1, 15) in compat.tf_series_with_cudnn(7)


_TESTED_ROW = """
[[tf_tested]]
tf_version = "{version}"
cuda = "9"
cudnn = "7"
source = "https://www.tensorflow.org/install/source#gpu"
"""


def test_minimal_file_loads(tmp_path: Path) -> None:
    compat = load_from(_write(tmp_path, _valid()))
    assert compat.tf_build("2.16.2") is not None
    assert compat.driver_supports("530.30.02", "12.3") is True
    assert compat.windows_native_gpu("2.10") is None  # section absent: unknown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_valid() + _TF_ROW.format(version="2.16.2"), "duplicate TF version 2.16"),
        (
            _valid().replace('source = "https://www.tensorflow.org/install/source#gpu"\n', ""),
            "missing source",
        ),
        (
            _valid().replace('source = "https://developer.nvidia.com/cuda-gpus"', ""),
            r"\[\[architecture\]\] #1.*missing source",
        ),
        (_valid().replace("https://www.tensorflow.org", "ftp://www.tensorflow.org"), "not an http"),
        (_valid().replace('tf_version = "2.16.1"', 'tf_version = "2.16"'), "malformed tf_version"),
        (_valid().replace('tf_version = "2.16.1"', 'tf_version = "2.x.1"'), "malformed tf_version"),
        (_valid().replace('build_cuda = "12.3"', 'build_cuda = "twelve"'), "malformed build_cuda"),
        (_valid().replace('linux = "545.23.06"', 'linux = "545-23"'), "malformed linux"),
        (_valid().replace('"9.0"]\nmin_cc', '"sm_90"]\nmin_cc'), "malformed compute capability"),
        (_valid().replace('min_cc = "5.0"', 'min_cc = "6.0"'), "not the lowest compiled CC"),
        (_valid().replace('python_min = "3.9"', 'python_min = "3.13"'), "python_min"),
        (_valid().replace('cudnn = "8.9"', 'cudnn = "8.9"\ncudnn_extra = "x"'), "unknown field"),
        (_valid().replace("ga = true", "ga = false"), "ga = true"),
        (
            _valid() + '[[architecture]]\nccs = ["8.6"]\nname = "X"\nsource = "https://a.b"\n',
            "CC 8.6 already belongs to Ampere",
        ),
        (_valid().replace("==2.16.1'", "==2.16.0'"), "must pin"),
        (_valid() + _TESTED_ROW.format(version="2.16.0"), "duplicate TF version 2.16"),
        (_valid() + _TESTED_ROW.format(version="1.8.0").replace('"9"', '"nine"'), "malformed cuda"),
        (_valid().replace("schema = 1", "schema = 2"), "schema 2"),
        (_valid().replace("schema = 1", 'schema = "one"'), "schema must be an integer"),
        (_valid() + "[[tf_build\n", "not valid TOML"),
        (
            _valid() + '[[minor_compat]]\ncuda_major = 12\nlinux = "525.60.13"\n'
            'source = "https://x.y"\n',
            "duplicate cuda_major 12",
        ),
        (
            _valid() + '[[env_var]]\nname = "V"\nvalues = ["a"]\ncase_sensitive = true\n'
            'since = { b = "2.5" }\nsource = "https://x.y"\n',
            "unknown value 'b'",
        ),
        (
            _valid() + '[[gpu_model]]\nnames = \'RTX 40\'\ncc = "8.9"\nsource = "https://x.y"\n',
            r"\[\[gpu_model\]\] #1: CC '8.9' belongs to no \[\[architecture\]\]",
        ),
        (
            _valid() + '[[gpu_model]]\nnames = \'RTX (30\'\ncc = "8.6"\nsource = "https://x.y"\n',
            "names is not a regular expression",
        ),
    ],
)
def test_malformed_files_are_rejected(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(KnowledgeError, match=message):
        load_from(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA GeForce RTX 3090", "8.6"),
        ("GeForce RTX 2080 SUPER", "7.5"),
        ("GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("Tesla K80", "3.7"),
        ("NVIDIA A100-SXM4-40GB", "8.0"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("Tesla V100-SXM2-16GB", "7.0"),
        ("GeForce GTX 960M", "5.0"),  # the laptop 960M is Maxwell's first, the desktop 960 5.2
        ("GeForce GTX 960", "5.2"),
        ("GeForce GTX 770", "3.0"),  # legacy Kepler, below every TF 2 build's minimum
        ("GeForce GTX TITAN", "3.5"),
        ("GeForce GTX TITAN X", "5.2"),  # not the Kepler TITAN
        ("Quadro K2000", "3.0"),
        ("Quadro M4000", "5.2"),
        ("Quadro M4000M", "5.0"),  # the laptop part
        ("Quadro P4000", "6.1"),
        ("GeForce GT 730", None),  # sold as 2.1 and as 3.5
        ("GeForce GTX 860M", None),  # sold as 3.0 and as 5.0
        ("Quadro T1000", None),  # not in the table
    ],
)
def test_a_gpu_product_name_gives_its_compute_capability(
    compat: Compat, name: str, cc: str | None
) -> None:
    assert compat.cc_of_model(name) == cc
    if cc is not None:  # every CC the table gives belongs to an architecture
        assert compat.architecture(cc) is not None


def test_missing_file_is_a_knowledge_error(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeError, match="cannot read"):
        load_from(tmp_path / "absent.toml")


def test_error_names_the_file_and_row(tmp_path: Path) -> None:
    path = _write(tmp_path, _valid() + _TF_ROW.format(version="2.16.2"))
    with pytest.raises(KnowledgeError) as info:
        load_from(path)
    assert str(path) in str(info.value)
    assert "[[tf_build]] #2" in str(info.value)
