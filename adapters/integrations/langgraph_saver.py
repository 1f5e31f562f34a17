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
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any

from ctxstore.domain.errors import ContextNotFoundError, MissingExtraError

try:
    from langchain_core.messages import BaseMessage
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

from ctxstore.adapters.integrations.langgraph_records import (
    HELD,
    KEY,
    Thread,
    record,
    typed,
    untyped,
    version_key,
)
from ctxstore.adapters.integrations.langgraph_threads import Threads, thread_context
from ctxstore.adapters.integrations.surface import faces
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.domain.plain import is_record

MESSAGES = "messages"  # the channel kept as the context's messages


class CtxStoreSaver(BaseCheckpointSaver[str]):
    """LangGraph's checkpointer on a ctxstore store, async store or HTTP client."""

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, *,
        serde: SerializerProtocol | None = None, key_prefix: str = "langgraph:",
    ) -> None:  # fmt: skip
        super().__init__(serde=serde)
        self.store = faces(store).sync
        self.prefix = key_prefix
        self.threads = Threads(self.store, key_prefix)  # found, cached, read and written

    # ---- reading --------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread = self.threads.thread(configurable["thread_id"])
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
        return self.threads.messages(thread, value[1])

    def list(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:  # fmt: skip
        configurable = (config or {}).get("configurable", {})
        thread_ids = (
            [configurable["thread_id"]] if "thread_id" in configurable else self.threads.ids()
        )
        wanted_ns = configurable.get("checkpoint_ns")
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id in thread_ids:
            thread = self.threads.thread(thread_id)
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
        thread = self.threads.thread(configurable["thread_id"])
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
        cid = self.threads.context(thread_id, create=True)
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
        with self.threads.lock:  # (a step's put and its tasks' writes run on several threads)
            for _ in range(3):  # the thread as cached, then as read again after another's write
                thread = self.threads.cached(cid) or self.threads.read(cid)
                appended = self.threads.appended(thread, values[MESSAGES]) if mirrored else None
                if appended is None and mirrored:
                    break  # (messages removed or edited: one command each, below)
                new, held, prints = appended or ([], None, [])
                records = self._records(ns, values, new_versions, held, kept)
                if self.threads.append(cid, thread, new, records, prints):
                    return self._saved(thread_id, ns, checkpoint["id"])
            held = self.threads.mirror(cid, values[MESSAGES]) if mirrored else None
            self.threads.insert(cid, self._records(ns, values, new_versions, held, kept))
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

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
        task_path: str = "",
    ) -> None:  # fmt: skip
        configurable = config["configurable"]
        thread_id, ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        with self.threads.lock:  # (its writes are planned on the thread as cached, then written)
            # The thread as cached: a write of anyone else's since makes the insert's expected
            # version fail, and it is read again.
            cid = self.threads.known(thread_id)
            thread = self.threads.cached(cid)
            if thread is None:
                thread = self.threads.thread(thread_id)
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
            cid = thread.cid if thread is not None else self.threads.context(thread_id, create=True)
            assert cid is not None
            kept = record({"kind": "writes", "ns": ns, "checkpoint_id": checkpoint_id,
                           "writes": rows})  # fmt: skip
            if thread is None or not self.threads.append(cid, thread, [], [kept]):
                self.threads.insert(cid, [kept])

    # ---- removing and copying ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        cid = self.threads.context(thread_id, create=False)
        if cid is not None:
            self.threads.forget(thread_id, cid)
            with suppress(ContextNotFoundError):  # (erased by another saver since it was found)
                self.store.erase(cid, reason="LangGraph delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = {str(r) for r in run_ids}
        if not runs:
            return
        for thread_id in self.threads.ids():
            thread = self.threads.thread(thread_id)
            if thread is None:
                continue
            doomed = [key for key, (kept, _) in thread.checkpoints.items()
                      if str(kept.get("run_id")) in runs]  # fmt: skip
            self._hide(thread, doomed)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy is keep_latest or delete, not {strategy!r}")
        for thread_id in thread_ids:
            thread = self.threads.thread(thread_id)
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
        source = self.threads.thread(source_thread_id)
        if source is None:
            return
        target = self.threads.context(target_thread_id, create=True)
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
            self.threads.insert(target, records)

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


def _all_messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value)


__all__ = ["CtxStoreSaver", "thread_context"]
