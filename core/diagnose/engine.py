"""Crash diagnosis: streamed text (+ facts, exit status) -> ranked causes with evidence."""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from ahocorasick_rs import BytesAhoCorasick, Implementation

from tfdoctor.core.diagnose.bfc import (
    LISTING_TRIGGERS,
    TRIGGER_BYTES,
    BfcOom,
    BfcParser,
    format_size,
    parse_size,
    tensor_nbytes,
)
from tfdoctor.core.diagnose.logfacts import (
    RUNTIME_LIB,
    TOOLKIT_LIB,
    Stated,
    brief_cudnn,
    cuda_covers_gpu,
    cuda_soname,
    fact_rules,
    read_stated,
)
from tfdoctor.core.diagnose.reader import (
    MAX_LINE_CHARS,
    Chunk,
    clean_line,
    iter_chunks,
    rejoin_cut_lines,
)
from tfdoctor.core.knowledge import causes as known_causes
from tfdoctor.core.knowledge import signatures as known_signatures
from tfdoctor.core.knowledge.causes import CauseInfo as CauseInfo
from tfdoctor.core.knowledge.causes import load_causes as load_causes
from tfdoctor.core.knowledge.loader import KnowledgeError
from tfdoctor.core.knowledge.signatures import SAYS_FIELD
from tfdoctor.core.knowledge.signatures import Signature as Signature
from tfdoctor.core.knowledge.signatures import load_signatures as load_signatures
from tfdoctor.core.knowledge.words import HARMLESS, WordProfile, word_profile, words_in
from tfdoctor.core.model import Cause, Diagnosis, Evidence, Facts, Measure

# clues only for a line that nothing else explains: which TF source file printed it, which
# class of TF error it raised
FALLBACK_ROLES = frozenset({"source_file", "error_class"})
# a line TF prints as part of a message the engine reads (the free memory after a refused
# cuDNN handle): read, so not a new error of its source file
COMPANION_ROLES = frozenset({"companion"})
MIN_SCORE = 1.0  # below this a cause is only a candidate (when nothing stronger is there)
CANDIDATES = 3
CANDIDATE_CONFIDENCE = 0.3
CANDIDATE_NOTE = (
    "A weak clue, not a verdict: the log shows the crash but no message that names its cause. "
    "Capture the whole output from the start (with TF_CPP_MIN_LOG_LEVEL=0), nvidia-smi, and the "
    "kernel log (tfdoctor diagnose --recent), or reproduce it under `tfdoctor bench`."
)
# A look-alike of the first cause (causes.toml's look_alikes), offered after it: the first one
# states this share of what the first cause leaves (fitted on dev, where look-alikes were right
# 2% of the time)
LOOK_ALIKE_SHARE = 0.2
LOOK_ALIKE_NOTE = (
    'A look-alike, not a finding: the lines behind "{first}" are also this cause\'s signs, '
    "so it stays possible if that cause's fixes do not help. To tell:"
)
EVIDENCE_PER_SIGNATURE = 4
EVIDENCE_PER_CAUSE = 8
SEEN_LINES_KEPT = 20_000
STRENGTH_SCALE = 2.0  # score -> strength: 1 - exp(-score / scale)
RIVAL_PENALTY = 0.4  # a rival as strong as the cause takes this share of its confidence
SATURATED = 5  # hits after which a signature's evidence and weight are complete


@dataclass(frozen=True)
class ExitInfo:
    """How the process ended, when known (from the benchmark supervisor or the user)."""

    returncode: int | None = None
    signal: str | None = None
    oom_kill_record: bool = False  # a kernel/cgroup OOM record names this process
    oom_kill_line: str | None = None


@dataclass
class _Hit:
    count: int = 0
    lines: list[tuple[str, int, str]] = field(default_factory=list)  # (source, line, text)
    groups: list[dict[str, str]] = field(default_factory=list)


REBUILD_AFTER_SKIPPED = 1000


@functools.lru_cache(maxsize=4)
def _automaton(anchors: tuple[str, ...]) -> BytesAhoCorasick:
    """The automaton for these anchors and the BFC parser's trigger words (every diagnosis
    starts with all of them: built once per process)."""
    words = [a.encode() for a in anchors] + list(TRIGGER_BYTES)
    return BytesAhoCorasick(words, implementation=Implementation.DFA)


class Diagnoser:
    """Scans text once, streaming; remembers only hits (bounded), never the whole log."""

    def __init__(
        self,
        signatures: tuple[Signature, ...],
        causes: Mapping[str, CauseInfo],
        words: Callable[[], WordProfile] | None = None,
    ):
        self.signatures = signatures
        self.causes = causes
        # gives the wording profile that guesses candidates for a paste no rule reads (read
        # only when one is needed; None: never guess)
        self.words = words
        # the chunks of a paste, kept to read its words only if a guess is needed (None: a log
        # file, not a paste, or no profile)
        self._paste: list[Chunk] | None = [] if words is not None else None
        self._paste_bytes = 0
        # All anchors are found in one pass of an Aho-Corasick automaton (compiled code):
        # Python's re walks an alternation position by position at a few MB/s.
        by_anchor: dict[str, dict[str, Signature]] = {}  # each signature once per anchor
        for sig in signatures:
            for a in sig.anchors:
                by_anchor.setdefault(a, {})[sig.id] = sig
        self._anchors = tuple(sorted(by_anchor))
        self._by_anchor: dict[str, tuple[Signature, ...]] = {
            a: tuple(sigs.values()) for a, sigs in by_anchor.items()
        }
        self._active: tuple[str, ...] = ()
        self._matcher: BytesAhoCorasick | None = None
        self._skipped = 0  # matches of saturated anchors the last chunk stepped over
        # Logs repeat lines (progress, retried errors): remember what each distinct line
        # matched. Bounded: emptied when full.
        self._seen: dict[bytes, tuple[str, tuple[tuple[Signature, dict[str, str]], ...]]] = {}
        # per anchor, how many of its signatures are not yet saturated (0: the anchor is dead)
        self._live = {a: len(sigs) for a, sigs in self._by_anchor.items()}
        self._order = {s.id: i for i, s in enumerate(signatures)}
        self.hits: dict[str, _Hit] = {}
        self.lines_read = 0
        self.noise_lines = 0
        self.sources: list[str] = []
        self._bfc: dict[str, BfcParser] = {}  # per input: line numbers restart in each
        # readings a log prints over time (memory after each step...): (line, value) each
        self.series: dict[str, list[tuple[tuple[str, int, str], float]]] = {}
        # the worker processes of one job (Ray's "(pid=N)", MPI's "[1,N]<stderr>:") whose GPU
        # memory failed: worker -> its first such line
        self.workers: dict[str, tuple[str, int, str]] = {}
        # a paste whose traceback ends in a NumPy allocation, its error line missing: that line
        self.cut_at_allocation: tuple[str, int, str] | None = None
        # a paste whose last line stops inside a message the signatures read whole: the
        # signatures it may have been, and that line
        self.cut_message: tuple[tuple[Signature, ...], tuple[str, int, str]] | None = None
        # each input's last line that is not blank: where its output ended
        self.last_lines: dict[str, int] = {}

    def feed(self, chunk: Chunk) -> None:
        raw = chunk.raw
        if chunk.source not in self.sources:
            self.sources.append(chunk.source)
        bfc = self._bfc.setdefault(chunk.source, BfcParser())
        if self._matcher is None or self._skipped > REBUILD_AFTER_SKIPPED:
            # One automaton finds the live anchors and the BFC parser's trigger words. It is
            # built again without the saturated ones only when they keep matching (a repeated
            # message): a build costs milliseconds, stepping over a few matches far less.
            self._active = self._unsaturated_anchors()
            self._matcher = _automaton(self._active)
        self._skipped = 0
        active = self._active
        live = self._live
        n_active = len(active)
        bfc_starts: list[int] = []
        listing: set[int] = set()  # starts of bin lines (only listing trigger words)
        first_strong = n_active + LISTING_TRIGGERS
        line_start, line_end = -1, -1
        line_anchors: list[str] = []
        # a paste's last line may lack its line break: anchors that end a line ("AVX\n") see one
        scan = raw if raw.endswith(b"\n") else raw + b"\n"
        for idx, at, _end in self._matcher.find_matches_as_indexes(scan, overlapping=True):
            if not line_start <= at < line_end:
                if line_anchors:
                    self._examine(chunk, line_start, line_end, line_anchors)
                    line_anchors = []
                line_start = raw.rfind(b"\n", 0, at) + 1
                line_end = raw.find(b"\n", at)
                line_end = len(raw) if line_end < 0 else line_end
            if idx >= n_active:
                if not bfc_starts or bfc_starts[-1] != line_start:
                    bfc_starts.append(line_start)
                    if idx < first_strong:
                        listing.add(line_start)
                elif idx >= first_strong:
                    listing.discard(line_start)
                continue
            anchor = active[idx]
            if live[anchor]:  # else saturated since the automaton was built
                line_anchors.append(anchor)
            else:
                self._skipped += 1
        if line_anchors:
            self._examine(chunk, line_start, line_end, line_anchors)
        if bfc_starts or not bfc.idle:
            bfc.feed_chunk(chunk.first_line, raw, bfc_starts, chunk.line_at, listing)
        if self._paste is not None:
            self._paste_bytes += len(raw)
            if self._paste_bytes > BARE_SCAN_BYTES:
                self._paste = None  # a log file, not a paste: no guessing from its words
            else:
                self._paste.append(chunk)
        if self.lines_read == 0 and len(raw) <= BARE_SCAN_BYTES:
            self._bare_figures(chunk)
            self.cut_at_allocation = _traceback_cut_at_allocation(chunk)
            cut = _last_line_cut(chunk, self.signatures)
            if cut is not None:
                sigs, named, where = cut
                self.cut_message = (sigs, where) if sigs else None
                for sig, groups in named:  # the library it names is whole: read as whole
                    self._count(sig.id, where, groups)
        # last: the line numbers looked up above already counted most of the chunk's breaks
        self.lines_read += chunk.lines
        if raw and not raw.isspace():
            end = _shown_end(raw)
            self.last_lines[chunk.source] = chunk.line_at(len(raw)) - raw.count(b"\n", end)

    def _bare_figures(self, chunk: Chunk) -> None:
        """Lines that are one figure and nothing else (print(process.memory_info().rss) after
        each call), looked for in a paste only (an input of one small chunk): no anchor can
        find them, and a pass of its own over a long log file would cost more than they are
        worth there."""
        readings = self.series.setdefault("bare_figure", [])
        for m in _BARE_LINE.finditer(chunk.raw):
            if len(readings) >= SERIES_KEPT:
                break
            where = (
                chunk.source,
                chunk.line_at(m.start()),
                clean_line(m.group(0).decode()).strip(),
            )
            readings.append((where, float(m.group(1))))

    def _unsaturated_anchors(self) -> tuple[str, ...]:
        """Anchors of signatures that can still change the result.

        A signature with SATURATED hits has all the evidence lines it keeps and its full
        repeat weight; later lines only count. Dropping its anchors from the automaton keeps
        a log full of one repeated message (a progress line, a retried error) fast.
        """
        return tuple(a for a in self._anchors if self._live[a])

    def _examine(self, chunk: Chunk, start: int, end: int, anchors: list[str]) -> None:
        piece = chunk.raw[start : min(end, start + MAX_LINE_CHARS)]
        seen = self._seen.get(piece)
        if seen is None:
            line = clean_line(piece.decode("utf-8", "replace"))
            found = []
            tried: set[str] = set()
            for anchor in anchors:
                for sig in self._by_anchor[anchor]:
                    if sig.id in tried:
                        continue
                    tried.add(sig.id)
                    m = sig.pattern.search(line)
                    if m is not None:
                        groups = {k: v for k, v in m.groupdict().items() if v is not None}
                        found.append((sig, groups))
            matched = tuple(sorted(found, key=lambda sg: self._order[sg[0].id]))
            if len(self._seen) >= SEEN_LINES_KEPT:
                self._seen.clear()
            seen = self._seen[piece] = (line, matched)
        line, matched = seen
        refused = any(sig.id in _GPU_MEMORY_FAILED for sig, _ in matched)
        if refused and len(self.workers) < WORKERS_KEPT:
            tag = _WORKER_TAG.search(piece)
            if tag is not None:
                worker = next(g for g in tag.groups() if g is not None).decode()
                where = (chunk.source, chunk.line_at(start), line.strip()[:500])
                self.workers.setdefault(worker, where)
        # the source file or the error's class is only a clue for a message nothing else
        # explains (blames or calls harmless; a fact such as the platform explains nothing)
        if (
            len(matched) > 1
            and any(sig.role in FALLBACK_ROLES for sig, _ in matched)
            and any(
                sig.causes or sig.noise or sig.role in COMPANION_ROLES
                for sig, _ in matched
                if sig.role not in FALLBACK_ROLES
            )
        ):
            matched = tuple(sg for sg in matched if sg[0].role not in FALLBACK_ROLES)
        noise = False
        for sig, groups in matched:
            if sig.role == "version_question":
                self._version_answer(chunk, end)
            noise = noise or sig.noise
            hit = self._count(
                sig.id, (chunk.source, chunk.line_at(start), line.strip()[:500]), groups
            )
            if sig.role in ("series", "sizes_line"):  # every reading counts: never saturated
                if sig.role == "series":
                    value = _reading(  # a pattern with two forms names the second's value2
                        groups.get("value") or groups.get("value2", ""),
                        groups.get("unit") or groups.get("unit2", ""),
                    )
                    values = [] if value is None else [value]
                elif "values" in groups:  # a printed list of readings, its unit unstated
                    values = [float(v) for v in _NUMBER.findall(groups["values"])]
                elif sig.id == "readings_in_a_line":  # one reading printed again and again
                    values = _inline_readings(line)
                else:  # several readings told on one line, in order
                    values = [_reading(v, u) or 0.0 for v, u in _SIZE_IN_LINE.findall(line)]
                readings = self.series.setdefault(sig.id, [])
                kept = sig.keep or SERIES_KEPT
                if values and len(readings) < kept:
                    where = (chunk.source, chunk.line_at(start), line.strip()[:500])
                    readings += [(where, v) for v in values]
                    if len(readings) >= kept:  # full: later lines could change nothing
                        for a in sig.anchors:
                            self._live[a] -= 1
                continue
            if hit.count == SATURATED:
                for a in sig.anchors:
                    self._live[a] -= 1
        if noise:
            self.noise_lines += 1

    def _version_answer(self, chunk: Chunk, end: int) -> None:
        """The TF version a prompt or pip show answered on the line after the question."""
        raw = chunk.raw
        stop = raw.find(b"\n", end + 1)
        # cleaned as every line is: a quote's "> ", a terminal's colour, a collector's prefix
        after = raw[end + 1 : len(raw) if stop < 0 else stop][:MAX_LINE_CHARS]
        answer = _VERSION_ANSWER.match(clean_line(after.decode("utf-8", "replace")).encode())
        if answer is None:
            return
        text = answer.group(0).decode("ascii", "replace").strip()
        where = (chunk.source, chunk.line_at(end + 1), text)
        self._count("tf_version_stated", where, {"tfv": answer.group("v").decode("ascii")})

    def _count(self, sid: str, where: tuple[str, int, str], groups: dict[str, str]) -> _Hit:
        """One more line a signature matched; its evidence and groups kept while there is room."""
        hit = self.hits.get(sid)
        if hit is None:
            hit = self.hits[sid] = _Hit()
        hit.count += 1
        if len(hit.lines) < EVIDENCE_PER_SIGNATURE:
            hit.lines.append(where)
            hit.groups.append(groups)
        return hit

    def result(self, facts: Facts | None = None, exit_info: ExitInfo | None = None) -> Diagnosis:
        scores: dict[str, float] = {}
        evidence: dict[str, list[tuple[str, int, str]]] = {}
        notes: dict[str, list[str]] = {}
        by_id = {s.id: s for s in self.signatures}

        def add(cause: str, weight: float, lines: Iterable[tuple[str, int, str]] = ()) -> None:
            scores[cause] = scores.get(cause, 0.0) + weight
            if weight > 0:
                evidence.setdefault(cause, []).extend(lines)

        for sid, hit in self.hits.items():
            sig = by_id[sid]
            if any(e in self.hits for e in sig.echo_of):
                continue  # the message itself is there and says more
            repeat = _repeat_weight(hit.count)
            for cause, w in sig.causes.items():
                add(cause, w * repeat, hit.lines)
            said = _say(sig.says, hit.groups)
            for cause, w in sig.causes.items():
                if said and w > 0 and said not in notes.setdefault(cause, []):
                    notes[cause].append(said)
        ooms = [(src, oom) for src, p in self._bfc.items() for oom in p.results()]
        _context_rules(self.hits, add, notes, facts, exit_info, self.last_lines)
        steady_leak = _series_rules(self.series, add, notes)
        wanted = [
            (ln, g["lib"])
            for sid in _DLOPEN_SIGNATURES
            if sid in self.hits
            for ln, g in zip(self.hits[sid].lines, self.hits[sid].groups, strict=False)
            if g.get("lib")
        ]
        stated = read_stated({sid: (h.lines, h.groups) for sid, h in self.hits.items()}, wanted)
        symptom = _cpu_only_devices(self.hits) or any(
            s in self.hits
            for s in (
                "gpu_device_not_found",
                "no_cuda_driver",
                "cudart_not_found",
                "cuinit_no_device",
            )
        )
        before_facts = {c: scores.get(c, 0.0) for c in _SETTING_CAUSES}
        library_failed = any(by_id[sid].role == "handle_fail" for sid in self.hits)
        fact_rules(stated, add, _noter(notes), gpu_symptom=symptom, library_failed=library_failed)
        _kernel_failed_on_a_known_gpu_rule(self.hits, by_id, stated, add)
        _code_failed_on_an_uncovered_gpu_rule(self.hits, by_id, stated, add)
        told_by_facts = any(scores.get(c, 0.0) != v for c, v in before_facts.items())
        _bfc_rules(ooms, self.hits, add, notes, facts)
        _defragmented_then_failed_rule(ooms, self.hits, add, _noter(notes))
        _holder_rule(self.hits, scores, add, _noter(notes), facts)
        _shared_card_rule(self.hits, scores, add, _noter(notes))
        _stock_model_rule(self.hits, scores, add, _noter(notes))
        _async_held_elsewhere_rule(self.hits, scores, add, _noter(notes))
        _late_oom_rule(self.series, scores, add, _noter(notes))
        _leak_ran_out_rule(steady_leak, scores, add, _noter(notes))
        _handle_memory_rule(self.hits, scores, add, _noter(notes))
        _shared_by_workers_rule(self.workers, add, _noter(notes))
        _device_refusal_rule(self.hits, add, _noter(notes))
        _cut_at_allocation_rule(self.cut_at_allocation, add, _noter(notes))
        _cut_message_rule(self.cut_message, add, _noter(notes))
        slowing = "memory_leak" not in scores and _slowing_rule(self.series, add, notes)
        if not any(v > 0 for v in scores.values()) and not self.noise_lines and not slowing:
            _speed_only_rule(self.series, add, notes)
        # A run that got as far as allocating tensors was not stopped by a missing GPU: the
        # "no driver / cuInit failed" start-up notices then describe the setting, not the crash.
        # (so did one that printed reading after reading, memory or step times)
        if "no_gpu_visible" in scores and (
            _went_on(self.hits)
            or any(len(readings) >= RAN_ON_READINGS for readings in self.series.values())
        ):
            # training ran (on the CPU): not why it failed, unless the log asked for the GPUs
            # and got none, and nothing else went wrong (the question is why it is on the CPU)
            asked = _asked_and_no_gpu(self.hits) and not any(
                v > 0 for c, v in scores.items() if c != "no_gpu_visible"
            )
            scores["no_gpu_visible"] *= 1.0 if asked else 0.1
        elif "no_gpu_visible" in scores and any(h in self.hits for h in _RAN_PAST_DEVICE_INIT):
            scores["no_gpu_visible"] *= 0.4
        if not told_by_facts and _notices_then_another_ending(
            self.hits, by_id, scores, self.last_lines
        ):
            # libraries TF could not load at start-up, or no GPU it could start, then a run
            # ended by something else (the OOM killer, an out-of-memory error): TF went on
            # without them, the setting it ran in, not why it stopped
            for cid in _SETTING_CAUSES:
                if cid in scores:
                    scores[cid] *= 0.3
        plain_error = _plain_python_error(self.hits, by_id)
        if plain_error is not None:
            for cid in _SETTING_CAUSES:
                scores.pop(cid, None)  # the setting TF ran in, not why the run failed
        not_for = _fixes_that_do_not_apply(self.hits)
        causes: list[Cause] = []
        strong = any(v >= MIN_SCORE for c, v in scores.items() if c in self.causes)
        # Never silent when the run failed: with no strong cause, the weak clues become up to
        # CANDIDATES low-confidence candidates, each with its reason and what to capture next.
        # A fatal (F) line from TF's GPU code is a failure too, even when its message is cut or
        # worded in a way no signature knows; so is an error (E) line the run did not go past.
        went_on = _went_on(self.hits)
        # (and so is a failure's message the paste cut short)
        cut_failure = self.cut_message is not None and any(
            sig.role in ("failure", "error_class") for sig in self.cut_message[0]
        )
        failed = plain_error is None and (
            cut_failure
            or any(
                by_id[sid].role in ("failure", "error_class")
                or (
                    by_id[sid].role == "source_file"
                    and (not went_on or any(g.get("sev") == "F" for g in h.groups))
                )
                for sid, h in self.hits.items()
            )
        )
        for cid, score in sorted(scores.items(), key=lambda kv: -kv[1]):
            if cid not in self.causes or score <= 0:
                continue
            if score < MIN_SCORE:
                if strong or not failed or len(causes) >= CANDIDATES:
                    continue
                notes.setdefault(cid, []).insert(0, CANDIDATE_NOTE)
            ceiling = 0.99 if score >= MIN_SCORE else CANDIDATE_CONFIDENCE
            info = self.causes[cid]
            seen: set[tuple[str, int]] = set()
            # one line given in two inputs (dmesg and a log) is shown once
            quoted_by: dict[str, str] = {}
            ev_lines = []
            for src, n, text in sorted(evidence.get(cid, []), key=lambda t: (t[0], t[1])):
                if (src, n) in seen or quoted_by.get(text, src) != src:
                    continue
                seen.add((src, n))
                quoted_by.setdefault(text, src)
                ev_lines.append(Evidence(text, line=n, source=src))
            explanation = " ".join([*notes.get(cid, []), info.explanation])
            causes.append(
                Cause(
                    id=cid,
                    confidence=round(
                        min(ceiling, _confidence(score, scores, cid, info.reliability)), 2
                    ),
                    title=info.title,
                    explanation=explanation,
                    evidence=tuple(ev_lines[:EVIDENCE_PER_CAUSE]),
                    fixes=tuple(f for f in info.fixes if f not in not_for.get(cid, ())),
                )
            )
        # the order is the evidence's (by score); a cause's reliability lowers or raises what
        # it states, but no cause states more than one ranked above it
        for i in range(1, len(causes)):
            if causes[i].confidence > causes[i - 1].confidence:
                causes[i] = replace(causes[i], confidence=causes[i - 1].confidence)
        if not causes and not self.hits.keys() - _NOT_A_READING:
            # only a paste none of whose lines any signature read is guessed at: one with lines
            # read and found harmless, or telling only of the machine, was read, not unread
            causes = self._guessed_from_words()
        if causes and causes[0].confirmed:  # a guess has no lines for a look-alike to share
            causes.extend(_look_alikes(causes, self.causes, not_for))
        return Diagnosis(
            causes=tuple(causes),
            lines_read=self.lines_read,
            noise_lines=self.noise_lines,
            sources=tuple(self.sources),
            measures=_measures(ooms, self.hits),
            stated=_stated_words(stated),
            program_error=(
                None
                if plain_error is None
                else Evidence(
                    plain_error[2].strip()[:500], line=plain_error[1], source=plain_error[0]
                )
            ),
        )

    def _guessed_from_words(self) -> list[Cause]:
        """Candidates for a paste no rule reads, from its wording alone (the words.toml
        profile): the causes under which its words are far likelier than under the harmless
        logs, with the words that point there most and the lines that hold them. None when its
        words look harmless, or when it was a log file, not a paste."""
        if self.words is None or not self._paste:
            return []
        word_at: dict[str, tuple[Chunk, int]] = {}  # each word, where it is first used
        for chunk in self._paste:
            for word, at in words_in(chunk.raw).items():
                word_at.setdefault(word, (chunk, at))
        try:
            profile = self.words()
        except KnowledgeError:
            return []  # a broken install: the rules still work without the profile
        ranked = [(c, s) for c, s in profile.rank(word_at) if c in self.causes or c == HARMLESS]
        harmless = dict(ranked).get(HARMLESS, -math.inf)
        guesses = [(c, s) for c, s in ranked if c != HARMLESS][:WORD_GUESSES]
        if not guesses or guesses[0][1] - harmless <= WORD_GUESS_MARGIN:
            return []
        out = []
        for (cid, _), confidence in zip(guesses, WORD_GUESS_CONFIDENCE, strict=False):
            told = profile.telling(cid, word_at)
            evidence: list[Evidence] = []
            for word in told:
                chunk, at = word_at[word]
                start = chunk.raw.rfind(b"\n", 0, at) + 1
                end = chunk.raw.find(b"\n", at)
                text = chunk.raw[start : len(chunk.raw) if end < 0 else end]
                line = chunk.line_at(start)
                if all(e.line != line or e.source != chunk.source for e in evidence):
                    clean = clean_line(text[:MAX_LINE_CHARS].decode("utf-8", "replace"))
                    evidence.append(Evidence(clean.strip()[:500], line=line, source=chunk.source))
            said = ", ".join(f'"{w}"' for w in told)
            info = self.causes[cid]
            note = WORD_GUESS_NOTE.format(telling=f" (most of all: {said})" if said else "")
            out.append(
                Cause(
                    id=cid,
                    confidence=confidence,
                    title=info.title,
                    explanation=f"{note} {info.explanation}",
                    evidence=tuple(evidence),
                    fixes=info.fixes,
                    guess=True,
                )
            )
        return out


# lines a rule reads only beside another message (the device a node under an out-of-memory
# error was placed on, an allocator's in-use figure, the card's free/total under an async
# allocator's failure): alone, they leave a paste unread, for its words to be guessed from
_NOT_A_READING = frozenset({"node_placed_on", "allocator_in_use", "async_device_memory"})

# Guesses from wording alone, for a paste no rule reads: the first guess's log-likelihood must
# beat the harmless logs' by this much (nats; fitted on dev by 10-fold cross-validation, where
# it kept blaming harmless pastes below 5%)
WORD_GUESS_MARGIN = 15.0
WORD_GUESSES = 3
# what the first, second and third guess state: on dev pastes whose key lines were cut out,
# each guessed by a profile of the other folds' logs, the first guess was right about half the
# time and the second and third about 1 in 10 each (stated lower: a real paste nothing reads is
# thinner than one cut from a log the rules read)
WORD_GUESS_CONFIDENCE = (0.3, 0.1, 0.05)
WORD_GUESS_NOTE = (
    "A guess from the paste's wording, not a finding: no line in it names a cause, but its "
    "words, taken together, are far more like those of this cause's logs than of harmless "
    "ones{telling}. Capture the whole output from the start (with TF_CPP_MIN_LOG_LEVEL=0) and "
    "run `tfdoctor check` on the machine to confirm or rule it out."
)


def _repeat_weight(count: int) -> float:
    """A signature's weight grows with its repeats, up to SATURATED of them."""
    return 1.0 + 0.15 * min(count - 1, SATURATED - 1)


# a library kernel the GPU could not execute says "the card is too new for this CUDA" only
# while the log does not show a CUDA that has code for the card
_KERNEL_FAILED = "cublas_execution_failed"


def _kernel_failed_on_a_known_gpu_rule(
    hits: Mapping[str, _Hit], by_id: Mapping[str, Signature], stated: Stated, add: Any
) -> None:
    """cuBLAS failing to execute its kernel reads as a GPU too new for the CUDA TensorFlow
    runs on; when the log shows that CUDA has code for the GPU's compute capability, that
    reading is withdrawn (a driver or hardware fault stays)."""
    hit = hits.get(_KERNEL_FAILED)
    if hit is None or cuda_covers_gpu(stated) is not True:
        return
    arch = by_id[_KERNEL_FAILED].causes.get("unsupported_gpu_arch", 0.0)
    add("unsupported_gpu_arch", -arch * _repeat_weight(hit.count))


# GPU code that faulted as it ran (an illegal address, a failed launch)
_GPU_CODE_FAILED = ("illegal_address", "launch_failed")


def _code_failed_on_an_uncovered_gpu_rule(
    hits: Mapping[str, _Hit], by_id: Mapping[str, Signature], stated: Stated, add: Any
) -> None:
    """GPU code that faulted on a GPU the CUDA TensorFlow runs on has no code for (an RTX 30
    card under a CUDA 10 build): that is what running there looks like, as a cuDNN or cuBLAS
    handle failing is. The fault counts for the unsupported GPU as much as for a fault of the
    card, which stays a candidate."""
    if cuda_covers_gpu(stated) is not False:
        return
    for sid in _GPU_CODE_FAILED:
        hit = hits.get(sid)
        if hit is not None:
            weight = by_id[sid].causes.get("illegal_memory_access_or_hw", 0.0)
            add("unsupported_gpu_arch", weight * _repeat_weight(hit.count), hit.lines)


def _look_alikes(
    causes: list[Cause], infos: Mapping[str, CauseInfo], not_for: Mapping[str, set[str]]
) -> list[Cause]:
    """The first cause's look-alikes (causes.toml) that the log did not name, as low candidates
    after it, up to CANDIDATES causes in all: what the same lines also fit, and how to tell.

    Each states a share of what the first leaves unsaid (a fifth, then a tenth), never more than
    CANDIDATE_CONFIDENCE or the cause before it; its evidence is the first cause's lines.
    """
    if not causes:
        return []
    first = causes[0]
    named = {c.id for c in causes}
    prev = causes[-1].confidence
    share = LOOK_ALIKE_SHARE
    out: list[Cause] = []
    for cid in infos[first.id].look_alikes:
        if len(causes) + len(out) >= CANDIDATES:
            break
        if cid in named:
            continue
        info = infos[cid]
        confidence = round(
            min(prev, max(0.01, (1 - first.confidence) * share), CANDIDATE_CONFIDENCE), 2
        )
        note = LOOK_ALIKE_NOTE.format(first=first.title.rstrip("."))
        out.append(
            Cause(
                id=cid,
                confidence=confidence,
                title=info.title,
                explanation=" ".join(t for t in (note, info.confirm, info.explanation) if t),
                evidence=first.evidence,
                fixes=tuple(f for f in info.fixes if f not in not_for.get(cid, ())),
                look_alike=True,
            )
        )
        prev = confidence
        share /= 2
    return out


def _stated_words(stated: Stated) -> tuple[tuple[str, str, str], ...]:
    """What the log says about the machine, for a report's environment when no check ran."""
    out = []
    for what, value, line in (
        ("TensorFlow", stated.tf_version, stated.tf_line),
        ("NVIDIA driver", stated.driver, stated.driver_line),
        ("CUDA installed", stated.cuda, stated.cuda_line),
        ("cuDNN installed (major)", stated.cudnn, stated.cudnn_line),
        (
            "GPU compute capability",
            stated.cc_newest or stated.cc,
            stated.cc_newest_line or stated.cc_line,
        ),
        ("Platform", "native Windows" if stated.windows else None, stated.windows),
    ):
        if value is not None and line is not None:
            out.append((what, str(value), line[2].strip()[:300]))
    return tuple(out)


def _confidence(
    score: float, scores: Mapping[str, float], cid: str, reliability: float = 1.0
) -> float:
    """How likely the cause is right: its strength, lowered when a rival is nearly as strong,
    then scaled by how reliable the cause's signs have been (causes.toml's reliability).

    Calibrated on the dev corpus: a strong cause with a close rival was right about half the
    time, so a tie states about 0.6 of the strength; the sealed part reports how well it holds.
    """
    strength = 1 - math.exp(-score / STRENGTH_SCALE)
    rival = max((v for c, v in scores.items() if c != cid), default=0.0)
    r = min(1.0, max(rival, 0.0) / score) if score > 0 else 1.0
    return min(0.99, _calibrated(strength * (1 - RIVAL_PENALTY * r * r)) * reliability)


# Stated confidence -> how often the dev corpus found it right (a monotone map, fitted on dev
# only: raw values from 0.3 up were right more often than they said).
CALIBRATION = ((0.0, 0.0), (0.5, 0.6), (0.7, 0.8), (0.85, 0.93), (1.0, 0.99))


def _calibrated(raw: float) -> float:
    for (x0, y0), (x1, y1) in itertools.pairwise(CALIBRATION):
        if raw <= x1:
            return y0 + (y1 - y0) * (max(raw, x0) - x0) / (x1 - x0)
    return CALIBRATION[-1][1]


# ---------------------------------------------------------------- context rules
# Clues that are decisive only in context. Each adds weight (and a specific sentence) to a
# cause; the generic weights live in signatures.toml.

_RAN_PAST_DEVICE_INIT = (
    "bfc_oom",
    "oom_allocating_tensor",
    "python_memory_error",
    "killed",
    "killed_localized",
    "killed_by_tool",
    "killed_after_progress",
    "kernel_oom_kill",
    "retracing",
)
_CPU_ALLOCATOR = re.compile(
    r"cpu|host", re.I
)  # cpu, mklcpu, bfc_cpu_allocator_for_gpu, gpu_host_bfc
# a library name the paste cut off: a candidate under CANDIDATE_CONFIDENCE, so that a re-flowed
# paste is still read again with its cut lines joined, where the name is whole
CUT_LIB_WEIGHT = 1.0
SWAP_FULL = 0.9  # swap this full: the RAM ran out before it
SWAP_MIN_BYTES = 64 << 20  # a swap smaller than this says nothing of the machine's RAM
_STARTS_PYTHON = re.compile(r"[$#>]\s*(?:sudo\s+)?(?:python|ipython|jupyter|py\b|conda|pip)", re.I)
_ABORT = re.compile(r"abort|SIGABRT|signal 6\b|\b134\b|-6\b", re.I)
_DRIVER_SIDE = re.compile(r"^(libcuda\.so|nvcuda\.dll|libnvidia-ml|nvml\.dll)", re.I)
# the runtime itself, cuDNN (a separate install) and CUPTI (the profiler's, optional)
_NOT_A_TOOLKIT_SIBLING = re.compile(r"cudart|cublas(?!Lt)|cudnn|cupti", re.IGNORECASE)
_DLOPEN_SIGNATURES = (
    "dlopen_failed",
    "shared_object_missing",
    "dso_couldnt_open",
    "dylib_not_loaded",
    "tf_self_check_dll",
)

# Start-up notices: TensorFlow could not load a CUDA library or find a driver, and goes on
# on the CPU. Neither stops a run.
_STARTUP_NOTICES = frozenset(
    {
        *_DLOPEN_SIGNATURES,
        "gpu_libs_missing",
        "cuinit_failed",
        "cuinit_no_device",
        "no_cuda_driver",
        "cudart_not_found",
        "cuda_diagnostics_truncated",
        "file_cuda_diagnostics",
        "file_cuda_driver",
        "file_gpu_device",
    }
)
_SETTING_CAUSES = ("missing_cuda_libs", "cuda_cudnn_version_mismatch", "no_gpu_visible")


def _plain_python_error(
    hits: Mapping[str, _Hit], by_id: Mapping[str, Signature]
) -> tuple[str, int, str] | None:
    """The line of the plain Python error (ValueError, AttributeError...) that ended a run
    whose only GPU lines are start-up notices (then those are the setting, not the crash), or
    None."""
    hit = hits.get("python_user_error")
    if hit is None:
        return None
    for sid in hits:
        sig = by_id[sid]
        if sid in _STARTUP_NOTICES or sig.noise or sid in ("python_user_error", "python_traceback"):
            continue
        if sig.role in ("failure", "error_class", "gpu_query") or any(
            w > 0 for w in sig.causes.values()
        ):
            return None  # a failure of its own, or the program was asking for its GPU
    return hit.lines[-1]


# what ends a run: a kill, an out-of-memory error, a failure line
_ENDING_ROLES = frozenset({"killed", "oom_kill", "bfc_oom", "oom_tensor", "failure"})


def _notices_then_another_ending(
    hits: Mapping[str, _Hit],
    by_id: Mapping[str, Signature],
    scores: Mapping[str, float],
    ends: Mapping[str, int],
) -> bool:
    """Only start-up notices speak for a CUDA library missing or mismatched (or no GPU), and a
    strong failure of another cause (not a setting) ended the run, or Colab killed it."""

    def setting(sig: Signature) -> bool:
        return any(sig.causes.get(c, 0.0) > 0 for c in _SETTING_CAUSES)

    if any(setting(by_id[sid]) and sid not in _STARTUP_NOTICES for sid in hits):
        return False
    return _colab_kill_echo(hits, ends) is not None or any(
        sig.role in _ENDING_ROLES
        and not setting(sig)
        and any(w > 0 and scores.get(c, 0.0) >= MIN_SCORE for c, w in sig.causes.items())
        for sig in (by_id[sid] for sid in hits)
    )


# cuSOLVER's major-10 library, CUDA 10.1 to 11.0 only (Linux soname, Windows DLL)
_CUSOLVER_10 = re.compile(r"(?:libcusolver\.so\.10|cusolver64_10\.dll)$")
SERIES_KEPT = 5000
RAN_ON_READINGS = 5  # a series this long was printed by a program that got on with its work
# a memory size in a line that tells several ("1.2 GB -> 2.4 GB -> 3.6 GB")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SIZE_IN_LINE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMG]i?B)\b", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "BYTES": 1, "K": 2**10, "KB": 10**3, "KIB": 2**10, "M": 2**20,
          "MB": 10**6, "MIB": 2**20, "G": 2**30, "GB": 10**9, "GIB": 2**30,
          "KI": 2**10, "MI": 2**20, "GI": 2**30,
          # times (a step's), in seconds
          "US": 1e-6, "MS": 1e-3, "S": 1, "SEC": 1, "SECS": 1, "SECOND": 1,
          "SECONDS": 1}  # fmt: skip


def _reading(value: str, unit: str) -> float | None:
    try:  # a figure printed with thousands separators ("2,280.98") is read whole
        return float(value.replace(",", "")) * _UNITS.get(unit.upper(), 1)
    except ValueError:
        return None


# a memory word, as readings_in_a_line finds it; what its figure is: the one after its colon
# or equals sign when one comes first ("Memory usage after 3 run(s) (in MiB): 812.3"), else the
# first after the word ("mem 812MB")
_MEMORY_WORD = re.compile(r"(?i)(?<![a-z])(?:mem(?:ory)?|v?ram|rss)(?![a-z])")
_AFTER_COLON = re.compile(
    r"^[^:=\n\d]{0,16}(?:\d[^:=\n]{0,30})?[:=]\s*(\d+(?:\.\d+)?)(?:\s*([kKmMgG]i?[bB]?)(?![A-Za-z]))?"
)
_FIRST_FIGURE = re.compile(r"^\D{0,40}?(\d+(?:\.\d+)?)(?:\s*([kKmMgG]i?[bB]?)(?![A-Za-z]))?")


def _inline_readings(line: str) -> list[float]:
    """The figure each memory word on the line introduces, in order (see _MEMORY_WORD)."""
    starts = [m.end() for m in _MEMORY_WORD.finditer(line)]
    values = []
    for a, b in zip(starts, [*starts[1:], len(line)], strict=True):
        part = line[a:b]
        m = _AFTER_COLON.match(part) or _FIRST_FIGURE.match(part)
        if m is not None and (value := _reading(m.group(1), m.group(2) or "")) is not None:
            values.append(value)
    return values if len(values) >= 3 else []


MEMORY_SERIES = (
    "memory_reading",
    "memory_figure",
    "memory_in_use",
    "live_tensor_count",
    "free_used",
    "top_python_res",
    "nvidia_smi_used",
    "nvidia_smi_process_used",
    "top_mem_used",
    "ps_python_rss",
    "docker_stats_mem",
    "sizes_in_a_line",
    "readings_in_a_line",
    "memory_list",
    "memory_profiler_entry",
    "size_column",
    "psutil_svmem_used",
    "memory_percent",
    "memory_info_current",
    "heap_profile_in_use",
    "tracemalloc_total",
    "tasklist_mem",
    "gputil_mem",
)


# a script's own lines, each wording its own series, and what their figure measures
WORDED_SERIES = (
    ("sized_line", "Memory"),
    ("memory_word_line", "Memory"),
    ("object_count_line", "The count of objects or graph operations"),
    ("memory_profiler_row", "Memory at one profiled line of code"),
    ("tracemalloc_stat", "Memory that tracemalloc counted at one line of code"),
)
# series that count things (live tensors, objects, graph operations), not bytes: a count is
# exact, so one that rose at every one of many readings grew, however little (tensorflow#33178:
# gc.get_objects() up 1.6% over six epochs, then the GPU ran out)
COUNTED_SERIES = frozenset({"live_tensor_count", "object_count_line"})
COUNTED_READINGS = 5
# worded series whose lines begin with their own number (memory_profiler's line number,
# tracemalloc's file:line): the same line again is the same series, another line never is
NUMBERED_ROWS = frozenset({"memory_profiler_row", "tracemalloc_stat"})


def _series_rules(
    series: Mapping[str, list[tuple[tuple[str, int, str], float]]],
    add: Any,
    notes: dict[str, list[str]],
) -> bool:
    """Readings that keep growing: memory measured after step after step is a leak. Then, a
    reading below the first of its run starting another run (a restart, the run after a fix),
    each run judged alone. True when the leak rose at every one of many readings (`_steady`)."""
    named = [(series.get(sid) or [], "Memory", sid in COUNTED_SERIES) for sid in MEMORY_SERIES]
    worded = [
        (group, what, sid in COUNTED_SERIES)
        for sid, what in WORDED_SERIES
        for group in _by_wording(series.get(sid) or [], keep_first=sid in NUMBERED_ROWS)
    ]
    for readings, what, counted in [*named, *worded]:
        runs = _runs(readings)
        for run in [readings, *runs] if len(runs) > 1 else [readings]:
            if _leak_in(run, what, add, notes, counted=counted):
                return _steady(run)
    for readings, what, _ in [*named, *worded]:
        if _held_high(readings, what, add, notes):
            return False
    _bare_figures_rule(series.get("bare_figure") or [], add, notes)
    return False


def _leak_ran_out_rule(steady: bool, scores: Mapping[str, float], add: Any, note: Any) -> None:
    """Memory that rose at every one of many readings, to several times the first, then an
    out-of-memory error: the leak used the memory up, so it comes first and the error second
    (as the watch of a process says from its own trace)."""
    oom = max(scores.get("gpu_oom", 0.0), scores.get("host_oom", 0.0))
    leak = scores.get("memory_leak", 0.0)
    if steady and oom > 0 and leak > 0 and oom >= leak:
        add("memory_leak", oom - leak + LEAK_OVER_OOM)
        note("memory_leak", "It rose at every reading until the memory ran out.")


HELD_READINGS = 4
HELD_FLOOR = 2.0  # every reading after the first at least this many times the first
HELD_PEAK = 4.0  # and the highest this many times


def _held_high(
    readings: list[tuple[tuple[str, int, str], float]],
    what: str,
    add: Any,
    notes: dict[str, list[str]],
) -> bool:
    """Memory that jumped far above its first reading and stayed there, up and down but never
    back: what a user prints when each call keeps several times the memory it should
    (Keras 3's predict keeping its traced graphs, a cache filled per input shape). Not a
    steady climb, so only a candidate."""
    values = [v for _, v in readings]
    if len(values) < HELD_READINGS or values[0] <= 0:
        return False
    floor, peak = min(values[1:]) / values[0], max(values) / values[0]
    if floor < HELD_FLOOR or peak < HELD_PEAK:
        return False
    add("memory_leak", 1.2, [readings[0][0], max(readings, key=lambda r: r[1])[0]])
    notes.setdefault("memory_leak", []).append(
        f"{what} rose to {peak:.0f} times its first reading and stayed at least "
        f"{floor:.0f} times it over {len(values) - 1} more readings. "
        "Memory that never comes back after the first calls is kept by each call; if the "
        "work per call is the same, that is a leak."
    )
    return True


BARE_READINGS = 5
BARE_GROWTH = 0.10
BARE_SCAN_BYTES = 1 << 20  # an input this small whole: a paste, not a log file
# a line that is one figure (four digits or more, or three and decimals), maybe quoted, maybe
# after the loop's counter (print(i, rss) writes "100 179.42", an f-string "i=100: 179.42",
# "step 100: 179.42")
# (each run of blanks taken whole, possessively: two runs side by side that could share the
# blanks between them would try every split of a long one)
# (a terminal's colour codes around the line, \x1b[31m ... \x1b[0m, are no part of it)
_BARE_LINE = re.compile(
    rb"(?m)^(?:\x1b\[[\d;]{0,12}m)*+[ \t>]*+(?:(?:[A-Za-z_]\w{0,15}[ \t]*+[=#]?[ \t]*+)?\d{1,7}"
    rb"(?:[ \t]*+[:=,)|][ \t]*+|[ \t]++))?(\d{4,39}(?:\.\d{1,39})?|\d{3}\.\d{1,39})"
    rb"(?:\x1b\[[\d;]{0,12}m)*+[ \t]*+\r?$"
)


def _bare_figures_rule(
    readings: list[tuple[tuple[str, int, str], float]],
    add: Any,
    notes: dict[str, list[str]],
) -> None:
    """Lines that hold one figure and nothing else, rising: what print(process.memory_info()
    .rss) or print(asizeof(model)) writes after each call. Nothing says they are memory, so
    only a candidate; a counter (the same step every time) and a clock (the growth too small
    to see) are not readings."""
    values = [v for _, v in readings]
    if len(values) < BARE_READINGS or values[0] <= 0:
        return
    steps = {b - a for a, b in itertools.pairwise(values)}
    if len(steps) == 1:
        return  # a counter
    ups = sum(b > a for a, b in itertools.pairwise(values))
    growth = values[-1] / values[0] - 1
    if ups >= 0.75 * (len(values) - 1) and growth >= BARE_GROWTH:
        add("memory_leak", 1.6, [readings[0][0], readings[-1][0]])
        notes.setdefault("memory_leak", []).append(
            f"A column of bare figures rose in {ups} of {len(values) - 1} lines, by "
            f"{growth:.0%}. If they are the memory the script printed after each step or "
            "call, it keeps growing."
        )


_FIGURES = re.compile(r"0x[0-9a-fA-F]+|\d+(?:[.:/,-]\d+)*")


def _row_number(text: str) -> re.Match[str] | None:
    """The number a row starts with (memory_profiler's line number, the line after
    tracemalloc's file name): the first figure a space, a tab or a colon ends, so a version in
    the file's path ("python3.8/") is not taken for it."""
    return next(
        (m for m in _FIGURES.finditer(text) if text[m.end() : m.end() + 1] in ("", " ", "\t", ":")),
        None,
    )


def _by_wording(
    readings: list[tuple[tuple[str, int, str], float]], keep_first: bool = False
) -> list[list[tuple[tuple[str, int, str], float]]]:
    """A script's own lines that tell a memory size, grouped by their wording (the line with
    its figures taken out): "After predict: 840 MB" printed after each call is one series,
    "Before predict: 512 MB" another. Spacing aside: a column of figures widens as they grow.
    `keep_first`: the row's own number is part of its wording (a profiler's line number)."""
    groups: dict[str, list[tuple[tuple[str, int, str], float]]] = {}
    for reading in readings:
        text = reading[0][2]
        head = ""
        if keep_first and (m := _row_number(text)) is not None:
            head, text = text[: m.end()], text[m.end() :]
        wording = " ".join((head + _FIGURES.sub("#", text)).split())
        groups.setdefault(wording, []).append(reading)
    return [g for g in groups.values() if len(g) >= 3]


def _runs(
    readings: list[tuple[tuple[str, int, str], float]],
) -> list[list[tuple[tuple[str, int, str], float]]]:
    runs: list[list[tuple[tuple[str, int, str], float]]] = []
    for reading in readings:
        if not runs or reading[1] < runs[-1][0][1]:
            runs.append([])
        runs[-1].append(reading)
    return runs


STAIR_UPS = 0.25  # of the steps, for a series that never falls
STAIR_GROWTH = 0.10
STAIR_LATE = 0.2  # of its growth, in its last third
# a series up at every one of many readings, to several times its first: what ran out was
# used up by the leak, whatever error ended it (real: tests/fixtures/logs/real_h200_jax_leak.txt)
STEADY_READINGS = 8
STEADY_GROWTH = 2.0
LEAK_OVER_OOM = 1.5


def _steady(readings: list[tuple[tuple[str, int, str], float]]) -> bool:
    values = [v for _, v in readings]
    return (
        len(values) >= STEADY_READINGS
        and values[0] > 0
        and all(b > a for a, b in itertools.pairwise(values))
        and values[-1] >= (1 + STEADY_GROWTH) * values[0]
    )


def _leak_in(
    readings: list[tuple[tuple[str, int, str], float]],
    what: str,
    add: Any,
    notes: dict[str, list[str]],
    counted: bool = False,
) -> bool:
    values = [v for _, v in readings]
    if len(values) < 3 or values[0] <= 0:
        return False
    ups = sum(b > a for a, b in itertools.pairwise(values))
    downs = sum(b < a for a, b in itertools.pairwise(values))
    growth = values[-1] / values[0] - 1
    steps = len(values) - 1
    # a few readings must all rise and clearly (three: by half); a long series may dip now
    # and then; a count that rose at every one of many readings grew, by any amount
    enough = growth >= (0.03 if len(values) >= 5 else 0.10 if len(values) == 4 else 0.5) or (
        counted and len(values) >= COUNTED_READINGS and ups == steps
    )
    # a staircase: never down, up now and then (an allocator's pool grown chunk by chunk, a
    # figure rounded or a dump taken twice between rises), and a good part of its growth in its
    # last third; one that climbed and then held is a warm-up, not a leak
    late = values[-1] - values[len(values) * 2 // 3]
    stair = (
        downs == 0
        and ups >= STAIR_UPS * steps
        and growth >= STAIR_GROWTH
        and late >= STAIR_LATE * (values[-1] - values[0])
    )
    if (ups >= 0.75 * steps and enough) or stair:
        add("memory_leak", 4.0, [readings[0][0], readings[-1][0]])
        notes.setdefault("memory_leak", []).append(
            f"{what} grew in {ups} of {len(values) - 1} readings, by {growth:.0%} "
            f"(from the first to the last of {len(values)})."
        )
        return True
    return False


THROUGHPUT_SERIES = ("throughput_reading", "throughput_stat")
SPEED_ONLY_READINGS = 3
SPEED_UNSTEADY_CV = 0.15  # step-to-step spread of a pipeline that cannot keep up


# a traceback's frame, then the code line it ran: a NumPy allocation (or SciPy's toarray)
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
_ALLOCATION = re.compile(
    r"\b(?:np|numpy)\.(?:zeros|ones|empty|full|array|asarray|concatenate|stack|[vh]stack)"
    r"(?:_like)?\(|\.toarray\(\)|\.astype\("
)
CUT_ALLOCATION = 1.6  # a candidate the user can confirm: the error line was left out


def _shown_lines(chunk: Chunk) -> list[str]:
    """The chunk's lines up to its last one with something to show: a trailing line that is
    empty once cleaned (a collector's prefix alone, a colour reset alone) is no last line."""
    lines = chunk.text.split("\n")
    while lines and not clean_line(lines[-1]).strip():
        lines.pop()
    return lines


def _traceback_cut_at_allocation(chunk: Chunk) -> tuple[str, int, str] | None:
    """The paste's last line, when it is the code a traceback's last frame ran and that code
    allocates a NumPy array: the paste (or the thread, which put the error in its title) left
    out the error line, and a MemoryError is what such a line raises when the RAM runs out."""
    if b"Traceback (most recent call last)" not in chunk.raw:
        return None
    lines = _shown_lines(chunk)
    if len(lines) < 3:
        return None
    code, frame = clean_line(lines[-1]), clean_line(lines[-2])
    if _FRAME.match(frame) is None or _ALLOCATION.search(code) is None:
        return None
    return (chunk.source, chunk.first_line + len(lines) - 1, code.strip()[:500])


def _cut_at_allocation_rule(where: tuple[str, int, str] | None, add: Any, note: Any) -> None:
    if where is None:
        return
    add("host_oom", CUT_ALLOCATION, [where])
    note(
        "host_oom",
        "The traceback ends in a NumPy allocation and its error line is missing: when the RAM "
        "runs out, such a line raises MemoryError (an array's size is the product of its "
        "dimensions times its item size). Check the error under the traceback.",
    )


# A paste's last line cut inside a message (a stored excerpt, a copy that stopped short): what
# its start says, weighed at a share of the whole message's weight
CUT_MESSAGE_SHARE = 0.5
CUT_MESSAGE_MIN = 12  # the fewest characters of a message that say which message it is
# the message's first and last characters, found in this order in one example
CUT_HEAD_CHARS = 20
CUT_TAIL_CHARS = 16
CUT_WORDS_MIN = 2  # words of three letters or more, in the message and in its start
SHAPED_KEPT = 4  # sets of signatures whose shaped examples are kept (tests build their own)
_WORD = re.compile(r"[A-Za-z]{3,}")
# an ellipsis or a note where a line was cut ("...", "…", "[truncated]", "(truncated)")
# (the bracketed ones first: "[...]" ends with "...")
_CUT_MARKS = (
    *(f"{o}{w}{c}" for o, c in ("[]", "()") for w in ("...", "…", "truncated", "snip")),
    "...",
    "…",
)
_CUT_MARK_LONGEST = max(map(len, _CUT_MARKS))
_DIGIT_RUN = re.compile(r"\d+")
_BLANK_RUN = re.compile(r"\s+")
# what TensorFlow's C++ log writes before its message: the source file and line
_SOURCE_PREFIX = re.compile(r"^.*?\.(?:cc|cpp|h|py):\d+\]\s*")


def _mid_word(before: str, after: str) -> bool:
    """Whether a cut between these characters fell inside a word (or a number, a name)."""
    return (before[-1:].isalnum() or before[-1:] == "_") and (after.isalnum() or after == "_")


def _shape_of(text: str) -> str:
    """A message's words with every number one digit: the form its examples share."""
    return _BLANK_RUN.sub(" ", _DIGIT_RUN.sub("0", text)).strip()


_Shaped = tuple[tuple[Signature, tuple[str, ...], tuple[str, ...]], ...]
# per set of signatures (the shipped one is built once per process), kept with it
_SHAPED: dict[int, tuple[tuple[Signature, ...], _Shaped]] = {}


def _shaped_examples(signatures: tuple[Signature, ...]) -> _Shaped:
    """The signatures that blame (not a clue such as a source file), each with its examples
    and counterexamples shaped."""
    kept = _SHAPED.get(id(signatures))
    if kept is not None and kept[0] is signatures:
        return kept[1]
    shaped = tuple(
        (
            sig,
            tuple(_shape_of(e) for e in sig.examples),
            tuple(_shape_of(c) for c in sig.counterexamples),
        )
        for sig in signatures
        if not sig.noise
        and sig.role not in FALLBACK_ROLES
        and (sig.role == "dlopen" or any(w > 0 for w in sig.causes.values()))
    )
    if len(_SHAPED) >= SHAPED_KEPT:
        _SHAPED.clear()
    _SHAPED[id(signatures)] = (signatures, shaped)
    return shaped


_Named = tuple[tuple[Signature, dict[str, str]], ...]
# a paste's last line of one word, and the fewest letters of it that may be a cut word
_ONE_WORD = re.compile(r"[A-Za-z]{4,}")
_ONE_WORD_LINE = re.compile(r"([A-Za-z]{5,}):?")


def _one_word_lines(signatures: tuple[Signature, ...]) -> list[tuple[str, Signature]]:
    """The signatures that blame and read a line of one word whole ("Killed", "MemoryError",
    "Aborted"), each with that word, from their examples (looked for only when a paste ends in
    a line of one word)."""
    found: dict[tuple[str, str], tuple[str, Signature]] = {}
    for sig, _, _ in _shaped_examples(signatures):
        for example in sig.examples:
            if (m := _ONE_WORD_LINE.fullmatch(example.strip())) is not None:
                found.setdefault((m.group(1), sig.id), (m.group(1), sig))
    return list(found.values())


def _cut_word(start: str, word: str) -> bool:
    """Whether `start` is `word` cut inside it, with at least half of it kept ("Kill" of
    "Killed", "MemoryE" of "MemoryError"; not "Memo")."""
    return len(start) < len(word) and word.startswith(start) and 2 * len(start) >= len(word)


def _last_line_cut(
    chunk: Chunk, signatures: tuple[Signature, ...]
) -> tuple[tuple[Signature, ...], _Named, tuple[str, int, str]] | None:
    """The signatures whose message the paste's last line may be the cut-off start of: none
    read that line whole, and its message's first and last characters are, in that order, in
    one of each one's examples, which goes on after them in the same word (unless the paste
    marked the cut: a complete line may be a shorter form of the message). A message naming a
    library that did not load (whose weight the library decides) is read as whole when the
    cut left the library's name whole: it, with its groups. A last line of one word is read as a
    one-word line a signature reads whole ("Killed") when it is that word cut, half of it left."""
    lines = _shown_lines(chunk) or [""]
    line = clean_line(lines[-1]).rstrip()
    last = line[-_CUT_MARK_LONGEST:].lower()
    mark = next((m for m in _CUT_MARKS if last.endswith(m)), None)
    marked = mark is not None
    if not marked and line.endswith((".", "!", "?")):
        return None  # a sentence that ended
    kept = line[: len(line) - len(mark)].rstrip() if mark else line  # the one who cut it said so
    message = _shape_of(_SOURCE_PREFIX.sub("", kept, count=1))
    where = (chunk.source, chunk.first_line + len(lines) - 1, line.strip()[:500])
    if _ONE_WORD.fullmatch(message):
        # a line of one word a signature reads whole ("Killed", "MemoryError"), cut inside it
        words = _one_word_lines(signatures)
        cut = tuple(sig for word, sig in words if _cut_word(message, word))
        return (cut, (), where) if cut else None
    if len(message) < CUT_MESSAGE_MIN or len(_WORD.findall(message)) < CUT_WORDS_MIN:
        return None  # too little to tell one message from another; a rule of ===== or dots
    head, tail = message[:CUT_HEAD_CHARS], message[-CUT_TAIL_CHARS:]
    if len(_WORD.findall(head)) < CUT_WORDS_MIN:
        return None  # it starts with a time or a path: the words of a log's prefix, no message
    found: list[Signature] = []
    named: list[tuple[Signature, dict[str, str]]] = []
    for sig, examples, counterexamples in _shaped_examples(signatures):
        if any(tail in c for c in counterexamples):
            continue
        for example in examples:
            at = example.find(head)
            if at < 0 and sig.role != "dlopen":
                continue  # (a library's message starts with its name: the library decides)
            at = max(at, 0)
            end = example.find(tail, at)
            if end < 0 or end + len(tail) >= len(example):
                continue
            after = example[end + len(tail)]
            if marked and after in ".…":
                continue  # the dots are the message's own
            if not marked and not _mid_word(tail, after):
                continue  # a shorter form of the message may end there
            if sig.pattern.search(line) is not None:
                break  # read whole: not cut
            if sig.role != "dlopen":
                found.append(sig)
                break
            # the line completed with the example's rest: its library, if the cut spared it
            m = sig.pattern.search(kept + example[end + len(tail) :])
            if m is not None and m.groupdict().get("lib") and m.end("lib") <= len(kept):
                named.append((sig, {k: v for k, v in m.groupdict().items() if v is not None}))
            break
    if not found and not named:
        return None
    return tuple(found), tuple(named), where


def _cut_message_rule(
    cut: tuple[tuple[Signature, ...], tuple[str, int, str]] | None, add: Any, note: Any
) -> None:
    """Each message the cut line may have been, weighed alike: together, a share of one."""
    if cut is None:
        return
    sigs, where = cut
    for sig in sigs:
        for cause, weight in sig.causes.items():
            if weight > 0:
                add(cause, weight * CUT_MESSAGE_SHARE / len(sigs), [where])
                note(
                    cause,
                    "The paste's last line stops mid-message. What is left of it begins a "
                    "message that means this; the whole line would settle it.",
                )


def _speed_only_rule(
    series: Mapping[str, list[tuple[tuple[str, int, str], float]]],
    add: Any,
    notes: dict[str, list[str]],
) -> None:
    """A log of training speed and nothing else: the question is why training is slow.

    With no error and no warning to explain, the usual answer is an input pipeline that
    cannot feed the accelerator; an unsteady speed (batches that wait for data now and then)
    makes it likelier. Only a candidate: the utilization or a profile decides.
    """
    readings = [r for sid in THROUGHPUT_SERIES for r in series.get(sid) or []]
    values = [v for _, v in readings if v > 0]
    if len(values) < SPEED_ONLY_READINGS:
        return
    steady = values[1:] if len(values) > SPEED_ONLY_READINGS else values  # first: warm-up
    mean = sum(steady) / len(steady)
    cv = math.sqrt(sum((v - mean) ** 2 for v in steady) / len(steady)) / mean
    unsteady = cv >= SPEED_UNSTEADY_CV
    lines = sorted((w for w, _ in readings), key=lambda w: (w[0], w[1]))
    add("input_bound", 1.6 if unsteady else 1.2, [lines[0], lines[-1]])
    spread = f", varying by {cv:.0%} around their mean" if unsteady else ""
    notes.setdefault("input_bound", []).append(
        f"The log shows only training speed ({len(values)} readings{spread}) and no error. "
        "When training is slower than it should be, the usual cause is the input pipeline: "
        "check the GPU utilization while it runs (nvidia-smi dmon) or capture a TensorFlow "
        "profile."
    )


STEP_TIME_SERIES = ("epoch_step_time",)
SLOWING_READINGS = 4  # after the first (warm-up: tracing, autotuning, caches)
SLOWING_FACTOR = 1.5  # the last step at least half as slow again as the first


def _slowing(values: list[float]) -> tuple[float, float] | None:
    """A series of step times that keeps rising (the first, warm-up, left out): its first and
    last value, or None."""
    steady = values[1:]
    if len(steady) < SLOWING_READINGS or steady[0] <= 0:
        return None
    ups = sum(b > a for a, b in itertools.pairwise(steady))
    if ups >= 0.75 * (len(steady) - 1) and steady[-1] >= SLOWING_FACTOR * steady[0]:
        return steady[0], steady[-1]
    return None


def _slowing_rule(
    series: Mapping[str, list[tuple[tuple[str, int, str], float]]],
    add: Any,
    notes: dict[str, list[str]],
) -> bool:
    """Training that gets slower step after step, at the same work per step: the program grows
    something every step (ops added to the graph, functions traced again, tensors or models
    never freed), which is a leak whether or not memory was printed. Step times rising, or a
    speed falling (its inverse). Only a candidate: memory readings decide."""
    times = [series.get(sid) or [] for sid in STEP_TIME_SERIES]
    times += _by_wording(series.get("step_time_line") or [])
    speeds = [r for sid in THROUGHPUT_SERIES for r in series.get(sid) or []]
    found = [(r, _slowing([v for _, v in r])) for r in times]
    found.append((speeds, _slowing([1 / v for _, v in speeds if v > 0])))
    for readings, slowed in found:
        if slowed is None:
            continue
        first, last = slowed
        add("memory_leak", 1.6, [readings[1][0], readings[-1][0]])
        notes.setdefault("memory_leak", []).append(
            f"Each step got slower as the run went on: {last / first:.1f} times as long at the "
            f"end as after the warm-up, over {len(readings) - 1} readings. A program that slows "
            "down at the same work per step usually grows something at every step: ops added "
            "to the graph, a function traced again, tensors or models never freed. Print the "
            "process's memory after each epoch to confirm."
        )
        return True
    return False


def _say(sentences: tuple[str, ...], found: list[dict[str, str]]) -> str | None:
    """The first sentence whose fields all matched in one line, with the numbers in words."""
    for sentence in sentences:
        for groups in found:
            fields = [m.group("group") for m in SAYS_FIELD.finditer(sentence)]
            if all(groups.get(f) for f in fields):

                def fill(m: re.Match[str], groups: dict[str, str] = groups) -> str:
                    value, unit = groups[m.group("group")], m.group("unit")
                    if value[:1].isdigit():
                        value = value.rstrip(".")  # "7.6.4." at the end of a log's sentence
                    if unit == "cudnn":
                        v = int(value) if value.isdigit() and len(value) >= 4 else None
                        return value if v is None else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
                    if unit and value.isdigit():
                        return format_size(int(value) * (1024 if unit == "kib" else 1))
                    return value

                return SAYS_FIELD.sub(fill, sentence)
    return None


def _fixes_that_do_not_apply(hits: Mapping[str, _Hit]) -> dict[str, set[str]]:
    """Per cause, the fixes the evidence rules out: a kernel OOM kill of the whole machine
    (no memory cgroup hit its limit) is not helped by raising a cgroup's limit."""
    kills = hits.get("kernel_oom_kill")
    texts = [text for _, _, text in kills.lines] if kills else []
    cgroup = any("Memory cgroup out of memory" in t or "CONSTRAINT_MEMCG" in t for t in texts)
    machine = any(
        "CONSTRAINT_NONE" in t or re.search(r"(?<!cgroup )Out of memory: Kill", t) for t in texts
    )
    return {"host_oom": {"raise_memory_limit"}} if machine and not cgroup else {}


def _went_on(hits: Mapping[str, _Hit]) -> bool:
    """The program got on with its work (training steps, a progress bar) past the notices."""
    return "training_progress" in hits or "work_progress" in hits


def _asked_and_no_gpu(hits: Mapping[str, _Hit]) -> bool:
    """The log shows TensorFlow asked for its GPUs and the answer was none: an empty list, a
    count of zero, devices that are all CPUs."""
    return "gpu_list_empty" in hits or "gpu_device_not_found" in hits or _cpu_only_devices(hits)


# every device a listing line names (print(tf.config.list_physical_devices()) writes them all
# on one line, where the signature's match is only the first)
_LISTED_KIND = re.compile(
    r"(?:physical_device:|/device:|device_type[:=]\s*['\"])(XLA_CPU|XLA_GPU|CPU|GPU)\b"
)


def _device_kinds(hits: Mapping[str, _Hit]) -> set[str]:
    """The kinds of device the log's device listings name (CPU, GPU, XLA_CPU, XLA_GPU)."""
    devices = hits.get("device_list_entry")
    if devices is None:
        return set()
    named = (
        g.get("kind")
        or g.get("phys")
        or g.get("mapped")
        or g.get("strategy")
        or g.get("listed")
        or g.get("listed_gpu")
        for g in devices.groups
    )
    kinds = {k for k in named if k}
    kinds.update(m.group(1) for _, _, text in devices.lines for m in _LISTED_KIND.finditer(text))
    return kinds


def _cpu_only_devices(hits: Mapping[str, _Hit]) -> bool:
    """The log lists TensorFlow's devices and none of them is a GPU."""
    kinds = _device_kinds(hits)
    return bool(kinds) and not kinds & {"GPU", "XLA_GPU"}


XLA_ONLY_WEIGHT = 3.4  # above the empty answer's own no_gpu_visible


def _xla_gpu_without_gpu(hits: Mapping[str, _Hit]) -> bool:
    """The log lists TensorFlow's devices: an XLA_GPU among them, and no GPU."""
    kinds = _device_kinds(hits)
    return "XLA_GPU" in kinds and "GPU" not in kinds


def _noter(notes: dict[str, list[str]]) -> Callable[[str, str], None]:
    """A function that adds a sentence to a cause's explanation, once."""

    def note(cause: str, text: str) -> None:
        if text not in notes.setdefault(cause, []):
            notes[cause].append(text)

    return note


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


GPU_ANSWER_LINES = 6  # how far below the question its answer may be printed


def _context_rules(
    hits: Mapping[str, _Hit],
    add: Any,
    notes: dict[str, list[str]],
    facts: Facts | None,
    exit_info: ExitInfo | None,
    ends: Mapping[str, int],
) -> None:
    note = _noter(notes)

    # A library that failed to load: which one decides the cause. Several libraries of one
    # install failing are one fact, not several: each cause takes its strongest library's
    # weight, and a little more for each other library that points the same way.
    per_lib: dict[str, dict[str, float]] = {}
    lib_lines: dict[str, list[tuple[str, int, str]]] = {}

    def lib_add(lib: str, cause: str, weight: float, line: list[tuple[str, int, str]]) -> None:
        by_lib = per_lib.setdefault(cause, {})
        by_lib[lib] = max(by_lib.get(lib, 0.0), weight)
        lib_lines.setdefault(cause, []).extend(line)

    for sid in _DLOPEN_SIGNATURES:
        hit = hits.get(sid)
        if hit is None:
            continue
        for (src, n, text), groups in zip(hit.lines, hit.groups, strict=False):
            cut = groups.get("cut")  # the paste ends inside the name
            lib = groups.get("lib") or cut or ""
            line = [(src, n, text)]
            if not lib and sid == "tf_self_check_dll":
                # TF's own import check names cuDNN by its version ("Could not find cuDNN 6."),
                # weighed as a cuDNN library that did not load; a bare traceback frame is less
                if "cuDNN" in text:
                    lib_add("cuDNN", "missing_cuda_libs", 3.2, line)
                    lib_add("cuDNN", "cuda_cudnn_version_mismatch", 1.4, line)
                    note("missing_cuda_libs", "TensorFlow's import check could not find cuDNN.")
                else:
                    lib_add("(unnamed)", "missing_cuda_libs", 1.0, line)
                continue
            if not lib or lib.startswith("libnvinfer"):
                continue  # no library named / TensorRT: optional, known noise
            if cut:
                # a library did not load, which one the paste does not say whole
                lib_add(f"{lib}…", "missing_cuda_libs", CUT_LIB_WEIGHT, line)
                lib_add(f"{lib}…", "cuda_cudnn_version_mismatch", CUT_LIB_WEIGHT * 0.75, line)
                note(
                    "missing_cuda_libs",
                    f"A library could not be loaded; the paste cuts its name off ({lib}…): "
                    "the full line says which one and which version.",
                )
                continue
            if _DRIVER_SIDE.match(lib):
                lib_add(lib, "no_gpu_visible", 3.5, line)
                note(
                    "no_gpu_visible",
                    f"{lib} is part of the NVIDIA driver, not of CUDA: the "
                    "driver is missing here (or the container was started without the GPU).",
                )
            elif (
                pinned := _one_cuda_named(lib, want := cuda_soname(lib)) or brief_cudnn(lib, want)
            ) is not None:
                # the file name says which CUDA (or short-lived cuDNN) the build needs:
                # another one is installed
                lib_add(lib, "cuda_cudnn_version_mismatch", 2.6, line)
                lib_add(lib, "missing_cuda_libs", 2.2, line)
                note("cuda_cudnn_version_mismatch", f"TensorFlow looks for {lib}{pinned}")
            elif want is not None and want[0] >= 11 and RUNTIME_LIB.search(lib):
                # From CUDA 11 on the runtime's file name carries only the major (every 11.x
                # is libcudart.so.11.0): any CUDA 11 would do, so none is installed or on the
                # loader path.
                lib_add(lib, "missing_cuda_libs", 2.8, line)
                lib_add(lib, "cuda_cudnn_version_mismatch", 2.0, line)
                note(
                    "missing_cuda_libs",
                    f"TensorFlow looks for {lib}, which any CUDA "
                    f"{want[0]}.x provides: it is not installed or not on the loader path.",
                )
            else:
                lib_add(lib, "missing_cuda_libs", 3.2, line)
                lib_add(lib, "cuda_cudnn_version_mismatch", 1.4, line)
                optional = " (CUPTI: only the profiler needs it)" if "cupti" in lib.lower() else ""
                note("missing_cuda_libs", f"{lib} could not be loaded{optional}.")

    # TF 2.14+ names no library: "could not find cuda drivers" is its CUDA runtime not loading
    # (tsl/cuda/cudart_stub.cc), whatever the driver. A run that went on past it was only
    # told it runs on the CPU.
    cudart = hits.get("cudart_not_found")
    if cudart and not _went_on(hits):
        lib_add("libcudart", "missing_cuda_libs", 2.8, cudart.lines[:1])
        lib_add("libcudart", "no_gpu_visible", 1.5, cudart.lines[:1])
        # A CUDA image's banner: its CUDA is on the loader path, so one TF cannot load is
        # one of another version than the build's
        image = [
            (where, g["cuda_banner"])
            for where, g in _found(hits, "cuda_installed_stated")
            if g.get("cuda_banner")
        ]
        if image:
            lib_add(
                "libcudart", "cuda_cudnn_version_mismatch", 3.5, [*cudart.lines[:1], image[0][0]]
            )
            note(
                "cuda_cudnn_version_mismatch",
                f"This container image ships CUDA {image[0][1]} on the loader path: a CUDA "
                "runtime TensorFlow cannot load there is one of another version than its build's.",
            )
        note(
            "missing_cuda_libs",
            "TensorFlow could not load the CUDA runtime (libcudart): from TensorFlow 2.14 on, "
            '"could not find cuda drivers" means that, whatever the driver.',
        )

    # Colab's image ships a CUDA toolkit and cuDNN: a CUDA runtime it cannot find there is one
    # of another major than the image's (a TensorFlow pinned to an older build), not a CUDA
    # that is absent.
    if "colab_platform" in hits:
        runtime = [
            lib
            for lib in per_lib.get("missing_cuda_libs", {})
            if cuda_soname(lib) is not None and RUNTIME_LIB.search(lib)
        ]
        if runtime:
            lib_add(
                runtime[0], "cuda_cudnn_version_mismatch", 3.4, hits["colab_platform"].lines[:1]
            )
            note(
                "cuda_cudnn_version_mismatch",
                f"This is Google Colab, whose image comes with its own CUDA: {runtime[0]} "
                "not being there means this TensorFlow was built for another CUDA version "
                "than the image's (often a TensorFlow pinned to an older release).",
            )

    # TF lists every GPU library it failed to open: only one library of the toolkit among
    # them (cuSOLVER, cuSPARSE...) while the runtime and the rest loaded means a CUDA is
    # installed, of a version whose copy of that library has another number (CUDA 11.0's
    # libcusolver.so.10 for a build that wants libcusolver.so.11).
    failed = {lib for libs in per_lib.values() for lib in libs}
    if "gpu_libs_missing" in hits and len(failed) == 1:
        (only,) = failed
        if TOOLKIT_LIB.search(only) and not _NOT_A_TOOLKIT_SIBLING.search(only):
            per_lib.setdefault("missing_cuda_libs", {})[only] = 1.0  # there, by another number
            lib_add(only, "cuda_cudnn_version_mismatch", 4.5, hits["gpu_libs_missing"].lines[:1])
            note(
                "cuda_cudnn_version_mismatch",
                f"Only {only} is missing: the other CUDA libraries loaded, so a CUDA is "
                "installed, of a version whose copy of that library has another number.",
            )

    # TF 1.x's fatal GetConvolveAlgorithms check follows a cuDNN that did not start. Alone, it
    # weighs as the start-up failure itself: in the corpus' TF 1.x logs most often another
    # cuDNN than the build's, else memory held elsewhere. Next to a line that tells how cuDNN
    # failed, it is that same event and adds nothing.
    check = hits.get("conv_algorithms_check_failed")
    if check and not any(k in hits for k in _CUDNN_START_TOLD):
        add("cuda_cudnn_version_mismatch", 2.0, check.lines[:1])
        add("gpu_memory_contention", 1.6, check.lines[:1])
        add("gpu_oom", 0.6, check.lines[:1])
        note(
            "cuda_cudnn_version_mismatch",
            "cuDNN gave TensorFlow no convolution algorithms: it did not start, most often "
            "because it is another version than the one this build needs.",
        )

    # A CUDA library not found and no CUDA compiler either: no toolkit is installed at all.
    toolkit = [lib for lib in per_lib.get("missing_cuda_libs", {}) if TOOLKIT_LIB.search(lib)]
    if toolkit and "nvcc_missing" in hits:
        lib_add(toolkit[0], "missing_cuda_libs", 4.0, hits["nvcc_missing"].lines[:1])
        note(
            "missing_cuda_libs",
            "nvcc is not found either: no CUDA toolkit is installed (or it is not on the PATH).",
        )

    for cause, by_lib in per_lib.items():
        weights = sorted(by_lib.values(), reverse=True)
        add(cause, weights[0] + min(0.6, 0.2 * (len(weights) - 1)), lib_lines[cause])
    # An empty GPU list next to a library that did not load is that failure's symptom.
    symptom_weight = 1.0 if per_lib or "gpu_libs_missing" in hits else 3.0

    # No ptxas on the PATH, so PTX goes to the driver's compiler; routine on Windows, where TF
    # says first that it never runs ptxas there.
    fallback = hits.get("ptxas_not_on_path")
    if fallback and "ptxas_windows_notice" not in hits:
        add("xla_ptxas_libdevice", 3.0, fallback.lines[:1])
        note(
            "xla_ptxas_libdevice",
            "XLA found no ptxas on the PATH and leaves PTX compilation to the driver (slower, "
            "and failing where the driver is older than the code).",
        )

    # XLA's "ptxas X, which is older than Y": blamed when X really is older (TF 1.12 also
    # warned about newer ones).
    for where, g in _found(hits, "ptxas_older_than"):
        have, need = g.get("have", ""), g.get("need", "")
        if have and need and _version_tuple(have) < _version_tuple(need):
            add("xla_ptxas_libdevice", 4.0, [where])
            note(
                "xla_ptxas_libdevice",
                f"XLA found ptxas {have}; it needs {need} or newer to compile correctly.",
            )
            break

    # An nvidia-smi paste with a full GPU: memory was taken before this run.
    # Snapshot after snapshot of one GPU filling up is the run's own growth (a leak).
    nvsmi = hits.get("nvidia_smi_memory")
    rows = [
        (where, int(g.get("used", 0)), int(g.get("total", 0)))
        for where, g in zip(
            nvsmi.lines if nvsmi else [], nvsmi.groups if nvsmi else [], strict=False
        )
    ]
    filling = len(rows) >= 4 and all(
        a[2] == b[2] and a[1] < b[1] for a, b in itertools.pairwise(rows)
    )
    for where, used, total in rows if not filling else []:
        if total and used / total >= 0.5:
            add("gpu_memory_contention", 3.5 if used / total >= 0.9 else 2.2, [where])
            note(
                "gpu_memory_contention",
                f"nvidia-smi shows {used} of {total} MiB ({used / total:.0%}) already in use.",
            )

    # An accelerator that sits idle while its memory is in use waits for its input.
    idle: list[tuple[tuple[str, int, str], float]] = []
    for sid in ("device_utilization", "nvidia_smi_memory"):
        hit = hits.get(sid)
        for where, g in zip(hit.lines if hit else [], hit.groups if hit else [], strict=False):
            util, used, total = g.get("util"), int(g.get("used", 0)), int(g.get("total", 0))
            # nvidia-smi: some work, memory in use but not full (memory held by an idle GPU
            # is someone else's: contention)
            in_use = sid != "nvidia_smi_memory" or (total and 0.05 <= used / total < 0.9)
            if util is not None and in_use and 0 < float(util) <= 25:
                idle.append((where, float(util)))
    if idle:
        add("input_bound", 2.5, [w for w, _ in idle[:2]])
        note(
            "input_bound",
            f"The accelerator was only {min(u for _, u in idle):g}% busy while training: it "
            "spends its time waiting for the next batch.",
        )
    shuffle = hits.get("shuffle_buffer_filling")
    if shuffle and shuffle.count >= 3:
        add("input_bound", 2.0, shuffle.lines[:2])
        note(
            "input_bound",
            f"The shuffle buffer was refilled {shuffle.count} times: each refill stalls training "
            "until the input pipeline has read it (cache the data, or use a smaller buffer).",
        )

    # cuda_diagnostics prints the kernel module's and libcuda's driver versions: a kernel
    # module older than the library is a driver update that did not finish (or no reboot).
    versions = hits.get("driver_reported_versions")
    if versions:
        found = {g.get("which"): g.get("version", "") for g in versions.groups}
        kernel, libcuda = found.get("kernel"), found.get("libcuda") or found.get("DSO")
        if kernel and libcuda and _version_tuple(kernel) < _version_tuple(libcuda):
            add("driver_too_old", 3.5, versions.lines)
            note(
                "driver_too_old",
                f"The loaded kernel driver is {kernel} but libcuda is {libcuda}: the driver in "
                "use is older than its library (finish the driver update, then reboot).",
            )

    # A kernel that died right after `import tensorflow`, before any model code ran: the
    # import itself killed it, and a CPU without AVX is the classic reason.
    if (
        "kernel_died" in hits
        and "tf_import_statement" in hits
        and not _went_on(hits)
        and not any(h in hits for h in ("fit_call", *_RAN_PAST_DEVICE_INIT))
    ):
        add("cpu_instructions_unsupported", 1.2, hits["tf_import_statement"].lines[:1])
        note(
            "cpu_instructions_unsupported",
            "The kernel died with only `import tensorflow` shown, before any model ran: the "
            "import itself crashed it, which is what a CPU without AVX does (check with "
            "`grep -o avx /proc/cpuinfo`, or run the import in a terminal to see the message).",
        )

    # `import tensorflow` and, on the next line, an abort: TensorFlow's CPU check
    # (cpu_feature_guard) aborts the import when the CPU lacks an instruction set the build
    # uses; its F line is what a paste keeps least (it goes to stderr, or scrolls off)
    imported, crashed = hits.get("tf_import_statement"), hits.get("native_crash")
    aborted = [ln for ln in crashed.lines if _ABORT.search(ln[2])] if crashed else []
    aborted += hits["aborted_localized"].lines if "aborted_localized" in hits else []
    started = _went_on(hits) or any(h in hits for h in ("fit_call", *_RAN_PAST_DEVICE_INIT))
    if aborted and not started:
        # a bare abort (not a segfault) before any work: TensorFlow's fatal log lines abort,
        # and its CPU check is the one a paste loses most; a clue among candidates, no verdict
        add("cpu_instructions_unsupported", 0.55, aborted)
        aborts = [
            (src, n, text)
            for src, n, text in aborted
            if imported and any(s == src and 0 < n - m <= 2 for s, m, _ in imported.lines)
        ]
        if aborts:
            add("cpu_instructions_unsupported", 2.0, aborts)
            note(
                "cpu_instructions_unsupported",
                "`import tensorflow` aborted the process at once: TensorFlow's CPU check does "
                "that when the CPU lacks an instruction set the build uses (AVX, AVX2, FMA).",
            )

    # `>>> import tensorflow` at Python's prompt (its banner, or a shell that started it, came
    # first), and the shell's prompt right after it (not one that starts Python, as after a
    # script's code): Python died during the import without
    # a word (Windows prints none when the CPU lacks AVX; on Linux the shell's "Illegal
    # instruction" is the line a paste drops)
    prompt, session = hits.get("shell_prompt"), hits.get("python_interactive")
    if imported and prompt and session and not started:
        back = [ln for ln in prompt.lines if not _STARTS_PYTHON.search(ln[2])]
        died = [
            (src, n, text)
            for src, n, text in imported.lines
            if any(s == src and 0 < m - n <= 2 for s, m, _ in back)
            and any(s == src and m < n for s, m, _ in session.lines)  # typed at Python's prompt
        ]
        if died:
            add("cpu_instructions_unsupported", 2.0, died[:1])
            note(
                "cpu_instructions_unsupported",
                "`import tensorflow` at the Python prompt returned straight to the shell: Python "
                "died in the import, which is what TensorFlow does on a CPU without AVX.",
            )

    # free's swap row all used: the machine ran out of RAM and had paged out all it could (a
    # snapshot, not a verdict: a clue that the host's memory was the limit)
    for where, g in _found(hits, "free_swap"):
        total = parse_size(f"{g['total']}{g.get('tu') or 'M'}") or 0
        used = parse_size(f"{g['used']}{g.get('uu') or 'M'}") or 0
        if total >= SWAP_MIN_BYTES and used >= SWAP_FULL * total:
            add("host_oom", 1.2, [where])
            note(
                "host_oom",
                f"Swap was {used / total:.0%} used ({format_size(used)} of "
                f"{format_size(total)}): the machine had run out of RAM.",
            )
            break

    # TF's allocator warning it ran short ("The caller indicates that this is not a failure"),
    # then a traceback whose error the paste lost: the run failed near the GPU's memory limit.
    # Only a candidate: alone, those warnings are harmless.
    benign, traceback = hits.get("bfc_benign_retry"), hits.get("python_traceback")
    if benign and traceback:
        after = [
            ln
            for ln in traceback.lines
            if any(s == ln[0] and m < ln[1] for s, m, _ in benign.lines)
        ]
        if after:
            add("gpu_oom", 0.8, [benign.lines[0], after[0]])
            note(
                "gpu_oom",
                "TensorFlow's allocator warned that it ran short of GPU memory, and then the "
                "run failed: capture the error at the end of the traceback to be sure.",
            )

    # /proc/cpuinfo pasted: TensorFlow 1.6+ binaries need AVX.
    cpu = hits.get("cpu_flags")
    if cpu and any("avx" not in g.get("flags", "").split() for g in cpu.groups):
        add("cpu_instructions_unsupported", 4.0, cpu.lines[:1])
        note(
            "cpu_instructions_unsupported",
            "The CPU's flags list no avx: TensorFlow's prebuilt binaries (1.6 and later) need it.",
        )
    # the CPU named by its model, from a family before AVX (the flags, where pasted, decide)
    model = hits.get("cpu_model_without_avx")
    if model and not cpu:
        add("cpu_instructions_unsupported", 3.0, model.lines[:1])
        name = model.groups[0].get("model", "this CPU").strip()
        note(
            "cpu_instructions_unsupported",
            f'The CPU is "{name}", the virtual CPU a QEMU/KVM guest gets by default, which '
            "offers no AVX; TensorFlow's prebuilt binaries (1.6 and later) need it. Give the VM "
            "the host's CPU model (host-passthrough)."
            if "KVM" in name or "QEMU" in name
            else "The CPU is of family 15 (a Pentium 4 or D, an AMD K8, or the kvm64 virtual "
            "CPU), which has no AVX; TensorFlow's prebuilt binaries (1.6 and later) need it."
            if name.startswith("cpu family")
            else f"The CPU is an {name}, from a family without AVX, which TensorFlow's prebuilt "
            "binaries (1.6 and later) need.",
        )

    # The user asked for the GPUs and the answer, a few lines on, was empty (a cell's outputs
    # come in its statements' order: a version printed first, a "returns:" typed between).
    asked, empty = hits.get("gpu_query"), hits.get("gpu_list_empty")
    if asked and empty:
        for src, n, text in empty.lines:
            if any(s == src and 0 < n - m <= GPU_ANSWER_LINES for s, m, _ in asked.lines):
                add("no_gpu_visible", symptom_weight, [*asked.lines[:1], (src, n, text)])
                note("no_gpu_visible", "Asked for its GPUs, TensorFlow answered with none.")
                break

    # `gpus[0]` in the GPU set-up, then "list index out of range": the list of GPUs was empty.
    indexed, index_error = hits.get("gpu_list_indexed"), hits.get("index_out_of_range")
    if indexed and index_error:
        for src, n, text in index_error.lines:
            if any(s == src and 0 < n - m <= 3 for s, m, _ in indexed.lines):
                add("no_gpu_visible", 3.5, [*indexed.lines[:1], (src, n, text)])
                note(
                    "no_gpu_visible",
                    "The program took the first GPU of TensorFlow's list and the list was empty.",
                )
                break

    # Many ops placed, every one of them on the CPU: there was no GPU to place them on (a few
    # CPU placements alone are input-pipeline ops, which run on the CPU anyway).
    placed = hits.get("op_placed_on_cpu")
    if placed and placed.count >= 3 and "op_placed_on_gpu" not in hits:
        add("no_gpu_visible", symptom_weight, placed.lines[:2])
        note("no_gpu_visible", f"All {placed.count} ops TensorFlow placed went to the CPU.")

    # A device list that shows only the CPU: TensorFlow found no GPU.
    devices = hits.get("device_list_entry")
    if devices and _cpu_only_devices(hits):
        add("no_gpu_visible", symptom_weight, devices.lines[:2])
        note("no_gpu_visible", "The devices TensorFlow lists are CPU only.")
    elif devices and _xla_gpu_without_gpu(hits):
        # TF 1.14-2.3 list an XLA_GPU whenever the driver finds the card; the GPU device itself
        # needs the CUDA libraries TF opens (tensorflow#30748, #38990: CUDA 10.2 where the
        # build wanted 10.1). The card is seen: its libraries did not load.
        add("cuda_cudnn_version_mismatch", XLA_ONLY_WEIGHT, devices.lines[:2])
        add("missing_cuda_libs", XLA_ONLY_WEIGHT - 0.4, devices.lines[:2])
        for cid in ("cuda_cudnn_version_mismatch", "missing_cuda_libs"):
            note(
                cid,
                "TensorFlow lists an XLA_GPU but no GPU: the driver found the card, and the "
                "CUDA libraries TensorFlow needs for its GPU device did not load.",
            )

    # TF 1.x printed free vs total memory when it created the device (1.0-1.2: two lines).
    readings: list[tuple[tuple[str, int, str], int | None, int | None]] = []
    free = hits.get("tf1_free_memory")
    if free:
        for where, g in zip(free.lines, free.groups, strict=False):
            t = parse_size(g.get("total", "") + g.get("tu", ""))
            f = parse_size(g.get("free", "") + g.get("fu", ""))
            readings.append((where, t, f))
    split = hits.get("tf1_memory_lines")
    if split:
        pending: int | None = None
        for where, g in zip(split.lines, split.groups, strict=False):
            if g.get("which") == "Total":
                pending = parse_size(g.get("size", ""))
            elif pending is not None:
                readings.append((where, pending, parse_size(g.get("size", ""))))
                pending = None
    for (src, n, text), t, f in readings:
        if t and f is not None and f < 0.5 * t:
            # the less was free, the surer: a card nearly full before TF began was held
            add("gpu_memory_contention", _held_weight(f / t), [(src, n, text)])
            note(
                "gpu_memory_contention",
                f"Only {f / 2**30:.1f} of {t / 2**30:.1f} GiB was free when TensorFlow started.",
            )

    # TF 2.x says how much it took when it created the device: far under the card, the rest
    # was held before it started (a size that is a multiple of 256 MB is a limit the user set).
    _small_device_rule(hits, add, note, facts)

    # A tensor OOM on the CPU device is host memory, not GPU memory.
    tensor = hits.get("oom_allocating_tensor")
    on_cpu = _tensor_oom_on_cpu(hits)
    if tensor and on_cpu:
        add("gpu_oom", -4.0)
        add("host_oom", 4.0, [*tensor.lines, *on_cpu])
        note("host_oom", "The failed allocation was on the CPU device: host RAM ran out.")

    _initializer_oom_rule(hits, add, note)
    _backpedal_rule(hits, add, note)
    _small_refusal_rule(hits, add, note)
    _host_alloc_rule(hits, add, note)
    _colab_interrupt_rule(hits, ends, add, note)
    _small_pinned_rule(hits, add, note)
    _torch_oom_rule(hits, add, note)
    _cpu_only_pip_rule(hits, add, note)
    _rocm_fault_rule(hits, add, note)
    _died_loading_native_rule(hits, add, note)

    # BFC out-of-memory: the request size and the other clues tell the three causes apart.
    # cuDNN/cuBLAS handle failures plus a small device: someone else had the memory.
    created = hits.get("created_device_memory")
    if created and any(k in hits for k in ("cudnn_handle_failed", "cublas_handle_failed")):
        mbs = [int(g.get("mb", "0")) for g in created.groups]
        note(
            "gpu_memory_contention",
            f"TensorFlow created its GPU device with "
            f"{min(mbs)} MB; cuDNN/cuBLAS then could not get memory for their handles.",
        )

    # How the process ended.
    if exit_info is not None:
        if exit_info.signal == "SIGKILL" and exit_info.oom_kill_record:
            line = [("kernel log", 0, exit_info.oom_kill_line or "OOM kill record")]
            add("host_oom", 6.0, line)
            note(
                "host_oom",
                "The process was killed by SIGKILL and the kernel recorded an "
                "out-of-memory kill for it.",
            )
        elif exit_info.signal == "SIGILL":
            add("cpu_instructions_unsupported", 3.0)
            note("cpu_instructions_unsupported", "The process died of SIGILL.")
        elif exit_info.signal == "SIGKILL":
            add("host_oom", 1.5)

    # Environment facts: who else holds VRAM.
    if facts is not None and any(
        c in hits
        for c in (
            "cudnn_handle_failed",
            "cublas_handle_failed",
            "bfc_oom",
            "cuda_out_of_memory",
            "blas_launch_failed",
        )
    ):
        for name in facts:
            if name.endswith(".processes") and name.startswith("gpu"):
                procs = facts.value(name) or []
                held = sum(p.get("used_mib") or 0 for p in procs if isinstance(p, dict))
                total = facts.value(name.replace(".processes", ".memory_total_mib")) or 0
                if total and held > 0.5 * total:
                    add("gpu_memory_contention", 3.0)
                    note(
                        "gpu_memory_contention",
                        f"Other processes hold {held} of {total} MiB on this GPU.",
                    )


# A pool defragmented and an allocation that still failed: fragmentation's own sign.
GC_THEN_OOM = 6.0
_GPU_ALLOCATION_FAILED = ("bfc_oom", "oom_allocating_tensor", "cuda_out_of_memory")


def _defragmented_then_failed_rule(
    ooms: list[tuple[str, BfcOom]],
    hits: Mapping[str, _Hit],
    add: Any,
    note: Callable[[str, str], None],
) -> None:
    """TF's allocator said it deallocated free regions to re-allocate a larger one ("Garbage
    collection: ... to avoid OOM due to memory fragmentation") and an allocation failed all
    the same: the memory was there but not in one piece. Unless the allocator's own numbers
    show the pool full, which is the workload's size."""
    gc = hits.get("bfc_garbage_collection")
    if gc is None or not any(sid in hits for sid in _GPU_ALLOCATION_FAILED):
        return
    if any(o.verdict() == "workload_too_big" for _, o in ooms if not o.benign):
        return
    add("fragmentation", GC_THEN_OOM, gc.lines[:1])
    note(
        "fragmentation",
        "TensorFlow's allocator defragmented its memory pool to make room for a larger "
        "block, and an allocation failed after that: the free memory was in pieces too "
        "small for the request.",
    )


_VERDICT_CAUSE = {
    "workload_too_big": "gpu_oom",
    "fragmentation": "fragmentation",
    "small_pool": "gpu_memory_contention",
}


FRAGMENTED_POOL_NOT_OOM = 4.0


def _bfc_rules(
    ooms: list[tuple[str, BfcOom]],
    hits: Mapping[str, _Hit],
    add: Any,
    notes: dict[str, list[str]],
    facts: Facts | None,
) -> None:
    """The BFC allocator's own numbers tell gpu_oom, fragmentation and contention apart."""

    note = _noter(notes)

    failures = [(src, o) for src, o in ooms if not o.benign]
    benign = [(src, o) for src, o in ooms if o.benign]
    header_hits = hits.get("bfc_oom")
    header_lines = header_hits.lines if header_hits else []

    def lines_of(src: str, oom: BfcOom) -> list[tuple[str, int, str]]:
        return [ln for ln in header_lines if ln[0] == src and ln[1] in oom.lines]

    if failures and all(o.device == "CPU" for _, o in failures):
        # TF's CPU allocator (or pinned host memory) ran out: host RAM, not GPU memory.
        for other, w in (
            ("gpu_oom", -2.0),
            ("fragmentation", -1.0),
            ("gpu_memory_contention", -1.0),
        ):
            add(other, w)
        src, oom = failures[-1]
        add("host_oom", 5.0, lines_of(src, oom))
        note(
            "host_oom",
            "The allocator that ran out is TensorFlow's CPU allocator: host RAM "
            "(or the limit put on it) was exhausted, not GPU memory. " + oom.sentence(),
        )
        return
    gpu_total = None
    if facts is not None:
        totals = [facts.value(n) for n in facts if n.endswith(".memory_total_mib")]
        known = [int(t) << 20 for t in totals if isinstance(t, int)]
        gpu_total = max(known) if len(known) == 1 else None
    decided = False
    for src, oom in failures:
        cause = _VERDICT_CAUSE.get(oom.verdict(gpu_total))
        if cause is None and oom.limit_bytes and oom.in_use_bytes:
            # No request size (the paste starts inside the dump), but a full pool says enough;
            # so does a pool with much free whose free memory lies in small pieces only
            free = oom.limit_bytes - oom.in_use_bytes
            largest = oom.largest_free_block_bytes
            if oom.in_use_bytes >= 0.9 * oom.limit_bytes:
                add("gpu_oom", 1.5, lines_of(src, oom))
                note("gpu_oom", oom.sentence())
            elif largest and free >= 0.3 * oom.limit_bytes and largest <= 0.25 * free:
                add("fragmentation", 1.5, lines_of(src, oom))
                note(
                    "fragmentation",
                    f"{free / 2**30:.2f} GiB of the {oom.limit_bytes / 2**30:.2f} GiB pool was "
                    f"free when it ran out, but no free block was over "
                    f"{largest / 2**20:.0f} MiB: the memory is there, not in one piece.",
                )
            continue
        if cause is None:
            continue
        decided = True
        add(cause, 3.5, lines_of(src, oom))
        note(cause, oom.sentence())
        if cause == "fragmentation":
            # free memory enough in total, no piece big enough: the allocator's own numbers
            # say the ask would have fitted, so the out-of-memory lines around it are not a
            # workload too big (real: tests/fixtures/logs/real_h200_jax_fragmentation.txt)
            add("gpu_oom", -FRAGMENTED_POOL_NOT_OOM)
        if cause == "gpu_memory_contention":  # the numbers are the OOM's, whoever held it
            add("gpu_oom", 0.5, lines_of(src, oom))
            note("gpu_oom", oom.sentence())
    if decided or not failures:
        return
    # No usable numbers (a pasted header only): judge by the request size and what else
    # the log shows.
    biggest = max((o.request_bytes or 0) for _, o in failures)
    lines = [ln for src, o in failures for ln in lines_of(src, o)]
    if benign and max((o.request_bytes or 0) for _, o in benign) >= 8 * biggest:
        # A huge allocation retried beside a small one that failed: the pool holds big
        # chunks and cannot serve the small request contiguously. (A failed request of a
        # few times less is the workload's own: the pool is full for both.)
        add(
            "fragmentation",
            3.0,
            lines + [ln for s, o in benign for ln in _benign_lines(hits, s, o)],
        )
        note(
            "fragmentation",
            "The allocator retried a very large allocation and failed a far smaller "
            "one: memory is there, but not in one piece.",
        )
    elif biggest and biggest < 256 << 20:
        add("gpu_memory_contention", 1.6, lines)
        note(
            "gpu_memory_contention",
            f"Even a small allocation ({biggest / 2**20:.1f} MiB) "
            "failed: the memory pool was already almost full, which usually means other "
            "processes (another notebook) hold the GPU memory.",
        )
    elif biggest >= 1 << 30:
        add("gpu_oom", 1.5, lines)
        note("gpu_oom", f"A single tensor needed {biggest / 2**30:.2f} GiB.")


INITIALIZER_OOM_MAX_BYTES = 1 << 30  # a weight this big may simply not fit the card
INITIALIZER_TINY_BYTES = 16 << 20  # a bias, a norm's scale: rarely the weight that crosses a limit


_AND_TYPE = re.compile(r"and type (\w+)")
_BLANK_BYTES = b" \t\r\n"


def _shown_end(raw: bytes) -> int:
    """Where the text's last shown character ends: blanks after it, and lines a terminal
    shows empty (a colour code alone, "\\x1b[0m" reset at the end of output), left out."""
    end = len(raw)
    while True:
        while end and raw[end - 1] in _BLANK_BYTES:
            end -= 1
        start = raw.rfind(b"\n", 0, end) + 1
        tail = raw[start:end]
        if start == 0 or b"\x1b" not in tail or clean_line(tail.decode("utf-8", "replace")).strip():
            return end
        end = start


_INITIALIZER_ERRORS = ("oom_allocating_tensor", "dst_tensor_not_initialized")


_CPU_DEVICE = re.compile(r"/(?:device:CPU|cpu):\d|\ballocator (?:mkl)?cpu", re.IGNORECASE)
NODE_LINES = 3  # the op's line ([[Node: ...]], [Op:...]) follows its error within this many


def _just_below(lines: Sequence[tuple[str, int, str]], src: str, n: int) -> list[int]:
    """The indices of `lines` in input `src` on line `n` or up to NODE_LINES below it: the op
    line that belongs to the error on line n."""
    return [i for i, (s, m, _) in enumerate(lines) if s == src and 0 <= m - n <= NODE_LINES]


def _tensor_oom_on_cpu(hits: Mapping[str, _Hit]) -> list[tuple[str, int, str]]:
    """The lines that place a tensor's failed allocation on the CPU device (none: it was not,
    or the log does not say). TF 1.4+ names the device in the error; TF 1.0-1.14 name it in the
    node line under the error, the op's own `_device` (the first node line is the op that
    failed; a _Recv/_Send there moves a tensor between devices, and says nothing of where the
    memory ran out)."""
    tensor = hits.get("oom_allocating_tensor")
    if tensor is None:
        return []
    named = [ln for ln in tensor.lines if _CPU_DEVICE.search(ln[2])]
    if named:
        return named
    nodes = hits.get("node_placed_on")
    if nodes is None:
        return []
    for src, n, _ in tensor.lines:
        below = [i for i in _just_below(nodes.lines, src, n) if i < len(nodes.groups)]
        if below:
            first = min(below, key=lambda i: nodes.lines[i][1])
            g = nodes.groups[first]
            if g.get("dev", "").lower() == "cpu" and not g.get("op", "").startswith("_"):
                return [nodes.lines[first]]
    return []


def _initializer_oom(
    hits: Mapping[str, _Hit],
) -> tuple[tuple[str, int, str], tuple[str, int, str], int] | None:
    """An out-of-memory error while a variable got its first value (TF 1.x's initializers,
    TF 2.x's random weights, a checkpoint's restore), with a weight well under any card: the
    error line, the op's line and the weight's size (0: not stated). The error is TF's "OOM
    when allocating tensor" or TF 1.x's "Dst tensor is not initialized" (a copy to the GPU
    that found no memory). Only for an error without the allocator's numbers, which tell for
    themselves."""
    init = hits.get("oom_at_initializer")
    errors = [hits[sid] for sid in _INITIALIZER_ERRORS if sid in hits]
    if not errors or init is None or "bfc_oom" in hits or "bfc_dump" in hits:
        return None
    for (src, n, text), groups in (
        found for hit in errors for found in zip(hit.lines, hit.groups, strict=False)
    ):
        at = [init.lines[i] for i in _just_below(init.lines, src, n)]
        if not at or "device:CPU" in text:
            continue
        dims = [int(d) for d in re.findall(r"\d+", groups.get("shape") or "")]
        typed = _AND_TYPE.search(groups.get("rest") or "")
        # an unstated type is float32, the weights' usual one; an unknown one counts a byte each
        size = tensor_nbytes(dims, typed[1] if typed else "float") or math.prod(dims)
        if not dims:
            size = 0  # no shape stated
        if size < INITIALIZER_OOM_MAX_BYTES:
            return (src, n, text), at[0], size
    return None


# TF's stream executor, and XLA's under JAX ("Failed to allocate device memory of 104.85GiB
# (112583507968 bytes)": real, tests/fixtures/logs/real_h200_jax_other_process.txt)
_DEVICE_ALLOC_FAILED = re.compile(
    r"failed to allocate \S+ \((\d+) bytes\) from device"
    r"|Failed to allocate device memory of \S+ \((\d+) bytes\)"
)
BACKPEDAL = (0.85, 0.95)  # TF's allocator asks for 90% of what the device refused, again
BACKPEDAL_WEIGHT = 2.5


def _device_refusals(hits: Mapping[str, _Hit]) -> list[tuple[tuple[str, int, str], int]]:
    """Each "failed to allocate N from device" line the log kept, with N in bytes."""
    hit = hits.get("cuda_out_of_memory")
    return [
        (line, int(m.group(1) or m.group(2)))
        for line in (hit.lines if hit else [])
        if (m := _DEVICE_ALLOC_FAILED.search(line[2])) is not None
    ]


def _backpedal_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """The allocator asking the device for its region, refused, then again for 90% of it and
    90% of that (BFCAllocator::Extend backing off; XLA's under JAX the same): the memory it
    counted as free when it sized its pool was no longer there, taken outside it (another
    process)."""
    asked = _device_refusals(hits)
    for (a, first), (b, second), (c, third) in zip(asked, asked[1:], asked[2:], strict=False):
        ratios = (second / first, third / second) if first and second else (0.0, 0.0)
        if all(BACKPEDAL[0] <= r <= BACKPEDAL[1] for r in ratios):
            add("gpu_memory_contention", BACKPEDAL_WEIGHT, [a, b, c])
            note(
                "gpu_memory_contention",
                f"The GPU allocator asked for {format_size(first)}, then for less and less "
                f"({format_size(second)}, {format_size(third)}): memory it had counted as "
                "free when it sized its pool was taken by then.",
            )
            return


SMALL_REFUSAL = 256 << 20  # less than any model's working set: the card was already full


def _small_refusal_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """The driver refusing a small allocation (a cuDNN workspace, a pool's next few MB): the
    GPU had less than that left, so its memory was held before the run needed it (another
    process, or a TensorFlow pool that took it all)."""
    for line, size in _device_refusals(hits):
        if size < SMALL_REFUSAL:
            add("gpu_memory_contention", 1.0, [line])
            note("gpu_memory_contention", f"The GPU refused even {format_size(size)}: it was full.")
            return


# half a Colab VM's 12.7 GB in a few allocations (the process holds more besides), or most of
# what a desktop has spare: Colab's "session crashed after using all available RAM" is a
# dialog, not a line, so these are all a paste from there holds
HOST_ALLOC_HEAVY = 6 << 30


def _host_alloc_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """tcmalloc granted huge host allocations (each one alone is only a hint): together they
    took most of a Colab VM's RAM or a desktop's spare memory, so the process that was
    later killed or hung was most likely out of host RAM."""
    hit = hits.get("host_large_alloc")
    if hit is None or len(hit.groups) < 2:
        return
    total = sum(int(g.get("bytes") or 0) for g in hit.groups)
    if total >= HOST_ALLOC_HEAVY:
        add("host_oom", 0.6, hit.lines[:3])
        note(
            "host_oom",
            f"The process took {format_size(total)} of host memory in {len(hit.groups)} "
            "allocations of a gigabyte or more.",
        )


# as sure as a "Killed" line: the stop button would have had Python raise KeyboardInterrupt
COLAB_INTERRUPT_WEIGHT = 2.5


def _colab_kill_echo(
    hits: Mapping[str, _Hit], ends: Mapping[str, int]
) -> tuple[str, int, str] | None:
    """The lone "^C" a run on Colab ended with, when Python never saw it as an interrupt (no
    KeyboardInterrupt): Colab's shell echoes ^C when the process a cell started is killed, and
    Colab kills it when the VM's RAM runs out. Only on Colab (its paths, its allocator's
    lines), and only as the input's last line (`ends`): in a terminal, ^C is a key."""
    echo = hits.get("interrupt_echo")
    if echo is None or "keyboard_interrupt" in hits:
        return None
    if "colab_platform" not in hits and "host_large_alloc" not in hits:
        return None
    # (a hit keeps its first few lines: a run that echoed ^C more often ends unread)
    return next((w for w in reversed(echo.lines) if ends.get(w[0]) == w[1]), None)


def _colab_interrupt_rule(
    hits: Mapping[str, _Hit], ends: Mapping[str, int], add: Any, note: Any
) -> None:
    """Colab's echo of the kill that ended a run (_colab_kill_echo): host RAM ran out."""
    last = _colab_kill_echo(hits, ends)
    if last is None:
        return
    add("host_oom", COLAB_INTERRUPT_WEIGHT, [last])
    note(
        "host_oom",
        "The output ends in ^C with no KeyboardInterrupt from Python: on Colab that is the "
        "process the cell started being killed, which Colab does when the VM's RAM runs out "
        "(watch the RAM gauge while it runs).",
    )


PINNED_TINY = 16 << 20  # no machine's RAM runs out for a pinned buffer this small
_PINNED_SIZE = re.compile(r"(?:size:?|alloc(?:ate)?)\s+(\d+)")


def _small_pinned_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """The driver refused a small pinned host buffer: RAM that short would have had the
    process killed first. Pinned memory is mapped for the GPU, and TensorFlow's grab-all pool
    had left the driver no room on the device: allow_growth is the fix."""
    hit = hits.get("host_pinned_alloc_failed")
    if hit is None:
        return
    sizes = [int(m[1]) for _, _, t in hit.lines if (m := _PINNED_SIZE.search(t))]
    if sizes and max(sizes) < PINNED_TINY:
        add("host_oom", -3.0)
        add("gpu_memory_contention", 2.5, hit.lines[:2])
        note(
            "gpu_memory_contention",
            f"The driver refused a pinned host buffer of only {format_size(max(sizes))}: "
            "not the machine's RAM, but no room left on the GPU to map it, which TensorFlow's "
            "default of taking all GPU memory causes.",
        )


def _one_cuda_named(lib: str, want: tuple[int, int | None] | None) -> str | None:
    """What a CUDA library's file name pins down, when it names so narrow a range of CUDA
    releases that another release installed is the common reason it is not found; else None.

    Up to CUDA 10 the name carries the minor too (libcudart.so.10.1, libcublas.so.9.0,
    cublas64_80.dll). cuSOLVER kept its major 10 from CUDA 10.1 to 11.0 (TF 2.1-2.4), and
    CUDA 11.1 on ships libcusolver.so.11.
    """
    if (
        want is not None
        and want[1] is not None
        and want[0] <= 10
        and TOOLKIT_LIB.search(lib)
        and "cupti" not in lib.lower()  # CUPTI lives off the loader path (extras/)
    ):
        return (
            f": CUDA {want[0]}.{want[1]} is the version this build needs, and another one is "
            "likely installed."
        )
    if _CUSOLVER_10.match(lib):
        return (
            ", which only CUDA 10.1 to 11.0 provide: a later CUDA (libcusolver.so.11) is "
            "likely installed."
        )
    return None


def _cpu_only_pip(version: str) -> bool:
    """pip's `tensorflow` of this version is a CPU-only build: every release before 2.1 but
    1.15.0 (TF 1.15.0 and 2.1.0 release notes; 1.15.2 split the packages again)."""
    parts = tuple(int(p) for p in version.split("."))
    return parts < (2, 1) and parts[:3] != (1, 15, 0)


def _cpu_only_pip_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """The pip `tensorflow` package installed is a CPU-only release, and no GPU package (nor a
    GPU device made) is in sight: TensorFlow cannot use the GPU at all."""
    hit = hits.get("pip_tensorflow_version")
    if hit is None or "tensorflow_gpu_package" in hits or "created_device_memory" in hits:
        return
    for where, groups in zip(hit.lines, hit.groups, strict=False):
        version = groups.get("v1") or groups.get("v2") or groups.get("v3") or ""
        if version and _cpu_only_pip(version):
            add("no_gpu_visible", 2.5, [where])
            note(
                "no_gpu_visible",
                f"pip's tensorflow {version} is a CPU-only build: before 2.1 the GPU build "
                "was the separate tensorflow-gpu package.",
            )
            return


# the AMD ISAs TF-ROCm builds code for: its own "The supported AMDGPU versions are gfx1030,
# gfx900, gfx906, gfx908, gfx90a" (TF-ROCm 2.12-2.14's gpu_device.cc), and the MI300 (gfx94x)
# and RDNA3 (gfx1100) targets its later releases add
TF_ROCM_ISAS = frozenset(
    {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx1030", "gfx1100"}
)


def _foreign_isa(stated: _Hit, forced: bool) -> tuple[tuple[str, int, str], str | None] | None:
    """The first line that shows an AMD GPU TF-ROCm has no code for, and its ISA: one outside
    TF_ROCM_ISAS, or (when forced counts) one run as another with HSA_OVERRIDE_GFX_VERSION,
    whose ISA the line does not say (None)."""
    for where, groups in zip(stated.lines, stated.groups, strict=False):
        isa = groups.get("isa")
        if (isa is None and forced) or (isa is not None and isa.lower() not in TF_ROCM_ISAS):
            return where, isa
    return None


FAULT_STACK_TOP = 3  # the frame that died is printed this close under the stack's header


def _died_loading_native_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """Python's fault handler printed the stack of a thread that died creating an extension
    module, and the line that named the signal is gone: the process died loading a native
    library, which on `import tensorflow` is TensorFlow's own, and a CPU without AVX dies there
    (SIGILL). Ranked just above a native crash's other candidates, no more."""
    stack, top = hits.get("faulthandler_stack"), hits.get("faulthandler_loading_native")
    if stack is None or top is None:
        return
    if any(sid in hits for sid in known_signatures.signature("faulthandler_stack").echo_of):
        return  # the signal is named: its own signatures say what it means
    died = [
        (src, n, text)
        for src, n, text in top.lines
        if any(s == src and 0 < n - m <= FAULT_STACK_TOP for s, m, _ in stack.lines)
    ]
    if died:
        add("cpu_instructions_unsupported", 0.6, died[:1])
        note(
            "cpu_instructions_unsupported",
            "Python died while loading a native library (importlib was creating an extension "
            "module): on `import tensorflow` that is TensorFlow's, and a CPU without AVX dies "
            "there. The line naming the signal is not in the paste.",
        )


def _rocm_fault_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """A GPU memory access fault on an AMD GPU the ROCm build has no code for (its ISA is not
    one TF-ROCm supports, or it is run as another with HSA_OVERRIDE_GFX_VERSION): the fault is
    the unsupported GPU's, not a program's bad address or the hardware's.

    Without a fault, such a GPU listed (the RX 4xx/5xx's gfx803, the RX 5700's gfx1010, the
    RX 6700's gfx1031) is still, from ROCm 4.0 on, the likeliest reason a TF-ROCm run on it
    fails or hangs, whatever it printed. Only a candidate: older TF-ROCm releases still built
    for gfx803."""
    fault = hits.get("gpu_memory_access_fault")
    stated = hits.get("amd_isa_stated")
    found = None if stated is None else _foreign_isa(stated, forced=fault is not None)
    if found is None:
        return
    where, isa = found
    if fault is not None:
        add("unsupported_gpu_arch", 4.5, [where, *fault.lines[:1]])
        add("illegal_memory_access_or_hw", -2.0)
        why = f"its ISA {isa} is not one" if isa else "it is run as another GPU, not as one"
        note(
            "unsupported_gpu_arch",
            f"The AMD GPU faulted, and {why} TensorFlow's ROCm build has code for.",
        )
        return
    add("unsupported_gpu_arch", 1.2, [where])
    note(
        "unsupported_gpu_arch",
        f"The AMD GPU's ISA is {(isa or '').lower()}, not one TensorFlow's ROCm builds have "
        f"code for ({', '.join(sorted(TF_ROCM_ISAS))}); ROCm 4.0 and later do not support it.",
    )


_TORCH_OTHER_PROCESS = re.compile(r"Process \d+ has ([0-9.]+ ?(?:[KMGT]i?B|bytes)) memory in use")


def _torch_oom_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """PyTorch out of GPU memory, told apart by the sizes its message states.

    - Other processes it lists ("Process 643 has 125.51 GiB memory in use", PyTorch 2.1+) hold
      a quarter of the card or more, and more than this process: memory held elsewhere.
    - It held little of the card itself and almost nothing was free: the rest was held
      elsewhere (another process, a TensorFlow pool in the same notebook).
    - It had more reserved but unallocated than it asked for (2.1+): the free space was in
      pieces too small, fragmentation (the caching allocator frees whole unused segments and
      retries before it gives up, so what is left is split across segments still in use).
    Recorded for real on an H200: tests/fixtures/logs/real_h200_torch_*.txt.
    """
    hit = hits.get("torch_cuda_oom")
    if hit is None or not hit.groups:
        return
    where, groups = hit.lines[0], hit.groups[0]

    def size(*keys: str) -> int | None:
        for k in keys:
            if groups.get(k):
                return parse_size(groups[k].replace(" ", ""))
        return None

    total, free, asked = size("total", "total2"), size("free", "free2"), size("size")
    held, unalloc = size("reserved", "own"), size("unalloc")
    others = sum(
        parse_size(m.replace(" ", "")) or 0
        for m in _TORCH_OTHER_PROCESS.findall(groups.get("others") or "")
    )
    if total and others >= 0.25 * total and others > (held or 0):
        add("gpu_oom", -2.5)
        add("gpu_memory_contention", 4.5, [where])
        own = f"; this process had {format_size(held)}" if held is not None else ""
        note(
            "gpu_memory_contention",
            f"Other processes held {format_size(others)} of the GPU's {format_size(total)}{own}.",
        )
    elif total and free is not None and held is not None:
        if held < 0.4 * total and free < 0.1 * total:
            add("gpu_oom", -2.5)
            add("gpu_memory_contention", 4.0, [where])
            note(
                "gpu_memory_contention",
                f"PyTorch held only {format_size(held)} of the GPU's {format_size(total)} "
                f"and {format_size(free)} was free: the rest was held elsewhere.",
            )
        elif asked and unalloc and unalloc >= asked and unalloc >= 0.1 * total:
            add("gpu_oom", -2.5)
            add("fragmentation", 5.0, [where])
            note(
                "fragmentation",
                f"PyTorch had {format_size(unalloc)} reserved but unallocated, more than "
                f"the {format_size(asked)} it asked for, but not in one piece.",
            )


def _initializer_oom_rule(hits: Mapping[str, _Hit], add: Any, note: Any) -> None:
    """A weight that could not get its first value: the model's own weights (and their
    optimizer slots) did not fit in what was free. Either the model is too big for the card or
    another process (a notebook still holding TensorFlow's grab-all pool) took the memory first;
    the log alone cannot tell, and the corpus has more of the first (3 of 5 dev logs since the
    rule was written were a model too big), so this is a strong second to the workload's own
    out-of-memory, never ahead of it without a holder seen. A bias-sized weight failing counts
    as one (_tiny_weight_failed)."""
    found = _initializer_oom(hits)
    if found is None:
        return
    error, op, size = found
    add("gpu_memory_contention", 2.9, [error, op])
    what = f" ({format_size(size)})" if size else ""
    note(
        "gpu_memory_contention",
        f"The allocation that failed{what} was a weight getting its first value, before "
        "training began. If the model is small for this card, the memory was already taken: "
        "check nvidia-smi for other processes (another notebook holding TensorFlow's memory).",
    )
    if 0 < size < INITIALIZER_TINY_BYTES:  # counted as a holder seen (_holder_rule)
        note(
            "gpu_memory_contention",
            f"Only {format_size(size)} could not be had: when a model's own weights fill the "
            "card, the one that fails is nearly always one of its big ones.",
        )


def _stock_model_rule(
    hits: Mapping[str, _Hit], scores: Mapping[str, float], add: Any, note: Any
) -> None:
    """An out-of-memory error raised inside a Keras application's constructor (ResNet50(),
    VGG16()...), before any training: a stock model's weights fit any card (VGG16's, the
    largest, are 528 MB), so the card was full before they came. Not when the allocator's
    numbers are there, which tell for themselves."""
    frame = hits.get("keras_application_frame")
    if (
        frame is None
        or _went_on(hits)
        or "bfc_oom" in hits
        or "bfc_dump" in hits
        or not any(s in hits for s in ("oom_allocating_tensor", "resource_exhausted_generic"))
    ):
        return
    lead = scores.get("gpu_oom", 0.0) - scores.get("gpu_memory_contention", 0.0)
    add("gpu_memory_contention", max(lead, 0.0) + 0.6, frame.lines[-1:])
    model = frame.groups[-1].get("model", "the model")
    note(
        "gpu_memory_contention",
        f"The out-of-memory error came while {model}() created its weights, before any batch. "
        "A stock model's weights fit any card TensorFlow still supports, so the memory was "
        "taken before it came: by another process, or by an earlier model in the same "
        "notebook.",
    )


ASYNC_HELD_ELSEWHERE = 0.5  # of the card, held outside the pool when cudaMallocAsync failed


def _async_held_elsewhere_rule(
    hits: Mapping[str, _Hit], scores: Mapping[str, float], add: Any, note: Any
) -> None:
    """cudaMallocAsync's failure prints the card's free and total bytes, and its pool's
    statistics the bytes the process's tensors held: with the card full and most of it not
    held by the pool (it reserves nothing up front), another process had the memory."""
    failed, card, pool = (
        hits.get(sid) for sid in ("async_allocator_oom", "async_device_memory", "allocator_in_use")
    )
    if failed is None or card is None or pool is None:
        return
    try:
        request = int(failed.groups[-1]["bytes"])
        free, total = int(card.groups[-1]["free"]), int(card.groups[-1]["total"])
        in_use = int(pool.groups[-1]["in_use"])
    except (KeyError, ValueError):
        return
    elsewhere = total - free - in_use
    if total <= 0 or free >= request or elsewhere < ASYNC_HELD_ELSEWHERE * total:
        return
    lead = scores.get("gpu_oom", 0.0) - scores.get("gpu_memory_contention", 0.0)
    add("gpu_memory_contention", max(lead, 0.0) + 1.0, [card.lines[-1], pool.lines[-1]])
    note(
        "gpu_memory_contention",
        f"The card had {format_size(free)} of {format_size(total)} free and this process's "
        f"tensors held {format_size(in_use)}: {format_size(elsewhere)} was held outside it.",
    )


HANDLE_FREE_ENOUGH = 0.5  # a refused cuDNN handle with this much of the card free: not memory
HANDLE_FREE_NONE = 0.05  # this little free: the memory was taken (another process, TF's pool)


def _handle_memory_rule(
    hits: Mapping[str, _Hit], scores: Mapping[str, float], add: Any, note: Any
) -> None:
    """TF 2.12+ logs the GPU's free memory right after a refused cuDNN handle. With most of
    the card free, the refusal was not for memory: the cuDNN library does not fit the build or
    the driver. With almost nothing free, memory was taken before cuDNN asked."""
    told = hits.get("cudnn_handle_memory")
    if told is None or "cudnn_handle_failed" not in hits:
        return
    where, groups = told.lines[0], told.groups[0]
    free, total = int(groups["free"]), int(groups["total"])
    if total <= 0:
        return
    share = free / total
    sizes = f"{format_size(free)} of {format_size(total)}"
    if share >= HANDLE_FREE_ENOUGH:
        # memory falls behind; the library comes just ahead of it (a driver the log blames
        # keeps its place)
        held = scores.get("gpu_memory_contention", 0.0) - 2.0
        behind = held - scores.get("cuda_cudnn_version_mismatch", 0.0)
        add("gpu_memory_contention", -2.0)
        add("gpu_oom", -0.8)
        add("cuda_cudnn_version_mismatch", max(behind, 0.0) + 0.5, [where])
        note(
            "cuda_cudnn_version_mismatch",
            f"cuDNN refused its handle with {sizes} of the GPU free, so not for memory: the "
            "cuDNN library loaded does not fit this TensorFlow build or the driver.",
        )
    elif share <= HANDLE_FREE_NONE:
        add("gpu_memory_contention", 1.0, [where])
        note(
            "gpu_memory_contention",
            f"Only {sizes} of the GPU was free when cuDNN asked for its handle: the memory "
            "was taken before (another process, or TensorFlow's own pool grabbing the card).",
        )


LATE_EPOCH = 4  # the epoch it failed in: three or more ran whole at the same batch size


def _late_oom_rule(
    series: Mapping[str, list[tuple[tuple[str, int, str], float]]],
    scores: Mapping[str, float],
    add: Any,
    note: Any,
) -> None:
    """Out of memory, GPU or host, only after several whole epochs of the same work: memory
    that sufficed for three epochs and then did not has grown, and growth epoch after epoch is
    a leak (or, on the GPU, a pool that fragmented). A candidate beside the out-of-memory,
    which stays first: a longer input or a validation pass can also come late."""
    oom = max(scores.get("gpu_oom", 0.0), scores.get("host_oom", 0.0))
    late = [r for r in series.get("epoch_header") or [] if r[1] >= LATE_EPOCH]
    if not late or oom <= 0 or scores.get("memory_leak", 0.0) > 0:
        return
    where, last = max(late, key=lambda r: r[1])
    add("memory_leak", min(1.6, 0.5 * oom), [where])
    note(
        "memory_leak",
        f"Memory ran out only after {last - 1:.0f} whole epochs of the same work had "
        "fit: what the run holds grew from epoch to epoch. Print the process's memory (or "
        "tf.config.experimental.get_memory_info('GPU:0')) after each epoch to see it grow.",
    )


def _tiny_weight_failed(hits: Mapping[str, _Hit]) -> list[tuple[str, int, str]]:
    """The error line of a bias-sized weight that could not get its first value, or nothing.
    Weights that fill a card are mostly big tensors, so the one that crosses the limit is
    almost always a big one: a tiny one failing shows the card was full before the model's
    weights came, as a holder seen would."""
    found = _initializer_oom(hits)
    return [found[0]] if found is not None and 0 < found[2] < INITIALIZER_TINY_BYTES else []


# an allocation of the workload that failed: its own OOM unless something else held the memory
# (the device refusing memory to the allocator or a context, CUDA_ERROR_OUT_OF_MEMORY alone, is
# not one: the GPU was full before the model asked)
_OOM_FAILURES = (
    "bfc_oom",
    "oom_allocating_tensor",
    "oom_allocation_report",
    "dst_tensor_not_initialized",
    "xla_resource_exhausted",
)
# lines that tell how cuDNN failed to start
_CUDNN_START_TOLD = (
    "cudnn_handle_failed",
    "conv_algorithm_failed",
    "cudnn_version_mismatch",
    "cudnn_insufficient_driver",
    "cudnn_sublibrary_not_loaded",
    "cudnn_sublibrary_mixed",
    "cudnn_sublib_load_failed",
    "cudnn_symbol_missing",
)
_HANDLE_FAILURES = (
    "cudnn_handle_failed",
    "cublas_handle_failed",
    "blas_launch_failed",
    "blas_without_support",
)
HOLDER_MIN_MIB = 256  # a process row below this (a desktop's Xorg) holds nothing that matters
SMALL_DEVICE_FRACTION = 0.5  # TF's device this far under the card: memory was taken already


def _mib(value: str | None, unit: str | None = "MiB") -> float:
    """A size the log wrote (value and unit) in MiB; 0 when it says none."""
    return (parse_size(f"{value}{unit}") or 0) / 2**20 if value else 0.0


def _holders(hits: Mapping[str, _Hit], facts: Facts | None) -> list[tuple[str, int, str]]:
    """The lines that show something other than this run holding GPU memory: nvidia-smi's
    process rows or a busy card, TF 1.x's free memory far under the total, a device TF created
    far smaller than the card, a GPU already full or taken when TF started, or (from the
    environment check) other processes on the GPU now. Empty: no holder is seen."""
    lines: list[tuple[str, int, str]] = []

    def of(sid: str, keep: Callable[[Mapping[str, str]], bool]) -> None:
        hit = hits.get(sid)
        for where, g in zip(hit.lines if hit else [], hit.groups if hit else [], strict=False):
            if keep(g):
                lines.append(where)

    for rows in ("nvidia_smi_process", "nvidia_smi_apps_csv"):  # its table, its CSV query
        of(rows, lambda g: int(g.get("mib", 0)) >= HOLDER_MIN_MIB)
    of("nvidia_smi_memory", lambda g: int(g.get("used", 0)) >= 0.5 * int(g.get("total", 1) or 1))
    of(
        "tf1_free_memory",
        lambda g: _mib(g.get("free"), g.get("fu")) < 0.5 * _mib(g.get("total"), g.get("tu")),
    )
    of("device_init_out_of_memory", lambda g: True)
    of("devices_busy", lambda g: True)
    sizes = {g.get("which"): _mib(g.get("size"), "") for g in _groups(hits, "tf1_memory_lines")}
    if sizes.get("Free") and sizes.get("Total") and sizes["Free"] < 0.5 * sizes["Total"]:
        lines += hits["tf1_memory_lines"].lines[:2]
    card = _card_mib(hits, facts)
    if card:
        of(
            "created_device_memory",
            lambda g: (
                _not_a_limit(mb := int(g.get("mb", 0) or 0)) and mb < SMALL_DEVICE_FRACTION * card
            ),
        )
    else:
        of("created_device_memory", lambda g: _small_unlimited(int(g.get("mb", 0) or 0)))
    if facts is not None:
        probe = facts.value("target.probe_pid")  # tfdoctor's own probe is no holder
        for name in facts:
            if not re.fullmatch(r"gpu\d+\.processes", name):
                continue
            procs = facts.value(name) or []
            others = [
                p
                for p in procs
                if isinstance(p, dict)
                and p.get("pid") != probe
                and (p.get("used_mib") or 0) >= HOLDER_MIN_MIB
            ]
            for p in others[:2]:
                text = f"{p.get('name') or 'a process'} (pid {p.get('pid')}) holds "
                lines.append(("environment check", 0, text + f"{p.get('used_mib')} MiB"))
    return lines


_HELD_AT_START = (
    "tf1_free_memory",
    "tf1_memory_lines",
    "created_device_memory",
    "device_init_out_of_memory",
    "devices_busy",
)
SMALL_DEVICE_MB = 1000  # with the card's size unknown: below this, most of any card was taken


HELD_WEIGHT = 3.0  # half the card taken before TensorFlow started
HELD_WEIGHT_FULL = 5.0  # all of it


def _held_weight(free_share: float) -> float:
    """How strongly memory held before TF started points at another holder: from
    HELD_WEIGHT with half the card free to HELD_WEIGHT_FULL with none of it."""
    share = min(max(free_share / SMALL_DEVICE_FRACTION, 0.0), 1.0)
    return HELD_WEIGHT_FULL - (HELD_WEIGHT_FULL - HELD_WEIGHT) * share


def _not_a_limit(mb: int) -> bool:
    """A device size TF chose from the free memory: not a multiple of 256 MB (such sizes are
    limits users set with set_logical_device_configuration / per_process_gpu_memory_fraction)."""
    return mb > 0 and mb % 256 != 0


def _small_unlimited(mb: int) -> bool:
    """A device TF created so small that any card it supports had most of its memory taken."""
    return _not_a_limit(mb) and mb < SMALL_DEVICE_MB


def _card_mib(hits: Mapping[str, _Hit], facts: Facts | None) -> float:
    """The GPU's whole memory in MiB, from the log's device properties or nvidia-smi, else the
    check's facts; 0 when nothing says."""

    totals = [
        _mib(g.get("total"), g.get("tu"))
        for sid in ("tf1_free_memory", "device_memory_size")
        for g in _groups(hits, sid)
    ]
    totals += [float(g.get("total", 0)) for g in _groups(hits, "nvidia_smi_memory")]
    sizes = {g.get("which"): _mib(g.get("size"), "") for g in _groups(hits, "tf1_memory_lines")}
    totals.append(sizes.get("Total") or 0.0)
    if facts is not None:
        totals += [float(facts.value(n)) for n in facts if _is_total(facts, n)]
    return max(totals, default=0.0)


def _small_device_rule(
    hits: Mapping[str, _Hit], add: Any, note: Callable[[str, str], None], facts: Facts | None
) -> None:
    created = hits.get("created_device_memory")
    if created is None:
        return
    card = _card_mib(hits, facts)
    for where, g in zip(created.lines, created.groups, strict=False):
        mb = int(g.get("mb", "0") or 0)
        if not _not_a_limit(mb):
            continue
        if card and mb < SMALL_DEVICE_FRACTION * card:
            add("gpu_memory_contention", _held_weight(mb / card), [where])
            note(
                "gpu_memory_contention",
                f"TensorFlow got only {mb} MB of the card's {card / 1024:.1f} GiB when it "
                "created its device: the rest was held before it started.",
            )
            return
        if not card and _small_unlimited(mb):
            add("gpu_memory_contention", 2.0, [where])
            note(
                "gpu_memory_contention",
                f"TensorFlow got only {mb} MB when it created its GPU device: every GPU it "
                "supports has at least 2 GB, so most of it was held before it started.",
            )
            return


def _found(hits: Mapping[str, _Hit], sid: str) -> list[tuple[tuple[str, int, str], dict[str, str]]]:
    """Each evidence line a signature kept, with the parts it read there."""
    hit = hits.get(sid)
    return list(zip(hit.lines, hit.groups, strict=False)) if hit else []


def _groups(hits: Mapping[str, _Hit], sid: str) -> list[dict[str, str]]:
    hit = hits.get(sid)
    return hit.groups if hit else []


def _is_total(facts: Facts, name: str) -> bool:
    return name.endswith(".memory_total_mib") and isinstance(facts.value(name), int)


DEVICE_REFUSAL_LEAN = 0.3


def _device_refusal_rule(
    hits: Mapping[str, _Hit], add: Any, note: Callable[[str, str], None]
) -> None:
    """CUDA_ERROR_OUT_OF_MEMORY from the driver for a new CUDA context while the model never
    failed an allocation of its own: the GPU was full before this process asked for any.
    (The allocator refused growth alone says nothing: a small card does that too.)"""
    cuda = hits.get("cuda_out_of_memory")
    if cuda is None or any(s in hits for s in _OOM_FAILURES):
        return
    context = [ln for ln in cuda.lines if re.search(r"CtxRetain|cuCtxCreate|context", ln[2])]
    if context:
        add("gpu_memory_contention", 1.5, context)
        note(
            "gpu_memory_contention",
            "The GPU had no memory left even for a new CUDA context: another process (or "
            "another worker of the same job) held it.",
        )
        return
    # The pool's first region refused once and nothing of the model failed after it: in the
    # threads, the memory was more often held elsewhere (another process, a display, a second
    # session) than the model too big. A lean, not a verdict. (The same region asked for again
    # and again is a growing workload's.)
    refused = _device_refusals(hits)
    if len(refused) == 1 and cuda.count == 1:
        add("gpu_memory_contention", DEVICE_REFUSAL_LEAN, [refused[0][0]])


def _holder_rule(
    hits: Mapping[str, _Hit],
    scores: dict[str, float],
    add: Any,
    note: Callable[[str, str], None],
    facts: Facts | None,
) -> None:
    """Another process holding the GPU memory outranks the workload's own OOM only when the
    evidence shows a holder; without one, an allocation that failed is the workload's."""
    contention = scores.get("gpu_memory_contention", 0.0)
    if contention <= 0 or not any(s in hits for s in _OOM_FAILURES):
        return
    if any(s in hits for s in _HANDLE_FAILURES):
        # cuDNN/cuBLAS could not get memory for their own handles: the memory was held before
        # the model asked for any (TF's grab-all pool, or another process): contention itself
        return
    tiny = _tiny_weight_failed(hits)
    holders = _holders(hits, facts) + tiny
    if holders:
        add("gpu_memory_contention", 0.3, holders)
        oom = scores.get("gpu_oom", 0.0)
        # seen when TF started (not an nvidia-smi row, which may be this run itself): the
        # memory was gone before the workload asked, and its out-of-memory follows from that
        at_start = {ln for sid in _HELD_AT_START for ln in (hits[sid].lines if sid in hits else [])}
        at_start.update(tiny)
        if contention + 0.3 < oom and any(ln in at_start for ln in holders):
            add("gpu_memory_contention", oom - contention - 0.3 + 0.6)
            note(
                "gpu_memory_contention",
                "The out-of-memory error follows from it: the memory was taken before this "
                "run asked for any.",
            )
        return
    oom = scores.get("gpu_oom", 0.0)
    if contention >= oom:
        add("gpu_oom", contention - oom + 0.6)
        note(
            "gpu_memory_contention",
            "Nothing in what you gave shows another process on the GPU: to tell, run "
            "`nvidia-smi` while it trains (or check the environment on the first step).",
        )


SHARED_HOLDER_MIB = 1024  # a process row this big is a workload, not a desktop's Xorg


def _shared_card_rule(
    hits: Mapping[str, _Hit], scores: dict[str, float], add: Any, note: Callable[[str, str], None]
) -> None:
    """nvidia-smi's process table with two processes or more each holding a workload's worth
    of one GPU's memory, and an out-of-memory error: one row may be this run, the others are
    not, so the memory the run failed to get was held by another process."""
    if not any(s in hits for s in (*_OOM_FAILURES, *_GPU_MEMORY_FAILED)):
        return
    by_gpu: dict[str, dict[str, tuple[tuple[str, int, str], int]]] = {}
    for where, g in _found(hits, "nvidia_smi_process"):
        mib = int(g.get("mib", 0) or 0)
        if mib >= SHARED_HOLDER_MIB:
            by_gpu.setdefault(g.get("gpu", ""), {})[g.get("pid", "")] = (where, mib)
    shared = max(by_gpu.values(), key=len, default={})
    if len(shared) < 2:
        return
    rows = sorted(shared.values(), key=lambda r: -r[1])
    oom = max(scores.get("gpu_oom", 0.0), scores.get("fragmentation", 0.0))
    contention = scores.get("gpu_memory_contention", 0.0)
    add("gpu_memory_contention", max(oom - contention, 0.0) + 0.6, [r[0] for r in rows[:3]])
    sizes = " and ".join(f"{mib} MiB" for _, mib in rows[:3])
    note(
        "gpu_memory_contention",
        f"nvidia-smi shows {len(rows)} processes holding memory on one GPU ({sizes}): at most "
        "one of them is this run; the others held the memory it could not get.",
    )


# The answer to `tf.__version__` or pip show on the line after the question: '2.3.0', 2.3.0,
# IPython's Out[2]: '2.3.0', pip's Version: 2.3.0
_VERSION_ANSWER = re.compile(
    rb"^\s*(?:Out\[\d+\]:\s*|Version:\s*)?['\"]?(?P<v>[12]\.\d{1,2}(?:\.\d+)?)"
    rb"(?:-?(?:rc|dev)\d*)?['\"]?\s*$"
)
# A line of one worker process of a job, as the job's launcher tags it: Ray's "(pid=4240)" or
# "(RolloutWorker pid=4240)", Open MPI's and Horovod's "[1,3]<stderr>:", torchrun's "[rank3]:";
# after whatever prefix a quote or a log collector put before it, or Ray's colour code
# ("\x1b[2m\x1b[36m(pid=4240)\x1b[0m" in a log written to a file)
_WORKER_TAG = re.compile(
    rb"(?:^|(?<=[\s>|])|(?<=\dm))"
    rb"(?:\((?:[\w.]+[ \t]+)?pid=(\d+)|\[\d+,(\d+)\]<std(?:err|out)>|\[rank(\d+)\]:)"
)
WORKERS_KEPT = 16
# the device itself refused memory to the process (not a tensor its model asked for: workers
# each on a GPU of their own, each with too big a batch, fail that way too)
_GPU_MEMORY_FAILED = ("cuda_out_of_memory", "device_init_out_of_memory")


def _shared_by_workers_rule(
    workers: Mapping[str, tuple[str, int, str]], add: Any, note: Callable[[str, str], None]
) -> None:
    """Several worker processes of one job each failing to get GPU memory: they share the GPU,
    and the first to start took nearly all of it (TensorFlow's default), whatever one of them
    alone would need."""
    if len(workers) < 2:
        return
    add("gpu_memory_contention", 2.0, list(workers.values())[:3])
    note(
        "gpu_memory_contention",
        f"{len(workers)} worker processes of one job (pids or ranks "
        f"{', '.join(list(workers)[:4])}) each failed to get GPU memory: they share the GPU. "
        "Give each worker its own GPU (CUDA_VISIBLE_DEVICES) or a share of it (memory growth "
        "or a memory limit per process).",
    )


def _benign_lines(hits: Mapping[str, _Hit], src: str, oom: BfcOom) -> list[tuple[str, int, str]]:
    hit = hits.get("bfc_benign_retry")
    return [ln for ln in (hit.lines if hit else []) if ln[0] == src and ln[1] in oom.lines]


# ---------------------------------------------------------------- public API


@functools.cache
def shipped_causes() -> dict[str, CauseInfo]:
    """The shipped cause catalogue, parsed once per process (do not change it).

    Raises:
        KnowledgeError: causes.toml is malformed (a broken install).
    """
    return known_causes.causes()


@functools.cache
def default_diagnoser_parts() -> tuple[tuple[Signature, ...], dict[str, CauseInfo]]:
    return known_signatures.signatures(), known_causes.causes()


def _case_blind(sig: Signature) -> Signature:
    """The signature read without regard to case: its anchors lower-cased, its patterns
    ignoring case."""
    return replace(
        sig,
        anchors=tuple(dict.fromkeys(a.lower() for a in sig.anchors)),
        pattern=re.compile(sig.pattern.pattern, sig.pattern.flags | re.IGNORECASE),
        parts={k: re.compile(p.pattern, p.flags | re.IGNORECASE) for k, p in sig.parts.items()},
    )


@functools.cache
def _case_blind_parts() -> tuple[tuple[Signature, ...], dict[str, CauseInfo]]:
    """The shipped signatures for a paste with no capital letter in it (an issue title typed
    in lower case, "could not load dynamic library 'cudart64_110.dll'")."""
    sigs, causes = default_diagnoser_parts()
    return tuple(_case_blind(s) for s in sigs), causes


def new_diagnoser(words: Callable[[], WordProfile] | None = None) -> Diagnoser:
    """A fresh engine over the shipped signatures (for feeding chunks yourself); with `words`,
    it guesses candidates from a paste's wording when no rule reads it."""
    sigs, causes = default_diagnoser_parts()
    return Diagnoser(sigs, causes, words)


# XLA compiled the model when these say so (its own OOM and compile failures included)
_XLA_SIGNATURES = ("xla_in_use", "xla_resource_exhausted", "xla_jit_failed")


def _measures(ooms: list[tuple[str, BfcOom]], hits: Mapping[str, _Hit]) -> tuple[Measure, ...]:
    """The numbers the log states that a fix may be sized from: the GPU pool that ran out
    and the allocation that failed (the last failed GPU allocation's), and whether XLA ran."""
    out: list[Measure] = []
    failed = [(src, o) for src, o in ooms if not o.benign and o.device != "CPU"]
    # the last failure's numbers (a paste can split one dump into two events)
    for src, o in reversed(failed):
        pool = o.limit_bytes or o.device_memory_bytes or o.pool_bytes
        if pool:
            out.append(Measure("gpu_pool_bytes", pool,
                               f"TF's GPU memory pool was {format_size(pool)}", src,
                               o.lines[0] if o.lines else None))  # fmt: skip
            break
    for src, o in reversed(failed):
        ask = o.rounded_bytes or o.requested_bytes
        if ask:
            out.append(Measure("gpu_request_bytes", ask,
                               f"an allocation of {format_size(ask)} failed", src,
                               o.lines[0] if o.lines else None))  # fmt: skip
            break
    for sid in _XLA_SIGNATURES:
        hit = hits.get(sid)
        if hit is not None and hit.lines:
            src, n, _ = hit.lines[0]
            out.append(Measure("xla_in_use", 1, "XLA compiled the model", src, n))
            break
    return tuple(out)


def diagnose(
    *inputs: str | bytes | Path | BinaryIO,
    facts: Facts | None = None,
    exit_info: ExitInfo | None = None,
    names: Iterable[str] = (),
    guess_from_words: bool = True,
    words: WordProfile | None = None,
) -> Diagnosis:
    """Diagnose one case made of one or more texts (files, pastes, stdin), streaming.

    Never raises on content: any text or bytes give a (possibly empty) diagnosis. A paste no
    rule reads gets candidates guessed from its wording (`words`, else the shipped profile),
    unless `guess_from_words` is False (output of a run tfdoctor made itself).

    Raises:
        OSError: a Path input cannot be opened or read.
    """
    shipped_or_given = word_profile if words is None else lambda: words
    d = new_diagnoser(shipped_or_given if guess_from_words else None)
    labels = list(names)
    # each input that was one paste, kept for a second reading (None once one was not)
    pastes: list[Chunk] | None = []
    for i, src in enumerate(inputs):
        label = labels[i] if i < len(labels) else (src.name if isinstance(src, Path) else "input")
        for chunk in iter_chunks(src, label):
            d.feed(chunk)
            if pastes is not None and chunk.first_line == 1:
                pastes.append(chunk)
            else:
                pastes = None
    found = d.result(facts=facts, exit_info=exit_info)
    if not pastes or (found.causes and found.causes[0].confidence > REREAD_JOINED_BELOW):
        return found
    found = _read_again_joined(pastes, found, facts, exit_info)
    return _read_again_case_blind(pastes, found, facts, exit_info)


CASE_BLIND_NOTE = "(Read without regard to case: the paste has no capital letter.)"


def _read_again_case_blind(
    pastes: list[Chunk], found: Diagnosis, facts: Facts | None, exit_info: ExitInfo | None
) -> Diagnosis:
    """A paste with no capital letter that no rule read (a title typed or lower-cased whole:
    "could not load dynamic library 'cudart64_110.dll'"), read again with the signatures
    blind to case. Only what a rule reads there replaces the first reading."""
    # bytes.islower(): a lower-case letter and no capital one
    if any(not c.guess for c in found.causes) or not all(c.raw.islower() for c in pastes):
        return found
    sigs, causes = _case_blind_parts()
    d = Diagnoser(sigs, causes)
    for chunk in pastes:
        d.feed(chunk)
    again = d.result(facts=facts, exit_info=exit_info)
    return _noted(again, CASE_BLIND_NOTE) if again.causes else found


CUT_LINES_NOTE = "(Read with the lines the paste had cut in two joined again.)"
# a first reading no surer than this is read again with its cut lines joined: a cut message's
# tail alone ("le: CUDNN_STATUS_INTERNAL_ERROR") is read as weakly as a candidate is
REREAD_JOINED_BELOW = 0.7


def _read_again_joined(
    pastes: list[Chunk], found: Diagnosis, facts: Facts | None, exit_info: ExitInfo | None
) -> Diagnosis:
    """A paste nothing was found in (or only weak candidates), read again with its cut lines
    joined (a reporter or a forum re-flowed it: TensorFlow's messages went on in the next
    lines, where no signature sees them whole). The first reading stands unless the second
    finds a cause more surely."""
    joined = [_replace_chunk(c, rejoin_cut_lines(c.raw, completes_a_message)) for c in pastes]
    if all(j is c for j, c in zip(joined, pastes, strict=True)):
        return found
    d = new_diagnoser()
    for chunk in joined:
        d.feed(chunk)
    again = d.result(facts=facts, exit_info=exit_info)
    if not again.causes or (
        found.causes and again.causes[0].confidence <= found.causes[0].confidence
    ):
        return found
    return _noted(again, CUT_LINES_NOTE)


def _noted(d: Diagnosis, how: str) -> Diagnosis:
    """The diagnosis with how the paste was read said at the end of each cause's explanation."""
    return replace(
        d, causes=tuple(replace(c, explanation=f"{c.explanation} {how}") for c in d.causes)
    )


@functools.cache
def _message_finder() -> tuple[BytesAhoCorasick, tuple[tuple[Signature, ...], ...]]:
    """The shipped engine's anchor automaton (the one every diagnosis uses), and for each of
    its anchors the signatures that read a message (not harmless noise)."""
    d = new_diagnoser()
    messages = tuple(tuple(s for s in d._by_anchor[a] if not s.noise) for a in d._anchors)
    return _automaton(d._anchors), messages


def completes_a_message(line: str, rest: str, joined: str) -> bool:
    """Whether a line joined with the lines after it (`rest`) holds a message that neither
    held alone: a message cut in two, whole again."""
    finder, sigs = _message_finder()
    found = {
        s.id: s
        for idx, _, _ in finder.find_matches_as_indexes(joined.encode(), overlapping=True)
        if idx < len(sigs)  # else one of the BFC parser's trigger words
        for s in sigs[idx]
    }
    return any(
        sig.pattern.search(joined) is not None
        and sig.pattern.search(line) is None
        and sig.pattern.search(rest) is None
        for sig in found.values()
    )


def _replace_chunk(chunk: Chunk, raw: bytes) -> Chunk:
    """The chunk with these bytes instead (the same lines, joined): itself when unchanged."""
    return chunk if raw is chunk.raw else Chunk(chunk.source, chunk.first_line, raw)
