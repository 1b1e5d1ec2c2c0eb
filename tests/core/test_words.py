"""The wording profile (core/knowledge/words.toml) and the guesses it gives for a paste no rule
reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus import cases
from tfdoctor.core.diagnose.combine import combine
from tfdoctor.core.diagnose.engine import WORD_GUESS_CONFIDENCE, diagnose, new_diagnoser
from tfdoctor.core.diagnose.reader import iter_chunks
from tfdoctor.core.fixes.propose import proposed_fixes
from tfdoctor.core.knowledge.causes import causes
from tfdoctor.core.knowledge.loader import KnowledgeError
from tfdoctor.core.knowledge.words import (
    WORDS_FILE,
    WordProfile,
    load_word_profile,
    to_toml,
    train,
    word_profile,
    words_in,
)
from tfdoctor.core.model import Cause
from tools.train_word_profile import shipped_text

# a card the build has no kernels for, told in a framework's own words (no signature reads
# them), against harmless training output
ARCH_WORDS = "darknet cfg weights nvs kepler nvs510 sm_30 legacy driver_r390 build_net"
HARMLESS_WORDS = "epoch loss accuracy val_loss val_accuracy saving checkpoint finished"


def _profile() -> WordProfile:
    arch = [("unsupported_gpu_arch", f"{ARCH_WORDS} run{i}".encode()) for i in range(6)]
    oom = [("gpu_oom", f"batch resnet fit run{i} allocation".encode()) for i in range(6)]
    harmless = [("none", f"{HARMLESS_WORDS} run{i}".encode()) for i in range(8)]
    return train([*arch, *oom, *harmless])


PASTE = (
    "Parsing ./cfg/yolo.cfg\n"
    "Loading darknet weights for an NVS NVS510 (Kepler, sm_30) with legacy driver_r390\n"
    "Building net ... build_net\n"
)


def test_the_shipped_profile_is_the_one_the_dev_part_gives() -> None:
    """Stale after logs were added to the corpus: run tools/train_word_profile.py."""
    assert WORDS_FILE.read_text(encoding="utf-8") == shipped_text()


def test_the_shipped_profile_counts_every_dev_log_and_no_sealed_one() -> None:
    profile = word_profile()
    assert sum(profile.logs.values()) == len(cases("dev"))
    for cause, n in profile.logs.items():
        assert n == sum(c.want == cause for c in cases("dev"))
    assert set(profile.logs) <= {*causes(), "none"}


def test_words_are_read_lower_cased_once_each_with_where_first_used() -> None:
    found = words_in(b"Could not load libcudnn.so.8: CUDNN ok 42 0x7f sm_86\nlibcudnn again")
    assert found["libcudnn"] == 15
    assert {"could", "not", "load", "cudnn", "sm_86", "again"} <= set(found)
    assert "42" not in found and "0x7f" not in found and "ok" not in found  # too short


def test_a_terminals_colour_codes_are_no_part_of_the_words() -> None:
    text = b"\x1b[31mKilled\x1b[0m after \x1b[1;33mepoch"
    assert words_in(text) == {"killed": 5, "after": 16, "epoch": 29}


def test_the_cause_whose_logs_use_the_words_ranks_first() -> None:
    profile = _profile()
    assert profile.rank(words_in(PASTE.encode()))[0][0] == "unsupported_gpu_arch"
    assert profile.rank(words_in(b"epoch 3 loss 0.2 val_loss 0.3"))[0][0] == "none"


def test_words_the_profile_never_saw_say_nothing() -> None:
    profile = _profile()
    # the harmless logs are the most numerous: with nothing known, they win
    assert profile.rank(["zyxxy", "qwerty"])[0][0] == "none"
    assert profile.rank(["zyxxy"]) == profile.rank([])


def test_telling_words_set_the_cause_apart_from_the_others() -> None:
    told = _profile().telling("unsupported_gpu_arch", words_in(PASTE.encode()))
    assert len(told) == 3
    assert set(told) <= set(ARCH_WORDS.split())


def test_a_paste_no_rule_reads_gets_guesses_that_say_they_are_guesses() -> None:
    assert not diagnose(PASTE.encode(), guess_from_words=False).causes  # no rule reads it
    found = diagnose(PASTE.encode(), words=_profile()).causes
    assert [c.id for c in found[:2]] == ["unsupported_gpu_arch", "gpu_oom"]
    assert [c.confidence for c in found[:2]] == list(WORD_GUESS_CONFIDENCE[:2])
    first = found[0]
    assert first.explanation.startswith("A guess from the paste's wording, not a finding")
    assert "most of all:" in first.explanation
    assert first.fixes  # the cause's fixes, to try
    # the lines that hold the words that point there, by their line numbers
    lines = PASTE.splitlines()
    assert first.evidence
    for e in first.evidence:
        assert e.line is not None and lines[e.line - 1].strip() == e.text


def test_a_harmless_paste_is_not_guessed_at() -> None:
    paste = b"Epoch 1/3 - loss: 0.52 - accuracy: 0.81 - val_loss: 0.47\nSaving checkpoint\n"
    assert not diagnose(paste, words=_profile()).causes


@pytest.mark.parametrize(
    "extra",
    [
        # a notice the signatures know as harmless: the paste was read, and found harmless
        "I tensorflow/stream_executor/cuda/cuda_gpu_executor.cc:937] successful NUMA node read"
        " from SysFS had negative value (-1), but there must be at least one NUMA node, so"
        " returning NUMA node zero\n",
        # the user's own program failed: not a TensorFlow cause to guess at
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        "    print(weights[3])\nKeyError: 3\n",
    ],
    ids=["harmless notice", "plain Python error"],
)
def test_no_guess_where_the_rules_found_the_paste_harmless_or_the_program_at_fault(
    extra: str,
) -> None:
    assert not diagnose((PASTE + extra).encode(), words=_profile()).causes


@pytest.mark.parametrize(
    "aid",
    [
        '\t [[Node: emb/lookup = Gather[Tparams=DT_FLOAT, _device="/job:localhost/replica:0/task:0'
        '/cpu:0"](emb/W/read, ids)]]\n',
        "InUse:                       1200000\n",
    ],
    ids=["node line", "allocator in-use figure"],
)
def test_a_line_read_only_beside_another_message_still_leaves_the_paste_to_guess(
    aid: str,
) -> None:
    """The device a node was placed on, an allocator's in-use figure: a rule reads them only
    next to the failure they describe. Alone they say nothing, and the
    paste's words are still there to guess from."""
    found = diagnose((PASTE + aid).encode(), words=_profile()).causes
    assert [c.id for c in found[:2]] == ["unsupported_gpu_arch", "gpu_oom"]
    assert all(c.guess for c in found)


def test_no_guess_for_a_run_tfdoctor_made_or_a_whole_log_file() -> None:
    assert not diagnose(PASTE.encode(), words=_profile(), guess_from_words=False).causes
    # over a paste's size: a log file, whose words are mostly not about the failure
    log_file = PASTE + "step done\n" * 120_000
    assert not diagnose(log_file.encode(), words=_profile()).causes


def test_a_cause_a_rule_reads_is_never_joined_by_guesses() -> None:
    paste = PASTE + (
        "2017-02-20 11:00:00: I tensorflow/core/common_runtime/gpu/gpu_device.cc:948] Ignoring"
        " visible gpu device (device: 0, name: Quadro K600, pci bus id: 0000:01:00.0) with Cuda"
        " compute capability 3.0. The minimum required Cuda capability is 3.5.\n"
    )
    found = diagnose(paste.encode(), words=_profile()).causes
    assert found[0].id == "unsupported_gpu_arch" and found[0].confidence > 0.5
    assert not any(c.explanation.startswith("A guess") for c in found)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("gpu_oom = 6\n", "gpu_boom = 6\n"), "unknown cause"),
        (
            lambda t: t.replace(
                "kepler = { unsupported_gpu_arch = 6 }", "kepler = { unsupported_gpu_arch = 9 }"
            ),
            "not a count",
        ),
        (lambda t: t.replace("alpha = 0.5", "alpha = 0.0"), "alpha"),
        (lambda t: t.replace("[words]", '[words]\n"two words" = { none = 1 }'), "not a word"),
        (lambda t: "extra = 1\n" + t, "unknown field"),
        (lambda t: t.replace("none = 8\n", ""), "needs \\[logs\\]"),
        (lambda t: t.replace("kepler = {", "kepler = {{"), "not valid TOML"),
    ],
    ids=["cause", "count", "alpha", "word", "field", "table", "toml"],
)
def test_a_broken_profile_is_refused_in_one_line_naming_the_file(
    tmp_path: Path, edit: object, message: str
) -> None:
    good = to_toml(_profile(), "a test profile")
    path = tmp_path / "words.toml"
    path.write_text(edit(good), encoding="utf-8")  # type: ignore[operator]
    with pytest.raises(KnowledgeError, match=message) as err:
        load_word_profile(path, causes=causes())
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    # the good one reads back as it was written
    path.write_text(good, encoding="utf-8")
    assert load_word_profile(path, causes=causes()) == _profile()


def test_a_profile_needs_harmless_logs() -> None:
    with pytest.raises(ValueError, match="harmless"):
        train([("gpu_oom", b"allocation failed")])


def test_a_guess_is_marked_everywhere_and_its_fixes_are_not_proposed() -> None:
    """A guess names its cause's fixes on its card, like a look-alike, but nothing proposes
    them: a fix is applied for what the evidence found, not for what the wording suggests."""
    found = diagnose(PASTE.encode(), words=_profile())
    first = found.causes[0]
    assert first.guess and not first.confirmed and first.fixes
    assert first.shown_title == f"Guess: {first.title}"
    assert not any(c.look_alike for c in found.causes)  # no lines for a look-alike to share
    assert found.to_json()["causes"][0]["guess"] is True
    back = Cause.from_json(first.to_json())
    assert back.guess and back == first
    ranked = combine(("your log", c) for c in found.causes)
    assert all(rc.cause.guess for rc in ranked)
    assert proposed_fixes(ranked, [], None).fixes == []
    # the same cause found by a source that read it: a finding, whose fixes are proposed
    read = Cause("unsupported_gpu_arch", 0.9, first.title, "read from a line", (), first.fixes)
    merged = combine([("your log", first), ("your machine", read)])
    arch = next(rc.cause for rc in merged if rc.cause.id == "unsupported_gpu_arch")
    assert arch.confirmed and arch.explanation == "read from a line"
    assert proposed_fixes(merged, [], None).fixes


def test_a_broken_install_without_a_readable_profile_still_diagnoses(tmp_path: Path) -> None:
    """words.toml missing or unreadable (a packaging mistake): no guesses, no traceback, and
    the rules answer as before."""

    def broken() -> WordProfile:
        return load_word_profile(tmp_path / "missing.toml")

    d = new_diagnoser(broken)
    for chunk in iter_chunks(PASTE.encode(), "paste"):
        d.feed(chunk)
    assert d.result().causes == ()
