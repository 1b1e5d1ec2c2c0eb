"""The exported .sh gives a Jupyter kernel its settings the way the app's "Apply to the kernel"
does: a copy of the kernelspec with an env block, written by the kernel's own interpreter (no
tfdoctor needed there), started for real by jupyter_client, undone to the byte, and killed
(SIGKILL) before every single write of an apply and of an undo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_fixes import kernel_env
from tfdoctor.core.fixes import export

HOSTILE = "a b 'q' \"d\" $(touch PWNED) `touch PWNED2` ;\nTFDOCTOR_PY_EOF\n''' \\ end"

# Loaded by the script's Python (PYTHONPATH): a real SIGKILL just before the Nth change it would
# make under TFD_KILL_UNDER (an open for writing, a rename, a mkdir, a remove, a copy...).
KILLER = """
import os, signal, sys
_AT = int(os.environ.get("TFD_KILL_AT") or 0)
_UNDER = os.environ.get("TFD_KILL_UNDER") or "/nonexistent"
_SEEN = [0]
_EVENTS = {"os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir", "os.chmod",
           "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
           "os.truncate", "os.utime"}
def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    else:
        path, writes = (args[0] if args else None), event in _EVENTS
    if writes and str(path).startswith(_UNDER):
        _SEEN[0] += 1
        if _SEEN[0] == _AT:
            os.kill(os.getpid(), signal.SIGKILL)
if _AT:
    sys.addaudithook(_hook)
"""


class World:
    """A home and a Jupyter data dir holding one real kernelspec for this Python."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "w" / "home"  # the killer counts the writes under "w" only
        self.data = root / "w" / "jupyter"
        self.spec = self.data / "kernels" / "tfk"
        self.spec.mkdir(parents=True)
        self.home.mkdir(parents=True)
        spec = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "TF kernel",
            "language": "python",
            "env": {"KEEP_ME": "1"},
        }
        (self.spec / "kernel.json").write_text(json.dumps(spec, indent=1))
        (self.spec / "logo-32x32.png").write_bytes(b"\x89PNG a logo")
        self.killer = root / "killer"
        self.killer.mkdir()
        (self.killer / "sitecustomize.py").write_text(KILLER)

    @property
    def clone(self) -> Path:
        return self.data / "kernels" / "tfk-tfdoctor"

    def env(self, kill_at: int = 0) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "PATH": os.environ["PATH"],
            "JUPYTER_DATA_DIR": str(self.data),
            "JUPYTER_PATH": str(self.data),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(self.killer),
            "TFD_KILL_AT": str(kill_at),
            "TFD_KILL_UNDER": str(self.root / "w"),
        }

    def sh(self, script: Path, *args: str, kill_at: int = 0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", str(script), *args],
            env=self.env(kill_at),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def files(self) -> dict[str, tuple[bytes, int]]:
        """Every file's bytes and mode (IPython's own history aside: the real kernel's)."""
        return {
            str(p.relative_to(self.root)): (p.read_bytes(), p.stat().st_mode & 0o7777)
            for top in (self.home, self.data)
            for p in sorted(top.rglob("*"))
            if p.is_file() and ".ipython" not in p.parts
        }

    def kernelspecs_parse(self) -> None:
        """What Jupyter would list is whole: every kernel.json is a kernelspec."""
        for path in self.data.rglob("kernel.json"):
            assert isinstance(json.loads(path.read_text())["argv"], list), path


def world(tmp_path: Path) -> World:
    return World(tmp_path)


def script(tmp_path: Path, fixes: list[str], kernel: str | None = "tfk") -> Path:
    path = tmp_path / "fix.sh"
    path.write_text(
        export.export("sh", fixes, ["gpu_memory_contention"], kernel=kernel, python=sys.executable)
    )
    return path


@pytest.mark.slow
def test_the_script_gives_a_real_kernel_its_settings_and_undoes_to_the_byte(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    fix = script(tmp_path, ["memory_growth", "verbose_tf_logging"])
    text = fix.read_text()
    assert "into a copy of the Jupyter kernel 'tfk', named 'tfk-tfdoctor'" in text
    assert "PY_DEFAULT=" + sys.executable in text
    before = w.files()

    dry = w.sh(fix)
    assert dry.returncode == 0, dry.stderr
    assert (
        "would make a copy of 'tfk'" in dry.stdout
        and "TF_FORCE_GPU_ALLOW_GROWTH=true" in dry.stdout
    )
    assert w.files() == before  # a dry run changes nothing, not even ~/.bashrc

    done = w.sh(fix, "--apply")
    assert done.returncode == 0, done.stderr
    assert "pick 'TF kernel (tfdoctor)'" in done.stdout
    assert not (w.home / ".bashrc").exists()  # the kernel, not the shell
    spec = json.loads((w.clone / "kernel.json").read_text())
    assert spec["display_name"] == "TF kernel (tfdoctor)"
    assert spec["env"] == {
        "KEEP_ME": "1",
        "TF_CPP_MIN_LOG_LEVEL": "0",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }
    assert (w.clone / "logo-32x32.png").read_bytes() == b"\x89PNG a logo"
    assert (w.spec / "kernel.json").read_bytes() == before["w/jupyter/kernels/tfk/kernel.json"][0]
    env = w.env()
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:  # Jupyter starts the copy, and the kernel has the settings
        seen = kernel_env("tfk-tfdoctor", ["TF_FORCE_GPU_ALLOW_GROWTH", "KEEP_ME"])
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    assert seen == {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "KEEP_ME": "1"}

    applied = w.files()
    again = w.sh(fix, "--apply")
    assert "already holds these settings" in again.stdout and w.files() == applied

    undone = w.sh(fix, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert "remove the kernel copy" in undone.stdout
    assert w.files() == before
    assert not w.clone.exists() and not (w.home / ".tfdoctor").exists()


def test_hostile_values_reach_the_kernel_as_values(tmp_path: Path) -> None:
    from tfdoctor.core import fixes

    w = world(tmp_path)
    plan = fixes.Plan(("test",), {"TFD_HOSTILE": HOSTILE})
    fix = tmp_path / "fix.sh"
    fix.write_text(export.sh_script(plan, ["x"], kernel="tfk", python=sys.executable))
    assert subprocess.run(["sh", "-n", str(fix)]).returncode == 0
    run = w.sh(fix, "--apply")
    assert run.returncode == 0, run.stderr
    assert json.loads((w.clone / "kernel.json").read_text())["env"]["TFD_HOSTILE"] == HOSTILE
    assert not list(tmp_path.rglob("PWNED*"))


def test_shell_and_kernel_together_and_one_undo_for_both(tmp_path: Path) -> None:
    w = world(tmp_path)
    (w.home / ".bashrc").write_text("# mine\n")
    fix = script(tmp_path, ["memory_growth"], kernel=None)
    assert "--kernel NAME puts them into a copy of that Jupyter kernel" in fix.read_text()
    before = w.files()
    run = w.sh(fix, "--apply", "--kernel", "tfk", "--shell")
    assert run.returncode == 0, run.stderr
    assert w.clone.is_dir() and "# tfdoctor" in (w.home / ".bashrc").read_text()
    assert w.sh(fix, "--undo").returncode == 0
    assert w.files() == before


def test_an_unknown_or_broken_kernel_is_refused_in_one_line_and_nothing_changes(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    fix = script(tmp_path, ["memory_growth"])
    before = w.files()
    run = w.sh(fix, "--apply", "--kernel", "nope")
    assert run.returncode == 1 and "no Jupyter kernel named 'nope'" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and w.files() == before
    (w.spec / "kernel.json").write_text('{"argv": ["python", ')  # a half-written kernelspec
    before = w.files()
    run = w.sh(fix, "--apply")
    assert run.returncode == 1 and "is not valid JSON" in run.stderr and "not touched" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and w.files() == before
    (w.spec / "kernel.json").write_text("[" * 100_000)  # nested past the parser's depth
    run = w.sh(fix, "--apply")
    assert (
        run.returncode == 1 and "is not valid JSON" in run.stderr and "Traceback" not in run.stderr
    )
    assert w.sh(fix, "--apply", "--kernel").returncode == 2  # a usage error, not a traceback


def test_undo_after_the_user_edited_the_copy_takes_out_only_its_own_settings(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    fix = script(tmp_path, ["memory_growth"])
    assert w.sh(fix, "--apply").returncode == 0
    spec = json.loads((w.clone / "kernel.json").read_text())
    spec["env"]["MINE"] = "x"
    (w.clone / "kernel.json").write_text(json.dumps(spec))
    run = w.sh(fix, "--undo")
    assert run.returncode == 0 and "changed since" in run.stdout
    kept = json.loads((w.clone / "kernel.json").read_text())
    assert kept["env"] == {"KEEP_ME": "1", "MINE": "x"}


@pytest.mark.slow
@pytest.mark.parametrize("earlier_copy", [False, True], ids=["no copy yet", "an earlier copy"])
def test_a_kill_before_any_write_leaves_a_state_the_next_run_finishes_or_undoes(
    tmp_path: Path, earlier_copy: bool
) -> None:
    w = world(tmp_path)
    if earlier_copy:  # the app (or an older script) made the copy already, with other settings
        w.clone.mkdir()
        (w.clone / "kernel.json").write_text(
            json.dumps({"argv": [sys.executable], "display_name": "mine", "env": {"OLD": "1"}})
        )
        (w.clone / "kernel.json").chmod(0o640)
    fix = script(tmp_path, ["memory_growth", "verbose_tf_logging"])
    before = w.files()
    assert w.sh(fix, "--apply").returncode == 0
    applied = w.files()
    assert w.sh(fix, "--undo").returncode == 0 and w.files() == before

    kills = {"apply": 0, "undo": 0}
    for then in ("--undo", "--apply"):  # after a killed apply: undo it, or apply again
        n = 0
        while True:
            n += 1
            run = w.sh(fix, "--apply", kill_at=n)
            if run.returncode == 0:
                assert w.files() == applied
                assert w.sh(fix, "--undo").returncode == 0 and w.files() == before
                break
            assert run.returncode == 137, (n, run.returncode, run.stderr)
            kills["apply"] = max(kills["apply"], n)
            w.kernelspecs_parse()
            assert w.sh(fix, then).returncode == 0, n
            assert w.files() == (before if then == "--undo" else applied), (then, n)
            if then == "--apply":
                assert w.sh(fix, "--undo").returncode == 0 and w.files() == before, n
    n = 0
    while True:  # an undo killed before each of its writes: undo again finishes it
        n += 1
        assert w.sh(fix, "--apply").returncode == 0 and w.files() == applied
        run = w.sh(fix, "--undo", kill_at=n)
        if run.returncode == 0:
            assert w.files() == before
            break
        assert run.returncode == 137, (n, run.returncode, run.stderr)
        kills["undo"] = n
        w.kernelspecs_parse()
        assert w.sh(fix, "--undo").returncode == 0 and w.files() == before, n
    # it was killed before every write it makes: a copy's folder, its files, the record...
    assert kills["apply"] >= 4 and kills["undo"] >= 2, kills
