"""The wizard's steps, Qt-free: which step is open, which is skipped and why, where Next and
Back go, and which benchmark settings to suggest: pure functions of the Session.

Steps: start -> checks -> reproduce -> diagnosis -> fix -> export. What the session's
evidence means (the ranked causes, the fixes) is `core.session`'s analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.session import Session

STEPS = ("start", "checks", "reproduce", "diagnosis", "fix", "export")
STEP_TITLES = {
    "start": "Start",
    "checks": "Environment checks",
    "reproduce": "Reproduce",
    "diagnosis": "Diagnosis",
    "fix": "Fix",
    "export": "Export",
}
DOOR_SETUP, DOOR_LOG = "setup", "log"


# --------------------------------------------------------------------------- step decisions


@dataclass(frozen=True)
class StepState:
    step: str
    enabled: bool
    reason: str = ""  # why it is closed or skipped; a note when open ("will run on the CPU")
    skipped: bool = False  # open, but Next passes over it on this path


def _fact(session: Session, name: str) -> Any:
    facts = session.facts()
    return facts.value(name) if facts is not None else None


def step_states(session: Session) -> dict[str, StepState]:
    s: dict[str, StepState] = {"start": StepState("start", True)}
    log_door = session.door == DOOR_LOG
    if session.target is None:
        s["checks"] = StepState("checks", False, "Pick the Python your notebook uses first.")
    else:
        s["checks"] = StepState(
            "checks",
            True,
            "You brought a crash log: checking the setup is optional (it sharpens the diagnosis)."
            if log_door
            else "",
            skipped=log_door,
        )
    tf_installed = _fact(session, "tf.installed")
    if session.target is None:
        s["reproduce"] = StepState("reproduce", False, "Pick the Python your notebook uses first.")
    elif tf_installed is False:
        s["reproduce"] = StepState(
            "reproduce",
            False,
            "TensorFlow does not import in this Python, so there is nothing to run: the "
            "environment checks say why.",
        )
    else:
        note = ""
        if _fact(session, "tf.gpu_count") == 0:
            note = "TensorFlow sees no GPU in this Python: the run will use the CPU."
        if log_door:
            note = (note + " " if note else "") + "Optional: reproduce the crash under watch."
        s["reproduce"] = StepState("reproduce", True, note, skipped=log_door)
    has_source = bool(
        session.logs
        or session.check is not None
        or session.bench is not None
        or session.watch is not None
    )
    s["diagnosis"] = StepState(
        "diagnosis",
        has_source,
        ""
        if has_source
        else "Nothing to diagnose yet: give a crash log, run the checks, or reproduce the crash.",
    )
    analysis = session.analysis()
    if analysis is None:  # a background session still reads the evidence
        s["fix"] = StepState(
            "fix", False, session.error() or "Reading the evidence: the fixes follow from it."
        )
    else:
        fixes = analysis.fixes
        s["fix"] = StepState(
            "fix", bool(fixes), "" if fixes else "No fix to propose yet: nothing was found wrong."
        )
    s["export"] = StepState(
        "export",
        has_source,
        ""
        if has_source
        else "Nothing to export yet: give a crash log, run the checks, or reproduce the crash.",
    )
    return s


def next_step(session: Session, current: str) -> str | None:
    """Where Next goes: the next open step that is not skipped on this path."""
    states = step_states(session)
    for step in STEPS[STEPS.index(current) + 1 :]:
        st = states[step]
        if st.enabled and not st.skipped:
            return step
    return None


def prev_step(session: Session, current: str) -> str | None:
    """Where Back goes: the previous open step that is not skipped on this path."""
    states = step_states(session)
    for step in reversed(STEPS[: STEPS.index(current)]):
        st = states[step]
        if st.enabled and not st.skipped:
            return step
    return None


# --------------------------------------------------------------------------- suggestions


def suggest_config(session: Session) -> tuple[BenchConfig, list[str]]:
    """Benchmark settings close to the user's crash, and why each was chosen."""
    reasons: list[str] = []
    preset, batch, device = "cnn", 32, "gpu"
    # what the logs say was read with the analysis, off the GUI thread: none until it is done
    analysis = session.analysis()
    hint = analysis.workload if analysis is not None else None
    if hint is not None:
        preset = hint.preset or preset
        batch = hint.batch or batch
        reasons += hint.reasons
    if _fact(session, "tf.gpu_count") == 0:
        device = "cpu"
        reasons.append("TensorFlow sees no GPU here: the run uses the CPU")
    growth = str((_fact(session, "target.env") or {}).get("TF_FORCE_GPU_ALLOW_GROWTH", ""))
    cfg = BenchConfig(
        preset=preset, batch_size=batch, device=device, memory_growth=growth.lower() == "true"
    )
    if cfg.memory_growth:
        reasons.append("your environment sets TF_FORCE_GPU_ALLOW_GROWTH=true: memory growth")
    return cfg.validate(), reasons
