"""Character spans of the original text: cutting fragments out of kept documents."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["remove_spans"]


def remove_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` without the code-point spans ``[start, end)`` (overlapping or touching spans merge).

    The inverse holds by construction: the input minus its spans is exactly the kept text.
    """
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"span [{start}, {end}) lies outside a text of {len(text)} characters")
        if start > pos:
            out.append(text[pos:start])
        pos = max(pos, end)
    out.append(text[pos:])
    return "".join(out)
