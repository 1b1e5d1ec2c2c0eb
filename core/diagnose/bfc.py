"""Parse TensorFlow's BFC allocator out-of-memory dumps, streaming, into numbers and a verdict."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from tfdoctor.core.diagnose.reader import MAX_LINE_CHARS

logger = logging.getLogger(__name__)

Verdict = Literal["workload_too_big", "fragmentation", "small_pool", "unknown"]

# --- verdict thresholds (documented in BfcOom.verdict) --------------------------------------
IN_USE_NEAR_LIMIT: Final = 0.90  # in use >= 90 % of the limit: the pool is full
SMALL_POOL_FRACTION: Final = 0.50  # limit < 50 % of the device's memory: the pool was capped
TINY_POOL_BYTES: Final = 2 << 30  # a limit under 2 GiB ...
SMALL_REQUEST_FRACTION: Final = 0.10  # ... failing a request under 10 % of it: a capped pool
# free bytes from the bin lines are sums of rounded human sizes ("1.23GiB"): ask for a margin
APPROX_MARGIN: Final = 1.05

# --- bounds: one parser reads a week-long log; nothing here grows with the log ------------
MAX_FAILURES: Final = 256  # past this, the newest failure replaces the last kept one
FULL_DUMPS: Final = 16  # past this, a dump is skimmed: header, Stats block, OOM line
MAX_BENIGN: Final = 64  # idem for the harmless freed_by_count warnings
MAX_EVIDENCE_LINES: Final = 24
DUMP_IDLE_LINES: Final = 16  # this many lines with nothing of the dump in them close it
SHAPE_WINDOW_LINES: Final = 5000  # the "OOM when allocating tensor" line follows within this
MAX_GPUS: Final = 64

_UNITS: Final[dict[str, int]] = {
    "": 1,
    "K": 1 << 10,
    "M": 1 << 20,
    "G": 1 << 30,
    "T": 1 << 40,
    "P": 1 << 50,
    "E": 1 << 60,
}
_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(?:([KkMGTPE])(i?)B?|(B|bytes?))?\s*")
# a size inside a line: TF prints no space before the unit ("34.10MiB"), and allowing one
# would read "Limit: 123 MaxInUse: ..." (a dump squeezed onto one line) as 123 MiB
_SIZE_TOKEN = r"[0-9]+(?:\.[0-9]+)?(?:[KkMGTPE]i?B?|B)?"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# every line that can start a record has one of these (dump lines are read in full): the
# header and device lines say "memory"/"Memory", bin and summary lines "Chunks", a paste may
# start at "Stats:", "Found device N" numbers the GPU whose memory the next lines give; "OOM"
# matters only while a dump waits for its tensor line. Plain substring tests: several times
# faster than one regex alternation.
# Outside a dump, only lines holding one of these can mean anything to the parser (see
# `_feed`: "hunk" lines only start a headless dump with one of the three "chunks" words).
# "OOM" comes last: it matters only while a failure waits for its "OOM when" line.
# the bin lines of a dump (they hold a trigger word): skipped in a skimmed dump
_LISTING_ONLY = re.compile(rb"Bin \(\d+\):\s*Total Chunks|Bin for .{0,40}was")
_TRIGGERS: Final = (
    "Total Chunks",  # the first LISTING_TRIGGERS words: bin lines
    "Bin for",
    "emory",
    "in-use chunks",
    "Stats:",
    "Found device",
    "OOM",
)
TRIGGER_BYTES: Final = tuple(t.encode() for t in _TRIGGERS)
LISTING_TRIGGERS: Final = 2
_HEADER = re.compile(
    # TF 0.x (2016) said "Ran out of memory trying to allocate 24.50MiB.  See logs for memory
    # state." without naming the allocator
    r"(?:Allocator \((?P<alloc>[^)\s]{1,200})\) )?[Rr]an out of memory trying to allocate\s*"
    rf"(?P<req>{_SIZE_TOKEN})"
    r"(?:\s*\(rounded to (?P<rounded>[0-9]+)\))?"
    r"(?:.*?requested by op\s*(?P<op>[^\s]+))?"
)
_BIN = re.compile(
    r"Bin \((?P<bin>[0-9]+)\):\s*Total Chunks: (?P<total>[0-9]+), Chunks in use: (?P<used>[0-9]+)"
    rf"\.?\s+(?P<alloc>{_SIZE_TOKEN}) allocated for chunks\."
    rf"(?:\s*{_SIZE_TOKEN} client-requested for chunks\.)?"
    rf"\s*(?P<inuse>{_SIZE_TOKEN}) in use in bin"
)
_CHUNK = re.compile(r"\b(InUse|Free|Chunk)\s+at\s+(?:0x)?[0-9a-fA-F]+\s+of size ([0-9]+)")
_REGION = re.compile(r"Next region of size ([0-9]+)")
_CHUNK_STATE = re.compile(rf"Size: ({_SIZE_TOKEN}) \| Requested Size: [^|]*\| in_use: 0\b")
_BIN_FOR = re.compile(rf"Bin for ({_SIZE_TOKEN}) was")
_DUMP_FOR = re.compile(r"BFCAllocator dump for (\S+)")
_SUM_TOTAL = re.compile(rf"Sum Total of in-use chunks:\s*({_SIZE_TOKEN})")
# TF <= 2.20: "total_region_allocated_bytes_: N memory_limit_: N available bytes: N ..."
# TF 2.21:    "Total size in pool: 2.00MiB memory_limit_: 512.00MiB available size: 510.00MiB ..."
_POOL = re.compile(
    rf"(?:total_region_allocated_bytes_|Total size in pool):\s*({_SIZE_TOKEN})"
    rf"\s+memory_limit_:\s*({_SIZE_TOKEN})"
    rf"(?:\s+available (?:bytes|size):\s*({_SIZE_TOKEN}))?"
)
# XLA/TSL (2026): "Allocator memory summary: rounded request X, total free in pool X, largest
# free chunk usable by lower end X, unallocated bytes X, pool size X, pool limit X"
_SUMMARY_FIELDS = re.compile(
    rf"(total free in pool|largest free chunk usable by \w+ end|unallocated bytes|pool size"
    rf"|pool limit) ({_SIZE_TOKEN})"
)
_STAT = re.compile(
    r"(?:^|[\s>|\]])(Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved"
    rf"|LargestFreeBlock|PeakPoolBytes|PoolBytes):\s+({_SIZE_TOKEN})(?=\s|$)"
)
_STAT_KEYS = (
    b"Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved"
    b"|LargestFreeBlock|PeakPoolBytes|PoolBytes"
)
# the lines of a Stats block, read with one regex call per block
_STATS_RUN = re.compile(rb"(?:[^\n]*?(?<![^\s>|\]])(?:" + _STAT_KEYS + rb"):[ \t]+[0-9][^\n]*\n)+")
_OCCUPANCY = re.compile(r"(?:^|\]\s?)\s*[*x_]{20,}\s*$")
_OOM_TENSOR = re.compile(
    r"OOM when allocating tensor (?:with|of) shape\s*\[(?P<shape>[^\]]{0,400})\]"
    r"(?:\s*and type (?P<dtype>\w+))?"
    r"(?:\s*on (?P<where>\S+))?"
    r"(?:\s*by allocator (?P<alloc>\S+))?"
)
_DEVICE_IN_PATH = re.compile(r"device:(CPU|GPU|XLA_GPU|TPU):([0-9]+)")
_FOUND_DEVICE = re.compile(r"Found device ([0-9]+) with properties")
# TF 1.x "totalMemory: 10.92GiB freeMemory: 10.76GiB", TF 2.x "deviceMemorySize: 10.76GiB",
# TF 0.x "Total memory: 12.00GiB" then "Free memory: 496.40MiB" on the next line
_GPU_TOTAL = re.compile(rf"(?:totalMemory|deviceMemorySize|Total memory):\s*({_SIZE_TOKEN})")
_GPU_FREE = re.compile(rf"(?:freeMemory|Free memory):\s*({_SIZE_TOKEN})")
_CREATED = re.compile(r"device:GPU:([0-9]+) with ([0-9]+) MB memory")
_GPU_ALLOCATOR = re.compile(r"(?i)^(?:xla_)?gpu_([0-9]+)_bfc$")
# TF's DataTypeString names, as printed in "OOM when allocating tensor ... and type X"
_DTYPE_BYTES: Final[dict[str, int]] = {
    "float": 4,
    "double": 8,
    "half": 2,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "qint8": 1,
    "quint8": 1,
    "qint16": 2,
    "quint16": 2,
    "qint32": 4,
    "float8_e5m2": 1,
    "float8_e4m3fn": 1,
}


def tensor_nbytes(shape: Iterable[int], dtype: str) -> int | None:
    """Bytes of a tensor of this shape and TF dtype name ("float", "half", ...), as an OOM
    message prints them; None for a dtype this table does not know."""
    size = _DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    for dim in shape:
        size *= dim
    return size


SIZE_DIGITS_MAX = 30  # digits (and a decimal point) of the largest size read


@functools.lru_cache(maxsize=4096)  # dumps repeat the same few sizes thousands of times
def parse_size(text: str) -> int | None:
    """Bytes in a size as TensorFlow prints it, exactly; None when it is not a size.

    Accepts "256B", "1.2KiB", "34.10MiB", "10.92GiB", "1.5TiB", a bare byte count, and the
    TF 1.x spellings "KB"/"MB"/"GB"/"M"/"G". TensorFlow computes all of these with powers of
    1024 (``strings::HumanReadableNumBytes`` and the "N MB memory" lines divide by 1 << 20), so
    every unit is binary here, "MB" included. Decimal digits are kept exactly (no float
    rounding): "34.10MiB" is 35756441.6 bytes, rounded half up to 35756442.
    """
    m = _SIZE_RE.fullmatch(text)
    if m is None:
        return None
    number, prefix, _binary, _byte_word = m.groups()
    if len(number) > SIZE_DIGITS_MAX:
        return None  # no memory has that many bytes: junk, and int() or a float would choke
    mult = _UNITS[(prefix or "").upper()]
    whole, _dot, frac = number.partition(".")
    if not frac:
        return int(whole) * mult
    # exact decimal arithmetic in integers: round(digits * mult / 10**k), half up
    scale: int = 10 ** len(frac)
    return (int(whole + frac) * mult * 2 + scale) // (2 * scale)


def format_size(num_bytes: int) -> str:
    """Plain size for people: "0 B", "256 B", "34.1 MiB", "10.2 GiB"."""
    if num_bytes < 1024:
        return f"{num_bytes} B"
    value = float(num_bytes)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}"
    return f"{num_bytes} B"  # unreachable; keeps mypy's return analysis simple


def _device_for_allocator(name: str) -> str | None:
    m = _GPU_ALLOCATOR.match(name)
    if m:
        return f"GPU:{m.group(1)}"
    low = name.lower()
    # bfc_cpu_allocator_for_gpu, cuda_host_bfc, gpu_host_bfc, mklcpu: host memory
    if "cpu" in low or "host" in low:
        return "CPU"
    return None


def _device_from_path(path: str) -> str | None:
    m = _DEVICE_IN_PATH.search(path)
    if m is None:
        return None
    kind, index = m.group(1), m.group(2)
    return "CPU" if kind == "CPU" else f"{kind.replace('XLA_', '')}:{index}"


def _parse_shape(text: str) -> tuple[int, ...] | None:
    text = text.strip()
    if not text:
        return ()
    dims: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            return None
        dims.append(int(part))
    return tuple(dims)


@dataclass(frozen=True)
class BfcOom:
    """One "Allocator (X) ran out of memory" event, with what its dump said.

    Sizes are bytes; None means the log did not say (a truncated paste, an older TF). The
    derived numbers are properties so they can never disagree with the raw ones.

    Attributes:
        allocator: the allocator's name, e.g. "GPU_0_bfc", "bfc_cpu_allocator_for_gpu"; None
            for a paste that starts after the header and never names it.
        device: "GPU:0", "CPU" (host memory, pinned or not), or None when unknown.
        requested_bytes: what the op asked for (parsed from TF's rounded human size).
        rounded_bytes: the exact size the allocator looked for ("rounded to N"); when TF did
            not print that, the "Bin for X was Y" size (X in TF's 3-digit human form).
        op: the op TF names ("requested by op X"), when printed.
        benign: the "freed_by_count=... The caller indicates that this is not a failure"
            warning: an optional allocation (e.g. a faster convolution workspace) was skipped;
            nothing failed because of it.
        limit_bytes: the pool limit (Stats "Limit", or memory_limit_).
        in_use_bytes: bytes held by live tensors (Stats "InUse").
        max_in_use_bytes: the peak of in_use_bytes (Stats "MaxInUse").
        largest_free_block_bytes: the largest free chunk in the pool, from the chunk listing
            or the stats; None when unknown (older TF always prints "LargestFreeBlock: 0").
        sum_in_use_chunks_bytes: "Sum Total of in-use chunks".
        num_allocs: allocations made so far (Stats "NumAllocs").
        max_alloc_size_bytes: the largest allocation so far (Stats "MaxAllocSize").
        pool_bytes: memory the allocator had obtained from the device (its regions).
        total_free_bytes: free bytes inside the pool (the free chunks), None when unknown.
        free_chunks: how many free chunks the region listing showed, None without a listing.
        tensor_shape: the shape of the tensor that did not fit, from the following
            "OOM when allocating tensor with shape[...]" line.
        dtype: its dtype ("float", "half", ...), from the same line.
        gpu_total_bytes: the GPU's total memory when the same log printed it (TF's
            "totalMemory:" / "deviceMemorySize:" / "Total memory:" device properties).
        gpu_free_at_start_bytes: the GPU's free memory when TF started ("freeMemory:", TF 1.x
            and 0.x only): far below the total means other processes held the GPU.
        device_memory_bytes: what TF took for the device at start ("Created ... device ...
            with N MB memory"): about the pool limit; far below the GPU's size means other
            processes held memory when TF started.
        lines: line numbers of the evidence: the header, the summary and Stats lines, the
            "OOM when allocating" line.
    """

    allocator: str | None
    device: str | None
    requested_bytes: int | None
    rounded_bytes: int | None
    op: str | None
    benign: bool
    limit_bytes: int | None = None
    in_use_bytes: int | None = None
    max_in_use_bytes: int | None = None
    largest_free_block_bytes: int | None = None
    sum_in_use_chunks_bytes: int | None = None
    num_allocs: int | None = None
    max_alloc_size_bytes: int | None = None
    pool_bytes: int | None = None
    total_free_bytes: int | None = None
    free_chunks: int | None = None
    tensor_shape: tuple[int, ...] | None = None
    dtype: str | None = None
    gpu_total_bytes: int | None = None
    gpu_free_at_start_bytes: int | None = None
    device_memory_bytes: int | None = None
    lines: tuple[int, ...] = field(default_factory=tuple)

    @property
    def tensor_bytes(self) -> int | None:
        """Size of the tensor that did not fit, from its shape and dtype, when both are known."""
        if self.tensor_shape is None or self.dtype is None:
            return None
        return tensor_nbytes(self.tensor_shape, self.dtype)

    @property
    def request_bytes(self) -> int | None:
        """The size the allocator had to find: the rounded size, else the asked or tensor size."""
        if self.rounded_bytes is not None:
            return self.rounded_bytes
        if self.requested_bytes is not None:
            return self.requested_bytes
        return self.tensor_bytes

    @property
    def free_bytes(self) -> int | None:
        """Limit minus in use: what the pool could still have handed out, pieces and growth."""
        if self.limit_bytes is None or self.in_use_bytes is None:
            return None
        return max(0, self.limit_bytes - self.in_use_bytes)

    @property
    def unallocated_bytes(self) -> int | None:
        """Limit minus pool: how much more the allocator was allowed to get from the device."""
        if self.limit_bytes is None or self.pool_bytes is None:
            return None
        return max(0, self.limit_bytes - self.pool_bytes)

    @property
    def fragmentation(self) -> float | None:
        """1 - largest free chunk / free bytes in the pool (TF's own definition), 0..1.

        0 means all free memory is one piece; near 1 means it is scattered in small pieces.
        None when either number is unknown or nothing was free.
        """
        free = self.total_free_bytes
        largest = self.largest_free_block_bytes
        if free is None or largest is None or free <= 0:
            return None
        return min(1.0, max(0.0, 1.0 - largest / free))

    def verdict(self, gpu_total_bytes: int | None = None) -> Verdict:
        """Why the allocation failed, as one of four words, checked in this order.

        - "unknown" for the benign freed_by_count warning (check `benign`), or without a
          request size and a limit.
        - "small_pool": the pool itself was too small for the device. Either the limit is
          under SMALL_POOL_FRACTION (50 %) of the device's memory (`gpu_total_bytes`, passed
          by the caller from NVML facts or taken from the log's device properties; for a CPU
          allocator pass the host RAM), or the pool was still allowed to grow by at least the
          request (limit - pool >= request) yet the allocator failed: the device refused more
          memory, i.e. someone else held it. Without the device size, a limit under
          TINY_POOL_BYTES (2 GiB) failing a request under SMALL_REQUEST_FRACTION (10 %) of it
          also counts: small requests fail only in a pool that is tiny to begin with.
        - "fragmentation": the free chunks in the pool add up to at least the request but the
          largest one is smaller (with a 5 % margin when the total comes from rounded bin
          sizes and no largest chunk is known; BFC only fails when no chunk fits).
        - "workload_too_big": the request alone exceeds the limit, or in use is at least
          IN_USE_NEAR_LIMIT (90 %) of the limit, or limit - in use is below the request.
        - "unknown" otherwise.

        Args:
            gpu_total_bytes: total memory of the device behind the allocator, if known.
        """
        req = self.request_bytes
        limit = self.limit_bytes
        if self.benign or req is None or limit is None or limit <= 0:
            return "unknown"
        total = gpu_total_bytes if gpu_total_bytes else self.gpu_total_bytes
        if total and limit < SMALL_POOL_FRACTION * total:
            return "small_pool"
        unallocated = self.unallocated_bytes
        if unallocated is not None and req <= unallocated:
            return "small_pool"
        free_in_pool = self.total_free_bytes
        largest = self.largest_free_block_bytes
        if free_in_pool is not None and free_in_pool > 0:
            if largest is not None:
                if free_in_pool >= req > largest:
                    return "fragmentation"
            elif free_in_pool >= req * APPROX_MARGIN:
                return "fragmentation"
        if not total and limit < TINY_POOL_BYTES and req < SMALL_REQUEST_FRACTION * limit:
            return "small_pool"
        if req > limit:
            return "workload_too_big"
        in_use = self.in_use_bytes
        if in_use is not None and (in_use >= IN_USE_NEAR_LIMIT * limit or limit - in_use < req):
            return "workload_too_big"
        return "unknown"

    def sentence(self) -> str:
        """One plain-language sentence with the numbers that matter."""
        where = self.device or self.allocator or "the device"
        req = self.requested_bytes
        if req is None:
            req = self.request_bytes
        asked = format_size(req) if req is not None else "memory"
        if self.benign:
            return (
                f"TensorFlow tried to get {asked} on {where} for an optional speed-up, did "
                "without it and carried on; this warning is not a failure."
            )
        text = f"TensorFlow asked for {asked}"
        if self.op:
            text += f" for op {self.op}"
        text += f" on {where}"
        if self.tensor_shape is not None:
            shape = ",".join(str(d) for d in self.tensor_shape)
            text += f" (a {self.dtype + ' ' if self.dtype else ''}tensor of shape [{shape}])"
        parts: list[str] = []
        if self.limit_bytes is not None:
            parts.append(f"the pool limit is {format_size(self.limit_bytes)}")
        if self.in_use_bytes is not None:
            parts.append(f"{format_size(self.in_use_bytes)} was in use")
        if self.largest_free_block_bytes is not None:
            parts.append(f"the largest free block was {format_size(self.largest_free_block_bytes)}")
        if self.total_free_bytes is not None and self.total_free_bytes > 0:
            parts.append(f"{format_size(self.total_free_bytes)} was free in the pool in total")
        if parts:
            text += "; " + ", ".join(parts)
        return text + "."

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, derived numbers and the verdict included."""
        data = asdict(self)
        data["lines"] = list(self.lines)
        data["tensor_shape"] = None if self.tensor_shape is None else list(self.tensor_shape)
        data["free_bytes"] = self.free_bytes
        data["unallocated_bytes"] = self.unallocated_bytes
        data["fragmentation"] = self.fragmentation
        data["verdict"] = self.verdict()
        data["sentence"] = self.sentence()
        return data


@dataclass(frozen=True)
class GpuMemory:
    """What TF's start-up lines said about one GPU's memory (None: not in the log).

    Attributes:
        index: the GPU's number ("Found device N", "device:GPU:N").
        total_bytes: "totalMemory:" / "deviceMemorySize:" / "Total memory:".
        free_at_start_bytes: "freeMemory:" / "Free memory:" (TF 1.x and older).
        created_bytes: "Created ... device ... with N MB memory": what TF took for its pool.
    """

    index: int
    total_bytes: int | None
    free_at_start_bytes: int | None
    created_bytes: int | None


class _Record:
    """The mutable aggregate of one dump while it streams past (a few ints, never chunks)."""

    def __init__(self, line_no: int, m: re.Match[str] | None, benign: bool = False) -> None:
        # m is the header's match; None for a paste that starts inside the dump
        self.allocator: str | None = m.group("alloc") if m else None
        self.device = _device_for_allocator(self.allocator) if self.allocator else None
        self.requested = parse_size(m.group("req")) if m else None
        rounded = m.group("rounded") if m else None
        self.rounded = int(rounded) if rounded else None
        op = m.group("op") if m else None
        self.op = op if op and not benign else None
        self.benign = benign
        self.lines: list[int] = [line_no]
        self.last_line = line_no
        self.stats: dict[str, int] = {}
        self.sum_in_use: int | None = None
        self.pool: int | None = None
        self.limit_from_pool: int | None = None
        self.summary: dict[str, int] = {}
        # from the region listing ("InUse at ... of size N", "Free  at ... of size N")
        self.listing = False
        self.free_sum = 0
        self.free_count = 0
        self.free_max = 0
        self.region_sum = 0
        # from "Bin for X was Y, Chunk State:" (free chunks of the wanted bin)
        self.state_free_max: int | None = None
        # from the bin lines: free = allocated - in use, summed (rounded human sizes)
        self.bins_seen = False
        self.bins_free = 0
        # a dump past FULL_DUMPS: its listing is not read (a log of thousands of OOMs)
        self.skimmed = False
        self.shape: tuple[int, ...] | None = None
        self.shape_seen = False
        self.dtype: str | None = None
        self.order = 0

    def add_line(self, line_no: int) -> None:
        if len(self.lines) < MAX_EVIDENCE_LINES and line_no not in self.lines:
            self.lines.append(line_no)

    def build(
        self, gpu_totals: dict[int, int], gpu_free: dict[int, int], created: dict[int, int]
    ) -> BfcOom:
        stats = self.stats
        limit = stats.get("Limit", self.limit_from_pool)
        if limit is None:
            limit = self.summary.get("pool limit")
        in_use = stats.get("InUse")
        pool = self.pool
        if pool is None:
            pool = self.summary.get("pool size")
        if pool is None and self.listing and self.region_sum:
            pool = self.region_sum

        # free bytes in the pool: the newest summary line, else pool - in use (TF's own
        # bytes_available), else the chunk listing, else the rounded bin sizes
        total_free = self.summary.get("total free in pool")
        if total_free is None and pool is not None and in_use is not None:
            total_free = max(0, pool - in_use)
            # the listing is exact to the byte but may be cut short in a paste: take it only
            # when it agrees with the (possibly rounded, "512.00MiB") pool and in-use numbers
            if self.listing and abs(self.free_sum - total_free) <= total_free // 100:
                total_free = self.free_sum
        if total_free is None and self.listing:
            total_free = self.free_sum
        approx_free = total_free is None and self.bins_seen
        if approx_free:
            total_free = self.bins_free

        largest: int | None = None
        candidates = [
            v
            for v in (
                self.summary.get("largest free chunk usable by lower end"),
                self.free_max if self.listing else None,
                self.state_free_max,
                stats.get("LargestFreeBlock") or None,  # 0 is what TF <= 2.21 always prints
            )
            if v is not None
        ]
        if candidates:
            largest = max(candidates)
        elif self.listing or (total_free == 0 and not approx_free):
            largest = 0  # a full listing without free chunks, or nothing free at all
        # otherwise stay None: TF's "LargestFreeBlock: 0" is a placeholder (TF <= 2.21 never
        # fills it in the dump) unless the listing or a zero free total confirms it

        gpu_index = _gpu_index(self.device)
        return BfcOom(
            allocator=self.allocator,
            device=self.device,
            requested_bytes=self.requested,
            rounded_bytes=self.rounded,
            op=self.op,
            benign=self.benign,
            limit_bytes=limit,
            in_use_bytes=in_use,
            max_in_use_bytes=stats.get("MaxInUse"),
            largest_free_block_bytes=largest,
            sum_in_use_chunks_bytes=self.sum_in_use,
            num_allocs=stats.get("NumAllocs"),
            max_alloc_size_bytes=stats.get("MaxAllocSize"),
            pool_bytes=pool,
            total_free_bytes=total_free,
            free_chunks=self.free_count if self.listing else None,
            tensor_shape=self.shape,
            dtype=self.dtype,
            gpu_total_bytes=gpu_totals.get(gpu_index) if gpu_index is not None else None,
            gpu_free_at_start_bytes=gpu_free.get(gpu_index) if gpu_index is not None else None,
            device_memory_bytes=created.get(gpu_index) if gpu_index is not None else None,
            lines=tuple(sorted(self.lines)),
        )


def _gpu_index(device: str | None) -> int | None:
    if device and device.startswith("GPU:"):
        tail = device[4:]
        return int(tail) if tail.isdigit() else None
    return None


class BfcParser:
    """Streaming parser: feed every line of a log once, in order, then ask for `results()`.

    Memory stays bounded whatever the log's size: a dump's thousands of bin and chunk lines
    are folded into a few counters as they pass, at most MAX_FAILURES failures and
    MAX_BENIGN benign warnings are kept (the newest replaces the last kept one, so the final
    crash is never lost), and lines longer than MAX_LINE_CHARS are cut. `feed` never raises.

    Example:
        >>> p = BfcParser()
        >>> for n, line in enumerate(open("train.log"), 1):
        ...     p.feed(n, line)
        >>> [oom.sentence() for oom in p.results()]
    """

    def __init__(self) -> None:
        self._failures: list[_Record] = []
        self._benign: list[_Record] = []
        self._order = 0
        self._current: _Record | None = None  # the dump being read
        self._in_stats = False
        self._idle = 0
        self._awaiting: _Record | None = None  # a failure waiting for its "OOM when" line
        self._gpu_totals: dict[int, int] = {}
        self._gpu_free: dict[int, int] = {}
        self._created: dict[int, int] = {}
        self._found_index: int | None = None
        self._dumps = 0  # failure dumps begun so far
        self._stats_line: int | None = None  # an idle "Stats:" line, a dump if "Limit:" follows

    # -- public ---------------------------------------------------------------------------
    def feed(self, line_no: int, text: str) -> None:
        """Read one line (its number in the input, and its text with or without newline)."""
        try:
            if (
                self._current is None
                and self._stats_line is None
                and "emory" not in text
                and "hunk" not in text
                and "Stats:" not in text
                and "Found device" not in text
                and (self._awaiting is None or "OOM" not in text)
            ):
                return  # the common case: a line with nothing about memory in it
            self._feed(line_no, text)
        except Exception:  # a diagnosis tool must not die of the log it diagnoses
            logger.debug("BFC parser skipped line %s", line_no, exc_info=True)

    @property
    def idle(self) -> bool:
        """Not inside a dump: a chunk without any trigger word can be skipped whole."""
        return self._current is None and self._stats_line is None and self._awaiting is None

    def feed_chunk(
        self,
        first_line: int,
        text: str | bytes,
        starts: Sequence[int] | None = None,
        line_at: Callable[[int], int] | None = None,
        listing: Container[int] = (),
    ) -> None:
        """Read a block of whole lines ("\n"-separated) whose first line is `first_line`.

        Same result as feeding each line, but the stretches between dumps are skipped at C
        speed (byte searches for the trigger words; only lines fed are decoded), which is
        what a multi-GiB log needs. `text` may be UTF-8 bytes (faster) or str. A caller that
        already scanned the bytes passes `starts`, the sorted byte offsets of the lines that
        hold a trigger word (TRIGGER_BYTES), `line_at`, offset to line number
        (`Chunk.line_at`), and `listing`, those of the starts whose only trigger words are
        LISTING_TRIGGERS; nothing is then searched twice.
        """
        try:
            self._feed_chunk(first_line, text, starts, line_at, listing)
        except Exception:
            logger.debug("BFC parser skipped a chunk at line %s", first_line, exc_info=True)

    def _feed_chunk(
        self,
        first_line: int,
        text: str | bytes,
        starts: Sequence[int] | None,
        line_at: Callable[[int], int] | None,
        listing: Container[int],
    ) -> None:
        data = text.encode("utf-8", "replace") if isinstance(text, str) else text
        pos = 0
        line_no = first_line
        end = len(data)
        upcoming = [-1] * len(TRIGGER_BYTES)  # next position of each trigger word (end: none)
        next_start = 0  # index in starts
        n_starts = len(starts) if starts is not None else 0
        while pos < end:
            cur = self._current
            skim = cur is not None and cur.skimmed and not self._in_stats
            if (cur is None and self._stats_line is None) or skim:
                if starts is not None:
                    while next_start < n_starts and (
                        starts[next_start] < pos or (skim and starts[next_start] in listing)
                    ):
                        next_start += 1
                    if next_start == n_starts:
                        return
                    line_start = starts[next_start]
                else:
                    hit = end
                    words = len(TRIGGER_BYTES) - (0 if self._awaiting is not None else 1)
                    for i in range(words):
                        if upcoming[i] < pos:
                            found = data.find(TRIGGER_BYTES[i], pos)
                            upcoming[i] = found if found >= 0 else end
                        hit = min(hit, upcoming[i])
                    if hit >= end:
                        return
                    line_start = data.rfind(b"\n", pos, hit) + 1 or pos
                if line_start > pos:
                    if line_at is not None:
                        line_no = line_at(line_start)
                    else:
                        line_no += data.count(b"\n", pos, line_start)
                    pos = line_start
            if self._in_stats and cur is not None:
                run = _STATS_RUN.match(data, pos)
                if run is not None:
                    taken = self._stats_run(cur, line_no, data[pos : run.end()])
                    if taken:
                        for _ in range(taken):
                            pos = data.find(b"\n", pos) + 1
                        line_no += taken
                        continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                nl = end
            if skim and starts is None and _LISTING_ONLY.search(data, pos, nl):
                pos = nl + 1  # a bin line of a skimmed dump
                line_no += 1
                continue
            line = data[pos : min(nl, pos + MAX_LINE_CHARS)].decode("utf-8", "replace")
            if line.endswith("\r"):
                line = line[:-1]
            self.feed(line_no, line)
            pos = nl + 1
            line_no += 1

    def results(self) -> list[BfcOom]:
        """Every OOM seen so far, in log order; a dump still streaming is included as is."""
        try:
            records = sorted(self._failures + self._benign, key=lambda r: r.order)
            return [r.build(self._gpu_totals, self._gpu_free, self._created) for r in records]
        except Exception:
            logger.debug("BFC parser could not build results", exc_info=True)
            return []

    def gpus(self) -> list[GpuMemory]:
        """The GPU memory facts TF printed at start-up, by GPU index (also without any OOM).

        A pool created far below the GPU's size, or little memory free at start, means other
        processes held the GPU when TF started: evidence of contention on its own.
        """
        indexes = sorted(set(self._gpu_totals) | set(self._gpu_free) | set(self._created))
        return [
            GpuMemory(i, self._gpu_totals.get(i), self._gpu_free.get(i), self._created.get(i))
            for i in indexes
        ]

    # -- internals ------------------------------------------------------------------------
    def _feed(self, line_no: int, text: str) -> None:
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS]
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        cur = self._current
        if cur is not None:
            self._dump_line(cur, line_no, text)
            return
        if self._stats_line is not None and self._headless_stats(line_no, text):
            return
        if "emory" in text or "OOM" in text or "Found device" in text:
            self._idle_line(line_no, text)
        elif "hunk" in text or "Stats:" in text:
            self._headless_start(line_no, text)

    def _headless_start(self, line_no: int, text: str) -> None:
        """A paste that starts inside a dump (no header line): begin a record anyway."""
        if "Stats:" in text:
            self._stats_line = line_no  # a dump only if "Limit:" follows
            return
        dump_for = _DUMP_FOR.search(text) if "BFCAllocator dump for" in text else None
        if not (
            dump_for
            or ("Total Chunks" in text and _BIN.search(text))
            or ("Bin for" in text and _BIN_FOR.search(text))
            or "Sum Total of in-use chunks" in text
        ):
            return
        rec = self._begin_headless(line_no)
        if dump_for:
            rec.allocator = dump_for.group(1)
            rec.device = _device_for_allocator(rec.allocator)
        self._dump_line(rec, line_no, text)

    def _headless_stats(self, line_no: int, text: str) -> bool:
        stats_line = self._stats_line
        if not text.strip() or stats_line is None:
            return False
        self._stats_line = None
        found = _STAT.findall(text)
        if not found or found[0][0] != "Limit" or line_no - stats_line > 2:
            return False
        rec = self._begin_headless(stats_line)
        rec.add_line(stats_line)
        self._in_stats = True
        self._dump_line(rec, line_no, text)
        return True

    def _begin_headless(self, line_no: int) -> _Record:
        rec = _Record(line_no, None)
        self._order += 1
        self._dumps += 1
        rec.skimmed = self._dumps > FULL_DUMPS
        self._keep(self._failures, rec, MAX_FAILURES)
        self._current = rec
        self._awaiting = rec
        self._in_stats = False
        self._idle = 0
        return rec

    def _idle_line(self, line_no: int, text: str) -> None:
        if "an out of memory trying to allocate" in text:
            self._header(line_no, text)
        elif "OOM when allocating" in text:
            self._oom_line(line_no, text)
        elif "Found device" in text:
            m = _FOUND_DEVICE.search(text)
            if m:
                self._found_index = int(m.group(1))
            self._gpu_total(text)
        elif "MB memory" in text:
            m = _CREATED.search(text)
            if m and (int(m.group(1)) in self._created or len(self._created) < MAX_GPUS):
                self._created[int(m.group(1))] = int(m.group(2)) << 20
        elif "emory:" in text or "MemorySize:" in text:
            self._gpu_total(text)

    def _gpu_total(self, text: str) -> None:
        index = self._found_index
        if index is None:
            return
        for regex, known in ((_GPU_TOTAL, self._gpu_totals), (_GPU_FREE, self._gpu_free)):
            m = regex.search(text)
            size = parse_size(m.group(1)) if m else None
            if size is not None and (index in known or len(known) < MAX_GPUS):
                known[index] = size

    def _header(self, line_no: int, text: str) -> None:
        m = _HEADER.search(text)
        if m is None:
            return
        benign = "freed_by_count" in text or "not a failure" in text
        rec = _Record(line_no, m, benign)
        self._order += 1
        self._close_dump()
        if benign:
            self._keep(self._benign, rec, MAX_BENIGN)
            return
        self._dumps += 1
        rec.skimmed = self._dumps > FULL_DUMPS
        self._keep(self._failures, rec, MAX_FAILURES)
        self._current = rec
        self._awaiting = rec
        self._in_stats = False
        self._idle = 0

    def _keep(self, kept: list[_Record], rec: _Record, cap: int) -> None:
        if len(kept) >= cap:
            kept.pop()
        rec.order = self._order
        kept.append(rec)

    def _close_dump(self) -> None:
        self._current = None
        self._in_stats = False
        self._idle = 0

    def _dump_line(self, cur: _Record, line_no: int, text: str) -> None:
        matched = True
        if self._in_stats:
            found = _STAT.findall(text)
            if found:
                self._take_stats(cur, line_no, found)
                cur.last_line = line_no
                return
            self._in_stats = False  # the block ends with a blank or any other line
        if " of size " in text:
            m = _CHUNK.search(text)
            if m is None and "Chunks of size" in text:
                cur.last_line = line_no  # "N Chunks of size S totalling T": the summary
                self._idle = 0
                return
            if m:
                size = int(m.group(2))
                cur.listing = True
                if m.group(1) == "Free":
                    cur.free_sum += size
                    cur.free_count += 1
                    cur.free_max = max(cur.free_max, size)
            else:
                r = _REGION.search(text)
                if r:
                    cur.listing = True
                    cur.region_sum += int(r.group(1))
                else:
                    matched = False
        elif "Bin (" in text:
            b = _BIN.search(text)
            if b:
                alloc = parse_size(b.group("alloc"))
                inuse = parse_size(b.group("inuse"))
                cur.bins_seen = True
                if alloc is not None and inuse is not None and alloc > inuse:
                    cur.bins_free += alloc - inuse
            else:
                matched = False
        elif "Bin for" in text:
            bf = _BIN_FOR.search(text)
            if bf and cur.rounded is None:
                cur.rounded = parse_size(bf.group(1))
            matched = bf is not None
        elif "BFCAllocator dump for" in text:
            df = _DUMP_FOR.search(text)
            if df and cur.allocator is None:
                cur.allocator = df.group(1)
                cur.device = cur.device or _device_for_allocator(cur.allocator)
        elif "in_use: 0" in text:
            s = _CHUNK_STATE.search(text.split("prev:", 1)[0])
            state_size = parse_size(s.group(1)) if s else None
            if state_size is not None:
                cur.state_free_max = max(cur.state_free_max or 0, state_size)
            else:
                matched = False
        elif "Sum Total of in-use chunks" in text:
            m2 = _SUM_TOTAL.search(text)
            if m2:
                cur.sum_in_use = parse_size(m2.group(1))
                cur.add_line(line_no)
        elif "memory_limit_:" in text:
            p = _POOL.search(text)
            if p:
                cur.pool = parse_size(p.group(1))
                cur.limit_from_pool = parse_size(p.group(2))
                cur.add_line(line_no)
        elif "Allocator memory summary" in text:
            for key, value in _SUMMARY_FIELDS.findall(text):
                value_bytes = parse_size(value)
                if value_bytes is not None:
                    key = "largest free chunk usable by lower end" if "usable" in key else key
                    cur.summary[key] = max(value_bytes, cur.summary.get(key, 0))
            cur.add_line(line_no)
        elif "Stats:" in text:
            self._in_stats = True
            cur.add_line(line_no)
            # a dump squeezed onto one line (an escaped notebook output): read it all here
            found = _STAT.findall(text.split("Stats:", 1)[1])
            if found:
                self._take_stats(cur, line_no, found)
        elif "an out of memory trying to allocate" in text:
            self._header(line_no, text)
            return
        elif "OOM when allocating" in text:
            self._oom_line(line_no, text)
            self._close_dump()
            return
        elif _OCCUPANCY.search(text) or "<allocator contains no memory>" in text:
            self._close_dump()  # TF's last dump line: the ASCII picture of the pool
            return
        else:
            matched = "Current allocation summary" in text
        if matched:
            cur.last_line = line_no
            self._idle = 0
            return
        if text.strip():
            self._idle += 1
            if self._idle >= DUMP_IDLE_LINES:
                self._close_dump()
            # other lines keep their meaning while a dump streams (other threads log too)
            if "emory" in text or "Found device" in text:
                self._idle_line(line_no, text)

    def _stats_run(self, cur: _Record, line_no: int, run: bytes) -> int:
        """Lines of a Stats block, as `_dump_line` reads them; how many were taken."""
        taken = 0
        for line in run.decode("utf-8", "replace").split("\n")[:-1]:
            if "\x1b" in line:
                line = _ANSI.sub("", line)
            found = _STAT.findall(line)
            if not found:
                break  # the block ends here: the line is read on its own
            self._take_stats(cur, line_no + taken, found)
            taken += 1
        if taken:
            cur.last_line = line_no + taken - 1
        return taken

    def _take_stats(self, cur: _Record, line_no: int, found: list[tuple[str, str]]) -> None:
        for key, value in found:
            size = parse_size(value)
            if size is not None:
                cur.stats[key] = size
        cur.add_line(line_no)

    def _oom_line(self, line_no: int, text: str) -> None:
        rec = self._awaiting
        if rec is None:
            return
        if rec.shape_seen or line_no - rec.last_line > SHAPE_WINDOW_LINES:
            self._awaiting = None
            return
        m = _OOM_TENSOR.search(text)
        if m is None:
            return
        alloc = m.group("alloc")
        if alloc:
            alloc = alloc.rstrip(".,;'\"")
            if rec.allocator is None:
                rec.allocator = alloc
                rec.device = rec.device or _device_for_allocator(alloc)
            elif alloc != rec.allocator:
                return
        rec.shape_seen = True
        rec.shape = _parse_shape(m.group("shape"))
        rec.dtype = m.group("dtype")
        where = m.group("where")
        if rec.device is None and where:
            rec.device = _device_from_path(where)
        rec.add_line(line_no)
        self._awaiting = None


def parse_lines(lines: Iterable[str], first_line: int = 1) -> list[BfcOom]:
    """Parse a whole log given as lines (numbered from `first_line`); convenient for tests."""
    parser = BfcParser()
    for n, line in enumerate(lines, first_line):
        parser.feed(n, line)
    return parser.results()
