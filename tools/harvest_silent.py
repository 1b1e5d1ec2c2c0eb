"""The harvested lines and reading blocks the engine answers nothing for: where to look for the
message forms and printouts it does not read yet.

tests/fixtures/harvest/ holds lines and blocks of output copied verbatim from public threads
(see its README). Each line is diagnosed alone, each block as a whole; this lists those that
get no cause, by area, with what the thread established where it said. Most are outside the
causes (npm, R packages, TF Lite on Android, Keras file formats, protobuf clashes); the rest
are forms to read. Reads only this repository.

Run: .venv/bin/python tools/harvest_silent.py [--area AREA] [--with-cause] [--blocks]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tfdoctor.core.diagnose.engine import diagnose  # noqa: E402

HARVEST = REPO / "tests" / "fixtures" / "harvest"


def load(name: str) -> list[dict[str, str]]:
    with (HARVEST / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--area",
        help="only this area's lines (tf2 down mem win cont old mem2 host gpu2 hw2 libs2)",
    )
    ap.add_argument("--with-cause", action="store_true", help="only where the thread said why")
    ap.add_argument("--blocks", action="store_true", help="the reading blocks, not the lines")
    args = ap.parse_args(argv)
    rows = load("blocks.jsonl") if args.blocks else load("lines.jsonl")
    silent = total = 0
    for row in rows:
        if args.area and row.get("area") != args.area:
            continue
        if args.with_cause and not row.get("cause"):
            continue
        total += 1
        text = row["block"] if args.blocks else row["line"]
        if diagnose(text.encode()).causes:
            continue
        silent += 1
        head = text.splitlines()[0] if text.strip() else text
        tag = row.get("shape") if args.blocks else row.get("area")
        print(f"[{tag}] {head[:160]}  || {row.get('cause', '')[:70]}  <{row['url']}>")
    print(f"{silent} of {total} silent", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
