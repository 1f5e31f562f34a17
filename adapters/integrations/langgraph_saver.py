"""A LangGraph checkpointer on ctxstore (`pip install 'ctxstore[langgraph]'`).

    saver = CtxStoreSaver(ctxstore.open("sqlite:///graphs.db"))   # or an async store, a client
    graph = builder.compile(checkpointer=saver)

Each thread is one ctxstore context (found by its key, `langgraph:<thread id>`). The graph's
`messages` channel (the one `add_messages` and `RemoveMessage` act on, in the root
namespace) is the context's messages: each checkpoint's list is written as messages — new
ones inserted, removed ones deleted, edited ones replaced, each kept with LangChain's own
serialization (as the LangChain history keeps them) — so `ctxstore show`, the debugger,
compaction and the audit see the conversation, and the checkpoint keeps only the version
of the context it was taken at: reading it reads the messages as they were at that version.
Everything else the graph keeps — the checkpoint itself (channel versions, what each node
has seen), every other channel's values, each task's pending writes — is stored beside them
as records (kept in the history, never sent to a model), serialized by LangGraph's own
serializer, exactly. A messages list the context cannot hold as it is (messages without
ids, an order other than the context's, a removal that would split a tool call from its
result) is stored as a serialized value instead, so a checkpoint always reads back exactly.

Editing or resuming from an earlier checkpoint writes a new checkpoint whose parent is that
one: the context's messages become the new branch's, and the later checkpoint keeps reading
its own messages at its version. `delete_thread` erases the thread's context
(crypto-shredded where keys are on); `delete_for_runs` and `prune` hide the checkpoints,
writes and values they remove (the context's history keeps them for the audit until it is
erased or its retention removes them); `copy_thread` writes the source thread's records and
messages into the target's context.
"""

from __future__ import annotations

import asyncio
import builtins
import random
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any
from uuid import UUID

from ctxstore.domain.context_reads import new_message_id
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    InvalidOperationError,
    MissingExtraError,
    VersionConflictError,
)

try:
    from langchain_core.messages import BaseMessage, message_to_dict
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        DeltaChannelHistory,
        PendingWrite,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the LangGraph checkpointer", "langgraph") from exc

from ctxstore.adapters.integrations.langchain_history import KEY as LANGCHAIN
from ctxstore.adapters.integrations.langchain_history import from_openai, to_openai
from ctxstore.adapters.integrations.langgraph_records import (
    HELD,
    KEY,
    Thread,
    in_parts,
    record,
    typed,
    untyped,
    version_key,
)
from ctxstore.adapters.integrations.surface import LRU, faces, named_contexts
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import is_record

NAME = "langgraph thread "  # contexts' names: the prefix, then the thread id
MESSAGES = "messages"  # the channel kept as the context's messages
THREADS = 256  # threads a saver keeps as last read
USAGE_SLACK = 16  # model calls' usage a checkpoint's one event may come after (_messages_at)


def thread_context(store: Any, thread_id: str, *, key_prefix: str = "langgraph:") -> UUID:
    """The context a saver keeps `thread_id` in (made, named as the saver names it, if new):
    where captured model calls of the thread are recorded too."""
    return store.context_for_key(  # type: ignore[no-any-return]
        key_prefix + str(thread_id), name=NAME + str(thread_id),
        metadata={"langgraph_thread_id": str(thread_id)},
    )  # fmt: skip


class CtxStoreSaver(BaseCheckpointSaver[str]):
    """LangGraph's checkpointer on a ctxstore store, async store or HTTP client."""

    def __init__(
        self, store: Any, *, serde: SerializerProtocol | None = None,
        key_prefix: str = "langgraph:",
    ) -> None:  # fmt: skip
        super().__init__(serde=serde)
        self.store, _ = faces(store)
        self.prefix = key_prefix
        # Threads as last read, by context: reused while the context's version is the same
        # (a write of this saver's own is folded in; anyone else's makes it read again).
        self._threads: LRU[UUID, Thread] = LRU(THREADS)  # bounded: a few threads are live
        self._versions: dict[tuple[UUID, int], dict[str, Message]] = {}  # messages at a version
        self._contexts: LRU[str, UUID] = LRU(THREADS)  # thread id -> its context, once known
        self._lock = threading.RLock()

    # ---- threads ------------------------------------------------------------------------

    def _context(self, thread_id: str, *, create: bool) -> UUID | None:
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

    def _forget(self, thread_id: str, cid: UUID | None) -> None:
        """Drop what is kept of a thread (erased, or written by someone else)."""
        with self._lock:
            self._contexts.pop(str(thread_id), None)
            if cid is not None:
                self._threads.pop(cid, None)

    def _thread(self, thread_id: str) -> Thread | None:
        cid = self._context(thread_id, create=False)
        if cid is None:
            return None
        try:
            return self._read(cid)
        except ContextNotFoundError:  # erased since it was found: look its key up again
            self._forget(thread_id, cid)
            cid = self._context(thread_id, create=False)
            return None if cid is None else self._read(cid)

    def _read(self, cid: UUID) -> Thread:
        with self._lock:
            cached = self._threads.get(cid)
            # A store answers its newest version and erasures cheaply (an erased thread made
            # again up to the same version is not the cached one); over HTTP a read is one
            # request either way.
            head = getattr(self.store, "head_mark", None)
            mark = None if head is None else head(cid)
            if cached is not None and (cached.version, cached.erasures) == mark:
                return cached
            seen = self.store.visible(cid, inline=True)
            thread = Thread.read(cid, seen.version, seen.messages)
            if mark is not None:  # an erasure after the mark was read makes the next differ
                thread.erasures = mark[1]
            self._threads[cid] = thread
            return thread

    def _insert(self, cid: UUID, records: builtins.list[dict[str, Any]]) -> None:
        """Insert records (one event, a long one in parts) and fold them into the thread as
        cached."""
        records = [part for r in records for part in in_parts(r)]
        with self._lock:
            written = self.store.insert(cid, records)
            cached = self._threads.get(cid)
            if cached is None or written.version != cached.version + 1:
                self._threads.pop(cid, None)  # someone else wrote too: read it again
                return
            for record, mid in zip(records, written.ids, strict=True):
                cached.add(record["metadata"][KEY], mid)
            cached.version = written.version

    def _append(
        self, cid: UUID, thread: Thread, messages: builtins.list[dict[str, Any]],
        records: builtins.list[dict[str, Any]], prints: Sequence[dict[str, Any]] = (),
    ) -> bool:  # fmt: skip
        """Insert new messages (ids given) and records as one event on the thread as cached,
        then fold them in; False when the context is not at that version any more (someone
        else wrote, or it was erased): nothing was written, and the thread is read again."""
        records = [part for r in records for part in in_parts(r)]
        with self._lock:
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
                self._keep_version((cid, thread.version + 1), thread.by_id)
            thread.version = written.version
            return True

    def _thread_ids(self) -> builtins.list[str]:
        return [str(c.name)[len(NAME) :] for c in named_contexts(self.store, NAME)]

    # ---- reading --------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread = self._thread(configurable["thread_id"])
        if thread is None:
            return None
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            newest = thread.ids(ns)
            if not newest:
                return None
            checkpoint_id = newest[0]
        if (ns, checkpoint_id) not in thread.checkpoints:
            return None
        return self._tuple(configurable["thread_id"], thread, ns, checkpoint_id)

    def _tuple(
        self, thread_id: str, thread: Thread, ns: str, checkpoint_id: str
    ) -> CheckpointTuple:
        kept, _ = thread.checkpoints[(ns, checkpoint_id)]
        checkpoint: Checkpoint = self.serde.loads_typed(untyped(kept["checkpoint"]))
        values: dict[str, Any] = {}
        for channel, version in checkpoint["channel_versions"].items():
            blob = thread.blobs.get(version_key(ns, channel, version))
            if blob is None or blob[0]["value"][0] == "empty":
                continue
            values[channel] = self._value(thread, blob[0]["value"])
        writes = sorted(
            (
                w
                for kept_w, _ in thread.writes.get((ns, checkpoint_id), [])
                for w in kept_w["writes"]
            ),
            key=lambda w: writes_sort_key(w[4], w[0], w[1]),
        )
        parent = kept.get("parent")
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": checkpoint_id}},
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self.serde.loads_typed(untyped(kept["metadata"])),
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                  "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=[(w[0], w[2], self.serde.loads_typed(untyped(w[3]))) for w in writes],
        )  # fmt: skip

    def _value(self, thread: Thread, value: builtins.list[Any]) -> Any:
        if value[0] != HELD:
            return self.serde.loads_typed(untyped(value))
        held = value[1]
        key = (thread.cid, held["at"])
        by_id = self._versions.get(key)
        # The store names messages afresh: a thread erased and made again up to the same
        # version holds other ids, read again.
        if by_id is None or any(i not in by_id for i in held["ids"]):
            by_id = self._messages_at(thread.cid, held["at"], held["ids"])
            self._keep_version(key, by_id)
        return [from_openai(by_id[i]) for i in held["ids"]]

    def _messages_at(self, cid: UUID, at: int, ids: builtins.list[str]) -> dict[str, Message]:
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

    def _keep_version(self, key: tuple[UUID, int], by_id: dict[str, Message]) -> None:
        if len(self._versions) >= 16:  # the few versions a run reads again and again
            self._versions.pop(next(iter(self._versions)))
        self._versions[key] = by_id

    def list(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:  # fmt: skip
        configurable = (config or {}).get("configurable", {})
        thread_ids = (
            [configurable["thread_id"]] if "thread_id" in configurable else self._thread_ids()
        )
        wanted_ns = configurable.get("checkpoint_ns")
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id in thread_ids:
            thread = self._thread(thread_id)
            if thread is None:
                continue
            for ns in thread.namespaces():
                if wanted_ns is not None and ns != wanted_ns:
                    continue
                for checkpoint_id in thread.ids(ns):
                    if wanted_id and checkpoint_id != wanted_id:
                        continue
                    if before_id and checkpoint_id >= before_id:
                        continue
                    kept, _ = thread.checkpoints[(ns, checkpoint_id)]
                    if filter:
                        metadata = self.serde.loads_typed(untyped(kept["metadata"]))
                        if not all(metadata.get(k) == v for k, v in filter.items()):
                            continue
                    if left is not None:
                        if left <= 0:
                            return
                        left -= 1
                    yield self._tuple(thread_id, thread, ns, checkpoint_id)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Each channel's writes along the checkpoint's ancestors, oldest first, back to
        the nearest ancestor holding a value for it (its seed), as LangGraph's default
        walk gives them; read from the thread as held, without building every ancestor's
        tuple (its values and every write of every channel)."""
        if not channels:
            return {}
        configurable = config["configurable"]
        found: dict[str, builtins.list[PendingWrite]] = {c: [] for c in channels}
        seeds: dict[str, Any] = {}
        thread = self._thread(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        target = get_checkpoint_id(config) or next(iter(thread.ids(ns) if thread else []), None)
        held = None if thread is None else thread.checkpoints.get((ns, str(target)))
        cursor = None if held is None else held[0].get("parent")
        remaining = set(channels)
        while thread is not None and cursor and remaining:
            held = thread.checkpoints.get((ns, cursor))
            if held is None:
                break
            writes = sorted(
                (w for kept_w, _ in thread.writes.get((ns, cursor), []) for w in kept_w["writes"]),
                key=lambda w: writes_sort_key(w[4], w[0], w[1]),
            )
            for w in reversed(writes):
                if w[2] in remaining:
                    found[w[2]].append((w[0], w[2], self.serde.loads_typed(untyped(w[3]))))
            versions = self.serde.loads_typed(untyped(held[0]["checkpoint"]))["channel_versions"]
            for channel in [c for c in remaining if c in versions]:
                blob = thread.blobs.get(version_key(ns, channel, versions[channel]))
                if blob is not None and blob[0]["value"][0] != "empty":
                    seeds[channel] = self._value(thread, blob[0]["value"])
                    remaining.discard(channel)
            cursor = held[0].get("parent")
        history: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": found[channel][::-1]}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            history[channel] = entry
        return history

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

    # ---- writing --------------------------------------------------------------------------

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:  # fmt: skip
        configurable = config["configurable"]
        thread_id, ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        cid = self._context(thread_id, create=True)
        assert cid is not None
        c = dict(checkpoint)
        values: dict[str, Any] = c.pop("channel_values")  # type: ignore[assignment]
        full = get_checkpoint_metadata(config, metadata)
        kept = {
            "kind": "checkpoint", "ns": ns, "id": checkpoint["id"],
            "parent": configurable.get("checkpoint_id"), "run_id": full.get("run_id"),
            "checkpoint": typed(self.serde.dumps_typed(c)),
            "metadata": typed(self.serde.dumps_typed(full)),
        }  # fmt: skip
        mirrored = ns == "" and MESSAGES in new_versions and _all_messages(values.get(MESSAGES))
        with self._lock:  # (a step's put and its tasks' writes run on several threads)
            for _ in range(3):  # the thread as cached, then as read again after another's write
                thread = self._threads.get(cid) or self._read(cid)
                appended = self._appended(thread, values[MESSAGES]) if mirrored else None
                if appended is None and mirrored:
                    break  # (messages removed or edited: one command each, below)
                new, held, prints = appended or ([], None, [])
                records = self._records(ns, values, new_versions, held, kept)
                if self._append(cid, thread, new, records, prints):
                    return self._saved(thread_id, ns, checkpoint["id"])
            held = self._mirror(cid, values[MESSAGES]) if mirrored else None
            self._insert(cid, self._records(ns, values, new_versions, held, kept))
        return self._saved(thread_id, ns, checkpoint["id"])

    def _saved(self, thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint_id}}  # fmt: skip

    def _records(
        self, ns: str, values: dict[str, Any], new_versions: ChannelVersions,
        held: dict[str, Any] | None, kept: dict[str, Any],
    ) -> builtins.list[dict[str, Any]]:  # fmt: skip
        """A checkpoint's records: each new channel value's, then the checkpoint's."""
        records = []
        for channel, version in new_versions.items():
            if channel == MESSAGES and held is not None:
                value: builtins.list[Any] = [HELD, held]
            elif channel in values:
                value = typed(self.serde.dumps_typed(values[channel]))
            else:
                value = ["empty", ""]
            records.append(record({"kind": "blob", "ns": ns, "channel": channel,
                                    "version": version, "value": value}))  # fmt: skip
        records.append(record(kept))
        return records

    def _appended(
        self, thread: Thread, wanted: builtins.list[BaseMessage]
    ) -> tuple[builtins.list[dict[str, Any]], dict[str, Any], builtins.list[Any]] | None:
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
            self._keep_version((thread.cid, thread.version), thread.by_id)
            return new, {"at": thread.version, "ids": ids}, prints
        return new, {"at": thread.version + 1, "ids": ids}, prints

    def _mirror(self, cid: UUID, wanted: builtins.list[BaseMessage]) -> dict[str, Any] | None:
        """Make the context's messages the list given; where it is read back from (the
        version and the messages' ids), or None when the context cannot hold it as it is."""
        if any(m.id is None for m in wanted) or len({m.id for m in wanted}) != len(wanted):
            return None
        thread = self._read(cid)
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

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
        task_path: str = "",
    ) -> None:  # fmt: skip
        configurable = config["configurable"]
        thread_id, ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        with self._lock:  # (its writes are planned on the thread as cached, then written)
            # The thread as cached: a write of anyone else's since makes the insert's expected
            # version fail, and it is read again.
            cid = self._contexts.get(str(thread_id))
            thread = self._threads.get(cid) if cid is not None else None
            if thread is None:
                thread = self._thread(thread_id)
            held = set()
            if thread is not None:
                held = {(w[0], w[1]) for k, _ in thread.writes.get((ns, checkpoint_id), [])
                        for w in k["writes"]}  # fmt: skip
            rows = []
            for idx, (channel, value) in enumerate(writes):
                index = WRITES_IDX_MAP.get(channel, idx)
                if index >= 0 and (task_id, index) in held:
                    continue  # already stored (a retried task's special writes are kept once)
                rows.append(
                    [task_id, index, channel, typed(self.serde.dumps_typed(value)), task_path]
                )
            if not rows:
                return
            cid = thread.cid if thread is not None else self._context(thread_id, create=True)
            assert cid is not None
            kept = record({"kind": "writes", "ns": ns, "checkpoint_id": checkpoint_id,
                           "writes": rows})  # fmt: skip
            if thread is None or not self._append(cid, thread, [], [kept]):
                self._insert(cid, [kept])

    # ---- removing and copying ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        cid = self._context(thread_id, create=False)
        if cid is not None:
            self._forget(thread_id, cid)
            with suppress(ContextNotFoundError):  # (erased by another saver since it was found)
                self.store.erase(cid, reason="LangGraph delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        for thread_id in self._thread_ids():
            thread = self._thread(thread_id)
            if thread is None:
                continue
            doomed = [key for key, (kept, _) in thread.checkpoints.items()
                      if str(kept.get("run_id")) in runs]  # fmt: skip
            self._hide(thread, doomed)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy is keep_latest or delete, not {strategy!r}")
        for thread_id in thread_ids:
            thread = self._thread(thread_id)
            if thread is None:
                continue
            doomed = []
            for ns in thread.namespaces():
                ids = thread.ids(ns)
                doomed += [(ns, i) for i in (ids[1:] if strategy == "keep_latest" else ids)]
            self._hide(thread, doomed)

    def _hide(self, thread: Thread, doomed: builtins.list[tuple[str, str]]) -> None:
        """Delete the records of these checkpoints, their writes, and the values no kept
        checkpoint reads."""
        if not doomed:
            return
        gone = set(doomed)
        ids = [thread.checkpoints[k][1] for k in doomed]
        ids += [mid for k in doomed for _, mid in thread.writes.get(k, [])]
        needed = set()
        for key, (kept, _) in thread.checkpoints.items():
            if key in gone:
                continue
            checkpoint = self.serde.loads_typed(untyped(kept["checkpoint"]))
            needed |= {
                version_key(key[0], ch, v) for ch, v in checkpoint["channel_versions"].items()
            }
        ids += [mid for k, (_, mid) in thread.blobs.items() if k not in needed]
        self.store.delete(thread.cid, thread.with_parts(ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source = self._thread(source_thread_id)
        if source is None:
            return
        target = self._context(target_thread_id, create=True)
        assert target is not None
        # The records in their order, each messages value held as a serialized value (the
        # target's context has messages of its own: a fork would carry only the newest).
        records: builtins.list[dict[str, Any]] = []
        for m in self.store.visible(source.cid, inline=True).messages:
            found = m.metadata.get(KEY) if is_record(m) else None
            if not isinstance(found, dict):
                continue
            kept: dict[str, Any] = dict(found)
            if kept.get("kind") == "blob" and kept["value"][0] == HELD:
                value = self._value(source, kept["value"])
                kept["value"] = typed(self.serde.dumps_typed(value))
            records.append(record(kept))
        if records:
            self._insert(target, records)

    # ---- versions and the async methods -----------------------------------------------------

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Increasing version strings, as LangGraph's own savers make them."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:  # fmt: skip
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:  # fmt: skip
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
        task_path: str = "",
    ) -> None:  # fmt: skip
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


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


def _all_messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value)


__all__ = ["CtxStoreSaver"]
