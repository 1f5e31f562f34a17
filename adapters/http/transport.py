"""The client's transport: requests to the service (httpx), a POST's Idempotency-Key (its
own per call unless given, so a POST resent after a network failure never writes twice),
bounded retries, and the service's problem+json answers raised as the typed exceptions the
in-process store raises (the problem's `error` names the class)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

import httpx
from pydantic import BaseModel, TypeAdapter

from ctxstore.domain import errors

M = TypeVar("M", bound=BaseModel)
ERRORS: dict[str, type[errors.CtxStoreError]] = {
    cls.__name__: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.CtxStoreError)
}


class ServiceError(errors.CtxStoreError):
    """The service answered an error with no ctxstore error class (auth, limits, 5xx)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(f"{status}: {problem.get('detail') or problem.get('title')}")
        self.status = status
        self.problem = problem


class ServiceTransport:
    """Requests to the service; CtxStoreClient names the operations on top of it."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        actor: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        idempotency_keys: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if actor is not None:
            headers["X-Ctxstore-Actor"] = actor
        self.retries = retries
        # Without keys a POST is sent once: resending it after a network failure could
        # write twice.
        self.idempotency_keys = idempotency_keys
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    # ---- plumbing -----------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        safe = method == "GET" or "Idempotency-Key" in (headers or {})
        for attempt in range(self.retries + 1 if safe else 1):
            try:
                response = self.http.request(
                    method, path, json=json, params=query, headers=headers, content=content
                )
            except httpx.TransportError as exc:
                # Safe to resend: reads change nothing, and writes carry an idempotency key.
                if not safe or attempt == self.retries:
                    raise self._unreachable(method, path, exc, headers) from exc
                time.sleep(0.05 * 2**attempt)
                continue
            if response.status_code == 409 and response.headers.get("retry-after"):
                time.sleep(float(response.headers["retry-after"]) / 4)  # the first try runs
                continue
            if response.status_code >= 400:
                raise self._error(response)
            return response
        raise ServiceError(409, {"detail": "the request was still running after retries"})

    def _unreachable(
        self, method: str, path: str, exc: httpx.TransportError, headers: dict[str, str] | None
    ) -> errors.StoreUnavailableError:
        """A request that got no answer, typed as the in-process store types an outage: a
        read or a request never sent is unavailable; a write that may have reached the
        service is of unknown outcome, named by its idempotency key (resend it with that key
        to learn the outcome without writing twice)."""
        where = f"{method} {self.http.base_url}{path}"
        sent = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        key = (headers or {}).get("Idempotency-Key", "")
        if method != "GET" and sent:
            return errors.OutcomeUnknownError(
                f"{where}: no answer, the write may or may not be stored "
                f"(Idempotency-Key {key or 'none'}): {type(exc).__name__}: {exc}",
                command_id=key,
            )
        return errors.StoreUnavailableError(
            f"{where}: the service cannot be reached: {type(exc).__name__}: {exc}"
        )

    @staticmethod
    def _error(response: httpx.Response) -> errors.CtxStoreError:
        try:
            problem = response.json()
        except ValueError:
            problem = {"detail": response.text[:500]}
        cls = ERRORS.get(str(problem.get("error")))
        if cls is not None:
            return cls(problem.get("detail", ""))
        return ServiceError(response.status_code, problem)

    def _post(
        self,
        path: str,
        body: dict[str, Any] | None,
        model: type[M],
        *,
        if_match: int | None = None,
        key: str | None = None,
    ) -> M:
        headers = self._key(key)
        if if_match is not None:
            headers["If-Match"] = f'"{if_match}"'
        clean = None if body is None else {k: v for k, v in body.items() if v is not None}
        return model.model_validate(self._send("POST", path, json=clean, headers=headers).json())

    def _get(self, path: str, model: type[M], **params: Any) -> M:
        return model.model_validate(self._send("GET", path, params=params).json())

    def _get_list(self, path: str, item: type[M], **params: Any) -> list[M]:
        return TypeAdapter(list[item]).validate_python(  # type: ignore[valid-type]
            self._send("GET", path, params=params).json()
        )

    def _events(
        self, path: str, after: int | None, idle: float | None
    ) -> Iterator[tuple[int, str, str]]:
        """Server-Sent Events of a live tail: (id, event, data) of each event with an id;
        reconnects after a dropped connection with Last-Event-ID (at most `retries` times
        in a row without an event in between); ends after `idle` seconds without one."""
        last = after
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            timeout = httpx.Timeout(self.http.timeout.connect or 30.0, read=idle or 60.0)
            try:
                with self.http.stream("GET", path, headers=headers, timeout=timeout) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise self._error(response)
                    for event_id, kind, data in _sse(response.iter_lines()):
                        if kind == "gone":
                            raise errors.ContextNotFoundError(f"{path}: the context is erased")
                        if kind == "dropped":
                            raise errors.StoreUnavailableError(f"{path}: dropped ({data})")
                        if event_id is None:
                            continue
                        failures = 0
                        last = event_id
                        yield event_id, kind, data
            except httpx.ReadTimeout:
                if idle is not None:
                    return
            except httpx.TransportError as exc:
                failures += 1
                if failures > self.retries:
                    raise errors.StoreUnavailableError(
                        f"{path}: the live tail failed ({exc})"
                    ) from exc
                time.sleep(min(0.1 * 2**failures, 2.0))

    def _key(self, given: str | None) -> dict[str, str]:
        if given is not None:
            return {"Idempotency-Key": given}
        return {"Idempotency-Key": uuid.uuid4().hex} if self.idempotency_keys else {}

    @staticmethod
    def _ctx(context_id: UUID | str) -> str:
        return f"/v1/contexts/{context_id}"

    # ---- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        from ctxstore.adapters.capture.recorder import close_recorder

        close_recorder(self)  # calls captured for this client are sent first (bounded)
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _sse(lines: Iterator[str]) -> Iterator[tuple[int | None, str, str]]:
    """(id, event, data) of each Server-Sent Event in a stream of lines."""
    event_id: int | None = None
    kind, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield event_id, kind, "\n".join(data)
            event_id, kind, data = None, "message", list[str]()
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "id" and value.isdigit():
                event_id = int(value)
            elif field == "event":
                kind = value
            elif field == "data":
                data.append(value)
