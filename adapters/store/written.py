"""The newest version this process wrote to each context it wrote recently: what a read
from a replica must show for the client to read its own writes (replicas.py)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from uuid import UUID

REMEMBERED = 100_000  # contexts whose newest written version a store remembers


class WrittenVersions:
    """The newest version this process wrote to each of its most recent contexts."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._versions: OrderedDict[UUID, int] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def wrote(self, cid: UUID, version: int) -> None:
        with self._lock:
            if self._versions.get(cid, 0) < version:
                self._versions[cid] = version
            self._versions.move_to_end(cid)
            while len(self._versions) > self._size:
                self._versions.popitem(last=False)

    def get(self, cid: UUID) -> int | None:
        with self._lock:
            return self._versions.get(cid)
