"""BFC allocator OOM dump parser: real dumps from public threads and from a real CPU run."""

from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfdoctor.core.diagnose import bfc
from tfdoctor.core.diagnose.bfc import (
    BfcOom,
    BfcParser,
    GpuMemory,
    format_size,
    parse_lines,
    parse_size,
)

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
CPU_FIXTURE = LOGS / "real_cpu_bfc_oom.txt"
MiB = 1 << 20
GiB = 1 << 30


def lines_of(text: str) -> list[str]:
    return text.strip("\n").split("\n")


def line_no_of(lines: list[str], needle: str, nth: int = 0) -> int:
    """1-based number of the nth line containing `needle`."""
    hits = [i for i, line in enumerate(lines, 1) if needle in line]
    return hits[nth]


# --- real excerpts from public threads, verbatim (the thread is named above each) ----------

# https://github.com/knaw-huc/loghi/issues/55 (also tests/fixtures/corpus/dev/008_fragmentation.txt)
# TF 2.x with the XLA/TSL allocator: a failing allocation, then the harmless warning
LOGHI = """\
(1)
9:07:50.044545: W external/local_xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying to allocate 34.10MiB (rounded to 35758080)requested by op StatefulPartitionedCall/model_new14_1/batch_normalization_36_1/moments/SquaredDifference
If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation. 

(2)
2026-08-17 16:23:20.472136: W external/local_xla/xla/tsl/framework/bfc_allocator.cc:310] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.64GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.
"""  # noqa: E501, W291

# https://github.com/tensorflow/tensorflow/issues/11915 (TF 1.2, pinned host allocator; the
# header and "Current allocation summary follows." share one line; old bin format)
HOST_BFC_TF1 = """\
2017-07-31 11:35:13.846775: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1045] Creating TensorFlow device (/gpu:3) -> (device: 3, name: Tesla P100-SXM2-16GB, pci bus id: 0000:85:00.0)
2017-07-31 11:36:02.747322: W tensorflow/core/common_runtime/bfc_allocator.cc:273] Allocator (cuda_host_bfc) ran out of memory trying to allocate 3.72GiB.  Current allocation summary follows.
2017-07-31 11:36:02.747386: I tensorflow/core/common_runtime/bfc_allocator.cc:643] Bin (256): \tTotal Chunks: 0, Chunks in use: 0 0B allocated for chunks. 0B client-requested for chunks. 0B in use in bin. 0B client-requested in use in bin.
2017-07-31 11:36:02.747402: I tensorflow/core/common_runtime/bfc_allocator.cc:643] Bin (512): \tTotal Chunks: 0, Chunks in use: 0 0B allocated for chunks. 0B client-requested for chunks. 0B in use in bin. 0B client-requested in use in bin.
"""  # noqa: E501

# https://github.com/tensorflow/tensorflow/issues/3304 (2016; a paste that starts after the
# header: the in-use summary and the Stats block, which TF prints without a log prefix)
STATS_ONLY_2016 = """\
I tensorflow/core/common_runtime/bfc_allocator.cc:692] 124 Chunks of size 3964928 totalling 468.88MiB
I tensorflow/core/common_runtime/bfc_allocator.cc:692] 1 Chunks of size 4219136 totalling 4.02MiB
I tensorflow/core/common_runtime/bfc_allocator.cc:696] Sum Total of in-use chunks: 479.76MiB
I tensorflow/core/common_runtime/bfc_allocator.cc:698] Stats: 
Limit:                   503270604
InUse:                   503061248
MaxInUse:                503061248
NumAllocs:                20717987
MaxAllocSize:              4219136
"""  # noqa: E501, W291

# https://github.com/mozilla/DeepSpeech/issues/1940 (TF 1.13; bins, then the wanted bin's free
# chunk with its in-use neighbour on the same line)
DEEPSPEECH = """\
2019-03-11 09:52:53.510313: I tensorflow/core/common_runtime/bfc_allocator.cc:597] Bin (134217728): \tTotal Chunks: 2, Chunks in use: 2. 256.00MiB allocated for chunks. 256.00MiB in use in bin. 256.00MiB client-requested in use in bin.
2019-03-11 09:52:53.510320: I tensorflow/core/common_runtime/bfc_allocator.cc:597] Bin (268435456): \tTotal Chunks: 3, Chunks in use: 2. 9.75GiB allocated for chunks. 6.66GiB in use in bin. 6.66GiB client-requested in use in bin.
2019-03-11 09:52:53.510328: I tensorflow/core/common_runtime/bfc_allocator.cc:613] Bin for 3.33GiB was 256.00MiB, Chunk State: 
2019-03-11 09:52:53.510338: I tensorflow/core/common_runtime/bfc_allocator.cc:619]   Size: 3.08GiB | Requested Size: 0B | in_use: 0, prev:   Size: 3.33GiB | Requested Size: 3.33GiB | in_use: 1
2019-03-11 09:52:53.510346: I tensorflow/core/common_runtime/bfc_allocator.cc:632] Chunk at 0x7f90e0000000 of size 256
"""  # noqa: E501, W291

# https://github.com/tensorflow/tensorflow/issues/17092 (TF 1.x; 6.09 GiB free in one chunk,
# 8.49 GiB wanted)
BIG_REQUEST_TF1 = """\
2018-02-17 14:02:53.755606: I tensorflow/core/common_runtime/bfc_allocator.cc:630] Bin (268435456):     Total Chunks: 2, Chunks in use: 1. 14.59GiB allocated for chunks. 8.49GiB in use in bin. 8.49GiB client-requested in use in bin.
2018-02-17 14:02:53.755622: I tensorflow/core/common_runtime/bfc_allocator.cc:646] Bin for 8.49GiB was 256.00MiB, Chunk State: 
2018-02-17 14:02:53.755645: I tensorflow/core/common_runtime/bfc_allocator.cc:652]   Size: 6.09GiB | Requested Size: 781.2KiB | in_use: 0, prev:   Size: 144.96MiB | Requested Size: 144.96MiB | in_use: 1
2018-02-17 14:02:53.755662: I tensorflow/core/common_runtime/bfc_allocator.cc:665] Chunk at 0x10216400000 of size 1280
2018-02-17 14:02:53.755676: I tensorflow/core/common_runtime/bfc_allocator.cc:665] Chunk at 0x10216400500 of size 9120000000
2018-02-17 14:02:53.755688: I tensorflow/core/common_runtime/bfc_allocator.cc:665] Chunk at 0x10435d82d00 of size 48000000
"""  # noqa: E501, W291

# https://github.com/lengstrom/fast-style-transfer/issues/9 (an e-mail style "> " quote whose
# lines the terminal wrapped mid-word)
QUOTED_WRAPPED = """\
> I tensorflow/core/common_runtime/bfc_allocator.cc:643] Bin (268435456):         Total Chunks: 1, Chunks in use: 0 512.00MiB allocated fo
> r chunks. 274.66MiB client-requested for chunks. 0B in use in bin. 0B client-requested in use in bin.
> I tensorflow/core/common_runtime/bfc_allocator.cc:660] Bin for 2.86GiB was 256.00MiB, Chunk State: 
> I tensorflow/core/common_runtime/bfc_allocator.cc:666]   Size: 512.00MiB | Requested Size: 274.66MiB | in_use: 0
> I tensorflow/core/common_runtime/bfc_allocator.cc:678] Chunk at 0x1041ac00000 of size 1280
> I tensorflow/core/common_runtime/bfc_allocator.cc:678] Chunk at 0x1041ac00500 of size 1047296
"""  # noqa: E501, W291

# https://github.com/tensorflow/tensorflow/issues/9790 (terminal-wrapped at 80 columns; the
# paste ends inside the Stats block)
WRAPPED_2017 = """\
2017-05-09 13:13:15.970947: I tensorflow/core/common_runtime/bfc_allocator.cc:696] 4 Chunks of size 48837
4272 totalling 1.82GiB
2017-05-09 13:13:15.970955: I tensorflow/core/common_runtime/bfc_allocator.cc:700] Sum Total of in-use ch
unks: 2.27GiB
2017-05-09 13:13:15.970966: I tensorflow/core/common_runtime/bfc_allocator.cc:702] Stats:
Limit:                 10619240448
InUse:
"""  # noqa: E501

# https://github.com/talmolab/sleap/issues/2142 (TF 2.x inference: cudaMalloc failures, the
# garbage-collection notice and the harmless warning, interleaved; nothing here failed yet)
SLEAP = """\
2025-03-17 17:48:09.854267: I tensorflow/stream_executor/cuda/cuda_driver.cc:739] failed to allocate 2.12G (2282521344 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory
2025-03-17 17:48:09.854399: W tensorflow/core/common_runtime/bfc_allocator.cc:343] Garbage collection: deallocate free memory regions (i.e., allocations) so that we can re-allocate a larger region to avoid OOM due to memory fragmentation. If you see this message frequently, you are running near the threshold of the available device memory and re-allocation may incur great performance overhead. You may try smaller batch sizes to observe the performance impact. Set TF_ENABLE_GPU_GARBAGE_COLLECTION=false if you'd like to disable this feature.
2025-03-17 17:48:09.935580: I tensorflow/stream_executor/cuda/cuda_driver.cc:739] failed to allocate 4.00G (4294967296 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory
2025-03-17 17:48:09.935747: W tensorflow/core/common_runtime/bfc_allocator.cc:275] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.10GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available.
"""  # noqa: E501

# https://github.com/openai/InfoGAN/issues/5 (TF 0.x, 2016: no allocator name in the header;
# the device properties come later in the paste)
INFOGAN_2016 = """\
W tensorflow/core/common_runtime/bfc_allocator.cc:271] Ran out of memory trying to allocate 24.50MiB.  See logs for memory state.
W tensorflow/core/framework/op_kernel.cc:909] Resource exhausted: OOM when allocating tensor with shape[6272,1024]
I tensorflow/core/common_runtime/gpu/gpu_init.cc:102] Found device 0 with properties:
name: GeForce GTX TITAN X
major: 5 minor: 2 memoryClockRate (GHz) 1.076
pciBusID 0000:06:00.0
Total memory: 12.00GiB
Free memory: 496.40MiB
"""  # noqa: E501

# https://github.com/tensorflow/tensorflow/issues/21775 (TF 1.10: the device properties and the
# pool TF created; 966 MB of a 1.96 GiB GPU, as 0.73 GiB were already taken at start)
MX150_PROPS = """\
2018-08-21 23:56:38.344228: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1405] Found device 0 with properties: 
name: GeForce MX150 major: 6 minor: 1 memoryClockRate(GHz): 1.5315
pciBusID: 0000:01:00.0
totalMemory: 1.96GiB freeMemory: 1.23GiB
2018-08-21 23:56:38.344242: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1484] Adding visible gpu devices: 0
2018-08-21 23:56:38.572650: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1097] Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 966 MB memory) -> physical GPU (device: 0, name: GeForce MX150, pci bus id: 0000:01:00.0, compute capability: 6.1)
"""  # noqa: E501, W291

# https://github.com/tensorflow/tensorflow/issues/43546 (TF 2.2 device properties)
MX250_PROPS_TF2 = """\
2020-09-24 21:35:15.668676: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1716] Found device 0 with properties: 
pciBusID: 0000:06:00.0 name: GeForce MX250 computeCapability: 6.1
coreClock: 1.582GHz coreCount: 3 deviceMemorySize: 2.00GiB deviceMemoryBandwidth: 44.76GiB/s
"""  # noqa: E501, W291

REAL_EXCERPTS = [
    LOGHI,
    HOST_BFC_TF1,
    STATS_ONLY_2016,
    DEEPSPEECH,
    BIG_REQUEST_TF1,
    QUOTED_WRAPPED,
    WRAPPED_2017,
    SLEAP,
    INFOGAN_2016,
    MX150_PROPS,
    MX250_PROPS_TF2,
]


# --- sizes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256B", 256),
        ("0B", 0),
        ("1.2KiB", 1229),  # 1228.8 rounds half up
        ("34.10MiB", 35756442),  # 35756441.6
        ("3.72GiB", 3994319585),
        ("512.00MiB", 512 * MiB),
        ("1.5TiB", 1536 * GiB),
        ("10963386778", 10963386778),
        ("13795 MB", 13795 * MiB),  # TF's "MB" is 1 << 20
        ("159.69M", 167447101),  # cuda_driver.cc "failed to allocate 159.69M (167444480 bytes)"
        ("2.00GiB", 2 * GiB),
        ("7 bytes", 7),
        ("", None),
        ("MiB", None),
        ("1.2.3MiB", None),
        ("-5MiB", None),
    ],
)
def test_parse_size_is_exact(text: str, expected: int | None) -> None:
    assert parse_size(text) == expected


def test_format_size() -> None:
    assert format_size(0) == "0 B"
    assert format_size(1023) == "1023 B"
    assert format_size(35758080) == "34.1 MiB"
    assert format_size(10963386778) == "10.2 GiB"


# --- the real CPU dumps recorded on this machine ------------------------------------------


@pytest.fixture(scope="module")
def cpu_lines() -> list[str]:
    return CPU_FIXTURE.read_text(encoding="utf-8").split("\n")


def test_real_cpu_fixture_fragmentation_then_too_big(cpu_lines: list[str]) -> None:
    frag, too_big = parse_lines(cpu_lines)

    # 1) four 96 MiB tensors, two freed, 160 MiB wanted: 226 MiB free, largest piece 128 MiB
    assert frag.allocator == "bfc_cpu_allocator_for_gpu"
    assert frag.device == "CPU"
    assert not frag.benign
    assert frag.op == "Fill"
    assert frag.requested_bytes == frag.rounded_bytes == 160 * MiB
    assert frag.limit_bytes == 512 * MiB
    assert frag.in_use_bytes == 286 * MiB
    assert frag.max_in_use_bytes == 510 * MiB
    assert frag.num_allocs == 9
    assert frag.max_alloc_size_bytes == 158 * MiB
    assert frag.sum_in_use_chunks_bytes == 286 * MiB
    assert frag.pool_bytes == 512 * MiB
    assert frag.free_chunks == 3
    assert frag.total_free_bytes == 100663296 + 134217728 + 2096896  # the three Free chunks
    assert frag.largest_free_block_bytes == 128 * MiB  # TF itself printed LargestFreeBlock: 0B
    assert frag.free_bytes == 512 * MiB - 286 * MiB
    assert frag.unallocated_bytes == 0
    assert frag.fragmentation == pytest.approx(1 - 134217728 / 236977920)
    assert frag.tensor_shape == (41943040,)
    assert frag.dtype == "float"
    assert frag.tensor_bytes == 160 * MiB
    assert frag.verdict() == "fragmentation"
    assert frag.sentence() == (
        "TensorFlow asked for 160.0 MiB for op Fill on CPU (a float tensor of shape "
        "[41943040]); the pool limit is 512.0 MiB, 286.0 MiB was in use, the largest free "
        "block was 128.0 MiB, 226.0 MiB was free in the pool in total."
    )
    header = line_no_of(cpu_lines, "trying to allocate 160.00MiB")
    assert header == frag.lines[0]
    for needle in ("Sum Total", "Total size in pool", "Stats:", "Limit:", "InUse:"):
        assert line_no_of(cpu_lines, needle) in frag.lines
    assert line_no_of(cpu_lines, "OOM when allocating tensor with shape[41943040]") in frag.lines
    assert len(frag.lines) <= bfc.MAX_EVIDENCE_LINES

    # 2) a 1 GiB tensor in the 512 MiB pool
    assert too_big.requested_bytes == GiB
    assert too_big.in_use_bytes == 256
    assert too_big.largest_free_block_bytes == 266338304
    assert too_big.tensor_shape == (256, 1024, 1024)
    assert too_big.verdict() == "workload_too_big"
    # ... unless the caller knows the host has far more memory than the 512 MiB cap
    assert too_big.verdict(gpu_total_bytes=23 * GiB) == "small_pool"
    assert line_no_of(cpu_lines, "trying to allocate 1.00GiB") == too_big.lines[0]


def test_feed_chunk_equals_feeding_lines(cpu_lines: list[str]) -> None:
    text = "\n".join(cpu_lines)
    expected = parse_lines(cpu_lines)
    for size in (1, 7, 40, 10_000):
        parser = BfcParser()
        for start in range(0, len(cpu_lines), size):
            parser.feed_chunk(start + 1, "\n".join(cpu_lines[start : start + size]) + "\n")
        assert parser.results() == expected
    whole = BfcParser()
    whole.feed_chunk(1, text.replace("\n", "\r\n"))
    assert whole.results() == expected


def test_stream_from_the_reader_gives_the_same_result(cpu_lines: list[str]) -> None:
    from tfdoctor.core.diagnose.reader import iter_chunks

    parser = BfcParser()
    for chunk in iter_chunks(CPU_FIXTURE):
        parser.feed_chunk(chunk.first_line, chunk.text)
    assert parser.results() == parse_lines(cpu_lines)


def test_colours_crlf_and_a_dump_squeezed_onto_one_line(cpu_lines: list[str]) -> None:
    expected = parse_lines(cpu_lines)[0]
    coloured = [f"\x1b[33m{line}\x1b[0m\r" for line in cpu_lines]
    assert parse_lines(coloured)[0] == expected
    # a notebook's escaped output, once the reader turned its "\n" into spaces: the Stats
    # block arrives on the "Stats:" line itself
    start = line_no_of(cpu_lines, "Stats:") - 1
    squeezed = [*cpu_lines[:start], " ".join(cpu_lines[start : start + 9])]
    oom = parse_lines(squeezed)[0]
    assert (oom.limit_bytes, oom.in_use_bytes, oom.max_in_use_bytes, oom.num_allocs) == (
        512 * MiB,
        286 * MiB,
        510 * MiB,
        9,
    )
    assert oom.verdict() == "fragmentation"


def _load_maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_cpu_bfc_oom", LOGS / "make_cpu_bfc_oom.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_live_cpu_bfc_oom_is_parsed() -> None:
    """Provoke a real ResourceExhaustedError in TensorFlow's CPU BFC allocator and parse it."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed in this interpreter")
    maker = _load_maker()
    header, log, code = maker.record(sys.executable)
    assert code != 0, log[-2000:]  # the 1 GiB tensor is not caught: the run dies
    ooms = [o for o in parse_lines(log.splitlines()) if not o.benign]
    assert ooms, log[-4000:]
    for oom in ooms:
        assert oom.allocator == "bfc_cpu_allocator_for_gpu"
        assert oom.device == "CPU"
        assert oom.limit_bytes == maker.LIMIT_MB * MiB
        assert oom.in_use_bytes is not None
        assert oom.request_bytes
    last = ooms[-1]
    assert last.tensor_shape == (256, 1024, 1024)
    assert last.requested_bytes == GiB
    assert last.verdict() == "workload_too_big"
    assert "TF " in header


# --- real excerpts from public threads -----------------------------------------------------


def test_loghi_failure_and_harmless_warning() -> None:
    failure, warning = parse_lines(lines_of(LOGHI))
    assert failure.allocator == "GPU_0_bfc"
    assert failure.device == "GPU:0"
    assert failure.requested_bytes == 35756442
    assert failure.rounded_bytes == 35758080
    assert failure.op == (
        "StatefulPartitionedCall/model_new14_1/batch_normalization_36_1/moments/SquaredDifference"
    )
    assert not failure.benign
    assert failure.lines == (2,)
    assert failure.verdict() == "unknown"  # the hint line alone does not prove fragmentation
    assert failure.sentence().startswith("TensorFlow asked for 34.1 MiB for op Stateful")

    assert warning.benign
    assert warning.requested_bytes == parse_size("4.64GiB")
    assert warning.op is None
    assert warning.lines == (6,)
    assert warning.verdict() == "unknown"
    assert "not a failure" in warning.sentence()


def test_tf1_host_allocator_header_with_summary_on_one_line() -> None:
    (oom,) = parse_lines(lines_of(HOST_BFC_TF1))
    assert oom.allocator == "cuda_host_bfc"
    assert oom.device == "CPU"  # pinned host memory, not the GPU
    assert oom.requested_bytes == 3994319585
    assert oom.rounded_bytes is None
    assert oom.op is None
    assert oom.total_free_bytes == 0  # both bins listed were empty
    assert oom.lines == (2,)


def test_paste_that_starts_at_the_stats_block() -> None:
    (oom,) = parse_lines(lines_of(STATS_ONLY_2016))
    assert oom.allocator is None
    assert oom.limit_bytes == 503270604
    assert oom.in_use_bytes == 503061248
    assert oom.max_in_use_bytes == 503061248
    assert oom.num_allocs == 20717987
    assert oom.max_alloc_size_bytes == 4219136
    assert oom.sum_in_use_chunks_bytes == parse_size("479.76MiB")
    assert oom.free_bytes == 503270604 - 503061248
    assert oom.verdict() == "unknown"  # no request size in the paste
    # given the size of the tensor that failed, the numbers speak: the pool is full ...
    assert replace(oom, rounded_bytes=100 * MiB).verdict() == "workload_too_big"
    # ... and a pool under 2 GiB failing a 1 MiB request was capped small to begin with
    assert replace(oom, rounded_bytes=MiB).verdict() == "small_pool"
    assert 3 in oom.lines and 5 in oom.lines and 6 in oom.lines


def test_headless_bins_and_wanted_bin_chunk_state() -> None:
    (oom,) = parse_lines(lines_of(DEEPSPEECH))
    assert oom.rounded_bytes == parse_size("3.33GiB")
    assert oom.largest_free_block_bytes == parse_size("3.08GiB")  # not the in-use "prev"
    # total free: only the bins say it (9.75 - 6.66 GiB), and the one chunk listed is in use
    assert oom.free_chunks == 0
    assert oom.largest_free_block_bytes <= oom.rounded_bytes


def test_big_request_with_one_large_free_chunk() -> None:
    (oom,) = parse_lines(lines_of(BIG_REQUEST_TF1))
    assert oom.rounded_bytes == parse_size("8.49GiB")
    assert oom.largest_free_block_bytes == parse_size("6.09GiB")
    assert oom.sentence().startswith("TensorFlow asked for 8.5 GiB on the device")


def test_quoted_and_wrapped_paste_is_read_where_it_can_be() -> None:
    (oom,) = parse_lines(lines_of(QUOTED_WRAPPED))
    assert oom.rounded_bytes == parse_size("2.86GiB")
    assert oom.largest_free_block_bytes == 512 * MiB


def test_terminal_wrapped_paste_cut_inside_stats() -> None:
    (oom,) = parse_lines(lines_of(WRAPPED_2017))
    assert oom.limit_bytes == 10619240448
    assert oom.in_use_bytes is None  # "InUse:" lost its value to the cut
    assert oom.verdict() == "unknown"


def test_interleaved_cuda_failures_and_harmless_warning_are_not_failures() -> None:
    ooms = parse_lines(lines_of(SLEAP))
    assert len(ooms) == 1
    assert ooms[0].benign
    assert ooms[0].requested_bytes == parse_size("2.10GiB")


def test_tf0_header_without_allocator_name_and_old_device_properties() -> None:
    (oom,) = parse_lines(lines_of(INFOGAN_2016))
    assert oom.allocator is None
    assert oom.requested_bytes == parse_size("24.50MiB")
    assert oom.tensor_shape == (6272, 1024)
    assert oom.dtype is None
    assert oom.lines == (1, 2)
    parser = BfcParser()
    for n, line in enumerate(lines_of(INFOGAN_2016), 1):
        parser.feed(n, line)
    assert parser.gpus() == [GpuMemory(0, 12 * GiB, parse_size("496.40MiB"), None)]


@pytest.mark.parametrize(
    ("text", "total", "free", "created"),
    [
        (MX150_PROPS, "1.96GiB", "1.23GiB", 966 * MiB),
        (MX250_PROPS_TF2, "2.00GiB", None, None),
    ],
)
def test_device_properties_are_remembered(
    text: str, total: str, free: str | None, created: int | None
) -> None:
    parser = BfcParser()
    for n, line in enumerate(lines_of(text), 1):
        parser.feed(n, line)
    assert parser.results() == []  # properties alone are no OOM
    free_bytes = parse_size(free) if free else None
    assert parser.gpus() == [GpuMemory(0, parse_size(total), free_bytes, created)]


def test_device_properties_reach_a_later_dump() -> None:
    # MX150_PROPS is real (tensorflow/tensorflow#21775); the dump after it is assembled from
    # TF 1.x format lines to exercise the join, with numbers of that 966 MB pool
    dump = lines_of(
        """\
2018-08-21 23:57:01.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:275] Allocator (GPU_0_bfc) ran out of memory trying to allocate 64.00MiB.  Current allocation summary follows.
2018-08-21 23:57:01.000001: I tensorflow/core/common_runtime/bfc_allocator.cc:678] Stats: 
Limit:                  1012924416
InUse:                   990000000
"""  # noqa: E501, W291
    )
    (oom,) = parse_lines(lines_of(MX150_PROPS) + dump)
    assert oom.gpu_total_bytes == parse_size("1.96GiB")
    assert oom.gpu_free_at_start_bytes == parse_size("1.23GiB")
    assert oom.device_memory_bytes == 966 * MiB
    # a 966 MiB pool on a 1.96 GiB GPU: the desktop held the rest when TF started, which is
    # what that thread's title says ("Suddenly OOM (GPU has free memory)")
    assert oom.verdict() == "small_pool"
    # on a 1 GiB GPU the same numbers mean the model does not fit
    assert oom.verdict(gpu_total_bytes=GiB) == "workload_too_big"


def test_newest_xla_summary_line() -> None:
    # format of DumpMemoryLog in openxla/xla xla/tsl/framework/bfc_allocator.cc (2026): the
    # "from the lower end" header and the "Allocator memory summary" line; numbers invented
    lines = [
        "W0000 00:00:1795300446.746254   14203 bfc_allocator.cc:520] Allocator (GPU_0_bfc) ran "
        "out of memory trying to allocate 1.00GiB (rounded to 1073741824) from the lower end "
        "requested by op Conv2D",
        "I0000 00:00:1795300446.746300   14203 bfc_allocator.cc:1290] Allocator memory summary: "
        "rounded request 1.00GiB, total free in pool 3.00GiB, largest free chunk usable by lower "
        "end 512.00MiB, unallocated bytes 0B, pool size 10.00GiB, pool limit 10.00GiB",
        "I0000 00:00:1795300446.746301   14203 bfc_allocator.cc:1310] Stats: ",
        "Limit:                     10737418240",
        "InUse:                      7516192768",
        "LargestFreeBlock:            536870912",
    ]
    (oom,) = parse_lines(lines)
    assert oom.op == "Conv2D"
    assert oom.total_free_bytes == 3 * GiB
    assert oom.largest_free_block_bytes == 512 * MiB
    assert oom.pool_bytes == 10 * GiB
    assert oom.verdict() == "fragmentation"
    assert oom.fragmentation == pytest.approx(1 - 512 / 3072)


# --- verdicts ------------------------------------------------------------------------------


def oom_with(**kw: object) -> BfcOom:
    base = BfcOom(
        allocator="GPU_0_bfc", device="GPU:0", requested_bytes=None, rounded_bytes=None,
        op=None, benign=False,
    )  # fmt: skip
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "gpu_total", "expected"),
    [
        # the pool is full: in use >= 90 % of the limit
        (dict(rounded_bytes=100 * MiB, limit_bytes=10 * GiB, in_use_bytes=int(9.8 * GiB)),
         None, "workload_too_big"),
        # one tensor bigger than the whole pool
        (dict(rounded_bytes=12 * GiB, limit_bytes=10 * GiB, in_use_bytes=0), None,
         "workload_too_big"),
        # plenty free in total, no piece big enough
        (dict(rounded_bytes=GiB, limit_bytes=10 * GiB, in_use_bytes=7 * GiB, pool_bytes=10 * GiB,
              total_free_bytes=3 * GiB, largest_free_block_bytes=256 * MiB), None,
         "fragmentation"),
        # a 3 GiB pool on a 16 GiB GPU: others held the rest when TF started
        (dict(rounded_bytes=GiB, limit_bytes=3 * GiB, in_use_bytes=int(2.9 * GiB)), 16 * GiB,
         "small_pool"),
        # allowed to grow by 5 GiB, yet the device refused 1 GiB: someone else holds it
        (dict(rounded_bytes=GiB, limit_bytes=10 * GiB, in_use_bytes=5 * GiB, pool_bytes=5 * GiB),
         None, "small_pool"),
        # a tiny pool failing a small request, GPU size unknown
        (dict(rounded_bytes=20 * MiB, limit_bytes=900 * MiB, in_use_bytes=890 * MiB), None,
         "small_pool"),
        # nothing known but the request
        (dict(rounded_bytes=20 * MiB), None, "unknown"),
        # the harmless warning is never a verdict
        (dict(rounded_bytes=20 * MiB, limit_bytes=GiB, in_use_bytes=GiB, benign=True), None,
         "unknown"),
    ],
)  # fmt: skip
def test_verdicts(kw: dict[str, object], gpu_total: int | None, expected: str) -> None:
    assert oom_with(**kw).verdict(gpu_total_bytes=gpu_total) == expected


def test_fragmentation_estimate_bounds() -> None:
    assert oom_with(total_free_bytes=0, largest_free_block_bytes=0).fragmentation is None
    assert oom_with(total_free_bytes=GiB, largest_free_block_bytes=GiB).fragmentation == 0.0
    assert oom_with(total_free_bytes=GiB, largest_free_block_bytes=None).fragmentation is None
    assert oom_with(total_free_bytes=GiB, largest_free_block_bytes=2 * GiB).fragmentation == 0.0


def test_as_dict_is_plain_data(cpu_lines: list[str]) -> None:
    import json

    data = parse_lines(cpu_lines)[0].as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["verdict"] == "fragmentation"


# --- several OOMs, bounds, robustness ------------------------------------------------------


def test_oom_line_for_another_allocator_is_not_attached() -> None:
    lines = [
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.00GiB "
        "(rounded to 1073741824)",
        "OOM when allocating tensor with shape[8,1024] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc",
    ]
    (oom,) = parse_lines(lines)
    assert oom.tensor_shape is None


def test_many_ooms_stay_bounded_and_keep_the_last(cpu_lines: list[str]) -> None:
    body = cpu_lines[1:]
    parser = BfcParser()
    n = 0
    for _ in range(bfc.MAX_FAILURES // 2 + 10):  # two failures per recorded run
        for line in body:
            n += 1
            parser.feed(n, line)
    warning = lines_of(LOGHI)[-1]
    for _ in range(bfc.MAX_BENIGN + 50):
        n += 1
        parser.feed(n, warning)
    ooms = parser.results()
    failures = [o for o in ooms if not o.benign]
    assert len(failures) == bfc.MAX_FAILURES
    assert sum(o.benign for o in ooms) == bfc.MAX_BENIGN
    assert ooms[-1].lines == (n,)  # the newest warning was kept
    assert failures[-1].verdict() == "workload_too_big"  # the last crash was kept
    assert [o.lines[0] for o in ooms] == sorted(o.lines[0] for o in ooms)


def test_huge_dump_is_aggregated_not_stored() -> None:
    parser = BfcParser()
    parser.feed(1, "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB")
    parser.feed(2, "Next region of size 8589934592")
    for i in range(100_000):
        kind = "Free " if i % 2 else "InUse"
        parser.feed(3 + i, f"{kind} at 7f2a{i:08x} of size {4096 + i} next {i + 1}")
    (oom,) = parser.results()
    assert oom.free_chunks == 50_000
    assert oom.largest_free_block_bytes == 4096 + 99_999
    assert oom.total_free_bytes == sum(4096 + i for i in range(1, 100_000, 2))
    assert oom.lines == (1,)


CPU_TEXT = CPU_FIXTURE.read_text(encoding="utf-8") if CPU_FIXTURE.exists() else ""
REAL_LINES = [line for text in [*REAL_EXCERPTS, CPU_TEXT] for line in text.split("\n")]


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(REAL_LINES),
            st.text(max_size=300),
            st.sampled_from(REAL_LINES).map(lambda s: s[: len(s) // 2]),  # truncated lines
            st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
        ),
        max_size=80,
    )
)
def test_any_text_never_raises(lines: list[str]) -> None:
    errors = _Errors()
    log = logging.getLogger(bfc.__name__)
    log.addHandler(errors)
    old_level = log.level
    log.setLevel(logging.DEBUG)
    try:
        parser = BfcParser()
        for n, line in enumerate(lines, 1):
            parser.feed(n, line)
        ooms = parser.results()
        chunked = BfcParser()
        chunked.feed_chunk(1, "\n".join(line.replace("\n", " ") for line in lines))
        chunked.results()
        for oom in ooms:
            oom.sentence()
            oom.verdict()
            oom.as_dict()
            assert oom.fragmentation is None or 0.0 <= oom.fragmentation <= 1.0
    finally:
        log.removeHandler(errors)
        log.setLevel(old_level)
    # the safety net in feed() never had to catch anything: the parsing itself did not raise
    assert errors.records == []


def test_a_log_of_many_dumps_skims_the_later_ones_but_keeps_their_numbers(
    cpu_lines: list[str],
) -> None:
    """Past FULL_DUMPS failures the bin listing of a dump is skipped (a week of OOMs stays
    fast), but each later dump still gets its header, Stats numbers, shape and verdict."""
    copies = bfc.FULL_DUMPS // 2 + 4  # the fixture holds two failures
    lines = cpu_lines * copies
    per_line = [o for o in parse_lines(lines) if not o.benign]
    chunked = BfcParser()
    chunked.feed_chunk(1, "\n".join(lines) + "\n")
    skimmed = [o for o in chunked.results() if not o.benign]
    assert len(skimmed) == len(per_line) == 2 * copies
    assert skimmed[: bfc.FULL_DUMPS] == per_line[: bfc.FULL_DUMPS]
    for full, skim in zip(per_line, skimmed, strict=True):
        assert skim.lines[0] == full.lines[0]
        assert (skim.requested_bytes, skim.limit_bytes, skim.in_use_bytes) == (
            full.requested_bytes,
            full.limit_bytes,
            full.in_use_bytes,
        )
        assert skim.tensor_shape == full.tensor_shape
        assert skim.verdict() == full.verdict()
    assert per_line[-1].free_chunks is not None
    assert skimmed[-1].free_chunks is None  # its listing was skipped


def test_starts_found_by_the_engine_equal_the_parser_own_search(cpu_lines: list[str]) -> None:
    """The engine hands the parser the trigger lines its own automaton found: the result must
    be what the parser finds searching by itself, dumps skimmed or not."""
    from tfdoctor.core.diagnose.engine import Diagnoser, load_causes, load_signatures
    from tfdoctor.core.diagnose.reader import iter_chunks

    noise = "Epoch 3/30 - loss: 0.25 - memory ok\n1875/1875 [====] - 3s 2ms/step\n"
    text = (noise * 50 + "\n".join(cpu_lines) + "\n") * (bfc.FULL_DUMPS // 2 + 3)
    own = BfcParser()
    own.feed_chunk(1, text)
    engine = Diagnoser(load_signatures(), load_causes())
    for chunk in iter_chunks(text.encode()):
        engine.feed(chunk)
    assert [o for p in engine._bfc.values() for o in p.results()] == own.results()
