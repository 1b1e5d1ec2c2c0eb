"""Tests for the system probe: live facts on this machine, and real-format fixtures in tmp trees."""
# ruff: noqa: E501  (kernel-log fixtures keep their real, long line format)

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tfdoctor.core.factnames import is_known
from tfdoctor.core.model import Facts, ProbeStatus
from tfdoctor.core.probes import system
from tfdoctor.core.probes.system import (
    CmdResult,
    cgroup_memory,
    cgroup_memory_limit_mib,
    detect_container,
    detect_wsl,
    parse_oom_kills,
    parse_xid_errors,
    read_kernel_log,
)

MIB = 1024 * 1024


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --------------------------------------------------------------------------------------------
# Kernel-log parsers on real formats (dmesg --time-format iso, dmesg -T, journalctl short-iso)

OOM_LINES = """\
2024-03-11T09:14:02,118734+01:00 python3 invoked oom-killer: gfp_mask=0x140dca(GFP_HIGHUSER_MOVABLE|__GFP_COMP|__GFP_ZERO), order=0, oom_score_adj=0
2024-03-11T09:14:02,118790+01:00 CPU: 7 PID: 48213 Comm: python3 Tainted: P           OE      6.5.0-21-generic #21~22.04.1-Ubuntu
2024-03-11T09:14:02,119654+01:00 [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name
2024-03-11T09:14:02,119990+01:00 [  48213]  1000 48213 12873341  7812210 64733184        0             0 python3
2024-03-11T09:14:02,120310+01:00 oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.scope,task=python3,pid=48213,uid=1000
2024-03-11T09:14:02,120342+01:00 Out of memory: Killed process 48213 (python3) total-vm:51493364kB, anon-rss:31248840kB, file-rss:0kB, shmem-rss:4096kB, UID:1000 pgtables:63216kB oom_score_adj:0
2024-03-11T09:14:03,501122+01:00 oom_reaper: reaped process 48213 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:4096kB
[Tue Jun  4 16:02:11 2024] Memory cgroup out of memory: Killed process 7730 (python) total-vm:20937412kB, anon-rss:8377552kB, file-rss:81920kB, shmem-rss:0kB, UID:0 pgtables:17120kB oom_score_adj:0
Jun 05 10:20:44 ws-07 kernel: [ 8811.204187] Killed process 3120 ((sd-pam)), UID 0, total-vm:168424kB, anon-rss:4064kB, file-rss:3584kB, shmem-rss:0kB
Jun 05 10:20:44 ws-07 kernel: Memory cgroup out of memory: Kill process 9001 (java) score 912 or sacrifice child
Jun 05 10:20:44 ws-07 kernel: Killed process 9002 (java), UID 0, total-vm:7034778kB, anon-rss:4556357kB, file-rss:0kB, shmem-rss:0kB
Jun 05 10:21:30 ws-07 systemd-oomd[812]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-5c1d.scope due to memory pressure for /user.slice/user-1000.slice/user@1000.service being 62.40% > 50.00% for > 20s with reclaim activity
"""

XID_LINES = """\
[ 5123.774512] NVRM: Xid (PCI:0000:01:00): 79, pid=48213, name=python3, GPU has fallen off the bus.
[ 5123.774600] NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.
[24128.828315] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000
[93297.027938] NVRM: Xid (PCI:0000:43:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x52e7b0=0x101000e 0x52e7b4=0x4
2024-08-30T11:43:14,120001+00:00 NVRM: Xid (PCI:0000:CB:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005
"""


def test_parse_oom_kills_real_formats() -> None:
    kills = parse_oom_kills(OOM_LINES.splitlines())
    assert [(k["pid"], k["process"], k["kind"]) for k in kills] == [
        (48213, "python3", "global"),
        (7730, "python", "cgroup"),
        (3120, "(sd-pam)", "kernel"),
        (9002, "java", "cgroup"),
        (None, "vte-spawn-5c1d.scope", "systemd-oomd"),
    ]
    first = kills[0]
    # the oom-kill summary and the Killed line are one kill, not two
    assert first["line"].endswith("oom_score_adj:0")
    assert "Out of memory: Killed process 48213" in first["line"]
    assert first["cgroup"].endswith("/jupyter.scope")
    assert first["time"] == "2024-03-11T09:14:02,120310+01:00"
    assert kills[4]["cgroup"].startswith("/user.slice/")
    assert all(k["line"] in OOM_LINES for k in kills)


def test_parse_oom_kills_summary_without_killed_line_and_cap() -> None:
    line = (
        "[2059991.491436] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
        "mems_allowed=0,oom_memcg=/docker/4f2a,task_memcg=/docker/4f2a,task=python3,pid=25315,"
        "uid=0"
    )
    (rec,) = parse_oom_kills([line])
    assert rec == {
        "pid": 25315,
        "process": "python3",
        "line": line,
        "kind": "cgroup",
        "cgroup": "/docker/4f2a",
    }
    many = [f"Out of memory: Killed process {i} (p{i}) total-vm:1kB" for i in range(80)]
    capped = parse_oom_kills(many)
    assert len(capped) == 50
    assert capped[-1]["pid"] == 79  # most recent last
    assert parse_oom_kills(["oom_reaper: reaped process 5 (x), now anon-rss:0kB"]) == []


def test_parse_xid_errors_of_a_real_h200() -> None:
    # dmesg of a lent H200 after two kernels wrote far past their buffers (driver 580.159.04;
    # tools/record_gpu_logs.py cupy_illegal_address)
    lines = (FIXTURES / "logs" / "real_h200_dmesg_xid31.txt").read_text().splitlines()
    xids = parse_xid_errors(lines)
    assert [(x["xid"], x["pid"], x.get("process")) for x in xids] == [
        (31, 669, "python3"),
        (31, 830, "python3"),
    ]
    assert all(x["pci"] == "0000:00:06" for x in xids)


def test_parse_xid_errors_real_formats() -> None:
    xids = parse_xid_errors(XID_LINES.splitlines())
    assert [(x["xid"], x["pci"], x["pid"]) for x in xids] == [
        (79, "0000:01:00", 48213),
        (32, "0000:01:00", None),
        (13, "0000:43:00", None),
        (109, "0000:cb:00", 1797828),
    ]
    assert xids[0]["process"] == "python3"
    assert "process" not in xids[2]  # name=<unknown>
    assert xids[0]["line"].endswith("GPU has fallen off the bus.")
    assert xids[3]["time"].startswith("2024-08-30T11:43:14")
    assert len(parse_xid_errors(XID_LINES.splitlines() * 30)) == 50


# --------------------------------------------------------------------------------------------
# cgroup v2 and v1 in fake /proc + /sys trees


def test_cgroup_v2_nested_limit_walks_up(tmp_path: Path) -> None:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    write(proc / "4242" / "cgroup", "0::/user.slice/user-1000.slice/session-3.scope\n")
    cg = sys_ / "fs" / "cgroup"
    write(cg / "cgroup.controllers", "cpuset cpu io memory pids\n")
    write(cg / "user.slice" / "memory.max", f"{8192 * MIB}\n")
    write(cg / "user.slice" / "user-1000.slice" / "memory.max", "max\n")
    write(cg / "user.slice" / "user-1000.slice" / "session-3.scope" / "memory.max", "max\n")

    info = cgroup_memory(4242, proc_root=proc, sys_root=sys_)
    assert info.version == 2
    assert info.path == "/user.slice/user-1000.slice/session-3.scope"
    assert info.limit_known and info.limit_mib == 8192
    assert info.limit_file == str(cg / "user.slice" / "memory.max")

    # a tighter limit lower down wins
    write(cg / "user.slice" / "user-1000.slice" / "memory.max", f"{3000 * MIB + 123}\n")
    assert cgroup_memory_limit_mib(4242, proc_root=proc, sys_root=sys_) == 3000


def test_cgroup_v2_all_max_is_unlimited(tmp_path: Path) -> None:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    write(proc / "self" / "cgroup", "0::/system.slice/jupyter.service\n")
    cg = sys_ / "fs" / "cgroup"
    write(cg / "cgroup.controllers", "memory pids\n")
    write(cg / "system.slice" / "memory.max", "max\n")
    write(cg / "system.slice" / "jupyter.service" / "memory.max", "max\n")
    info = cgroup_memory(proc_root=proc, sys_root=sys_)
    assert (info.version, info.limit_known, info.limit_mib) == (2, True, None)

    result = system.collect(proc_root=proc, sys_root=sys_, kernel_log=False)
    facts = Facts(result.facts)
    assert facts.value("cgroup.version") == 2
    assert "cgroup.memory_limit_mib" in facts and facts.value("cgroup.memory_limit_mib") is None


def test_cgroup_v2_container_without_cgroupns_uses_mountinfo(tmp_path: Path) -> None:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    write(proc / "self" / "cgroup", "0::/system.slice/docker-4f2a.scope\n")
    write(
        proc / "self" / "mountinfo",
        "1180 1170 0:26 /system.slice/docker-4f2a.scope /sys/fs/cgroup ro,nosuid,nodev,noexec,"
        "relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot\n",
    )
    write(sys_ / "fs" / "cgroup" / "memory.max", f"{4 * 1024 * MIB}\n")
    assert cgroup_memory_limit_mib(proc_root=proc, sys_root=sys_) == 4096


def test_cgroup_v1_nested_limit_and_sentinel(tmp_path: Path) -> None:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    write(
        proc / "77" / "cgroup",
        "12:pids:/a/b\n4:memory:/batch/job-17/step-2\n3:cpu,cpuacct:/a/b\n0::/\n",
    )
    write(
        proc / "self" / "mountinfo",
        "25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
        "30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
        "31 25 0:28 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n",
    )
    mem = sys_ / "fs" / "cgroup" / "memory"
    sentinel = "9223372036854771712\n"
    write(mem / "memory.limit_in_bytes", sentinel)
    write(mem / "batch" / "memory.limit_in_bytes", sentinel)
    write(mem / "batch" / "job-17" / "memory.limit_in_bytes", f"{2048 * MIB}\n")
    write(mem / "batch" / "job-17" / "step-2" / "memory.limit_in_bytes", sentinel)
    info = cgroup_memory(77, proc_root=proc, sys_root=sys_)
    assert (info.version, info.path, info.limit_mib) == (1, "/batch/job-17/step-2", 2048)

    write(mem / "batch" / "job-17" / "memory.limit_in_bytes", sentinel)
    info = cgroup_memory(77, proc_root=proc, sys_root=sys_)
    assert (info.version, info.limit_known, info.limit_mib) == (1, True, None)


def test_cgroup_unreadable_is_unknown_not_unlimited(tmp_path: Path) -> None:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    write(proc / "self" / "cgroup", "4:memory:/x\n")  # and no /sys tree at all
    info = cgroup_memory(proc_root=proc, sys_root=sys_)
    assert (info.version, info.limit_known) == (1, False)
    facts = Facts(system.collect(proc_root=proc, sys_root=sys_, kernel_log=False).facts)
    assert facts.value("cgroup.version") == 1
    assert "cgroup.memory_limit_mib" not in facts  # unknown, not "unlimited"
    assert cgroup_memory(proc_root=tmp_path / "nothing", sys_root=sys_).version is None


# --------------------------------------------------------------------------------------------
# OS, WSL, containers, CPU, memory on fake trees

WSL2_VERSION = (
    "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1) (gcc (GCC) 11.2.0, "
    "GNU ld (GNU Binutils) 2.37) #1 SMP Fri Mar 29 23:14:13 UTC 2024\n"
)
WSL1_VERSION = (
    "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) "
    "#1237-Microsoft Sat Sep 11 14:32:00 PST 2021\n"
)
CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Core(TM) i9-10900K CPU @ 3.70GHz
flags\t\t: fpu vme de pse tsc msr pae mce sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Core(TM) i9-10900K CPU @ 3.70GHz
flags\t\t: fpu vme de pse tsc msr pae mce sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
"""
MEMINFO = """\
MemTotal:       65770276 kB
MemFree:         1203344 kB
MemAvailable:   30101216 kB
SwapTotal:       2097148 kB
SwapFree:         524284 kB
"""


def fake_machine(tmp_path: Path, version: str, osrelease: str) -> tuple[Path, Path, Path, Path]:
    proc, sys_, etc, root = (tmp_path / n for n in ("proc", "sys", "etc", "root"))
    write(proc / "version", version)
    write(proc / "sys" / "kernel" / "osrelease", osrelease + "\n")
    write(proc / "cpuinfo", CPUINFO)
    write(proc / "meminfo", MEMINFO)
    write(proc / "vmstat", "nr_free_pages 300836\npgfault 123\noom_kill 3\n")
    write(proc / "self" / "cgroup", "0::/\n")
    write(proc / "812" / "comm", "systemd-oomd\n")
    write(proc / "1" / "comm", "systemd\n")
    write(etc / "os-release", 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n')
    root.mkdir()
    return proc, sys_, etc, root


def test_wsl_detection() -> None:
    assert detect_wsl(WSL2_VERSION, "5.15.153.1-microsoft-standard-WSL2") == (True, 2)
    assert detect_wsl(WSL1_VERSION, "4.4.0-19041-Microsoft") == (True, 1)
    assert detect_wsl("Linux version 6.5.0-21-generic (buildd@lcy02-amd64-091)", None) == (
        False,
        None,
    )


def test_collect_on_a_fake_wsl2_machine(tmp_path: Path) -> None:
    proc, sys_, etc, root = fake_machine(
        tmp_path, WSL2_VERSION, "5.15.153.1-microsoft-standard-WSL2"
    )
    result = system.collect(
        proc_root=proc, sys_root=sys_, etc_root=etc, root=root, env={}, kernel_log=False
    )
    assert result.status is ProbeStatus.OK
    f = Facts(result.facts)
    assert f.value("os.kernel") == "5.15.153.1-microsoft-standard-WSL2"
    assert f.value("os.distro") == "Ubuntu 22.04.4 LTS"
    assert (f.value("os.is_wsl"), f.value("os.wsl_version")) == (True, 2)
    assert f.value("os.container") == "none"
    assert f.value("cpu.model") == "Intel(R) Core(TM) i9-10900K CPU @ 3.70GHz"
    assert f.value("cpu.count_logical") == 2
    assert (f.value("cpu.has_avx"), f.value("cpu.has_avx2"), f.value("cpu.has_avx512f")) == (
        True,
        True,
        False,
    )
    assert (f.value("mem.total_mib"), f.value("mem.available_mib")) == (64228, 29395)
    assert (f.value("swap.total_mib"), f.value("swap.used_mib")) == (2047, 1536)
    assert f.value("vmstat.oom_kill") == 3
    assert f.value("oomd.active") is True
    assert "kernel_log.readable" not in f
    assert all(is_known(name) for name in f)


def test_container_detection(tmp_path: Path) -> None:
    proc, root = tmp_path / "proc", tmp_path / "root"
    root.mkdir()
    write(proc / "1" / "cgroup", "0::/\n")
    assert detect_container(root=root, proc_root=proc, env={}) == "none"
    (root / ".dockerenv").touch()
    assert detect_container(root=root, proc_root=proc, env={}) == "docker"
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    assert detect_container(root=root, proc_root=proc, env=env) == "kubernetes"
    write(root / "run" / ".containerenv", 'engine="podman-4.9.3"\n')
    assert detect_container(root=root, proc_root=proc, env={}) == "podman"

    root2 = tmp_path / "root2"
    root2.mkdir()
    write(proc / "1" / "cgroup", "12:memory:/docker/0123abcd\n")
    assert detect_container(root=root2, proc_root=proc, env={}) == "docker"
    assert detect_container(root=root2, proc_root=proc, env={}) == "docker"
    write(proc / "1" / "cgroup", "0::/\n")
    write(proc / "1" / "environ", "container=lxc\0PATH=/usr/sbin:/usr/bin\0")
    assert detect_container(root=root2, proc_root=proc, env={}) == "lxc"


# The root mount of a Firecracker VM (the lent H100, 2026-11-24) whose image was built as a
# container and kept /.dockerenv; and Docker's own roots (overlay2, devicemapper, vfs's
# bind-mounted folder).
VM_ROOT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict\n"
DOCKER_ROOTS = (
    "611 540 0:52 / / rw,relatime master:274 - overlay overlay rw,lowerdir=/var/lib/docker/"
    "overlay2/l/ABC:/var/lib/docker/overlay2/l/DEF,upperdir=/var/lib/docker/overlay2/1/diff\n",
    "88 70 253:3 / / rw,relatime - xfs /dev/mapper/docker-253:0-1234-abcdef rw,nouuid\n",
    "90 71 8:1 /var/lib/docker/vfs/dir/4f3c / rw,relatime - ext4 /dev/sda1 rw\n",
)


def test_a_vm_built_from_a_container_image_is_not_called_docker(tmp_path: Path) -> None:
    proc, root = tmp_path / "proc", tmp_path / "root"
    root.mkdir()
    (root / ".dockerenv").touch()
    write(proc / "1" / "cgroup", "0::/process_api/core\n")
    write(proc / "self" / "mountinfo", "22 27 0:21 / /proc rw - proc proc rw\n" + VM_ROOT)
    assert detect_container(root=root, proc_root=proc, env={}) == "none"
    for line in DOCKER_ROOTS:
        write(proc / "self" / "mountinfo", VM_ROOT + line)  # the last mount on / counts
        assert detect_container(root=root, proc_root=proc, env={}) == "docker", line
    (proc / "self" / "mountinfo").unlink()  # unreadable: /.dockerenv decides, as before
    assert detect_container(root=root, proc_root=proc, env={}) == "docker"


# --------------------------------------------------------------------------------------------
# Kernel log fallbacks with a scripted runner (the commands' outputs are what real tools print)


class ScriptedRun:
    def __init__(self, answers: dict[str, CmdResult]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CmdResult:
        self.calls.append(list(argv))
        assert timeout_s <= 2.0
        return self.answers.get(argv[0], CmdResult(None, error=f"{argv[0]}: not found"))


DENIED = CmdResult(1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")


def test_kernel_log_falls_back_to_journalctl(tmp_path: Path) -> None:
    journal = (
        "2024-06-05T10:20:44+0200 ws-07 kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=4242, "
        "name=python3, GPU has fallen off the bus.\n"
    )
    run = ScriptedRun({"dmesg": DENIED, "journalctl": CmdResult(0, journal)})
    klog = read_kernel_log(run=run, kmsg_path=tmp_path / "none")
    assert (klog.readable, klog.source) == (True, "journalctl")
    assert [c[0] for c in run.calls] == ["dmesg", "journalctl"]  # EPERM: no plain-dmesg retry
    assert parse_xid_errors(klog.lines)[0]["pid"] == 4242


def test_kernel_log_falls_back_to_kmsg_then_denied(tmp_path: Path) -> None:
    kmsg = write(
        tmp_path / "kmsg",
        "6,1021,5140900,-;Out of memory: Killed process 991 (python3) total-vm:1024kB, "
        "anon-rss:512kB\n SUBSYSTEM=memory\n4,1022,5141000,-;oom_reaper: reaped process 991\n",
    )
    no_entries = CmdResult(0, "-- No entries --\n")
    run = ScriptedRun({"dmesg": DENIED, "journalctl": no_entries})
    klog = read_kernel_log(run=run, kmsg_path=kmsg)
    assert (klog.readable, klog.source) == (True, str(kmsg))
    assert klog.lines[0].startswith("Out of memory: Killed process 991")
    assert len(klog.lines) == 2

    klog = read_kernel_log(run=run, kmsg_path=tmp_path / "missing")
    assert (klog.readable, klog.source) == (False, None)
    assert any("Operation not permitted" in p for p in klog.problems)

    proc = tmp_path / "proc"
    write(proc / "self" / "cgroup", "0::/\n")
    facts = Facts(system.collect(proc_root=proc, run=run, kmsg_path=tmp_path / "missing").facts)
    assert facts.value("kernel_log.readable") is False
    assert "kernel_log.oom_kills" not in facts  # unknown, not "no OOM kills"


def test_dmesg_without_time_format_retries_plain() -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str], timeout_s: float) -> CmdResult:
        calls.append(list(argv))
        if "--time-format" in argv:
            return CmdResult(1, "", "dmesg: unrecognized option '--time-format'\n")
        return CmdResult(0, "[    0.000000] Linux version 6.1.0\n")

    klog = read_kernel_log(run=run, kmsg_path=Path("/nonexistent"))
    assert (klog.readable, klog.source) == (True, "dmesg")
    assert calls == [["dmesg", "--time-format", "iso"], ["dmesg"]]


# --------------------------------------------------------------------------------------------
# Live: what is true on the machine running the tests


def _live_memory_cgroup() -> str | None:
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            return parts[2]
    return None


def test_live_collect_facts_are_catalogued() -> None:
    result = system.collect()
    assert result.status is ProbeStatus.OK
    names = [f.name for f in result.facts]
    assert names and all(is_known(n) for n in names), [n for n in names if not is_known(n)]
    assert len(names) == len(set(names))
    f = Facts(result.facts)
    assert f.value("os.kernel") == Path("/proc/sys/kernel/osrelease").read_text().strip()
    assert f.value("cpu.count_logical") == os.cpu_count()
    assert f.value("mem.total_mib") > 0
    version = Path("/proc/version").read_text()
    if "microsoft" not in version.lower():
        assert f.value("os.is_wsl") is False and "os.wsl_version" not in f


@pytest.mark.skipif(_live_memory_cgroup() is None, reason="no cgroup v1 memory controller here")
def test_live_cgroup_v1_limit_matches_hand_read() -> None:
    cg_path = _live_memory_cgroup()
    assert cg_path is not None
    info = cgroup_memory()
    assert (info.version, info.path, info.limit_known) == (1, cg_path, True)
    # by hand: the smallest limit_in_bytes from the nested dir up to the controller's root
    base = Path("/sys/fs/cgroup/memory")
    d = base / cg_path.strip("/")
    values = []
    while True:
        values.append(int((d / "memory.limit_in_bytes").read_text()))
        if d == base:
            break
        d = d.parent
    smallest = min(values)
    expected = None if smallest >= 1 << 62 else smallest // MIB
    assert info.limit_mib == expected
    assert cgroup_memory_limit_mib(os.getpid()) == expected


def _remove_cgroup(child: Path) -> None:
    # cgroup dirs are removed with rmdir (their files go with them), innermost first
    for d in (child / "inner", child):
        with contextlib.suppress(OSError):
            d.rmdir()


@pytest.mark.skipif(_live_memory_cgroup() is None, reason="no cgroup v1 memory controller here")
def test_live_cgroup_v1_child_with_real_limit(tmp_path: Path) -> None:
    """A real child memory cgroup with a 512 MiB limit, a grandchild with 1 GiB, a real process."""
    parent = Path("/sys/fs/cgroup/memory") / str(_live_memory_cgroup()).strip("/")
    child = parent / f"tfdoctor-test-{os.getpid()}"
    grandchild = child / "inner"
    try:
        grandchild.mkdir(parents=True)
        (child / "memory.limit_in_bytes").write_text(str(512 * MIB))
        (grandchild / "memory.limit_in_bytes").write_text(str(1024 * MIB))
    except OSError as exc:
        _remove_cgroup(child)
        pytest.skip(f"cannot create a memory cgroup here: {exc}")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        (grandchild / "cgroup.procs").write_text(str(proc.pid))
        info = cgroup_memory(proc.pid)
        assert info.path is not None and info.path.endswith(f"{child.name}/inner")
        assert (info.version, info.limit_mib) == (1, 512)
        assert info.limit_file == str(child / "memory.limit_in_bytes")
        facts = Facts(system.collect(proc.pid, kernel_log=False).facts)
        assert facts.value("cgroup.memory_limit_mib") == 512
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        _remove_cgroup(child)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("dmesg") is None, reason="kernel log needs root + dmesg"
)
def test_live_kernel_log_readable_as_root() -> None:
    res = system.run_command(["dmesg"], 2.0)
    if not res.ok:
        pytest.skip(f"dmesg refused even as root: {res.stderr.strip()}")
    f = Facts(system.collect().facts)
    assert f.value("kernel_log.readable") is True
    assert f.value("kernel_log.source") == "dmesg"
    assert isinstance(f.value("kernel_log.oom_kills"), list)
    assert isinstance(f.value("kernel_log.xid_errors"), list)
