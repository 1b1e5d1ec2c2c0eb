"""Reports of a real investigation: they answer what a maintainer asks first, in HTML,
Markdown and JSON alike; redaction (on by default) keeps every planted secret, home folder,
user and host name out of every format, and the switch puts them back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests import investigations as inv
from tfdoctor.core.redact import MASK, Identity, Redactor
from tfdoctor.core.report import content, render
from tfdoctor.core.report.investigation import load
from tfdoctor.core.session import Session


def _reports(path: Path, redact: bool = True) -> dict[str, str]:
    opened = load(path)
    with inv.planted_environment():  # the secrets are in this process's environment too
        rep = content.build(
            opened.session,
            opened.session.analysis(),
            redact=redact,
            identity=opened.identity,
            source=path.name,
        )
    return {fmt: render.render(rep, fmt) for fmt in render.FORMATS}


@pytest.mark.slow
def test_no_planted_secret_or_identity_reaches_any_format(
    real_investigation: tuple[Any, Path],
) -> None:
    _, path = real_investigation
    for fmt, text in _reports(path).items():
        for planted in inv.PLANTED:
            assert planted.lower() not in text.lower(), (fmt, planted)
        assert "~/proj" in text or fmt == "json" or "~" in text  # the home became ~


@pytest.mark.slow
def test_the_switch_includes_them(real_investigation: tuple[Any, Path]) -> None:
    """--no-redact: the identities come back (the file itself never held the secrets)."""
    _, path = real_investigation
    text = _reports(path, redact=False)["md"]
    assert inv.HOME in text and inv.HOST in text and "Not redacted" in text


@pytest.mark.slow
def test_a_report_answers_what_a_maintainer_asks_first(
    real_investigation: tuple[Any, Path],
) -> None:
    _, path = real_investigation
    reports = _reports(path)
    data = json.loads(reports["json"])
    env = {row["label"]: row["value"] for row in data["environment"]}
    for label in ("Platform", "Python", "TensorFlow", "NVIDIA driver", "Memory"):
        assert label in env, label
    assert env["TensorFlow"].startswith("2.") and "cannot" not in env["TensorFlow"]
    assert data["error"]["from"] == "your log" and any(
        "Killed" in line["text"] for line in data["error"]["lines"]
    )
    assert data["causes"][0]["id"] == "host_oom" and data["causes"][0]["evidence"]
    # tfdoctor's own capped run is apart from the user's crash
    assert data["experiments"] and "cap you set" in data["experiments"][0]["title"]
    assert data["experiments"][0]["seen_in"] == ["reproduced run"]
    tried = data["tried"]
    assert tried["actions"][0]["action"] == "applied"
    assert tried["verifications"][0]["fixed"] is True
    assert {r["measure"] for r in tried["verifications"][0]["table"]} >= {"outcome"}
    script = data["fix_script"]  # host_oom's fixes are code changes: the report says so
    assert script["text"] is None and "setting a script can apply" in script["why_not"]
    assert [p["id"] for p in data["plots"]] == ["run", "verify-0"]
    html_text = reports["html"]
    assert html_text.count('src="data:image/svg+xml;base64,') == 2
    # self-contained: nothing is fetched (the log's URLs are text, not links)
    assert not re.search(r'(?:src|href)="(?!data:)', html_text) and "<script" not in html_text
    assert "No fix script: none of the proposed fixes" in html_text
    md = reports["md"]
    assert md.count("<details>") == md.count("</details>") > 2
    assert "| **TensorFlow** |" in md


def test_markdown_fences_survive_backticks_in_logs() -> None:
    s = Session(door="log")
    s.add_log("pasted text", b"```\nKilled\n````\n")
    rep = content.build(s, s.analysis())
    md = render.to_markdown(rep)
    fences = re.findall(r"^(`{3,})", md, flags=re.M)
    assert "`````text" in md and len(fences) % 2 == 0


def test_html_escapes_what_logs_say() -> None:
    s = Session(door="log")
    s.add_log("pasted text", b"<script>alert(1)</script>\nKilled\n")
    html_text = render.to_html(content.build(s, s.analysis()))
    assert "<script>" not in html_text and "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text


def test_an_empty_investigation_reports_without_inventing() -> None:
    s = Session()
    data = content.build(s, s.analysis()).data
    assert data["causes"] == [] and data["error"]["lines"] == []
    assert data["summary"]["headline"] == "Nothing failed: no cause to name"
    assert data["fix_script"]["text"] is None


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("/home/alice/x.py and /home/alicex/y", ["~/x.py", "/home/alicex/y"], []),
        ("cgroup /sys/fs/cgroup/home/alice", ["/sys/fs/cgroup/home/"], []),
        ("alice@gpu-box-17:~$ ls", ["<user>@<host>"], ["alice", "gpu-box"]),
        ("user malice-bot ran it", ["malice-bot"], []),
        ("token embeddings shape [512]", ["token embeddings"], []),
        ("--token abcdef12345 --api-key=xyzxyz99", ["--token ***", "--api-key=***"], []),
        ('{"password": "hunter2hunter"}', ['"password": "***"'], ["hunter2"]),
        ("push hf_AbCdEfGhIjKlMnOpQrStUv12", ["push ***"], ["hf_"]),
    ],
)
def test_redactor(text: str, kept: list[str], gone: list[str]) -> None:
    r = Redactor(Identity(homes=("/home/alice",), users=("alice",), hosts=("gpu-box-17",)))
    out = r.text(text)
    for k in kept:
        assert k in out, out
    for g in gone:
        assert g not in out, out


def test_generic_accounts_keep_their_word_but_not_their_home() -> None:
    r = Redactor(Identity(homes=("/root",), users=("root",), hosts=("localhost",)))
    out = r.text("ran as root in /root/proj on localhost")
    assert out == "ran as root in ~/proj on localhost"
    assert r.summary() == ["home folder → ~ (1×)"]


def test_secret_values_are_masked_wherever_they_appear() -> None:
    r = Redactor(Identity(secrets=("s3cr3t-value-42",)))
    data = r.data({"cmd": "run --x s3cr3t-value-42", "env": {"HF_TOKEN": "other"}})
    assert data == {"cmd": f"run --x {MASK}", "env": {"HF_TOKEN": MASK}}


def test_without_a_check_the_report_says_what_the_log_states_about_the_machine() -> None:
    """A log-only investigation (the most common): the driver and the GPU's compute
    capability the log itself states, each with the line that says it."""
    from tests.conftest import CORPUS

    text = (CORPUS / "unsupported_gpu_arch__tensorflow-41976.txt").read_text()
    s = Session(door="log")
    s.add_log("pasted text", text.partition("\n---\n")[2].encode())
    rows = {r["label"]: r["value"] for r in content.build(s, s.analysis()).data["environment"]}
    assert rows["NVIDIA driver (your log says)"].startswith("450.57 — “NVIDIA-SMI 450.57")
    assert "Environment check" in rows


def test_a_run_that_failed_in_the_program_says_so_with_its_line() -> None:
    """A real run here that ended in Keras's ValueError after the no-driver notices: the
    report's headline and exact error name the program's error, not "no known cause"."""
    from tests.conftest import FIXTURES

    s = Session(door="log")
    s.add_log("run.log", (FIXTURES / "logs" / "real_user_error_tf221.txt").read_bytes())
    rep = content.build(s, s.analysis())
    data = rep.data
    assert data["summary"]["headline"].startswith("The run ended in a Python error")
    md = render.render(rep, "md")  # the headline is its own paragraph, not run into the next
    assert "not of the GPU set-up.\n\n**What was tried**" in md
    error = data["error"]
    assert error["lines"][0]["text"].startswith("ValueError: Exception encountered")
    assert "not of the GPU set-up" in error["note"]


def test_a_look_alike_is_marked_in_the_report_and_left_off_the_fix_scripts_causes() -> None:
    """A lone library not found: another CUDA version first, absent libraries next, then the
    old driver as a look-alike: marked as one, its lines not quoted again, and the fix
    script's header names only the causes the log showed."""
    s = Session(door="log")
    s.add_log(
        "pasted text",
        b"W dso_loader.cc:64] Could not load dynamic library 'libcudart.so.10.1'; dlerror: "
        b"libcudart.so.10.1: cannot open shared object file: No such file or directory\n",
    )
    rep = content.build(s, s.analysis())
    causes = rep.data["causes"]
    alike = [c for c in causes if c["look_alike"]]
    assert alike and all(c["title"].startswith("Look-alike: ") for c in alike)
    assert all(c["evidence"] == [] for c in alike) and causes[0]["evidence"]
    md = render.render(rep, "md")
    header = next(line for line in md.splitlines() if line.startswith("# causes: "))
    assert alike[0]["id"] not in header and causes[0]["id"] in header
