"""Every signature's inline examples, run through the whole engine (reader, anchors, pattern).

Load-time validation checks each pattern on its examples; this checks what a user gets: the
example line, pasted as a log, is recognised by that signature, a counterexample is not, and
a signature with causes names one of them.
"""

from __future__ import annotations

import pytest

from tfdoctor.core.diagnose.engine import Signature, load_causes, load_signatures, new_diagnoser
from tfdoctor.core.diagnose.reader import iter_chunks

SIGNATURES = load_signatures()
CAUSES = load_causes()
EXAMPLES = [(s, e) for s in SIGNATURES for e in s.examples]
COUNTEREXAMPLES = [(s, e) for s in SIGNATURES for e in s.counterexamples]


def _hits(line: str) -> set[str]:
    d = new_diagnoser()
    for chunk in iter_chunks(line + "\n"):
        d.feed(chunk)
    return set(d.hits)


def test_every_signature_has_examples_and_known_causes() -> None:
    assert len(SIGNATURES) >= 40
    for sig in SIGNATURES:
        assert sig.examples, sig.id
        assert set(sig.causes) <= set(CAUSES), sig.id


@pytest.mark.parametrize(
    ("sig", "line"), EXAMPLES, ids=[f"{s.id}:{i}" for i, (s, _) in enumerate(EXAMPLES)]
)
def test_example_is_recognised(sig: Signature, line: str) -> None:
    assert sig.id in _hits(line)
    # the same line as users paste it: quoted in a forum post, with a Windows line end
    assert sig.id in _hits("> " + line + "\r")


@pytest.mark.parametrize(
    ("sig", "line"),
    COUNTEREXAMPLES,
    ids=[f"{s.id}:{i}" for i, (s, _) in enumerate(COUNTEREXAMPLES)],
)
def test_counterexample_is_not(sig: Signature, line: str) -> None:
    assert sig.id not in _hits(line)
