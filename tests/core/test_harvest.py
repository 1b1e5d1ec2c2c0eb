"""The harvested lines and blocks (tests/fixtures/harvest): real output from public threads."""

from __future__ import annotations

import json

import pytest

from tests.corpus import cases
from tfdoctor.core.diagnose.engine import diagnose
from tools.harvest_silent import HARVEST, load


def _norm(url: str) -> str:
    return url.strip().rstrip("/").replace("http://", "https://").lower()


def test_no_harvested_line_comes_from_a_sealed_thread() -> None:
    """Tuning on these must never tune on a sealed log."""
    sealed = {_norm(c.meta.get("source", "")) for c in cases("sealed")}
    for name in ("lines.jsonl", "blocks.jsonl"):
        urls = {_norm(row["url"]) for row in load(name)}
        assert urls and not urls & sealed, name


@pytest.mark.parametrize("name", ["lines.jsonl", "blocks.jsonl"])
def test_every_harvested_line_and_block_is_read_without_an_error(name: str) -> None:
    rows = load(name)
    assert len(rows) >= 50
    answered = 0
    for row in rows:
        d = diagnose((row.get("line") or row["block"]).encode())
        answered += bool(d.causes)
        assert all(0.0 < c.confidence <= 0.99 for c in d.causes)
    assert answered >= len(rows) // 4  # a real share of them name a cause


def test_the_harvest_files_are_one_json_object_per_line() -> None:
    for name in ("lines.jsonl", "blocks.jsonl"):
        for line in (HARVEST / name).read_text(encoding="utf-8").splitlines():
            assert isinstance(json.loads(line), dict)


def test_a_harvested_line_is_read_as_cut_short_only_where_the_store_cut_it() -> None:
    """Thousands of real lines, most of them whole: the reading of a last line that stops
    mid-message must leave those alone (the few it takes are the store's own cut copies, each
    stopping inside a word)."""
    rows = load("lines.jsonl")
    cut = [
        row["line"]
        for row in rows
        if any("stops mid-message" in c.explanation for c in diagnose(row["line"].encode()).causes)
    ]
    assert cut and len(cut) <= len(rows) // 200
    assert all(line.rstrip()[-1:].isalnum() or line.rstrip().endswith("_") for line in cut)
