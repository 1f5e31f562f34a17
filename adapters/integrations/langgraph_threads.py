"""The threads a LangGraph checkpointer keeps in ctxstore contexts (langgraph_saver.py):
each thread's context found by its key, the thread as last read or written, and how a
step's messages become the context's messages.

A step that adds messages writes them with its records as one event, conditional on the
thread's version as cached; a write of anyone else's refuses it, and the thread is read
again. A step that removes, edits or reorders messages writes one command each.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage, message_to_dict

from ctxstore.adapters.integrations.langchain_history import KEY as LANGCHAIN
from ctxstore.adapters.integrations.langchain_history import from_openai, to_openai
from ctxstore.adapters.integrations.langgraph_records import KEY, Thread, in_parts
from ctxstore.adapters.integrations.surface import LRU, hooks_of, named_contexts
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.domain.context_reads import new_message_id
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    InvalidOperationError,
    VersionConflictError,
)
from ctxstore.domain.messages import Message

NAME = "langgraph thread "  # contexts' names: the prefix, then the thread id
THREADS = 256  # threads a saver keeps as last read
USAGE_SLACK = 16  # model calls' usage a checkpoint's one event may come after (messages_at)


def thread_context(
    store: ContextOperations, thread_id: str, *, key_prefix: str = "langgraph:"
) -> UUID:
    """The context a saver keeps `thread_id` in (made, named as the saver names it, if new):
    where captured model calls of the thread are recorded too."""
    return store.context_for_key(
        key_prefix + str(thread_id), name=NAME + str(thread_id),
        metadata={"langgraph_thread_id": str(thread_id)},
    )  # fmt: skip


class Threads:
    """A saver's threads on one store face: found, cached, read and written."""

    def __init__(self, store: ContextOperations, prefix: str) -> None:
        self.store, self.prefix = store, prefix
        # Threads as last read, by context: reused while the context's version is the same
        # (a write of this saver's own is folded in; anyone else's makes it read again).
        self._threads: LRU[UUID, Thread] = LRU(THREADS)  # bounded: a few threads are live
        self._versions: dict[tuple[UUID, int], dict[str, Message]] = {}  # messages at a version
        self._contexts: LRU[str, UUID] = LRU(THREADS)  # thread id -> its context, once known
        self.lock = threading.RLock()  # a step's put and its tasks' writes come on threads

    def cached(self, cid: UUID | None) -> Thread | None:
        """The thread as last read or written, if kept (a write checks its version)."""
        return None if cid is None else self._threads.get(cid)

    def known(self, thread_id: str) -> UUID | None:
        """The thread's context, if already found."""
        return self._contexts.get(str(thread_id))

    def ids(self) -> list[str]:
        """Every thread id the store lists."""
        return [str(c.name)[len(NAME) :] for c in named_contexts(self.store, NAME)]

    def context(self, thread_id: str, *, create: bool) -> UUID | None:
        known = self._contexts.get(str(thread_id))
        if known is not None:
            return known
        if not create:
            found = self.store.lookup_key(self.prefix + str(thread_id))
        else:
            found = thread_context(self.store, thread_id, key_prefix=self.prefix)
        if found is not None:
            self._contexts[str(thread_id)] = found
        return found

    def forget(self, thread_id: str, cid: UUID | None) -> None:
        """Drop what is kept of a thread (erased, or written by someone else)."""
        with self.lock:
            self._contexts.pop(str(thread_id), None)
            if cid is not None:
                self._threads.pop(cid, None)

    def thread(self, thread_id: str) -> Thread | None:
        cid = self.context(thread_id, create=False)
        if cid is None:
            return None
        try:
            return self.read(cid)
        except ContextNotFoundError:  # erased since it was found: look its key up again
            self.forget(thread_id, cid)
            cid = self.context(thread_id, create=False)
            return None if cid is None else self.read(cid)

    def read(self, cid: UUID) -> Thread:
        with self.lock:
            cached = self._threads.get(cid)
            # A store answers its newest version and erasures cheaply (an erased thread made
            # again up to the same version is not the cached one); over HTTP a read is one
            # request either way.
            hooks = hooks_of(self.store)
            mark = None if hooks is None else hooks.head_mark(cid)
            if cached is not None and (cached.version, cached.erasures) == mark:
                return cached
            seen = self.store.visible(cid, inline=True)
            thread = Thread.read(cid, seen.version, seen.messages)
            if mark is not None:  # an erasure after the mark was read makes the next differ
                thread.erasures = mark[1]
            self._threads[cid] = thread
            return thread

    def insert(self, cid: UUID, records: list[dict[str, Any]]) -> None:
        """Insert records (one event, a long one in parts) and fold them into the thread as
        cached."""
        records = [part for r in records for part in in_parts(r)]
        with self.lock:
            written = self.store.insert(cid, records)
            cached = self._threads.get(cid)
            if cached is None or written.version != cached.version + 1:
                self._threads.pop(cid, None)  # someone else wrote too: read it again
                return
            for record, mid in zip(records, written.ids, strict=True):
                cached.add(record["metadata"][KEY], mid)
            cached.version = written.version

    def append(
        self, cid: UUID, thread: Thread, messages: list[dict[str, Any]],
        records: list[dict[str, Any]], prints: Sequence[dict[str, Any]] = (),
    ) -> bool:  # fmt: skip
        """Insert new messages (ids given) and records as one event on the thread as cached,
        then fold them in; False when the context is not at that version any more (someone
        else wrote, or it was erased): nothing was written, and the thread is read again."""
        records = [part for r in records for part in in_parts(r)]
        with self.lock:
            try:
                written = self.store.insert(
                    cid, [*messages, *records], expected_version=thread.version
                )
            except (VersionConflictError, ContextNotFoundError):
                self._threads.pop(cid, None)
                return False
            if self._threads.get(cid) is not thread:
                return True  # (read again meanwhile: that read holds what was written)
            added = [Message.model_validate(m) for m in messages]
            thread.messages.extend(added)
            thread.prints.extend(prints)
            thread.by_id.update((str(m.id), m) for m in added)
            for record, mid in zip(records, written.ids[len(messages) :], strict=True):
                thread.add(record["metadata"][KEY], mid)
            if messages:  # what a checkpoint of this version reads back, without a read
                self.keep_version((cid, thread.version + 1), thread.by_id)
            thread.version = written.version
            return True

    def messages_at(self, cid: UUID, at: int, ids: list[str]) -> dict[str, Message]:
        """The context's messages at version `at`, by id. A checkpoint written in one event
        with its new messages names the version that event was to have; a model call's usage
        recorded just before it (which changes no message) moves it later: the first version
        from `at` on that holds every id is then the one."""
        for version in range(at, at + USAGE_SLACK + 1):
            try:
                seen = self.store.visible(cid, at_version=version, inline=True).messages
            except InvalidOperationError:  # past the newest version
                break
            by_id = {str(m.id): m for m in seen}
            if all(i in by_id for i in ids):
                return by_id
        raise KeyError(f"context {cid}: a checkpoint's messages are not held at version {at}")

    def keep_version(self, key: tuple[UUID, int], by_id: dict[str, Message]) -> None:
        if len(self._versions) >= 16:  # the few versions a run reads again and again
            self._versions.pop(next(iter(self._versions)))
        self._versions[key] = by_id

    def appended(
        self, thread: Thread, wanted: list[BaseMessage]
    ) -> tuple[list[dict[str, Any]], dict[str, Any], list[Any]] | None:
        """When `wanted` is the thread's messages as cached with new ones (or none) after
        them (a turn's usual step): the new messages with their ids given, where the checkpoint
        reads them back (the version the one event writing both will have), and the new
        messages' fields. None when messages were removed, edited or reordered (written one
        command at a time)."""
        current = thread.messages
        if len(wanted) < len(current):
            return None  # (some removed)
        if any(m.id is None for m in wanted) or len({m.id for m in wanted}) != len(wanted):
            return None
        # A step's reducer hands the earlier messages again as they were: their fields
        # equal the copy kept, and only the others are compared by their serialized form.
        differing = [n for n, (m, seen) in enumerate(zip(wanted, thread.prints, strict=False))
                     if seen != m.__dict__]  # fmt: skip
        if not all(_unchanged(thread, n, wanted[n]) for n in differing):
            return None
        ids = [str(m.id) for m in current]
        new, prints = [], []
        for m in wanted[len(current) :]:
            body = to_openai(m)
            body["id"] = new_message_id()
            new.append(body)
            ids.append(body["id"])
            prints.append(dict(m.__dict__))
        if not new:  # the messages as they are: read back at the thread's version
            self.keep_version((thread.cid, thread.version), thread.by_id)
            return new, {"at": thread.version, "ids": ids}, prints
        return new, {"at": thread.version + 1, "ids": ids}, prints

    def mirror(self, cid: UUID, wanted: list[BaseMessage]) -> dict[str, Any] | None:
        """Make the context's messages the list given; where it is read back from (the
        version and the messages' ids), or None when the context cannot hold it as it is."""
        if any(m.id is None for m in wanted) or len({m.id for m in wanted}) != len(wanted):
            return None
        thread = self.read(cid)
        current = thread.messages
        by_lc = {_lc_id(m): m for m in current}
        keep_ids = {m.id for m in wanted}
        kept_order = [_lc_id(m) for m in current if _lc_id(m) in keep_ids]
        new = [m for m in wanted if m.id not in by_lc]
        if kept_order + [m.id for m in new] != [m.id for m in wanted]:
            return None  # another order than the context's: kept as a value
        version = thread.version
        ids = {str(_lc_id(m)): str(m.id) for m in current if _lc_id(m) in keep_ids}
        try:
            gone = [str(m.id) for m in current if _lc_id(m) not in keep_ids]
            if gone:
                version = self.store.delete(cid, gone).version
            for m in wanted:
                old = by_lc.get(m.id)
                if old is not None and old.metadata.get(LANGCHAIN) != message_to_dict(m):
                    version = self.store.replace(cid, str(old.id), to_openai(m)).version
            if new:
                written = self.store.insert(cid, [to_openai(m) for m in new])
                version = written.version
                ids.update(zip((str(m.id) for m in new), written.ids, strict=True))
        except CtxStoreError:
            return None  # (a removal that would split a call from its result, ...)
        finally:
            if version != thread.version:
                self._threads.pop(cid, None)  # its messages changed: read them again
        return {"at": version, "ids": [ids[str(m.id)] for m in wanted]}

    def messages(self, thread: Thread, held: dict[str, Any]) -> list[BaseMessage]:
        """A checkpoint's messages channel held as the context's messages: LangChain's
        messages, made afresh, from the context as it was at the version named."""
        key = (thread.cid, held["at"])
        by_id = self._versions.get(key)
        # The store names messages afresh: a thread erased and made again up to the same
        # version holds other ids, read again.
        if by_id is None or any(i not in by_id for i in held["ids"]):
            by_id = self.messages_at(thread.cid, held["at"], held["ids"])
            self.keep_version(key, by_id)
        return [from_openai(by_id[i]) for i in held["ids"]]


def _lc_id(m: Message) -> str | None:
    kept = m.metadata.get(LANGCHAIN)
    data = kept.get("data") if isinstance(kept, dict) else None
    found = data.get("id") if isinstance(data, dict) else None
    return None if found is None else str(found)


def _unchanged(thread: Thread, n: int, m: BaseMessage) -> bool:
    """Whether LangChain message `m` is the one the thread holds at `n`, by its serialized
    form (remembered as its fields, a shallow copy: the next step's reducer hands the same
    message again, and its fields then answer at once)."""
    old = thread.messages[n]
    if _lc_id(old) != m.id or old.metadata.get(LANGCHAIN) != message_to_dict(m):
        return False
    thread.prints[n] = dict(m.__dict__)
    return True


__all__ = ["NAME", "Threads", "thread_context"]
