"""Lines a signature's pattern reads but its anchors never reach: forms the engine misses.

The engine looks at a line only when one of a signature's anchors (exact, case-sensitive
words) is on it, then runs that signature's pattern. A pattern that grew an alternative, or a
case-insensitive part, without an anchor for it reads that form in its own tests but never in
a log (cuInit's CUDA_ERROR_INSUFFICIENT_DRIVER matched driver_insufficient's pattern, yet no
anchor held "INSUFFICIENT_DRIVER"). This runs every pattern over every line of the repo's logs
(the corpus, the fixture logs, the harvested lines) and lists, per signature, the lines its
pattern matches that hold none of its anchors. Reads only this repository.

Some signatures are anchored narrowly on purpose: they are listed in DELIBERATE with why, and
left out unless --all.

Run: .venv/bin/python tools/anchor_gaps.py [--all] [--lines N]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tfdoctor.core.diagnose.reader import iter_chunks  # noqa: E402
from tfdoctor.core.knowledge.signatures import load_signatures  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
MAX_LINE = 3000
DELIBERATE = {
    # readings of a series: anchored on the words of the printouts they were written for, so
    # a stray "Total memory: 4.00GiB" in a device listing is not a memory series
    "sized_line": "series readings, anchored on their printouts' own words",
    "memory_word_line": "series readings, anchored on their printouts' own words",
    "sizes_in_a_line": "series readings, anchored on their printouts' own words",
    "object_count_line": "series readings, anchored on their printouts' own words",
    # TF 2.x's "exceeds 10% of free system memory" is printed by healthy runs (see its comment)
    "exceeds_system_memory": "TF 2.x's free-memory wording is left unread",
    # faceswap's numbered advice ("1) Close any other application that is using your GPU")
    # is advice printed after every OOM, not a user saying another process held the card
    "holder_described": "a tool's advice is not a description of a holder",
    # the anchors want the names as products and tools write them: a host called hai-a100-3
    # or cuda-24-0 is no GPU and no CUDA, and `wsl` typed at a prompt is not WSL's own output
    "gpu_model_named": "host names are not GPUs",
    "cuda_installed_stated": "host names are not CUDA installs",
    "wsl_platform": "a command typed is not the platform's output",
}


def repo_lines() -> list[str]:
    """Every distinct line of the repo's logs, as the reader cleans it."""
    raw_logs: list[bytes] = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix in {".txt", ".log"}:
            raw = path.read_bytes()
            if b"\n---\n" in raw[:6000] and "corpus" in path.parts:
                raw = raw.split(b"\n---\n", 1)[1]  # the provenance header is not log
            raw_logs.append(raw)
        elif path.suffix == ".jsonl" and "harvest" in path.parts:
            for row in path.read_text(encoding="utf-8").splitlines():
                if row.strip():
                    record = json.loads(row)
                    text = record.get("line") or record.get("block") or ""
                    raw_logs.append(str(text).encode("utf-8"))
    lines: set[str] = set()
    for raw in raw_logs:
        for chunk in iter_chunks(raw, "log"):
            for line in chunk.raw.decode("utf-8", "replace").split("\n"):
                if 8 < len(line) < MAX_LINE:
                    lines.add(line)
    return sorted(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="the deliberately narrow ones too")
    ap.add_argument("--lines", type=int, default=3, help="lines shown per signature")
    args = ap.parse_args(argv)
    lines = repo_lines()
    gaps: dict[str, list[str]] = defaultdict(list)
    for sig in load_signatures():
        if not sig.anchors or (sig.id in DELIBERATE and not args.all):
            continue
        for line in lines:
            if sig.pattern.search(line) and not any(a in line for a in sig.anchors):
                gaps[sig.id].append(line)
    print(f"{len(lines)} distinct lines; {len(gaps)} signatures miss some of what they read")
    for sid, missed in sorted(gaps.items(), key=lambda kv: -len(kv[1])):
        why = f"  ({DELIBERATE[sid]})" if sid in DELIBERATE else ""
        print(f"{sid}: {len(missed)}{why}")
        for line in missed[: args.lines]:
            print(f"    {line[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
