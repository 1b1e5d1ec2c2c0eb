"""Write core/knowledge/words.toml, the wording profile, from the dev part of the real-log corpus.

The profile counts, per established cause, in how many of its logs each word appears (see
core/knowledge/words.py). Only the dev part is read: the sealed part stays unseen, so the
benchmark's sealed score measures the profile on logs it was not built from. Run it again
after adding logs to the corpus; tests/core/test_words.py fails while the file is stale.

Run: .venv/bin/python tools/train_word_profile.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.corpus import Case, cases, word_profile_of  # noqa: E402
from tfdoctor.core.knowledge.words import WORDS_FILE, to_toml  # noqa: E402

HEADER = """\
The wording profile: for each cause, in how many of its logs each word appears, counted over
the dev part of the real-log corpus (tests/fixtures/corpus/dev, {n} logs; never the sealed
part). Written by tools/train_word_profile.py: do not edit by hand, run it again."""


def shipped_text(logs: list[Case] | None = None) -> str:
    """words.toml's text as the dev corpus (or these logs) gives it."""
    logs = cases("dev") if logs is None else logs
    return to_toml(word_profile_of(logs), HEADER.format(n=len(logs)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say whether the file is current")
    args = ap.parse_args(argv)
    text = shipped_text()
    current = WORDS_FILE.exists() and WORDS_FILE.read_text(encoding="utf-8") == text
    if args.check:
        print("words.toml is current" if current else "words.toml is stale: run this tool")
        return 0 if current else 1
    if not current:
        tmp = WORDS_FILE.with_suffix(".toml.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(WORDS_FILE)
    print(f"{WORDS_FILE.relative_to(REPO)}: {'unchanged' if current else 'written'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
