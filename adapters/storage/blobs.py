"""Blob rows: attachments' bytes, once per tenant and sha256, and which contexts refer to them.

`ctxstore_blobs` holds the bytes (through the store's cipher when it has one: encrypted at
rest with the events); `ctxstore_blob_refs` records each context that refers to a blob.
A write keeps its blobs and references in one transaction before its command runs, so a
stored message never refers to a blob that is not there (a command that then fails leaves
a reference that only keeps the blob longer). Erasing a context releases its references
and deletes each blob it referred to that no other context refers to. On PostgreSQL both
take a transaction-scoped advisory lock per blob, so a release and a new reference to the
same blob never pass each other; SQLite has one writer at a time.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any
from uuid import UUID

from ctxstore.adapters.keys import blob_keys
from ctxstore.adapters.keys.cipher import STORE_KEY
from ctxstore.domain.blobs import Blob, BlobRef, StoredBlob
from ctxstore.domain.errors import BlobNotFoundError

BLOBS, REFS = "ctxstore_blobs", "ctxstore_blob_refs"


class BlobRows(ABC):
    """One store's blobs, per tenant (None: the store's own, as '' in the rows)."""

    cipher: Any = None  # encrypt/decrypt of bytes: the store's key (blobs stored before
    keys: Any = None  # ContextCipher: each blob under its own key (adapters/keys/blob_keys.py)

    @abstractmethod
    def keep(
        self, tenant: str | None, cid: UUID, blobs: Sequence[Blob], refs: set[str]
    ) -> list[str]:
        """Store `blobs` (once each) and record that `cid` refers to every sha in `refs`;
        nothing is recorded when some referred sha is neither given nor stored: those shas."""

    @abstractmethod
    def fetch(self, tenant: str | None, sha256: str) -> StoredBlob | None: ...

    @abstractmethod
    def describe(self, tenant: str | None, sha256: str) -> BlobRef | None:
        """What is stored of a blob without its bytes."""

    @abstractmethod
    def record_file_id(self, tenant: str | None, sha256: str, provider: str, file_id: str) -> bool:
        """Note the id a provider's Files API gave the blob; False when there is no blob."""

    @abstractmethod
    def file_ids(self, tenant: str | None, shas: Sequence[str]) -> dict[str, dict[str, str]]:
        """The provider file ids recorded for these blobs: sha256 -> provider -> id."""

    @abstractmethod
    def release(self, cid: UUID) -> int:
        """Forget `cid`'s references; delete the blobs no context refers to any more.
        Returns how many were deleted."""

    @abstractmethod
    def stored_bytes(self) -> int:
        """The bytes all blobs take (as stored: encrypted when the store encrypts)."""

    def reseal_refs(self, cid: UUID) -> int:
        """Seal `cid`'s wrappings of attachment keys with its current key (re-keying)."""
        return 0

    def seal_all(self) -> int:
        """Put every attachment stored before keys per attachment under a key of its own
        (encrypting a store in place); how many were."""
        return 0

    def _seal(self, data: bytes) -> bytes:
        return data if self.cipher is None else self.cipher.encrypt(data)

    def _open(self, data: bytes) -> bytes:
        return data if self.cipher is None else self.cipher.decrypt(data)


def _tuple(row: Any) -> tuple[Any, ...]:
    """A row as a tuple, from either driver's row type (PostgreSQL's are dicts)."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _row_blob(row: Sequence[Any], data: bytes) -> StoredBlob:
    sha, media_type, size, width, height = row[:5]
    return StoredBlob(BlobRef(sha, media_type, int(size), width, height), data)


class SQLBlobRows(BlobRows, ABC):
    """Blob rows in two tables, in the backend's placeholder style."""

    def __init__(self, blobs: str, refs: str, mark: str) -> None:
        m = mark
        self.put_sql = (
            f"INSERT INTO {blobs} (tenant, sha256, media_type, size, width, height, data, created, "
            f"sealed_key) VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}) "
            "ON CONFLICT (tenant, sha256) DO NOTHING"
        )
        self.upload_key_sql = f"SELECT sealed_key FROM {blobs} WHERE tenant = {m} AND sha256 = {m}"
        self.owned_sql = (
            f"UPDATE {blobs} SET sealed_key = NULL WHERE tenant = {m} AND sha256 = {m} "
            "AND sealed_key IS NOT NULL"
        )
        self.ref_keys_sql = (
            f"SELECT context_id, sealed_key FROM {refs} WHERE tenant = {m} AND sha256 = {m} "
            "AND sealed_key IS NOT NULL"
        )
        self.all_sql = f"SELECT tenant, sha256 FROM {blobs} ORDER BY tenant, sha256"
        self.ref_contexts_sql = f"SELECT context_id FROM {refs} WHERE tenant = {m} AND sha256 = {m}"
        self.set_holder_key_sql = (
            f"UPDATE {refs} SET sealed_key = {m} WHERE context_id = {m} AND tenant = {m} "
            f"AND sha256 = {m}"
        )
        self.set_data_sql = (
            f"UPDATE {blobs} SET data = {m}, sealed_key = {m} WHERE tenant = {m} "
            f"AND sha256 = {m} AND data = {m}"
        )
        self.keys_of_sql = (
            f"SELECT tenant, sha256, sealed_key FROM {refs} WHERE context_id = {m} "
            "AND sealed_key IS NOT NULL"
        )
        self.set_ref_key_sql = (
            f"UPDATE {refs} SET sealed_key = {m} WHERE context_id = {m} AND tenant = {m} "
            f"AND sha256 = {m} AND sealed_key = {m}"
        )
        self.has_sql = f"SELECT 1 FROM {blobs} WHERE tenant = {m} AND sha256 = {m}"
        self.refer_sql = (
            f"INSERT INTO {refs} (context_id, tenant, sha256, sealed_key) "
            f"VALUES ({m}, {m}, {m}, {m}) ON CONFLICT (context_id, sha256) DO NOTHING"
        )
        self.get_sql = (
            f"SELECT sha256, media_type, size, width, height, data, sealed_key FROM {blobs} "
            f"WHERE tenant = {m} AND sha256 = {m}"
        )
        self.describe_sql = (
            f"SELECT sha256, media_type, size, width, height FROM {blobs} "
            f"WHERE tenant = {m} AND sha256 = {m}"
        )
        self.referred_sql = f"SELECT tenant, sha256 FROM {refs} WHERE context_id = {m}"
        self.unrefer_sql = f"DELETE FROM {refs} WHERE context_id = {m}"
        self.orphan_sql = (
            f"DELETE FROM {blobs} WHERE tenant = {m} AND sha256 = {m} AND NOT EXISTS "
            f"(SELECT 1 FROM {refs} r WHERE r.tenant = {m} AND r.sha256 = {m})"
        )
        self.size_sql = f"SELECT COALESCE(SUM(LENGTH(data)), 0) FROM {blobs}"
        self.ids_sql = f"SELECT file_ids FROM {blobs} WHERE tenant = {m} AND sha256 = {m}"
        self.set_ids_sql = f"UPDATE {blobs} SET file_ids = {m} WHERE tenant = {m} AND sha256 = {m}"

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """A cursor in a transaction that commits when the block ends without an error."""

    def _lock(self, c: Any, tenant: str, sha256: str) -> None:
        """Serialise work on one blob (PostgreSQL: an advisory lock until the commit)."""

    def keep(
        self, tenant: str | None, cid: UUID, blobs: Sequence[Blob], refs: set[str]
    ) -> list[str]:
        owner = tenant or ""
        given = {b.ref.sha256: b for b in blobs}
        now = time.time()
        with self._transaction() as c:
            missing = []
            made: dict[str, bytes] = {}  # blob keys of blobs stored now
            for sha in sorted(refs | set(given)):  # one order: two writers never deadlock
                self._lock(c, owner, sha)
                blob = given.get(sha)
                if blob is not None:
                    r = blob.ref
                    data, key, upload_key = self._sealed_new(owner, sha, blob.data, sha in refs)
                    c.execute(self.put_sql, (owner, sha, r.media_type, r.size, r.width, r.height,
                                             data, now, upload_key))  # fmt: skip
                    if key is not None and self._rowcount(c):
                        made[sha] = key
                else:
                    c.execute(self.has_sql, (owner, sha))
                    if c.fetchone() is None:
                        missing.append(sha)
            if missing:
                return missing  # (the block ends: the transaction commits nothing but puts)
            for sha in sorted(refs):
                c.execute(
                    self.refer_sql,
                    (cid.hex, owner, sha, self._wrapped_for(c, cid, owner, sha, made)),
                )
        return []

    def _sealed_new(
        self, owner: str, sha: str, data: bytes, referred: bool
    ) -> tuple[bytes, bytes | None, str | None]:
        """A new blob's stored bytes, its key, and its key sealed with the store's key when
        no context refers to it yet (an upload)."""
        if self.keys is None:
            return self._seal(data), None, None
        key = blob_keys.new_key()
        upload = None if referred else blob_keys.to_text(self.keys.encrypt(STORE_KEY, key))
        return blob_keys.seal(key, owner, sha, data), key, upload

    def _wrapped_for(
        self, c: Any, cid: UUID, owner: str, sha: str, made: dict[str, bytes]
    ) -> str | None:
        """The blob's key sealed with `cid`'s key (None: no keys, or a blob from before keys
        per attachment). An upload's store-sealed key goes once a context holds it."""
        if self.keys is None:
            return None
        key = made.get(sha) or self._key_of(c, owner, sha)
        if key is None:
            return None
        c.execute(self.owned_sql, (owner, sha))
        return blob_keys.to_text(self.keys.encrypt(cid, key))

    def _key_of(self, c: Any, owner: str, sha: str) -> bytes | None:
        """A stored blob's key, opened through the store's key (an upload) or any context
        that refers to it; None for a blob sealed before keys per attachment."""
        c.execute(self.upload_key_sql, (owner, sha))
        row = c.fetchone()
        held = None if row is None else _tuple(row)[0]
        if held:
            return bytes(self.keys.decrypt(STORE_KEY, blob_keys.from_text(held)))
        c.execute(self.ref_keys_sql, (owner, sha))
        for context_hex, wrapped in (_tuple(r) for r in c.fetchall()):
            try:
                return bytes(self.keys.decrypt(UUID(context_hex), blob_keys.from_text(wrapped)))
            except ValueError:  # that context's key is gone (erased meanwhile): another's
                continue
        return None

    def seal_all(self) -> int:
        if self.keys is None:
            return 0
        with self._transaction() as c:
            c.execute(self.all_sql)
            every = [_tuple(r) for r in c.fetchall()]
        done = 0
        for owner, sha in every:
            with self._transaction() as c:
                self._secure(c)
                self._lock(c, owner, sha)
                c.execute(self.get_sql, (owner, sha))
                row = c.fetchone()
                if row is None:
                    continue  # released meanwhile
                data = bytes(_tuple(row)[5])
                if blob_keys.is_sealed(data):
                    continue
                key = blob_keys.new_key()
                sealed = blob_keys.seal(key, owner, sha, self._open(data))
                c.execute(self.ref_contexts_sql, (owner, sha))
                holders = [_tuple(r)[0] for r in c.fetchall()]
                for context_hex in holders:
                    wrapped = blob_keys.to_text(self.keys.encrypt(UUID(context_hex), key))
                    c.execute(self.set_holder_key_sql, (wrapped, context_hex, owner, sha))
                upload = None if holders else blob_keys.to_text(self.keys.encrypt(STORE_KEY, key))
                c.execute(self.set_data_sql, (sealed, upload, owner, sha, data))
                done += self._rowcount(c)
        return done

    def reseal_refs(self, cid: UUID) -> int:
        """Seal `cid`'s wrappings of blob keys with its current key generation (re-keying)."""
        if self.keys is None:
            return 0
        done = 0
        gen = self.keys.keys.current(cid.hex)[0]
        with self._transaction() as c:
            c.execute(self.keys_of_sql, (cid.hex,))
            for tenant, sha, wrapped in [_tuple(r) for r in c.fetchall()]:
                raw = blob_keys.from_text(wrapped)
                if self.keys.generation(raw) == gen:
                    continue
                fresh = blob_keys.to_text(self.keys.encrypt(cid, self.keys.decrypt(cid, raw)))
                c.execute(self.set_ref_key_sql, (fresh, cid.hex, tenant, sha, wrapped))
                done += self._rowcount(c)
        return done

    def _one(self, sql: str, tenant: str | None, sha256: str) -> tuple[Any, ...] | None:
        with self._transaction() as c:
            c.execute(sql, (tenant or "", sha256))
            row = c.fetchone()
        return None if row is None else _tuple(row)

    def fetch(self, tenant: str | None, sha256: str) -> StoredBlob | None:
        row = self._one(self.get_sql, tenant, sha256)
        if row is None:
            return None
        data = bytes(row[5])
        if self.keys is None or not blob_keys.is_sealed(data):
            return _row_blob(row, self._open(data))
        with self._transaction() as c:
            key = self._key_of(c, tenant or "", sha256)
        if key is None:  # a copy from before every context holding it was erased
            raise BlobNotFoundError(f"no blob sha256:{sha256} (its contexts were erased)")
        return _row_blob(row, blob_keys.open_sealed(key, tenant or "", sha256, data))

    def describe(self, tenant: str | None, sha256: str) -> BlobRef | None:
        row = self._one(self.describe_sql, tenant, sha256)
        return None if row is None else _row_blob(row, b"").ref

    def record_file_id(self, tenant: str | None, sha256: str, provider: str, file_id: str) -> bool:
        owner = tenant or ""
        with self._transaction() as c:
            self._lock(c, owner, sha256)
            c.execute(self.ids_sql, (owner, sha256))
            row = c.fetchone()
            if row is None:
                return False
            held = _tuple(row)[0]
            ids = {**json.loads(held or "{}"), provider: file_id}
            c.execute(self.set_ids_sql, (json.dumps(ids, sort_keys=True), owner, sha256))
        return True

    def file_ids(self, tenant: str | None, shas: Sequence[str]) -> dict[str, dict[str, str]]:
        found = {}
        with self._transaction() as c:
            for sha in shas:
                c.execute(self.ids_sql, (tenant or "", sha))
                row = c.fetchone()
                held = (
                    None
                    if row is None
                    else (next(iter(row.values())) if isinstance(row, dict) else row[0])
                )
                if held:
                    found[sha] = json.loads(held)
        return found

    def release(self, cid: UUID) -> int:
        deleted = 0
        with self._transaction() as c:
            self._secure(c)
            c.execute(self.referred_sql, (cid.hex,))
            held = [_tuple(r) for r in c.fetchall()]
            c.execute(self.unrefer_sql, (cid.hex,))
            for tenant, sha in sorted(held):
                self._lock(c, tenant, sha)
                c.execute(self.orphan_sql, (tenant, sha, tenant, sha))
                deleted += self._rowcount(c)
        return deleted

    def _rowcount(self, c: Any) -> int:
        return max(int(c.rowcount), 0)

    def _secure(self, c: Any) -> None:
        """Make deleted rows' pages unreadable where the database can (SQLite)."""

    def stored_bytes(self) -> int:
        with self._transaction() as c:
            c.execute(self.size_sql)
            row = c.fetchone()
        return int(_tuple(row)[0])


class MemoryBlobRows(BlobRows):
    """For a memory:// store: blobs live as long as the process."""

    def __init__(self) -> None:
        self._blobs: dict[tuple[str, str], StoredBlob] = {}
        self._refs: dict[str, set[tuple[str, str]]] = {}
        self._ids: dict[tuple[str, str], dict[str, str]] = {}
        self._lock = threading.Lock()

    def keep(
        self, tenant: str | None, cid: UUID, blobs: Sequence[Blob], refs: set[str]
    ) -> list[str]:
        owner = tenant or ""
        with self._lock:
            for b in blobs:
                self._blobs.setdefault((owner, b.ref.sha256), StoredBlob(b.ref, b.data))
            missing = sorted(s for s in refs if (owner, s) not in self._blobs)
            if not missing:
                self._refs.setdefault(cid.hex, set()).update((owner, s) for s in refs)
            return missing

    def fetch(self, tenant: str | None, sha256: str) -> StoredBlob | None:
        with self._lock:
            return self._blobs.get((tenant or "", sha256))

    def describe(self, tenant: str | None, sha256: str) -> BlobRef | None:
        found = self.fetch(tenant, sha256)
        return None if found is None else found.ref

    def record_file_id(self, tenant: str | None, sha256: str, provider: str, file_id: str) -> bool:
        with self._lock:
            if (tenant or "", sha256) not in self._blobs:
                return False
            self._ids.setdefault((tenant or "", sha256), {})[provider] = file_id
            return True

    def file_ids(self, tenant: str | None, shas: Sequence[str]) -> dict[str, dict[str, str]]:
        with self._lock:
            return {s: dict(i) for s in shas if (i := self._ids.get((tenant or "", s)))}

    def release(self, cid: UUID) -> int:
        with self._lock:
            held = self._refs.pop(cid.hex, set())
            left = set().union(*self._refs.values()) if self._refs else set()
            gone = [k for k in held if k not in left and k in self._blobs]
            for k in gone:
                del self._blobs[k]
                self._ids.pop(k, None)
            return len(gone)

    def stored_bytes(self) -> int:
        with self._lock:
            return sum(len(b.data) for b in self._blobs.values())
