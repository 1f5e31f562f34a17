"""Export a context's events as JSON lines and import them back; import OpenAI transcripts.

An export line is `{"context_id", "version", "topic", "state", "chain"}`: `state` is the
stored event's JSON (without its chain), so re-encoding it gives the stored bytes back and
an import reproduces every id, version, timestamp and chain. The attachments the events
refer to follow, one `{"blob": {"sha256", "media_type", "data"}}` line each (base64), then
the trailer. Imports check everything
before writing and write all events in one transaction, or nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast
from uuid import UUID, uuid4

from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.storage.codec.chain import GENESIS, link, unseal
from ctxstore.adapters.storage.codec.transcoder import ContextTranscoder
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.write_attempt import Next, settled
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.blobs import Blob, describe
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import ContextExistsError, CtxStoreError, InvalidImportError
from ctxstore.domain.message_input import parse_message
from ctxstore.domain.transcript import check_transcript

Progress = Callable[[int, int], None]  # (done, total)
TOPICS = {
    get_topic(cls)
    for cls in vars(Context).values()
    if isinstance(cls, type) and issubclass(cls, Context.Event) and cls is not Context.Event
}
CHUNK = 500  # transcript messages per insert event
BLOB_SHA = re.compile(r"ctxstore-blob:sha256:([0-9a-f]{64})")  # an attachment's reference


def export_lines(core: StoreCore, context_id: UUID | str) -> Iterator[str]:
    """The context's events as JSON lines, oldest first."""
    cid = core.id(context_id)
    mapper = core.storage.mapper
    version, seen, last_chain = 0, False, None
    shas: set[str] = set()
    while True:
        page = core.storage.recorder.select_events(cid, gt=version, limit=5000)
        if not page:
            break
        seen = True
        for s in page:
            body, chain = unseal(mapper.plaintext(s.state, cid))
            # The stored JSON goes into the line as it is: nothing to decode and re-encode.
            yield (
                f'{{"context_id":"{cid}","version":{s.originator_version},'
                f'"topic":{json.dumps(s.topic)},"state":{body.decode("utf-8")},'
                f'"chain":{json.dumps(chain)}}}'
            )
            shas.update(BLOB_SHA.findall(body.decode("utf-8")))
        version = page[-1].originator_version
        last_chain = chain
    if not seen:
        core.require(cid)
    # The attachments its messages refer to: each checked against its hash on import.
    tenant = core.tenant_of(cid)
    for sha in sorted(shas):
        found = core.storage.blobs.fetch(tenant, sha)
        if found is not None:
            r = found.ref
            yield json.dumps({"blob": {
                "sha256": sha, "media_type": r.media_type,
                "data": base64.b64encode(found.data).decode("ascii")}})  # fmt: skip
    # The trailer: an export cut short (a lost tail) is refused on import, not taken for an
    # older version of the context.
    yield json.dumps({"trailer": {"context_id": str(cid), "events": version, "chain": last_chain}})


STATE_START = ',"state":'
CHAIN_END = re.compile(r',"chain":(null|"[0-9a-f]{64}")\}\s*$')


def _state_text(line: str) -> bytes | None:
    """The state's JSON text as an export wrote it, or None for a line laid out otherwise."""
    start = line.find(STATE_START)
    end = CHAIN_END.search(line)
    if start < 0 or end is None or not line.startswith('{"context_id":'):
        return None
    return line[start + len(STATE_START) : end.start()].encode("utf-8")


def _records(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidImportError(f"line {n} is not JSON: {exc.msg}") from None
            except RecursionError:  # the parser's own stack: deeper than any message may be
                raise InvalidImportError(f"line {n}: JSON nested too deeply") from None


def _blobs(records: list[tuple[int, Any]]) -> dict[str, Blob]:
    """The export's attachments (its `blob` lines, taken out of `records`), each checked
    against its hash."""
    found: dict[str, Blob] = {}
    kept = []
    for n, rec in records:
        if not (isinstance(rec, dict) and "blob" in rec):
            kept.append((n, rec))
            continue
        blob = rec["blob"]
        try:
            data = base64.b64decode(blob["data"], validate=True)
            ref = describe(data, str(blob["media_type"]))
        except (KeyError, TypeError, ValueError, binascii.Error, CtxStoreError):
            raise InvalidImportError(
                f"line {n}: a blob needs sha256, media_type and base64 data"
            ) from None
        if ref.sha256 != blob.get("sha256"):
            raise InvalidImportError(f"line {n}: the blob's data does not match its sha256")
        found[ref.sha256] = Blob(ref, data)
    records[:] = kept
    return found


def import_lines(
    writer: Writer,
    lines: Iterable[str],
    *,
    new_id: bool = False,
    progress: Progress | None = None,
    tenant: str | None = None,
    without_trailer: bool = False,
) -> UUID:
    """Store an exported context's events (same ids, versions, chains); returns its id.
    An export ends with a trailer (its event count and last chain); one without is refused
    unless `without_trailer` (exports written before trailers).
    With `tenant`, the context must be that tenant's (a service's caller imports only its own).

    With new_id the context gets a fresh id (and so new chains). Raises InvalidImportError
    naming the line at fault, ContextExistsError; writes nothing then.
    """
    core = writer.core
    mapper = core.storage.mapper
    line_texts = list(lines)
    records = list(_records(line_texts))
    trailer = None
    if records and isinstance(records[-1][1], dict) and "trailer" in records[-1][1]:
        trailer = records.pop()[1]["trailer"]
    blobs = _blobs(records)
    if not records:
        raise InvalidImportError("the export is empty")
    first = records[0][1]
    if isinstance(first, dict) and "role" in first and "context_id" not in first:
        raise InvalidImportError(
            "this is a transcript of messages, not an export of `ctxstore export`: import it "
            "as a new context with import_transcript (on the command line --openai)"
        )
    if trailer is None and not without_trailer:
        raise InvalidImportError(
            "the export has no trailer: it may have been cut short (an export written before "
            "trailers imports with without_trailer, on the command line --without-trailer)"
        )
    source: UUID | None = None
    target: UUID | None = None
    prev_file, prev_new = GENESIS, GENESIS
    stored: list[StoredEvent] = []
    ctx: Context | None = None
    for done, (n, rec) in enumerate(records, 1):
        if (
            not isinstance(rec, dict)
            or not {"context_id", "version", "topic", "state"} <= rec.keys()
        ):
            raise InvalidImportError(f"line {n}: needs context_id, version, topic and state")
        try:
            cid = UUID(str(rec["context_id"]))
        except ValueError:
            raise InvalidImportError(
                f"line {n}: context_id {rec['context_id']!r} is not a UUID"
            ) from None
        if source is None:
            source = cid
            target = uuid4() if new_id else cid
        if cid != source:
            raise InvalidImportError(f"line {n}: another context ({cid}) than line 1 ({source})")
        if rec["version"] != len(stored) + 1 or isinstance(rec["version"], bool):
            raise InvalidImportError(
                f"line {n}: version {rec['version']!r}, expected {len(stored) + 1}"
            )
        topic, state = rec["topic"], rec["state"]
        if topic not in TOPICS:
            raise InvalidImportError(f"line {n}: {topic!r} is not a ctxstore event type")
        if not isinstance(state, dict):
            raise InvalidImportError(f"line {n}: state must be a JSON object")
        # The state's text as exported; for a line laid out otherwise, the state encoded
        # again, as ctxstore writes it now or as it wrote it before (whichever the chain
        # names).
        text = _state_text(line_texts[n - 1])
        bodies = [text] if text else cast(ContextTranscoder, mapper.transcoder).encodings(state)
        for body in bodies:
            line_chain = link(prev_file, source, rec["version"], topic, body)
            if rec.get("chain") in (None, line_chain):
                break
        prev_file = line_chain
        if rec.get("chain") is not None and rec["chain"] != prev_file:
            raise InvalidImportError(f"line {n}: the chain does not match (the export was altered)")
        assert target is not None
        prev_new = link(prev_new, target, rec["version"], topic, body)
        s = StoredEvent(target, rec["version"], topic, mapper.seal_and_wrap(body, prev_new, target))
        try:
            event = cast(
                Context.Event, mapper.event_from_state(topic, target, rec["version"], state)
            )
            ctx = event.mutate(ctx)
        except CtxStoreError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # a state the event class cannot apply
            raise InvalidImportError(
                f"line {n}: not a valid {topic.rsplit('.', 1)[-1]}: {exc}"
            ) from None
        if ctx is None or (done == 1 and not isinstance(event, Context.ContextCreated)):
            raise InvalidImportError(f"line {n}: an export starts with the context's creation")
        stored.append(s)
        if progress:
            progress(done, len(records))
    assert ctx is not None and target is not None
    if trailer is not None and (
        not isinstance(trailer, dict)
        or trailer.get("events") != len(stored)
        or trailer.get("chain") not in (None, prev_file)
        or trailer.get("context_id") != str(source)
    ):
        raise InvalidImportError(
            f"the trailer does not match the {len(stored)} events before it (the export was "
            "cut short or altered)"
        )
    if tenant is not None and ctx.tenant != tenant:
        raise InvalidImportError("the export is another tenant's context")
    for i in ctx.order:  # the result must be a context ctxstore itself could have written
        parse_message(ctx.stored_message(i))
    check_transcript((i, ctx.stored_message(i)) for i in ctx.order)
    if core.exists(target):
        raise ContextExistsError(
            f"context {target} already exists; import with new_id (on the command line --new-id)"
        )
    referred = {sha for t in line_texts for sha in BLOB_SHA.findall(t)}
    missing = core.storage.blobs.keep(
        ctx.tenant, target, list(blobs.values()), referred | set(blobs)
    )
    if missing:
        raise InvalidImportError(f"the export refers to blob sha256:{missing[0]}, which it lacks")
    recorder = core.storage.recorder
    try:
        recorder.insert_events(stored)
    except driver_errors() as exc:

        def mine(version: int) -> bool:  # these very states: the import's own, its reply lost
            found = recorder.select_events(target, gt=version - 1, lte=version, limit=1)
            return bool(found) and bytes(found[0].state) == bytes(stored[version - 1].state)

        if settled(target, 0, exc, "", mine) is not Next.STORED:
            raise ContextExistsError(
                f"context {target} already exists; import with new_id (on the command line "
                "--new-id)"
            ) from exc
    writer.remember_import(ctx, prev_new)
    return target


def transcript_messages(text: str) -> list[JSON]:
    """Messages of an OpenAI-format transcript: a JSON list, {"messages": [...]}, or JSONL."""
    stripped = text.strip()
    if not stripped:
        raise InvalidImportError("the transcript is empty")
    data: Any
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        data = [rec for _, rec in _records(stripped.splitlines())]
    except RecursionError:  # the parser's own stack: deeper than any message may be
        raise InvalidImportError("the transcript's JSON is nested too deeply") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise InvalidImportError("a transcript is a JSON list of messages, or one message a line")
    for i, m in enumerate(data):
        if not isinstance(m, dict):
            raise InvalidImportError(f"message {i} is not a JSON object: {m!r:.60}")
    return data


def import_transcript(
    writer: Writer,
    messages: list[JSON],
    *,
    name: str | None,
    actor: str,
    progress: Progress | None = None,
    tenant: str | None = None,
) -> UUID:
    """A new context holding an OpenAI-format transcript (`tenant`'s); all or nothing."""
    core = writer.core
    ctx = Context.start(
        name=name, metadata=None, encoding=core.settings.encoding, actor=actor, tenant=tenant
    )
    counter = core.tokenizers.counter(ctx.encoding)
    for start in range(0, len(messages), CHUNK):
        chunk = messages[start : start + CHUNK]
        try:
            ctx.insert(chunk, actor=actor, counter=counter)
        except CtxStoreError as exc:
            raise type(exc)(
                f"transcript messages {start}..{start + len(chunk) - 1}: {exc}"
            ) from exc
        if progress:
            progress(min(start + CHUNK, len(messages)), len(messages))
    writer.store_new(ctx)
    return ctx.id
