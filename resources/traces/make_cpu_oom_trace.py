"""Record the demo trace: a real Keras run on the CPU, OOM-killed by the kernel in a memory cap.

The MLP preset trains for a while; then a callback loads a "validation set" into host RAM in
64 MiB pieces (the bench worker's host_oom fault, as a user's code does with NumPy) until the
kernel's OOM killer kills the worker at the memory cgroup's cap. Sampled at 10 Hz through the
live supervisor and sampler, written by the same TraceWriter the app uses.

Usage (root, or a delegated memory cgroup):
    python resources/traces/make_cpu_oom_trace.py [--out resources/traces/cpu_oom_kill.trace]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

from tfdoctor.core import telemetry
from tfdoctor.core.bench import memcg
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import SupervisorOptions, run_bench
from tfdoctor.core.probes.targetrun import current_target

CAP_MIB = 1400


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("cpu_oom_kill.trace"))
    args = ap.parse_args()
    why = memcg.unavailable()
    if why:
        print(f"make_cpu_oom_trace: {why}", file=sys.stderr)
        return 2
    config = BenchConfig(
        preset="mlp", batch_size=64, steps=400, device="cpu", fault="host_oom", fault_at_step=150
    )
    tmp = args.out.with_suffix(".tmp")
    header = {
        "interval_s": 0.1,
        "recorded": datetime.date.today().isoformat(),
        "note": (
            f"real run on a {os.cpu_count()}-core CPU machine without GPU ({platform.machine()}): "
            f"tfdoctor bench {config.describe()}, worker RAM capped at {CAP_MIB} MiB by a memory "
            "cgroup; from step 150 a callback loads data into RAM until the kernel's OOM "
            "killer kills the worker"
        ),
        "config": config.to_json(),
        "memory_cap_mb": CAP_MIB,  # the header key the bundled trace has
    }
    timeline = telemetry.Timeline(writer=telemetry.TraceWriter(tmp, header))
    options = SupervisorOptions(memory_cap_mib=CAP_MIB, guard_mib=0, sample_every_s=0.1)
    res = run_bench(current_target(), config, options, timeline=timeline)
    timeline.close()
    tmp.replace(args.out)
    print(f"{args.out}: {res.outcome.status} ({res.outcome.detail})")
    return 0 if res.outcome.status == "killed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
