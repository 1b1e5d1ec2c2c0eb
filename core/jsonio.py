"""JSON from files users name and from other programs: any input gives a value or a
ValueError (a JSONDecodeError is one), never a RecursionError from deep nesting."""

from __future__ import annotations

import json
from typing import Any


def loads(data: str | bytes) -> Any:
    """json.loads, with nesting too deep for the parser as a ValueError.

    Raises:
        ValueError: not JSON, or nested too deeply to be read.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None
