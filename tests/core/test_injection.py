"""Hostile HOMEs, kernel names, paths and values through the three script formats and the
fixes: each is run for real with a marker command inside, and the marker file must never
appear. What cannot run here (PowerShell) is checked by its grammar: every value sits inside
one single-quoted literal, so the script's code is the same whatever the values are."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.core import fixes
from tfdoctor.core.fixes import export

MARK = "PWNED"
# each tries to run `touch PWNED` in one of sh, PowerShell or Python, or to break the quoting
HOSTILE = [
    f"$(touch {MARK})",
    f"`touch {MARK}`",
    f"'; touch {MARK}; '",
    f'"; touch {MARK}; "',
    f"x;touch {MARK}",
    f"${{IFS}}touch${{IFS}}{MARK}",
    f"$'\\x27'; touch {MARK}",
    "-rf *",
    "back\\slash\\",
    "$HOME",
    f"\u2019; New-Item {MARK}; \u2019",  # a typographic quote ends a PowerShell literal
    f"$(New-Item {MARK})",
    f"@(New-Item {MARK})",
    f"'''+__import__('os').system('touch {MARK}')+'''",
    f'"""+__import__("os").system("touch {MARK}")+"""',
    f"%(touch {MARK})s {{touch {MARK}}}",
    "TFDOCTOR_ENV_EOF",
    "é ü 中 \u202e",
]
NEWLINE = f"a\ntouch {MARK}\n"
PATH = os.environ["PATH"]
TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))


def no_marker(root: Path) -> None:
    found = [str(p) for p in root.rglob(f"*{MARK}*") if p.name == MARK]
    assert not found, f"injected code ran: {found}"


def sh_run(script: Path, home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(script), *args],
        env={"HOME": str(home), "PATH": PATH},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


def startup_value(home: Path, cwd: Path, shell: str, name: str) -> str:
    """`name` in a new shell that reads the startup file, as a login would."""
    return subprocess.run(
        [shell, "-c", f'. "$HOME/.bashrc" && printf %s "${name}"'],
        env={"HOME": str(home), "PATH": PATH},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_home_is_only_a_name_to_the_exported_script(tmp_path: Path, name: str) -> None:
    if "/" in name:
        pytest.skip("not a folder name")
    home = tmp_path / "homes" / name
    home.mkdir(parents=True)
    (home / ".bashrc").write_bytes(b"export A=1\n")
    script = tmp_path / "fix.sh"
    script.write_text(export.export("sh", ["memory_growth"]))
    for mode in ("dry-run", "--apply", "--apply"):
        run = sh_run(script, home, tmp_path, mode)
        assert run.returncode == 0, run.stderr
    for shell in ("sh", "bash"):
        assert startup_value(home, tmp_path, shell, "TF_FORCE_GPU_ALLOW_GROWTH") == "true"
    assert sh_run(script, home, tmp_path, "--undo").returncode == 0
    assert (home / ".bashrc").read_bytes() == b"export A=1\n"
    no_marker(tmp_path)


def test_a_home_with_a_line_break_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "homes" / NEWLINE
    home.mkdir(parents=True)
    (home / ".bashrc").write_bytes(b"export A=1\n")
    script = tmp_path / "fix.sh"
    script.write_text(export.export("sh", ["memory_growth"]))
    run = sh_run(script, home, tmp_path, "--apply")
    assert run.returncode == 1 and "line break" in run.stderr
    assert (home / ".bashrc").read_bytes() == b"export A=1\n"
    no_marker(tmp_path)


@pytest.mark.parametrize("name", [*HOSTILE, NEWLINE], ids=range(len(HOSTILE) + 1))
def test_a_hostile_python_path_runs_that_python_and_nothing_else(tmp_path: Path, name: str) -> None:
    """The environment fixes' commands name the target's Python: a path that looks like code
    is still one argument."""
    if "/" in name:
        pytest.skip("not a folder name")
    folder = tmp_path / "envs" / name / "bin"
    folder.mkdir(parents=True)
    python = folder / "python"
    args = tmp_path / "args"
    python.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{args}'\n")
    python.chmod(0o755)
    text = export.proposal_script(
        "sh", ["install_tensorflow"], ["tf_not_installed"], None, str(python)
    )
    script = tmp_path / "fix.sh"
    script.write_text(text)
    dry = sh_run(script, tmp_path, tmp_path)
    assert dry.returncode == 0 and "would run" in dry.stdout and not args.exists()
    run = sh_run(script, tmp_path, tmp_path, "--apply")
    assert run.returncode == 0, run.stderr
    assert args.read_text() == "-m\npip\ninstall\ntensorflow[and-cuda]\n"
    no_marker(tmp_path)


_PS_LITERAL = re.compile(
    "['\u2018\u2019\u201a\u201b](?:[^'\u2018\u2019\u201a\u201b]|['\u2018\u2019\u201a\u201b]{2})*['\u2018\u2019\u201a\u201b]"
)


def ps_code(script: str) -> str:
    """The script with its single-quoted literals blanked and its comment lines dropped (the
    header's time stamp among them): what PowerShell runs as code."""
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    return _PS_LITERAL.sub("''", code)


def test_hostile_values_stay_values_in_all_three_formats(tmp_path: Path) -> None:
    values = {f"TFD_H{i}": v for i, v in enumerate([*HOSTILE, NEWLINE])}
    plan = fixes.Plan(("test",), values)
    home = tmp_path / "home"
    home.mkdir()
    # sh: applied, then read by a new shell
    script = tmp_path / "fix.sh"
    script.write_text(export.sh_script(plan))
    assert sh_run(script, home, tmp_path, "--apply").returncode == 0
    dump = subprocess.run(
        ["bash", "-c", '. "$HOME/.bashrc" && env -0'],
        env={"HOME": str(home), "PATH": PATH},
        cwd=tmp_path,
        capture_output=True,
        timeout=30,
    ).stdout.decode()
    got = dict(item.split("=", 1) for item in dump.split("\0") if item.startswith("TFD_H"))
    assert got == values
    # py: run as a script, then the variables it set are printed by the same process
    py = tmp_path / "fix.py"
    py.write_text(
        export.py_script(plan) + "\nimport json\nprint(json.dumps({k: os.environ[k] "
        f"for k in {sorted(values)!r}}}))\n"
    )
    out = subprocess.run(
        [sys.executable, str(py)], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == values
    # ps1: no PowerShell here; its code (literals blanked) is the same as with harmless values
    ps1 = export.ps1_script(plan)
    tame = export.ps1_script(fixes.Plan(("test",), {k: "v" for k in values}))
    assert ps_code(ps1) == ps_code(tame)
    assert "$(" not in ps_code(ps1).replace("'", "")
    no_marker(tmp_path)


def test_the_powershell_grammar_check_catches_an_unquoted_value() -> None:
    """The check above would see a value that escaped its literal."""
    call = "[Environment]::SetEnvironmentVariable('K', {}, 'User')"
    bad = call.format("'x\u2019; New-Item P; \u2019'")  # quoted as if ' were the only quote
    assert ps_code(bad) != ps_code(call.format(export._ps_quote("v")))
    good = call.format(export._ps_quote("x\u2019; New-Item P; \u2019"))
    assert ps_code(good) == ps_code(call.format(export._ps_quote("v")))


def tfdoctor(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TFDOCTOR, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_hostile_kernel_names_and_paths_through_the_fixes(tmp_path: Path) -> None:
    """Kernelspecs with hostile display names, an env file and a conda env at hostile paths:
    applied, listed and undone by the CLI, and nothing runs."""
    data = tmp_path / "jupyter"
    names = [n for n in HOSTILE if "/" not in n]
    for i, display in enumerate(names):
        spec = data / "kernels" / f"k{i}"
        spec.mkdir(parents=True)
        spec.joinpath("kernel.json").write_text(
            json.dumps(
                {"argv": [f"/opt/{display}/python", "-m", "ipykernel"], "display_name": display}
            )
        )
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "JUPYTER_PATH": str(data),
        "JUPYTER_DATA_DIR": str(data),
        "TFDOCTOR_STATE_DIR": str(tmp_path / "state"),
    }
    listed = tfdoctor(env, tmp_path, "envs", "--json")
    assert listed.returncode == 0, listed.stderr
    shown = {t["label"] for t in json.loads(listed.stdout)["targets"]}
    assert {f"Jupyter kernel '{n}' (k{i})" for i, n in enumerate(names)} <= shown
    for i, name in enumerate(names):
        folder = tmp_path / "paths" / name
        (folder / "conda-meta").mkdir(parents=True)
        for target in (
            ["--kernel", f"k{i}"],
            ["--conda", str(folder)],
            ["--env-file", str(folder / "tf.env")],
        ):
            run = tfdoctor(env, tmp_path, "fixes", "apply", "pick_gpu", "--set", "gpu=1", *target)
            assert run.returncode == 0, (name, target, run.stderr)
        clone = json.loads((data / "kernels" / f"k{i}-tfdoctor" / "kernel.json").read_text())
        assert clone["display_name"] == f"{name} (tfdoctor)"
        hook = folder / "etc" / "conda" / "activate.d" / "tfdoctor.sh"
        out = subprocess.run(
            [
                "bash",
                "-c",
                '. "$1" && . "$2" && printf %s "$CUDA_VISIBLE_DEVICES"',
                "-",
                str(hook),
                str(folder / "tf.env"),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.stdout == "1", out.stderr
    for _ in range(3 * len(names)):
        assert tfdoctor(env, tmp_path, "fixes", "undo").returncode == 0
    assert not list((data / "kernels").glob("*-tfdoctor"))
    no_marker(tmp_path)
