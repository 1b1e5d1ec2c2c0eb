"""Every number in a proposed fix comes from a measurement and says which; contradictory
fixes are never combined; a fix that changes nothing here, or makes the crash come sooner,
is left out with the reason. Real logs users posted (the dev corpus) as the crash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from tests.core.test_flow import report
from tfdoctor.core import fixes
from tfdoctor.core.diagnose.engine import diagnose
from tfdoctor.core.fixes import export
from tfdoctor.core.session import Inputs, LogInput, RunEvidence, analyse

# a 4 GB card's GPU OOM: the allocator's pool limit was 3.6 GiB (TF 1.x dump)
POOL_LOG = CORPUS / "gpu_oom__mozilla-DeepSpeech-606.txt"
XLA_LOG = CORPUS / "xla_ptxas_libdevice__talmolab-sleap-pr-919.txt"


def _log(path: Path) -> LogInput:
    return LogInput(path.name, path.read_bytes())


def test_the_log_states_the_pool_that_ran_out_and_whether_xla_ran() -> None:
    d = diagnose(POOL_LOG.read_bytes())
    pool = d.measure("gpu_pool_bytes")
    assert pool is not None and pool.value == 3894804480 and "3.6 GiB" in pool.says
    assert d.measure("xla_in_use") is None
    xla = diagnose(XLA_LOG.read_bytes()).measure("xla_in_use")
    assert xla is not None and xla.line


def test_a_gpu_oom_log_alone_gets_no_invented_number() -> None:
    a = analyse(Inputs((_log(POOL_LOG),)))
    assert a.ranked[0].cause.id == "gpu_oom"
    assert "memory_limit_mb" not in a.params  # nothing measured a limit
    assert "memory_limit" not in a.fix_ids  # no growth next to a limit, no 4096 out of thin air
    left = dict(a.left_out)
    assert "XLA never ran" in left["xla_toggle"]  # XLA is already off: nothing to turn off
    assert "xla_toggle" not in a.findings[0].fixes  # nor shown under the cause
    assert "batch search" in a.wanting["smaller_batch"]  # offers to measure, names no size
    text = export.proposal_script(
        "py", a.fix_ids, [r.cause.id for r in a.ranked], None, None,
        a.params, a.origins, a.wanting,
    )  # fmt: skip
    assert "memory_limit=" not in text and "set_jit" not in text
    applied = re.search(r"# tfdoctor: fixes (.*) \(run before", text)
    assert applied is not None
    listed = text.split("# this script applies:")[1].split("# not in this script")[0]
    assert sorted(re.findall(r"^#   (\w+):", listed, re.M)) == sorted(applied.group(1).split(", "))
    assert "smaller_batch: Use a smaller batch size — needs a measurement" in text


def test_a_limit_under_the_pool_that_ran_out_is_not_proposed() -> None:
    """The check measured 2.5 GiB free: a limit from it is under the 3.6 GiB pool the log ran
    out in, so it would make the same OOM come sooner."""
    check = report(gpu__count=1, gpu0__memory_total_mib=4096, gpu0__memory_used_mib=1000)
    a = analyse(Inputs((_log(POOL_LOG),), check.facts))
    assert a.params["memory_limit_mb"] == str(4096 - 1000 - 512)
    assert "memory_limit" not in a.fix_ids
    assert "under the 3.6 GiB pool your log ran out in" in dict(a.left_out)["memory_limit"]


def test_the_search_result_sizes_the_batch_and_says_so() -> None:
    run = RunEvidence(recommended_batch=86, largest_clean_batch=96)
    a = analyse(Inputs((_log(POOL_LOG),), run=run))
    assert "smaller_batch" in a.fix_ids and "smaller_batch" not in a.wanting
    assert a.params["batch_size"] == "86"
    assert "96 was the largest batch that trained" in a.origins["batch_size"]


def test_a_measured_limit_replaces_growth_and_names_its_origin() -> None:
    """A contention log with a check that saw the GPU: the limit is measured, so growth (which
    TF ignores under a limit) is not proposed next to it."""
    from tests.core.test_flow import corpus_log

    check = report(gpu__count=1, gpu0__memory_total_mib=24576, gpu0__memory_used_mib=8000)
    a = analyse(Inputs((_log(corpus_log("gpu_memory_contention")),), check.facts))
    assert a.ranked[0].cause.id == "gpu_memory_contention"
    assert "memory_limit" in a.fix_ids and "memory_growth" not in a.fix_ids
    assert a.origins["memory_limit_mb"].startswith("from the check: 16576 MiB free on GPU 0")
    script = export.proposal_script(
        "py", a.fix_ids, ["gpu_memory_contention"], check.facts, None,
        a.params, a.origins, a.wanting,
    )  # fmt: skip
    assert "memory_limit=16064" in script and "set_memory_growth" not in script
    assert "memory_limit_mb=16064 (from the check: 16576 MiB free" in script


def test_contradictory_fixes_are_never_planned_together() -> None:
    with pytest.raises(fixes.FixError, match="ignores memory growth"):
        fixes.plan(["memory_growth", "memory_limit"], {"memory_limit_mb": "6000"})


def test_a_fix_without_its_measured_value_refuses_to_invent_one() -> None:
    with pytest.raises(fixes.FixError, match="memory_limit needs memory_limit_mb"):
        fixes.plan(["memory_limit"])
    with pytest.raises(fixes.FixError, match="pick_gpu needs gpu"):
        fixes.plan(["pick_gpu"])  # never CUDA_VISIBLE_DEVICES="" (which hides every GPU)


def test_after_not_fixed_the_next_fix_and_the_combination_are_offered() -> None:
    """The verification order on the real catalog and benchmark knobs: the next proposed
    fix a run can show, then it together with the one that failed alone; never two fixes
    that contradict each other; and one line on which fix worked."""
    from tfdoctor.core.bench import verify
    from tfdoctor.core.bench.config import BenchConfig
    from tfdoctor.core.probes.targetrun import current_target

    target, config = current_target(), BenchConfig(preset="mlp", device="cpu")

    def can_verify(fids: list[str]) -> bool:
        try:
            verify.fixed_run(target, config, fids, {"memory_limit_mb": "6000"})
        except fixes.FixError:
            return False
        return True

    proposed = ["stop_gpu_process", "mixed_precision", "memory_growth", "memory_limit"]
    tried: dict[tuple[str, ...], bool] = {("mixed_precision",): False}
    assert verify.next_to_try(proposed, tried, can_verify) == [
        ("memory_growth",),  # stop_gpu_process is an action: no run can show it
        ("mixed_precision", "memory_growth"),
    ]
    tried[("memory_growth",)] = False
    steps = verify.next_to_try(proposed, tried, can_verify)
    assert steps[0] == ("memory_limit",)
    assert all(not {"memory_growth", "memory_limit"} <= set(s) for s in steps)  # contradict
    tried[("memory_limit",)] = True
    worked = verify.what_worked(tried)
    assert worked == "memory_limit worked; mixed_precision, memory_growth did not"
    assert verify.next_to_try(proposed, tried, can_verify) == []


def test_xla_is_pointed_at_the_cuda_folder_the_check_found_never_a_guessed_one() -> None:
    """A real ptxas/libdevice log: the folder for --xla_gpu_cuda_data_dir is the one the check
    saw holding ptxas and libdevice (or the nvidia-cuda-nvcc wheel's); with no check, the fix
    asks for that measurement instead of guessing /usr/local/cuda."""
    alone = analyse(Inputs((_log(XLA_LOG),)))
    assert alone.ranked[0].cause.id == "xla_ptxas_libdevice"
    assert "set_xla_cuda_data_dir" in alone.wanting and "cuda_dir" not in alone.params
    assert "ptxas and libdevice" in alone.wanting["set_xla_cuda_data_dir"]
    toolkit = report(
        cuda__ptxas=[{"path": "/usr/local/cuda-11.8/bin/ptxas", "version": "11.8"}],
        cuda__libdevice=["/usr/local/cuda-11.8/nvvm/libdevice/libdevice.10.bc"],
    )
    a = analyse(Inputs((_log(XLA_LOG),), toolkit.facts))
    assert a.params["cuda_dir"] == "/usr/local/cuda-11.8"
    assert a.origins["cuda_dir"] == "from the check: /usr/local/cuda-11.8 holds ptxas and libdevice"
    script = export.proposal_script(
        "sh", a.fix_ids, ["xla_ptxas_libdevice"], toolkit.facts, None,
        a.params, a.origins, a.wanting,
    )  # fmt: skip
    assert "export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda-11.8" in script
    wheel = "/venv/lib/python3.11/site-packages/nvidia/cuda_nvcc"
    pip = report(target__pip_ptxas={"path": f"{wheel}/bin/ptxas", "version": "12.3"})
    assert analyse(Inputs((_log(XLA_LOG),), pip.facts)).params["cuda_dir"] == wheel
