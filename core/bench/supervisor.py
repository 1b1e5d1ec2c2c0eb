"""Run the training benchmark in a supervised worker; survive and explain whatever kills it.

The worker (`core/probes/target/bench_worker.py`) runs in the target interpreter, in its own
process group, optionally in a memory cgroup. It speaks JSON lines on a dedicated pipe; its
stdout and stderr (TensorFlow's log, tracebacks) are kept as evidence: the last lines in
memory, the first STDERR_FILE_CAP bytes in the run folder. faulthandler writes native crash
stacks to a file there too.

The supervisor never hangs and never leaves a process behind: a watchdog turns "no progress"
into a stack dump then SIGTERM then SIGKILL of the whole group, a memory guard stops the
worker before the desktop runs out of RAM, and at the end the group is killed whatever
happened. Every end is classified (see STATUSES) and goes through the diagnosis engine with
the exit status and the kernel's OOM records as evidence.

The work is split by job, in the order the data flows: `config` (what runs), `process` (the
worker process and its pipes; `procgroup`, `memcg`, `rundir`), `watch` (the watch loop and its
events), `classify`, `evidence`, `explain` and `metrics` (the outcome, in `outcome`). This
module is the entry point: `run_bench`, and the names callers use.
"""

from __future__ import annotations

import threading
from typing import Any

from tfdoctor.core.bench.classify import final_status
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.evidence import OomKillEvidence
from tfdoctor.core.bench.explain import explain, hidden_causes
from tfdoctor.core.bench.metrics import TF_MEMORY_NOT_REPORTED, run_metrics
from tfdoctor.core.bench.outcome import STATUSES, BenchResult, Outcome, RunRecord, Stop
from tfdoctor.core.bench.process import WORKER_SCRIPT, WorkerProcess
from tfdoctor.core.bench.rundir import runs_root
from tfdoctor.core.bench.watch import Supervisor, SupervisorOptions, default_guard_mib
from tfdoctor.core.events import EventBuffer
from tfdoctor.core.model import Diagnosis, Target
from tfdoctor.core.probes import targetrun
from tfdoctor.core.telemetry import Timeline

__all__ = [
    "STATUSES",
    "TF_MEMORY_NOT_REPORTED",
    "WORKER_SCRIPT",
    "BenchResult",
    "OomKillEvidence",
    "Outcome",
    "RunRecord",
    "Stop",
    "Supervisor",
    "SupervisorOptions",
    "WorkerProcess",
    "default_guard_mib",
    "explain",
    "hidden_causes",
    "run_bench",
    "runs_root",
]


def run_bench(
    target: Target,
    config: BenchConfig,
    options: SupervisorOptions | None = None,
    *,
    events: EventBuffer[tuple[str, Any]] | None = None,
    cancel: threading.Event | None = None,
    timeline: Timeline | None = None,
) -> BenchResult:
    """One supervised benchmark run, start to end. Never raises for what the worker does.

    Raises:
        targetrun.TargetError: the interpreter is not a usable Python.
        ConfigError: a bad config value.
    """
    targetrun.python_version(target.python)
    sup = Supervisor(target, config, options, events=events, cancel=cancel, timeline=timeline)
    sup.emit("status", f"starting {config.describe()}")
    try:
        rr = sup.run(config)
        outcome = sup.end_worker()
    finally:
        sup.close()
    assert outcome is not None
    outcome = final_status(outcome, rr)
    result = _result(sup, config, outcome, rr)
    sup.emit("done", result)
    return result


def _result(sup: Supervisor, config: BenchConfig, outcome: Outcome, rr: RunRecord) -> BenchResult:
    output = list(sup.last_output)
    # a run that completed has nothing to explain (start-up notices are not failures)
    diagnosis = (
        Diagnosis()
        if outcome.status == "completed"
        else explain(outcome, output, rr, hide=hidden_causes(config))
    )
    return BenchResult(
        config=config,
        outcome=outcome,
        metrics=run_metrics(rr, sup.peaks),
        diagnosis=diagnosis,
        run_dir=sup.run_dir,
        output_tail=output[-200:],
        info=sup.info,
        knobs=sup.knobs,
    )
