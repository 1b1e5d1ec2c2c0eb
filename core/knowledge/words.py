"""The wording profile (words.toml): which words the logs of each cause use, counted over the
dev part of the real-log corpus, to offer candidates for a paste no rule reads.

A paste whose key line is cut off, or worded in a way no signature knows, still carries the
words around it: the libraries it loaded, the GPU's name, the TF build, a framework's own
messages. Counted per cause (in how many of its logs each word appears), they rank the causes
by how well each explains the paste's words (multinomial naive Bayes over the words a paste
holds, each counted once). `tools/train_word_profile.py` writes the file from the corpus;
tests check it is the one that corpus gives.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR, KnowledgeError, read_toml

WORDS_FILE = KNOWLEDGE_DIR / "words.toml"
HARMLESS = "none"  # the profile's name for logs whose thread found nothing to blame
# a word: a letter or underscore, then two or more letters, digits or underscores (numbers,
# addresses and hex say nothing of a cause; "libcudart", "cudnn", "sm_86" do)
WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{2,}")
WORDS_KEPT = 20_000  # distinct words kept of one paste (a paste holds a few hundred)
TELLING_LOGS = 3  # a word said to point at a cause is in at least this many of its logs
TELLING_LIFT = 3.0  # and this many times as likely in them as in the other logs


# a terminal's colour code, blanked out before words are read: "\x1b[31mKilled" holds "Killed",
# not "mKilled" (blanked, not removed, so each word keeps its offset in the text)
_COLOUR = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")


def words_in(raw: bytes) -> dict[str, int]:
    """The distinct words of a text, lower-cased, each with the offset of its first use."""
    out: dict[str, int] = {}
    if b"\x1b" in raw:
        raw = _COLOUR.sub(lambda m: b" " * len(m.group()), raw)
    for m in WORD.finditer(raw):
        word = m.group().lower().decode("ascii")
        if word not in out:
            out[word] = m.start()
            if len(out) >= WORDS_KEPT:
                break
    return out


@dataclass(frozen=True)
class WordProfile:
    """Per cause: how many logs it was counted over, and in how many of them each word is."""

    alpha: float  # added to every count: a word never seen with a cause is rare, not impossible
    logs: Mapping[str, int]  # cause -> logs counted
    counts: Mapping[str, Mapping[str, int]]  # word -> cause -> logs holding it

    @functools.cached_property
    def _totals(self) -> dict[str, int]:
        totals = dict.fromkeys(self.logs, 0)
        for by_cause in self.counts.values():
            for cause, n in by_cause.items():
                totals[cause] += n
        return totals

    def _log_p(self, word: str, cause: str) -> float:
        n = self.counts[word].get(cause, 0)
        return math.log((n + self.alpha) / (self._totals[cause] + self.alpha * len(self.counts)))

    def rank(self, words: Iterable[str]) -> list[tuple[str, float]]:
        """Every cause (the harmless one too) with its log-likelihood for these words, best
        first. Words the profile never saw say nothing."""
        known = [w for w in set(words) if w in self.counts]
        all_logs = sum(self.logs.values())
        scores = {
            cause: math.log(n / all_logs) + sum(self._log_p(w, cause) for w in known)
            for cause, n in self.logs.items()
        }
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))

    def telling(self, cause: str, words: Iterable[str], n: int = 3) -> list[str]:
        """The words of these that most set `cause` apart from every other kind of log: seen
        in at least TELLING_LOGS of its logs, and TELLING_LIFT times as often there as in the
        others (or more)."""
        others_total = sum(t for c, t in self._totals.items() if c != cause)
        smooth = self.alpha * len(self.counts)
        lift = {}
        for w in set(words):
            by_cause = self.counts.get(w, {})
            if by_cause.get(cause, 0) < TELLING_LOGS:
                continue
            elsewhere = sum(k for c, k in by_cause.items() if c != cause)
            lift[w] = self._log_p(w, cause) - math.log(
                (elsewhere + self.alpha) / (others_total + smooth)
            )
        floor = math.log(TELLING_LIFT)
        best = sorted((w for w, v in lift.items() if v >= floor), key=lambda w: (-lift[w], w))
        return best[:n]


def train(logs: Iterable[tuple[str, bytes]], alpha: float = 0.5) -> WordProfile:
    """The profile of these (cause, log text) pairs: every log counts each word it holds once."""
    per_cause: dict[str, int] = {}
    counts: dict[str, dict[str, int]] = {}
    for cause, raw in logs:
        per_cause[cause] = per_cause.get(cause, 0) + 1
        for word in words_in(raw):
            by_cause = counts.setdefault(word, {})
            by_cause[cause] = by_cause.get(cause, 0) + 1
    if HARMLESS not in per_cause:
        raise ValueError("a word profile needs harmless logs to tell causes from")
    return WordProfile(alpha, dict(sorted(per_cause.items())), dict(sorted(counts.items())))


def to_toml(profile: WordProfile, header: str) -> str:
    """The profile as words.toml holds it (`header`: comment lines saying where it came from)."""
    lines = [*(f"# {h}".rstrip() for h in header.splitlines()), ""]
    lines.append(f"alpha = {profile.alpha!r}")
    lines.append("")
    lines.append("[logs]")
    lines += [f"{cause} = {n}" for cause, n in profile.logs.items()]
    lines.append("")
    lines.append("[words]")
    for word, by_cause in profile.counts.items():
        cells = ", ".join(f"{c} = {n}" for c, n in sorted(by_cause.items()))
        lines.append(f"{word} = {{ {cells} }}")
    return "\n".join(lines) + "\n"


def load_word_profile(
    path: str | os.PathLike[str] = WORDS_FILE, causes: Iterable[str] | None = None
) -> WordProfile:
    """The profile in a words.toml; `causes`, when given, are the only cause ids it may name
    (besides the harmless one).

    Raises:
        KnowledgeError: the file is unreadable, or a count, a cause or a word is not valid.
    """
    data = read_toml(path)
    unknown = sorted(set(data) - {"alpha", "logs", "words"})
    if unknown:
        raise KnowledgeError(f"{path}: unknown field(s) {', '.join(unknown)}")
    alpha, logs, words = data.get("alpha"), data.get("logs"), data.get("words")
    if not isinstance(alpha, float) or not alpha > 0:
        raise KnowledgeError(f"{path}: alpha must be a number above 0")
    if not isinstance(logs, dict) or HARMLESS not in logs or not isinstance(words, dict):
        raise KnowledgeError(f"{path}: needs [logs] (with {HARMLESS}) and [words] tables")
    allowed = None if causes is None else {*causes, HARMLESS}
    for cause, n in logs.items():
        if allowed is not None and cause not in allowed:
            raise KnowledgeError(f"{path}: [logs]: unknown cause {cause!r}")
        if not isinstance(n, int) or n < 1:
            raise KnowledgeError(f"{path}: [logs].{cause}: must be a count of 1 or more")
    for word, by_cause in words.items():
        if not isinstance(by_cause, dict) or not WORD.fullmatch(word.encode()):
            raise KnowledgeError(f"{path}: [words].{word}: not a word with its counts")
        for cause, n in by_cause.items():
            if cause not in logs or not isinstance(n, int) or not 1 <= n <= logs[cause]:
                raise KnowledgeError(f"{path}: [words].{word}.{cause}: not a count of its logs")
    return WordProfile(alpha, logs, words)


@functools.cache
def word_profile() -> WordProfile:
    """The shipped profile (read once)."""
    from tfdoctor.core.knowledge.causes import causes

    return load_word_profile(causes=causes())
