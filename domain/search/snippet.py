"""The snippet of a hit: the first match in the message's text with what surrounds it, the
match marked «like this», cut at about `width` characters."""

from __future__ import annotations

from ctxstore.domain.search.text import fold, fold_char

OPEN, CLOSE = "«", "»"
WIDTH = 160
LOOKED_AT = 32 * 1024  # characters a match is looked for in (a huge tool output's head)


def snippet(text: str, shown: tuple[str, ...], width: int = WIDTH) -> str:
    """`text` around the earliest of the query's pieces (found as typed, case and accents
    aside), marked; the text's start when none is found as typed (a phrase split by
    punctuation in the text)."""
    folded, where = _folded(text[:LOOKED_AT])
    best: tuple[int, int] | None = None
    for piece in shown:
        at = folded.find(piece) if piece else -1
        if at >= 0 and (best is None or at < best[0]):
            best = (at, at + len(piece))
    flat = " ".join(text.split())
    if best is None:
        return flat[:width] + ("…" if len(flat) > width else "")
    start, end = where[best[0]], where[best[1] - 1] + 1
    before = " ".join(text[:start].split())
    hit = " ".join(text[start:end].split())
    after = " ".join(text[end:].split())
    room = max(width - len(hit), 0)
    lead = before[-(room // 3) :] if room // 3 else ""
    tail = after[: room - len(lead)]
    head_cut = "…" if len(lead) < len(before) else ""
    tail_cut = "…" if len(tail) < len(after) else ""
    gap_before = " " if before and text[start - 1 : start].isspace() else ""
    gap_after = " " if after and text[end : end + 1].isspace() else ""
    return f"{head_cut}{lead}{gap_before}{OPEN}{hit}{CLOSE}{gap_after}{tail}{tail_cut}"


def _folded(text: str) -> tuple[str, list[int]]:
    """The folded text, and for each of its characters the index in `text` it came from."""
    whole = fold(text)
    if len(whole) == len(text) and text.isascii():  # (one for one: the common case)
        return whole, list(range(len(text)))
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        f = fold_char(ch)
        out.append(f)
        where.extend([i] * len(f))
    return "".join(out), where


__all__ = ["CLOSE", "OPEN", "snippet"]
