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

import logging
import threading

from tfdoctor.core.bench.batchsearch import SearchOptions, find_max_batch
from tfdoctor.core.bench.classify import final_status
from tfdoctor.core.bench.config import BenchConfig, ConfigError
from tfdoctor.core.bench.evidence import OomKillEvidence
from tfdoctor.core.bench.explain import explain, hidden_causes
from tfdoctor.core.bench.metrics import TF_MEMORY_NOT_REPORTED, run_metrics
from tfdoctor.core.bench.outcome import STATUSES, BenchResult, Outcome, RunRecord, Stop
from tfdoctor.core.bench.process import WORKER_SCRIPT, WorkerProcess
from tfdoctor.core.bench.rundir import runs_root
from tfdoctor.core.bench.watch import (
    PHASE_LABELS,
    Supervisor,
    SupervisorOptions,
    default_guard_mib,
    phase_label,
)
from tfdoctor.core.events import Event, EventBuffer
from tfdoctor.core.model import Diagnosis, Target
from tfdoctor.core.probes import targetrun
from tfdoctor.core.telemetry import Timeline

log = logging.getLogger(__name__)

__all__ = [
    "PHASE_LABELS",
    "STATUSES",
    "TF_MEMORY_NOT_REPORTED",
    "WORKER_SCRIPT",
    "BenchResult",
    "BenchRun",
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
    "phase_label",
    "run_bench",
    "runs_root",
]


def run_bench(
    target: Target,
    config: BenchConfig,
    options: SupervisorOptions | None = None,
    *,
    events: EventBuffer[Event] | None = None,
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
    # a run that completed, or that the user stopped, has nothing to explain (start-up
    # notices are not failures, and a stopped run did not fail)
    diagnosis = (
        Diagnosis()
        if outcome.status in ("completed", "cancelled")
        else sup.within_the_cap(explain(outcome, output, rr, hide=hidden_causes(config)))
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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class BenchRun:
    """One benchmark, or with `search` a batch-size search, in a background thread: the way the
    CLI and the GUI both run it. Progress is read from `events` (kinds: see Supervisor) and
    `timeline`; once `done`, the end is `result`, or `error` (one line for people) when it could
    not run. `bug` keeps the exception of an internal error for the caller's log.
    """

    def __init__(
        self,
        target: Target,
        config: BenchConfig,
        options: SupervisorOptions | None = None,
        search: SearchOptions | None = None,
    ) -> None:
        self.target = target
        self.config = config
        self.options = options
        self.search = search
        self.events: EventBuffer[Event] = EventBuffer(50_000)
        self.timeline = Timeline()
        self.result: BenchResult | None = None
        self.error: str | None = None
        self.bug: BaseException | None = None
        self._cancel = threading.Event()
        self._done = threading.Event()

    def start(self) -> BenchRun:
        """Start in the background and return at once."""
        threading.Thread(target=self._run, name="tfdoctor-bench", daemon=True).start()
        return self

    def cancel(self) -> None:
        """Stop the run (the end is still reported: status "cancelled")."""
        self._cancel.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait up to `timeout_s` for the end; True once done."""
        return self._done.wait(timeout_s)

    def _run(self) -> None:
        events, cancel, timeline = self.events, self._cancel, self.timeline
        try:
            if self.search is not None:
                self.result = find_max_batch(
                    self.target, self.config, self.search, self.options,
                    events=events, cancel=cancel, timeline=timeline,
                )  # fmt: skip
            else:
                self.result = run_bench(
                    self.target, self.config, self.options,
                    events=events, cancel=cancel, timeline=timeline,
                )  # fmt: skip
        except (targetrun.TargetError, ConfigError) as exc:
            self.error = _one_line(exc)
        except Exception as exc:  # a bug in tfdoctor: one line here, details in the log
            log.debug("the benchmark failed", exc_info=True)
            self.error = f"internal error: {type(exc).__name__}: {_one_line(exc)}"
            self.bug = exc
        finally:
            self._done.set()
