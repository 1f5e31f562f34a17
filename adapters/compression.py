"""Stored states compressed where it pays: zlib for events and snapshots of 1 KiB or more.

A plain stored state is a JSON object (its first byte is `{`); a zlib stream with the
default window starts with 0x78. A reader tells them apart without a flag, so stores
written uncompressed, always compressed (the library's ZlibCompressor) or adaptively all
read the same way, whatever this store's own setting.
"""

from __future__ import annotations

import zlib

from eventsourcing.persistence import Compressor

ZLIB_HEADER = b"\x78"  # CMF byte of a deflate stream with a 32 KiB window
MIN_BYTES = 1024  # smaller states gain little and would pay the compressor on every append
# zlib's default level for events: on bench/workload.py turns, level 1 takes ~45 us for a
# turn's event of a few KiB against ~80 us, but leaves events 8% larger. Snapshots (large
# states) take level 1: 4-5x faster (~130 MB/s here) for 25% more bytes, because a snapshot
# costs about four messages' bytes per append (the snapshot step grows with the state).
LEVEL = 6
LARGE = 64 * 1024
LARGE_LEVEL = 1


class AdaptiveCompressor(Compressor):
    """zlib-compresses states of at least `min_bytes` that shrink (None: none); reads
    either form."""

    def __init__(self, min_bytes: int | None = MIN_BYTES) -> None:
        self.min_bytes = min_bytes

    def compress(self, data: bytes) -> bytes:
        if self.min_bytes is None or len(data) < self.min_bytes:
            return data
        packed = zlib.compress(data, LARGE_LEVEL if len(data) >= LARGE else LEVEL)
        return packed if len(packed) < len(data) else data

    def decompress(self, data: bytes) -> bytes:
        if data[:1] == b"{":
            return data
        if data[:1] == ZLIB_HEADER:
            return zlib.decompress(data)
        raise ValueError("a stored state is neither JSON nor zlib (wrong key or damaged)")


def compressor(mode: str) -> AdaptiveCompressor:
    """The compressor for CTXSTORE_COMPRESS: auto (1 KiB and up), always, or off (reads
    compressed states, writes none)."""
    if mode == "always":
        return AdaptiveCompressor(min_bytes=0)
    if mode == "off":
        return AdaptiveCompressor(min_bytes=None)
    return AdaptiveCompressor()
