"""Tests for the CUDA installs probe: real files and symlinks in tmp trees, and this machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tfdoctor.core.factnames import is_known
from tfdoctor.core.model import Facts, ProbeStatus
from tfdoctor.core.probes import cudalibs
from tfdoctor.core.probes.cudalibs import lib_version, parse_ldconfig, scan_lib_dirs

NVCC_OUT = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2023 NVIDIA Corporation
Built on Tue_Aug_15_22:02:13_PDT_2023
Cuda compilation tools, release 12.2, V12.2.140
Build cuda_12.2.r12.2/compiler.33191640_0
"""
PTXAS_OUT = """\
ptxas: NVIDIA (R) Ptx optimizing assembler
Copyright (c) 2005-2023 NVIDIA Corporation
Built on Tue_Aug_15_22:00:12_PDT_2023
Cuda compilation tools, release 12.2, V12.2.140
Build cuda_12.2.r12.2/compiler.33191640_0
"""
PTXAS_118_OUT = PTXAS_OUT.replace("12.2, V12.2.140", "11.8, V11.8.89")


def lib(d: Path, real: str, *links: str) -> Path:
    """A real (tiny) library file and the symlinks that point at it, like a package installs."""
    d.mkdir(parents=True, exist_ok=True)
    (d / real).write_bytes(b"\x7fELF fake")
    for link in links:
        (d / link).symlink_to(real)
    return d / real


def tool(path: Path, output: str) -> Path:
    """A real executable that prints what the NVIDIA tool prints for --version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")
    path.chmod(0o755)
    return path


def ldconfig_text(entries: list[tuple[str, str, Path]]) -> str:
    lines = [f"{len(entries)} libs found in cache `/etc/ld.so.cache'"]
    lines += [f"\t{soname} ({arch}) => {path}" for soname, arch, path in entries]
    return "\n".join(lines) + "\n"


def test_lib_version_follows_the_symlink(tmp_path: Path) -> None:
    lib(tmp_path, "libcudnn.so.8.9.7", "libcudnn.so.8", "libcudnn.so")
    lib(tmp_path, "libcudart.so.12.2.140", "libcudart.so.12")
    lib(tmp_path, "libcublas.so.12")  # a pip wheel ships the soname as a plain file
    assert lib_version(tmp_path / "libcudnn.so.8") == "8.9.7"
    assert lib_version(tmp_path / "libcudnn.so") == "8.9.7"
    assert lib_version(tmp_path / "libcudart.so.12") == "12.2.140"
    assert lib_version(tmp_path / "libcublas.so.12") == "12"
    assert lib_version(tmp_path / "missing.so", "libnvinfer.so.8") == "8"


def test_parse_ldconfig_real_files(tmp_path: Path) -> None:
    d = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    i386 = tmp_path / "usr" / "lib" / "i386-linux-gnu"
    lib(d, "libcudnn.so.8.9.7", "libcudnn.so.8", "libcudnn.so")
    lib(d, "libcudnn_ops_infer.so.8.9.7", "libcudnn_ops_infer.so.8")
    lib(d, "libcuda.so.535.104.05", "libcuda.so.1", "libcuda.so")
    lib(d, "libnvidia-ml.so.535.104.05", "libnvidia-ml.so.1")
    lib(d, "libz.so.1.2.13", "libz.so.1")
    lib(i386, "libcuda.so.535.104.05", "libcuda.so.1")
    text = ldconfig_text(
        [
            ("libz.so.1", "libc6,x86-64", d / "libz.so.1"),
            ("libnvidia-ml.so.1", "libc6,x86-64", d / "libnvidia-ml.so.1"),
            ("libcudnn_ops_infer.so.8", "libc6,x86-64", d / "libcudnn_ops_infer.so.8"),
            ("libcudnn.so.8", "libc6,x86-64", d / "libcudnn.so.8"),
            ("libcudnn.so", "libc6,x86-64", d / "libcudnn.so"),
            ("libcuda.so.1", "libc6,x86-64", d / "libcuda.so.1"),
            ("libcuda.so.1", "libc6", i386 / "libcuda.so.1"),
            ("libcuda.so", "libc6,x86-64", d / "libcuda.so"),
        ]
    )
    libs = parse_ldconfig(text, machine="x86_64")
    assert libs == [
        {
            "name": "libnvidia-ml",
            "soname": "libnvidia-ml.so.1",
            "path": str(d / "libnvidia-ml.so.1"),
            "version": "535.104.05",
        },
        {
            "name": "libcudnn_ops_infer",
            "soname": "libcudnn_ops_infer.so.8",
            "path": str(d / "libcudnn_ops_infer.so.8"),
            "version": "8.9.7",
        },
        {
            "name": "libcudnn",
            "soname": "libcudnn.so.8",  # the libcudnn.so dev link is folded in
            "path": str(d / "libcudnn.so.8"),
            "version": "8.9.7",
        },
        {
            "name": "libcuda",
            "soname": "libcuda.so.1",  # the i386 copy is not loadable by a 64-bit Python
            "path": str(d / "libcuda.so.1"),
            "version": "535.104.05",
        },
    ]


def test_two_cudnn_majors_reachable(tmp_path: Path) -> None:
    system_dir = tmp_path / "usr" / "lib"
    wheel_dir = tmp_path / "venv" / "site-packages" / "nvidia" / "cudnn" / "lib"
    llp_dir = tmp_path / "opt" / "libs"
    lib(system_dir, "libcudnn.so.8.9.7", "libcudnn.so.8")
    lib(system_dir, "libcudart.so.11.8.89", "libcudart.so.11.0")
    lib(wheel_dir, "libcudnn.so.9")
    lib(wheel_dir, "libcudnn_graph.so.9")
    lib(llp_dir, "libcudart.so.12.2.140", "libcudart.so.12")
    (llp_dir / "libcudart.so.12.broken").symlink_to("nowhere")
    text = ldconfig_text(
        [
            ("libcudnn.so.8", "libc6,x86-64", system_dir / "libcudnn.so.8"),
            ("libcudart.so.11.0", "libc6,x86-64", system_dir / "libcudart.so.11.0"),
        ]
    )
    env = {"PATH": str(tmp_path / "bin"), "LD_LIBRARY_PATH": f"{llp_dir}::{tmp_path}/gone"}
    result = cudalibs.collect(
        env,
        extra_lib_dirs=[wheel_dir],
        ldconfig_text=text,
        toolkit_roots=[tmp_path / "usr" / "local"],
        machine="x86_64",
    )
    assert result.status is ProbeStatus.OK
    f = Facts(result.facts)
    assert f.value("cuda.cudnn_majors") == ["8", "9"]
    assert f.value("cuda.runtime_majors") == ["11", "12"]
    assert f.value("cuda.ld_library_path") == [str(llp_dir), "", f"{tmp_path}/gone"]
    assert f.value("cuda.ld_library_path_libs") == [
        {
            "name": "libcudart",
            "soname": "libcudart.so.12",
            "path": str(llp_dir / "libcudart.so.12"),
            "version": "12.2.140",
        }
    ]
    assert [x["soname"] for x in f.value("cuda.extra_libs")] == [
        "libcudnn.so.9",
        "libcudnn_graph.so.9",
    ]
    assert f.value("cuda.toolkits") == []
    assert f.value("cuda.nvcc") is None and f.value("cuda.ptxas") == []
    assert all(is_known(n) for n in f)


def test_toolkits_nvcc_ptxas_libdevice(tmp_path: Path) -> None:
    local, opt = tmp_path / "usr" / "local", tmp_path / "opt"
    tk122 = local / "cuda-12.2"
    (tk122 / "nvvm" / "libdevice").mkdir(parents=True)
    (tk122 / "nvvm" / "libdevice" / "libdevice.10.bc").write_bytes(b"BC\xc0\xde")
    (tk122 / "version.json").write_text(
        '{"cuda": {"name": "CUDA SDK", "version": "12.2.2"},'
        ' "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.2.140"}}'
    )
    tool(tk122 / "bin" / "nvcc", NVCC_OUT)
    tool(tk122 / "bin" / "ptxas", PTXAS_OUT)
    lib(tk122 / "lib64", "libcudart.so.12.2.140", "libcudart.so.12", "libcudart.so")
    (local / "cuda").symlink_to("cuda-12.2")
    tk118 = local / "cuda-11.8"
    (tk118 / "lib64").mkdir(parents=True)
    (tk118 / "version.txt").write_text("CUDA Version 11.8.89\n")
    tool(tk118 / "bin" / "ptxas", PTXAS_118_OUT)
    tk_opt = opt / "cuda"  # no version file: the version comes from its nvcc
    tool(tk_opt / "bin" / "nvcc", NVCC_OUT.replace("12.2, V12.2.140", "12.4, V12.4.131"))
    (local / "cudnn").mkdir()  # not a toolkit
    (local / "cuda-empty").mkdir()  # no bin, no lib, no version: not a toolkit
    path_bin = tmp_path / "bin"
    tool(path_bin / "ptxas", PTXAS_118_OUT)

    env = {"PATH": f"{path_bin}:{local / 'cuda' / 'bin'}"}
    result = cudalibs.collect(env, ldconfig_text="", toolkit_roots=[local, opt])
    f = Facts(result.facts)
    toolkits = f.value("cuda.toolkits")
    assert [(t["path"], t["version"], t["version_source"]) for t in toolkits] == [
        (str(local / "cuda"), "12.2.2", "version.json"),
        (str(local / "cuda-11.8"), "11.8.89", "version.txt"),
        (str(local / "cuda-12.2"), "12.2.2", "version.json"),
        (str(opt / "cuda"), "12.4.131", "nvcc"),
    ]
    assert toolkits[0]["is_symlink"] and toolkits[0]["target"] == str(tk122.resolve())
    # nvcc on PATH wins (via the cuda symlink), with the version nvcc prints
    assert f.value("cuda.nvcc") == {
        "path": str(local / "cuda" / "bin" / "nvcc"),
        "version": "12.2.140",
    }
    assert f.value("cuda.ptxas") == [
        {"path": str(path_bin / "ptxas"), "version": "11.8.89"},
        {"path": str(local / "cuda" / "bin" / "ptxas"), "version": "12.2.140"},
        {"path": str(tk118 / "bin" / "ptxas"), "version": "11.8.89"},
    ]
    assert f.value("cuda.libdevice") == [
        str(local / "cuda" / "nvvm" / "libdevice" / "libdevice.10.bc")
    ]
    assert f.value("cuda.runtime_majors") == ["12"]
    assert f.value("cuda.ldconfig_libs") == []
    assert all(is_known(n) for n in f)


def test_broken_tools_are_not_errors(tmp_path: Path) -> None:
    tk = tmp_path / "local" / "cuda-12.0"
    nvcc = tk / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'nvcc fatal : something broke' >&2\nexit 1\n")
    nvcc.chmod(0o755)
    (tk / "bin" / "ptxas").write_bytes(b"\x00not a program")
    (tk / "bin" / "ptxas").chmod(0o755)
    result = cudalibs.collect(
        {"PATH": str(tmp_path / "nothing")}, toolkit_roots=[tmp_path / "local"]
    )
    f = Facts(result.facts)
    assert result.status is ProbeStatus.OK
    assert f.value("cuda.toolkits")[0]["version"] is None
    assert f.value("cuda.nvcc") == {"path": str(nvcc), "version": None}
    assert f.value("cuda.ptxas") == [{"path": str(tk / "bin" / "ptxas"), "version": None}]


def test_scan_lib_dirs_skips_missing_and_non_cuda(tmp_path: Path) -> None:
    lib(tmp_path, "libnccl.so.2.18.3", "libnccl.so.2")
    lib(tmp_path, "libnvJitLink.so.12.3.101", "libnvJitLink.so.12")
    lib(tmp_path, "libcupti.so.12")  # CUDA, but not a library TF's loader checks
    found = scan_lib_dirs([tmp_path / "missing", tmp_path, tmp_path])
    assert [(x["name"], x["version"]) for x in found] == [
        ("libnccl", "2.18.3"),
        ("libnvJitLink", "12.3.101"),
    ]


# --------------------------------------------------------------------------------------------
# Live: this machine


LIVE_TK = Path("/usr/local/cuda-13.0")


def test_live_collect_is_catalogued() -> None:
    result = cudalibs.collect()
    assert result.status is ProbeStatus.OK
    names = [f.name for f in result.facts]
    assert all(is_known(n) for n in names), [n for n in names if not is_known(n)]
    assert len(names) == len(set(names))


@pytest.mark.skipif(not LIVE_TK.is_dir(), reason="no CUDA 13.0 toolkit on this machine")
def test_live_cuda_13_toolkit() -> None:
    f = Facts(cudalibs.collect().facts)
    toolkits = {t["path"]: t for t in f.value("cuda.toolkits")}
    assert toolkits[str(LIVE_TK)]["version"].startswith("13.0")
    ptxas = shutil.which("ptxas")
    assert ptxas is not None
    by_hand = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=True)
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", by_hand.stdout)
    assert m is not None and m.group(1) == "13.0"
    ptxas_found = {p["path"]: p["version"] for p in f.value("cuda.ptxas")}
    assert ptxas_found[ptxas] == m.group(2)
    assert f.value("cuda.nvcc")["version"].startswith("13.0")
    assert "13" in f.value("cuda.runtime_majors")
    ld = {x["name"]: x for x in f.value("cuda.ldconfig_libs")}
    if "libcudart" in ld:
        assert ld["libcudart"]["soname"] == "libcudart.so.13"
    if not os.path.exists("/proc/driver/nvidia/version"):
        assert "libcuda" not in ld  # no driver installed here
    assert str(LIVE_TK / "nvvm" / "libdevice" / "libdevice.10.bc") in {
        os.path.realpath(p) for p in f.value("cuda.libdevice")
    }
