"""The wizard's step decisions and suggested benchmark settings, without Qt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import CORPUS
from tfdoctor.core import flow
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.model import Fact, Facts
from tfdoctor.core.probes.targetrun import current_target
from tfdoctor.core.scan import CheckReport
from tfdoctor.core.session import analyse


def report(**facts: Any) -> CheckReport:
    fs = Facts([Fact(k.replace("__", "."), v, "test") for k, v in facts.items()])
    return CheckReport(target=current_target(), facts=fs, findings=[], probes={})


def corpus_log(cause: str) -> Path:
    for f in sorted(CORPUS.glob("*.txt")):
        head = f.read_text(errors="replace").partition("\n---\n")[0]
        if f"label: {cause}" in head:
            return f
    raise AssertionError(f"no corpus log labelled {cause}")


def test_a_fresh_session_opens_only_start_and_says_why_the_rest_is_closed() -> None:
    s = flow.Session()
    st = flow.step_states(s)
    assert st["start"].enabled
    for step in ("checks", "reproduce", "diagnosis", "fix", "export"):
        assert not st[step].enabled and st[step].reason, step
    assert flow.next_step(s, "start") is None


def test_the_setup_door_walks_every_step_in_order() -> None:
    s = flow.Session(door=flow.DOOR_SETUP, target=current_target())
    assert flow.next_step(s, "start") == "checks"
    assert flow.next_step(s, "checks") == "reproduce"
    s.check = report(tf__installed=True, tf__gpu_count=1)
    assert flow.next_step(s, "reproduce") == "diagnosis"
    assert flow.prev_step(s, "diagnosis") == "reproduce"
    assert flow.prev_step(s, "checks") == "start"


def test_the_log_door_goes_straight_to_the_diagnosis_and_back() -> None:
    s = flow.Session(door=flow.DOOR_LOG, target=current_target())
    s.add_log("oom.txt", corpus_log("gpu_oom").read_bytes())
    st = flow.step_states(s)
    assert st["checks"].skipped and "optional" in st["checks"].reason
    assert st["reproduce"].skipped
    assert flow.next_step(s, "start") == "diagnosis"
    assert flow.prev_step(s, "diagnosis") == "start"
    assert flow.next_step(s, "diagnosis") == "fix"  # the OOM's fixes


def test_reproduce_is_closed_without_tensorflow_and_on_the_cpu_without_a_gpu() -> None:
    s = flow.Session(door=flow.DOOR_SETUP, target=current_target())
    s.check = report(tf__installed=False)
    st = flow.step_states(s)["reproduce"]
    assert not st.enabled and "TensorFlow does not import" in st.reason
    assert flow.next_step(s, "checks") == "diagnosis"  # skipped, with its reason shown
    s.check = report(tf__installed=True, tf__gpu_count=0)
    st = flow.step_states(s)["reproduce"]
    assert st.enabled and "CPU" in st.reason
    cfg, why = flow.suggest_config(s)
    assert cfg.device == "cpu" and any("no GPU" in w for w in why)


def test_suggested_settings_follow_the_users_crash_log() -> None:
    s = flow.Session(door=flow.DOOR_LOG)
    s.add_log(
        "x.txt",
        b"OOM when allocating tensor with shape[256,64,112,112] and type float on GPU:0\n"
        b"[[{{node model/conv2d_3/Conv2D}}]]\n",
    )
    cfg, why = flow.suggest_config(s)
    assert (cfg.preset, cfg.batch_size) == ("cnn", 256)
    assert len(why) == 2
    s2 = flow.Session()
    s2.add_log("t.txt", b"node model/multi_head_attention/softmax ... shape[48,8,512,512]\n")
    assert flow.suggest_config(s2)[0].preset == "transformer"
    assert flow.suggest_config(flow.Session())[0] == BenchConfig()  # nothing known: defaults


def test_a_background_session_closes_the_fix_step_until_the_evidence_is_read() -> None:
    s = flow.Session(door=flow.DOOR_LOG, target=current_target(), background=True)
    s.add_log("oom.txt", corpus_log("gpu_oom").read_bytes())
    st = flow.step_states(s)["fix"]
    assert not st.enabled and "Reading the evidence" in st.reason
    assert flow.next_step(s, "start") == "diagnosis"
    assert s.store(analyse(s.inputs()))
    assert flow.step_states(s)["fix"].enabled
    assert flow.next_step(s, "diagnosis") == "fix"
