"""The session's analysis: every source's causes combined, fixes with measured parameters,
evidence in context, computed once per change, without Qt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.core.test_flow import corpus_log, report
from tfdoctor.core import session as session_mod
from tfdoctor.core.diagnose import combine, engine
from tfdoctor.core.model import Cause, Diagnosis, Finding, Severity
from tfdoctor.core.probes.targetrun import current_target
from tfdoctor.core.session import Inputs, RunEvidence, Session, analyse, with_context


def test_causes_from_every_source_are_merged_with_their_sources() -> None:
    s = Session(door="log", target=current_target())
    s.add_log("host.txt", corpus_log("host_oom").read_bytes())
    s.check = report(tf__installed=True)
    s.check.findings.append(
        Finding(
            "log.host_oom",
            Severity.ERROR,
            "The machine ran out of RAM (why the probe failed, 80% sure)",
            "",
            confidence=0.8,
        )
    )
    a = s.analysis()
    assert a is not None
    top = a.ranked[0]
    assert top.cause.id == "host_oom"
    assert top.sources == ("crash log", "environment check")
    alone = Session()
    alone.add_log("host.txt", corpus_log("host_oom").read_bytes())
    solo = analyse(alone.inputs()).ranked[0].cause.confidence
    assert top.cause.confidence > solo  # two independent sources are surer than one
    assert a.fix_ids and a.fix_ids[0] in top.cause.fixes
    json.dumps(s.to_json(), default=str)


def test_a_check_finding_carries_its_confidence_as_data() -> None:
    info = engine.shipped_causes()
    f = Finding("log.host_oom", Severity.ERROR, "no number in this title", "", confidence=0.8)
    c = combine.finding_cause(f, info)
    assert c is not None and c.confidence == 0.8
    back = combine.cause_finding(c, Severity.ERROR, where="in TensorFlow's log", id_prefix="log.")
    assert back.id == "log.host_oom" and back.confidence == 0.8
    assert back.title.endswith("(in TensorFlow's log, 80% sure)")
    assert Finding.from_json(json.loads(json.dumps(back.to_json()))) == back
    assert combine.finding_cause(Finding("tf.no_gpu", Severity.INFO, "x", ""), info) is None


def test_a_big_log_file_is_read_from_disk(tmp_path: Path) -> None:
    big = tmp_path / "server.log"
    big.write_bytes(b"[I 10:00:00 ServerApp] saving\n" * 100_000 + b"Killed\n")
    s = Session(door="log")
    s.add_log(big.name, path=str(big))
    a = s.analysis()
    d = a.log_diagnosis if a is not None else None
    assert d is not None and d.causes[0].id == "host_oom"
    assert d.causes[0].evidence[0].line == 100_001


def test_the_analysis_runs_once_per_change_and_knowledge_is_parsed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine.shipped_causes()  # warm: parsed once per process
    runs: list[int] = []
    parses: list[int] = []
    real_diagnose, real_load = session_mod.diagnose, engine.load_causes

    def counted(*args: Any, **kw: Any) -> Diagnosis:
        runs.append(1)
        return real_diagnose(*args, **kw)

    def counted_load(*args: Any, **kw: Any) -> Any:
        parses.append(1)
        return real_load(*args, **kw)

    monkeypatch.setattr(session_mod, "diagnose", counted)
    monkeypatch.setattr(engine, "load_causes", counted_load)
    s = Session(door="log", target=current_target())
    s.add_log("oom.txt", corpus_log("gpu_oom").read_bytes())
    first = s.analysis()
    assert s.analysis() is first and len(runs) == 1
    s.logs = list(s.logs)  # the same logs in a new list: nothing changed
    assert s.analysis() is first and len(runs) == 1
    s.add_log("host.txt", corpus_log("host_oom").read_bytes())
    assert s.analysis() is not first and len(runs) == 2
    s.check = report(tf__installed=True)
    s.analysis()
    assert len(runs) == 3
    s.forget()  # "Diagnose again": the files may have grown
    s.analysis()
    assert len(runs) == 4 and parses == []


def test_a_background_session_never_reads_logs_on_demand() -> None:
    s = Session(background=True)
    assert s.analysis() is not None  # nothing slow to do: answered at once
    s.add_log("host.txt", corpus_log("host_oom").read_bytes())
    assert s.analysis() is None
    snapshot = s.inputs()
    done = analyse(snapshot)
    s.add_log("more.txt", b"Killed\n")  # changed while the worker ran: its answer is stale
    assert not s.store(done) and s.analysis() is None
    s.store_error(s.inputs(), "Cannot read a log")
    assert s.error() == "Cannot read a log"
    assert s.store(analyse(s.inputs())) and s.error() is None
    a = s.analysis()
    assert a is not None and a.ranked[0].cause.id == "host_oom"


def test_confidence_words() -> None:
    assert [combine.confidence_words(c) for c in (0.95, 0.75, 0.5, 0.2)] == [
        "almost certain",
        "likely",
        "plausible",
        "possible",
    ]


def test_evidence_comes_with_the_lines_around_it() -> None:
    s = Session(door="log")
    lines = [f"step {i}" for i in range(1, 30)]
    lines[19] = "Killed"
    s.add_log("run.txt", ("\n".join(lines) + "\n").encode())
    a = s.analysis()
    assert a is not None
    cause = a.ranked[0].cause
    assert cause.id == "host_oom"
    ev = with_context(s.logs, cause.evidence)
    assert [(e.line, e.source) for e in ev] == [
        (18, "context"),
        (19, "context"),
        (20, "run.txt"),
        (21, "context"),
        (22, "context"),
    ]
    assert ev[0].text == "step 18" and ev[2].text == "Killed"
    card = a.findings[0]  # the cause as the GUI and the CLI show it
    assert card.evidence == ev and card.severity is Severity.ERROR
    assert card.confidence == cause.confidence and "Seen in: crash log." in card.explanation


def test_the_lines_around_the_evidence_read_as_the_engine_read_them() -> None:
    """A container logger's JSON records and a collector's tag are shown as the lines they
    hold, like the evidence line itself; the log's final line break adds no empty line."""
    s = Session(door="log")
    records = [
        "Epoch 1/10",
        "Filling up shuffle buffer (this may take a while): 416 of 2048",
        "Killed",
    ]
    text = "".join(
        json.dumps({"log": t + "\n", "stream": "stderr", "time": "2021-03-04T05:06:07Z"}) + "\n"
        for t in records
    )
    s.add_log("docker.log", text.encode())
    a = s.analysis()
    assert a is not None and a.ranked[0].cause.id == "host_oom"
    ev = with_context(s.logs, a.ranked[0].cause.evidence)
    assert [e.text for e in ev] == records
    assert [e.line for e in ev] == [1, 2, 3]
    # a rich-text page's bullets, one on every line
    s = Session(door="log")
    s.add_log("copied.txt", "".join(f"\u2022 {t}\n" for t in records).encode())
    a = s.analysis()
    assert a is not None and a.ranked[0].cause.id == "host_oom"
    assert [e.text for e in with_context(s.logs, a.ranked[0].cause.evidence)] == records


def test_fix_parameters_come_from_what_was_measured() -> None:
    s = Session(target=current_target())
    s.check = report(
        gpu__count=2,
        gpu0__memory_total_mib=24576,
        gpu0__memory_used_mib=23000,
        gpu1__memory_total_mib=24576,
        gpu1__memory_used_mib=1000,
        tf__is_cuda_build=False,
    )
    a = s.analysis()
    assert a is not None
    params = a.params
    assert params["gpu"] == "1" and params["memory_limit_mb"] == str(24576 - 1000 - 512)
    s.check.findings.append(
        Finding("x", Severity.WARNING, "fragmented", "", fixes=("async_allocator", "add_swap"))
    )
    a = s.analysis()
    assert a is not None and a.fix_ids == ["add_swap"]  # CPU build: no async


def test_a_runs_tf_peak_and_searched_batch_set_the_parameters() -> None:
    check = report(gpu__count=1, gpu0__memory_total_mib=24576, gpu0__memory_used_mib=1000)
    run = RunEvidence(
        (Cause("gpu_oom", 0.9, "t", "e", fixes=("memory_limit",)),),
        tf_peak_gpu_bytes=8 << 30,
        recommended_batch=96,
    )
    a = analyse(Inputs(facts=check.facts, run=run))
    limit = str(int(8 * 1024 * 1.25))  # the peak with 25% headroom, below the free VRAM
    assert a.params == {"gpu": "0", "memory_limit_mb": limit, "batch_size": "96"}
    assert [r.sources for r in a.ranked] == [("reproduced run",)]


def test_the_users_crash_is_ranked_apart_from_tfdoctors_own_runs() -> None:
    """A real GPU OOM log, and a real Keras run the kernel killed in a memory cgroup (as a
    capped run on the Reproduce page ends): the run's host OOM is tfdoctor's experiment, so
    it neither leads nor adds to the crash's answer, and its fixes are not proposed for it."""
    from tests.conftest import FIXTURES
    from tfdoctor.core.diagnose.engine import diagnose

    killed = (FIXTURES / "logs" / "real_host_oom_kill.txt").read_bytes()
    run = RunEvidence(diagnose(killed).causes)
    assert run.causes[0].id == "host_oom" and run.causes[0].confidence >= 0.9
    s = Session(door="log")
    s.add_log("oom.log", corpus_log("gpu_oom").read_bytes())
    a = analyse(Inputs(tuple(s.logs), run=run))
    assert a.has_crash and a.ranked[0].cause.id == "gpu_oom"
    assert all("reproduced run" not in rc.sources for rc in a.ranked)
    assert "host_oom" not in [rc.cause.id for rc in a.ranked]
    assert a.experiments[0].cause.id == "host_oom"
    assert a.experiment_findings[0].id == "cause.host_oom"
    assert a.experiment_findings[0].severity is Severity.WARNING  # never the answer's red
    assert "add_swap" not in a.fix_ids and "raise_memory_limit" not in a.fix_ids
    # without a crash, the run is the answer (the Reproduce door)
    alone = analyse(Inputs(run=run))
    assert not alone.has_crash and alone.ranked[0].cause.id == "host_oom"
    assert alone.experiment_findings == () and "stream_tf_data" in alone.fix_ids
