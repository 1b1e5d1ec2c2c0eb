"""Benchmark: every signature's regexes on long hostile lines, and how their time grows with
the line's length (a pattern that backtracks quadratically stalls the diagnosis for seconds on
one long line of junk, and for minutes on a file of them).

Each signature's pattern (and its parts) is searched in lines that hold one of its anchors in
a long run of one filler ("aaaa", "1111", "a a ", "a/a/", "1,1,", ...), the anchor at the
start, the middle and the end, in its own examples with the run put between their words, and
in the first words of its examples (cut after each word and sign) followed by the run and
nothing the pattern wants (where a pattern's runs of optional parts all try to take the run
before it fails), once at SHORT characters and, where the short line is not searched in a
blink, once at LONG (4x). A pattern whose
time grows linearly takes about 4x as long on the long line; one that backtracks
quadratically about 16x. Growth is measured side by side in one run and judged only where the
long line takes more than FLOOR_MS (shorter times are noise). Then the same end to end: a
paste of one such line per signature, for each filler, through the whole diagnosis (the
reader's repairs and prefixes, every rule), and one such line pasted alone (the rules only a
short paste gets). Target: the worst growth <= 8.
Usage: python tests/perf/bench_patterns.py [--short 4000] [--only SIGNATURE_ID]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tfdoctor.core.diagnose.engine import diagnose  # noqa: E402
from tfdoctor.core.diagnose.reader import clean_line  # noqa: E402
from tfdoctor.core.knowledge.signatures import signatures  # noqa: E402

FILLERS = ("a", "1", " ", "a ", "1 ", "a/", "a.", "1.", "1,", "x:", "=", "-", "\t", '"', "*", "_")
ANCHORS_TRIED = 3  # per signature: the first few (most anchor lists are variants of one text)
EXAMPLES_TRIED = 2  # and lines it matches, the run put inside them
GROWTH_TARGET = 8.0  # linear is 4 (the long line is 4x the short)
FLOOR_MS = 5.0  # shorter times are too noisy to compare (a quadratic pattern takes seconds)
# a short line searched faster than this cannot reach FLOOR_MS on the long one even growing
# cubically (64x): the long line is not searched
SKIP_MS = FLOOR_MS / 64
_TOKEN = re.compile(r"\w+|\W")
# what stands around a hostile run pasted alone as one line: a word, a figure a column of
# readings would end with, the start of a message a cut line is read as
PASTE_ENDS = (("x", "y"), ("rss", "123456"), ("Error polling for event", " s"))


def lines(anchor: str, filler: str, size: int) -> list[str]:
    run = (filler * (size // len(filler) + 1))[:size]
    half = run[: size // 2]
    return [anchor + run, half + anchor + half, run + anchor]


def inside(example: str, filler: str, size: int) -> list[str]:
    """The run inside a line the pattern matches: between its words, where a pattern's later
    parts must still be found after its first ones matched."""
    run = (filler * (size // len(filler) + 1))[:size]
    cuts = [i for i, ch in enumerate(example) if ch == " "] or [len(example) // 2]
    return [example[:i] + run + example[i:] for i in (cuts[0], cuts[len(cuts) // 2], cuts[-1])]


def cut(example: str, filler: str, size: int) -> list[str]:
    """The first words of a line the pattern matches, then the run, then nothing it wants:
    "Step 100:" and 4,000 spaces, where a pattern whose optional spaces and separators
    are many ways to split one run backtracks through all of them before it gives up. Cut
    after every word and every sign of the example, and cleaned as the reader cleans a line
    (what the patterns are ever given)."""
    run = (filler * (size // len(filler) + 1))[:size]
    cuts = sorted({m.end() for m in _TOKEN.finditer(example)})
    return [clean_line(example[:i] + run + "~") for i in cuts]


def worst_time(pattern: re.Pattern[str], texts: list[str]) -> float:
    best_of = []
    for text in texts:
        times = []
        for _ in range(2):  # the faster of two: noise only ever adds time
            t0 = time.perf_counter()
            pattern.search(text)
            times.append(time.perf_counter() - t0)
        best_of.append(min(times))
    return max(best_of)


def _timed(func: object, arg: bytes) -> float:
    t0 = time.perf_counter()
    func(arg)  # type: ignore[operator]
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", type=int, default=4000, help="the short line's length")
    ap.add_argument("--only", help="one signature (its id): a quick check of a pattern")
    args = ap.parse_args()
    short, long_ = args.short, 4 * args.short
    rows = []  # (growth, long ms, signature, filler)
    checked = 0
    for sig in signatures():
        if args.only and sig.id != args.only:
            continue
        patterns = [sig.pattern, *sig.parts.values()]
        seeds = [(lines, a) for a in sig.anchors[:ANCHORS_TRIED]]
        seeds += [(inside, e) for e in sig.examples[:EXAMPLES_TRIED]]
        seeds += [(cut, e) for e in sig.examples]  # every example: each alternative's words
        for make, seed in seeds:
            for filler in FILLERS:
                for pattern in patterns:
                    a = worst_time(pattern, make(seed, filler, short))
                    checked += 1
                    if a * 1000 < SKIP_MS:
                        continue
                    b = worst_time(pattern, make(seed, filler, long_))
                    if b * 1000 >= FLOOR_MS:
                        rows.append((b / max(a, 1e-9), b * 1000, sig.id, filler))
    rows.sort(reverse=True)
    ends = []  # (growth, long ms, filler): the whole diagnosis of a paste of hostile lines
    for filler in FILLERS:
        pastes = [
            "\n".join(lines(sig.anchors[0], filler, size)[1] for sig in signatures()).encode()
            for size in (short, long_)
        ]
        a, b = (min(_timed(diagnose, paste) for _ in range(2)) for paste in pastes)
        ends.append((b / max(a, 1e-9), b * 1000, filler))
    ends.sort(reverse=True)
    # one such line pasted alone: the rules only a paste gets (bare figures, a last line cut
    # mid-message, cut lines joined), between a word and a word, a figure or a message's start
    alone = []  # (growth, long ms, filler, what the run follows)
    for filler in FILLERS:
        for head, tail in PASTE_ENDS:
            pastes = [
                (head + (filler * (size // len(filler) + 1))[:size] + tail).encode()
                for size in (short, long_)
            ]
            a, b = (min(_timed(diagnose, paste) for _ in range(2)) for paste in pastes)
            alone.append((b / max(a, 1e-9), b * 1000, filler, head))
    alone.sort(reverse=True)
    print(
        f"{checked:,} searches of {len(signatures())} signatures, lines of {short:,} and "
        f"{long_:,} characters; {len(rows)} took {FLOOR_MS:g} ms or more on the long line"
    )
    for growth, ms, sid, filler in rows[:10]:
        print(f"  {sid:40} filler {filler!r:6} {ms:8.1f} ms on the long line, {growth:5.1f}x")
    growth, ms, filler = ends[0]
    print(
        f"whole diagnosis of a paste of {len(signatures())} such lines, worst filler "
        f"{filler!r}: {ms:.0f} ms on the long lines, growth {growth:.1f}x"
    )
    lone_growth, lone_ms, lone_filler, lone_head = alone[0]
    print(
        f"one such line pasted alone, worst filler {lone_filler!r} after {lone_head!r}: "
        f"{lone_ms:.1f} ms on the long line, growth {lone_growth:.1f}x"
    )
    judged = [g for g, ms, _, _ in alone if ms >= FLOOR_MS]
    worst = max(rows[0][0] if rows else 4.0, growth, *judged)
    print(f"worst growth for 4x the length: {worst:.1f}x (target <= {GROWTH_TARGET:g}; linear 4)")
    return 0 if worst <= GROWTH_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
