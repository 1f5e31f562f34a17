"""A typed Python client of the HTTP service (httpx), with the facade's method names.

Errors come back as the same typed exceptions the in-process store raises, and POSTs are
safe to retry (adapters/http/transport.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.http.client_reads import ServiceReads
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.reply_stream import ReplyStream, StreamPolicy
from ctxstore.adapters.store.results import (
    Compaction,
    ContextSummary,
    Erasure,
    Prompt,
    TailEvent,
    Written,
)
from ctxstore.adapters.store.transfer import transcript_messages
from ctxstore.domain.blobs import SIZE_HEADER, BlobRef, StoredBlob, parse_ref
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.message_input import is_one_message
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import as_plain
from ctxstore.domain.prompt import Strategy, sent_with
from ctxstore.domain.streaming import neutral_deltas


class CtxStoreClient(ServiceReads, ContextOperations):
    """ctxstore over HTTP: `CtxStoreClient("http://127.0.0.1:8080", token="...")`."""

    # ---- contexts -----------------------------------------------------------------------

    def create(
        self,
        *,
        name: str | None = None,
        metadata: JSON | None = None,
        encoding: str | None = None,
        context_id: UUID | str | None = None,
        model: str | None = None,
        idempotency_key: str | None = None,
    ) -> UUID:
        body = {
            "name": name, "metadata": metadata, "encoding": encoding, "model": model,
            "context_id": None if context_id is None else str(context_id),
        }  # fmt: skip
        response = self._send(
            "POST",
            "/v1/contexts",
            json={k: v for k, v in body.items() if v is not None},
            headers=self._key(idempotency_key),
        )
        return UUID(response.json()["context_id"])

    def context_for_key(
        self, key: str, *, name: str | None = None, metadata: JSON | None = None
    ) -> UUID:
        """The context your own key names (a session id), created on first use."""
        body = {"key": key, "name": name, "metadata": metadata}
        response = self._send(
            "POST", "/v1/contexts/by-key", json={k: v for k, v in body.items() if v is not None}
        )
        return UUID(response.json()["context_id"])

    def lookup_key(self, key: str) -> UUID | None:
        """The context your own key names, if it was created; None otherwise."""
        found = self._send("GET", "/v1/contexts/by-key", params={"key": key}).json()
        return None if found["context_id"] is None else UUID(found["context_id"])

    def contexts(
        self, *, limit: int = 1000, search: str | None = None, after: UUID | str | None = None
    ) -> list[ContextSummary]:
        return self._get_list(
            "/v1/contexts", ContextSummary, limit=limit, search=search,
            after=None if after is None else str(after),
        )  # fmt: skip

    def put_blob(self, data: bytes, media_type: str) -> BlobRef:
        """Upload an attachment (stored once per tenant by its sha256) for messages to refer
        to by `ref.uri()`; safe to resend, as the same bytes are the same blob."""
        headers = {"Content-Type": media_type, "Idempotency-Key": uuid.uuid4().hex}
        found = self._send("POST", "/v1/blobs", headers=headers, content=data).json()
        return parse_ref(found["ref"])

    def blob(self, sha256: str) -> StoredBlob:
        """A stored attachment's bytes and what is known of them; raises BlobNotFoundError."""
        got = self._send("GET", f"/v1/blobs/{sha256}")
        width, _, height = got.headers.get(SIZE_HEADER, "").partition("x")
        media_type = got.headers.get("content-type", "application/octet-stream")
        ref = BlobRef(
            sha256=sha256, media_type=media_type.split(";")[0].strip(), size=len(got.content),
            width=int(width) if width.isdigit() else None,
            height=int(height) if height.isdigit() else None,
        )  # fmt: skip
        return StoredBlob(ref=ref, data=got.content)

    def record_file_id(self, sha256: str, provider: str, file_id: str) -> None:
        """Note the id a provider's Files API gave an attachment (see the store's)."""
        body = {"provider": provider, "file_id": file_id}
        self._send("POST", f"/v1/blobs/{sha256}/file-ids", json=body, headers=self._key(None))

    # ---- commands -----------------------------------------------------------------------

    def insert(
        self,
        context_id: UUID | str,
        messages: JSON | Sequence[JSON],
        *,
        after: MessageRef | None = None,
        expected_version: int | None = None,
        format: str | None = None,
        calls: Sequence[CapturedCall | JSON] | None = None,
        idempotency_key: str | None = None,
    ) -> Written:
        batch = [messages] if is_one_message(messages) else list(messages)
        body: JSON = {"messages": [as_plain(m) for m in batch], "after": after, "format": format}
        if calls is not None:  # (a service before captured calls takes the body without it)
            body["calls"] = [
                c.model_dump(mode="json") if isinstance(c, CapturedCall) else as_plain(c)
                for c in calls
            ]
        return self._post(
            f"{self._ctx(context_id)}/insert",
            body,
            Written,
            if_match=expected_version,
            key=idempotency_key,
        )

    def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        expected_version: int | None = None, idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        refs = [ids] if isinstance(ids, str | int) else list(ids)
        return self._post(
            f"{self._ctx(context_id)}/delete", {"ids": refs}, Written,
            if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | str, *,
        expected_version: int | None = None, idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        return self._post(
            f"{self._ctx(context_id)}/replace", {"id": message_id, "message": message}, Written,
            if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def compress(
        self,
        context_id: UUID | str,
        ids: Sequence[MessageRef],
        summary: JSON | str,
        *,
        stats: JSON | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> Written:
        return self._post(
            f"{self._ctx(context_id)}/compress",
            {"ids": list(ids), "summary": summary, "stats": stats},
            Written, if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def expand(
        self,
        context_id: UUID | str,
        summary_id: MessageRef,
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> Written:
        return self._post(
            f"{self._ctx(context_id)}/expand", {"summary_id": summary_id},
            Written, if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def batch_start(
        self,
        context_id: UUID | str,
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> Written:
        return self._post(
            f"{self._ctx(context_id)}/batch-start", {}, Written,
            if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def batch_end(
        self,
        context_id: UUID | str,
        to: int | None = None,
        *,
        keep: bool = False,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> Written:
        return self._post(
            f"{self._ctx(context_id)}/batch-end", {"to": to, "keep": keep}, Written,
            if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def record_usage(
        self,
        context_id: UUID | str,
        *,
        model: str,
        prompt_tokens: int,
        completion_tokens: int = 0,
        version: int | None = None,
        counted_tokens: int | None = None,
        prompt: Prompt | None = None,
        sent: Sequence[str | JSON] | None = None,
        latency: float | None = None,
        idempotency_key: str | None = None,
    ) -> Written:
        version, counted_tokens, sent = sent_with(prompt, version, counted_tokens, sent)
        body = {
            "model": model, "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens, "version": version,
            "counted_tokens": counted_tokens,
            "sent": None if sent is None else [_json_of(s) for s in sent],
            "latency": latency,
        }  # fmt: skip
        return self._post(f"{self._ctx(context_id)}/usage", body, Written, key=idempotency_key)

    def record_response(
        self, context_id: UUID | str, response: Any, *, request: Any = None,
        latency: float | None = None, idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        body = {"response": as_plain(response),
                "request": None if request is None else as_plain(request),
                "latency": latency}  # fmt: skip
        return self._post(f"{self._ctx(context_id)}/responses", body, Written, key=idempotency_key)

    def record_call(
        self, context_id: UUID | str, call: CapturedCall | JSON, *,
        idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        body = call.model_dump(mode="json") if isinstance(call, CapturedCall) else as_plain(call)
        return self._post(f"{self._ctx(context_id)}/calls", body, Written, key=idempotency_key)

    def fork(
        self,
        context_id: UUID | str,
        *,
        at_version: int | None = None,
        name: str | None = None,
        metadata: JSON | None = None,
        idempotency_key: str | None = None,
    ) -> UUID:
        body = {"at_version": at_version, "name": name, "metadata": metadata}
        response = self._send(
            "POST",
            f"{self._ctx(context_id)}/fork",
            json={k: v for k, v in body.items() if v is not None},
            headers=self._key(idempotency_key),
        )
        return UUID(response.json()["context_id"])

    # ---- streamed replies ---------------------------------------------------------------

    def begin(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        expected_version: int | None = None, idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        body = {"message": None if message is None else as_plain(message), "after": after,
                "format": format}  # fmt: skip
        return self._post(
            f"{self._ctx(context_id)}/begin", body, Written, if_match=expected_version,
            key=idempotency_key,
        )  # fmt: skip

    def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        expected_version: int | None = None, idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        return self._post(
            f"{self._ctx(context_id)}/append",
            {"id": message_id, "deltas": neutral_deltas(deltas)},
            Written, if_match=expected_version, key=idempotency_key,
        )  # fmt: skip

    def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | None = None, *,
        deltas: Any = None, expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        body = {"id": message_id, "message": None if message is None else as_plain(message),
                "deltas": None if deltas is None else neutral_deltas(deltas)}  # fmt: skip
        return self._post(
            f"{self._ctx(context_id)}/finish", body, Written, if_match=expected_version,
            key=idempotency_key,
        )  # fmt: skip

    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> Written:  # fmt: skip
        body = {"id": message_id, "reason": reason, "keep": keep,
                "deltas": None if deltas is None else neutral_deltas(deltas)}  # fmt: skip
        return self._post(
            f"{self._ctx(context_id)}/abandon", body, Written, if_match=expected_version,
            key=idempotency_key,
        )  # fmt: skip

    def stream(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None,
    ) -> ReplyStream:  # fmt: skip
        """Begin a reply; the handle batches its deltas (adapters/store/reply_stream.py)."""
        return ReplyStream.begin(
            self, context_id, message, after=after, format=format, policy=policy
        )

    # ---- the live tail -----------------------------------------------------------------

    def follow(
        self, context_id: UUID | str, *, after: int | None = None, idle: float | None = None
    ) -> Iterator[TailEvent]:
        """The context's events after version `after` (default: only new ones) as they are
        written (Server-Sent Events); a dropped connection is resumed after the last event
        seen (Last-Event-ID), so none is lost or repeated. Ends after `idle` seconds
        without an event, if given."""
        path = f"{self._ctx(context_id)}/events"
        for event_id, _, data in self._events(path, after, idle):
            event = TailEvent.model_validate_json(data)
            assert event.version == event_id
            yield event

    def recover_from_overflow(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[JSON] = (), safety: float | None = None,
        idempotency_key: str | None = None,
    ) -> Prompt:  # fmt: skip
        return self._post(
            f"{self._ctx(context_id)}/recover",
            {"budget": budget, "strategy": strategy, "query": query,
             "resources": list(resources), "safety": safety},
            Prompt, key=idempotency_key,
        )  # fmt: skip

    def compact(
        self,
        context_id: UUID | str,
        *,
        trigger: str = "manual",
        dry_run: bool = False,
        idempotency_key: str | None = None,
    ) -> Compaction:
        return self._post(
            f"{self._ctx(context_id)}/compact", {"trigger": trigger, "dry_run": dry_run},
            Compaction, key=idempotency_key,
        )  # fmt: skip

    # ---- erasure and imports ------------------------------------------------------------------

    def erase(
        self, context_id: UUID | str, *, reason: str, with_forks: bool | None = None
    ) -> Erasure:
        params: dict[str, Any] = {"reason": reason}
        if with_forks is not None:
            params["with_forks"] = "true" if with_forks else "false"
        response = self._send("DELETE", self._ctx(context_id), params=params)
        return Erasure.model_validate(response.json())

    def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False,
        idempotency_key: str | None = None,
    ) -> UUID:  # fmt: skip
        body = {
            "lines": [line.rstrip("\n") for line in lines if line.strip()], "new_id": new_id,
            "without_trailer": without_trailer,
        }  # fmt: skip
        response = self._send(
            "POST", "/v1/contexts/import", json=body, headers=self._key(idempotency_key)
        )
        return UUID(response.json()["context_id"])

    def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None,
        idempotency_key: str | None = None,
    ) -> UUID:  # fmt: skip
        parsed = transcript_messages(messages) if isinstance(messages, str) else list(messages)
        response = self._send(
            "POST", "/v1/contexts/import-transcript",
            json={"messages": parsed, "name": name}, headers=self._key(idempotency_key),
        )  # fmt: skip
        return UUID(response.json()["context_id"])


def _json_of(sent: Any) -> Any:
    """A message id, or a message as JSON (ctxstore's own Message, an SDK's object, a dict)."""
    return sent.model_dump(mode="json") if isinstance(sent, Message) else as_plain(sent)
