"""Durations as operators write them: a number and its unit (30d, 12h, 90m, 3600s, 2w).

A bare number is refused: `--expire-after 30` meant 30 days to whoever typed it and 30
seconds to the store, and a retention sweep erases what it expires. Periods read back in
the largest units that say them exactly ("30 days", "1 hour 30 minutes").
"""

from __future__ import annotations

import re

from ctxstore.domain.errors import InvalidOperationError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
NAMES = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))
SHORTEST_SAFE = 3600.0  # an expiry under this is refused unless forced
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")


def parse_duration(text: str, what: str = "a duration") -> float | None:
    """Seconds from `30d`, `12h`, `90m`, `3600s`, `2w`; None for `none`. Raises
    InvalidOperationError naming what was given (a bare number included)."""
    if text.strip().lower() == "none":
        return None
    found = _DURATION.fullmatch(text.lower())
    if found is None:
        if re.fullmatch(r"\s*\d+(\.\d+)?\s*", text):
            raise InvalidOperationError(
                f"{what} needs its unit: {text.strip()}d, {text.strip()}h, {text.strip()}m or "
                f"{text.strip()}s (s, m, h, d, w), not a bare {text.strip()!r}"
            )
        raise InvalidOperationError(
            f"{what}: {text!r} is not a duration (30d, 12h, 90m, 3600s, 2w, none)"
        )
    seconds = float(found.group(1)) * UNITS[found.group(2)]
    if seconds <= 0:
        raise InvalidOperationError(f"{what} must be longer than zero, got {text!r}")
    return seconds


def human(seconds: float) -> str:
    """`2592000` -> "30 days"; `5400` -> "1 hour 30 minutes"; fractions of a second kept."""
    left = float(seconds)
    for name, size in NAMES:  # one unit says it exactly: "30 days", not "4 weeks 2 days"
        if left >= size and left % size == 0 and (size != 604800 or left // size < 5):
            count = int(left // size)
            return f"{count} {name}{'s' if count != 1 else ''}"
    said = []
    for name, size in NAMES:
        count = int(left // size)
        if count:
            said.append(f"{count} {name}{'s' if count != 1 else ''}")
            left -= count * size
    if left > 1e-9 or not said:
        said.append(f"{left:g} seconds")
    return " ".join(said[:3])


def check_expiry(seconds: float | None, force: bool) -> None:
    """Refuse an expiry under an hour unless forced: the next sweep would erase every
    context idle that long."""
    if seconds is not None and seconds < SHORTEST_SAFE and not force:
        raise InvalidOperationError(
            f"expiring contexts after {human(seconds)} without writes would erase every "
            "context idle that long at the next sweep; periods under an hour need force "
            '(--force, or "force": true)'
        )
