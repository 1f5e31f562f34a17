"""Google ADK capture: a plugin recording each model call of a run into the session's context.

    runner = Runner(agent=agent, app_name="weather", session_service=sessions,
                    plugins=[ctxstore.capture.adk(store)])

The request is recorded as the provider received it: ADK's Gemini model turns the
LlmRequest (contents, system instruction, tools, generation settings) into a
`generateContent` body inside google-genai, so the plugin opens the call in
`before_model_callback` and google-genai's client, watched once for the process
(adapters/capture/genai_client.py), records the body exactly as it sends it and the reply
as it receives it — a stream assembled into one reply, recorded once when it ends — tied to
the call through a context variable. A model that does not send through google-genai (an
ADK LiteLlm or Anthropic model) is recorded from the LlmRequest and the first whole
LlmResponse, marked reconstructed (a body built the way the Gemini model builds it, not seen
on its way out). A failed call is recorded as failed, with its error.

The call lands in the session's own context when the runner's session service is
CtxStoreSessionService (the context keyed by app, user and session, linked to the version
the session was read at), else in a context keyed by the session id (`adk-session:<id>`).
The plugin never raises into ADK and never changes what ADK sends, receives or yields: every
callback returns None, and recording runs off the run's path (adapters/capture/recorder.py).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ctxstore.domain.errors import MissingExtraError

try:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("Google ADK capture", "adk") from exc

from ctxstore.adapters.capture import genai_client
from ctxstore.adapters.capture.genai_client import OpenCall
from ctxstore.adapters.capture.recorder import recorder_for
from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService
from ctxstore.domain.captured import GEMINI_API, CapturedCall

log = logging.getLogger("ctxstore.capture")

SOURCE = "adk"
FALLBACK_PREFIX = "adk-session:"  # the context of a session another service keeps


class CtxStoreCapturePlugin(BasePlugin):
    """Records every model call of a Runner's runs (see the module's docstring)."""

    def __init__(self, store: Any, *, name: str = "ctxstore_capture") -> None:
        super().__init__(name=name)
        self.store = store
        self.recorder = recorder_for(store)
        genai_client.install()

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        try:
            target, version = _target(callback_context)
            genai_client.open_call(OpenCall(finish=self._finish, context={
                "target": target, "for_version": version, "llm_request": llm_request}))  # fmt: skip
        except Exception:  # capture must never break the application
            log.exception("capture: an ADK model call could not be opened")
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        try:
            call = genai_client.current()
            # Sent through google-genai, the client ends the call itself; this is another
            # model (no body seen): its first whole response ends it.
            if call is not None and not call.done and call.request is None:
                if llm_response.error_code is not None:
                    call.end(error=f"{llm_response.error_code}: {llm_response.error_message}")
                elif not llm_response.partial:
                    call.end(response=_reply(llm_response))
        except Exception:
            log.exception("capture: an ADK model response could not be recorded")
        return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        try:
            call = genai_client.current()
            if call is not None and not call.done:
                call.end(error=error)
        except Exception:
            log.exception("capture: a failed ADK model call could not be recorded")
        return None

    def _finish(self, call: OpenCall) -> None:
        """Hand the ended call to the recorder (on the run's path: builds and queues only)."""
        request, reconstructed = call.request, False
        llm_request: LlmRequest = call.context["llm_request"]
        if request is None:
            request, reconstructed = built_request(llm_request), True
        error = call.error
        if call.response is None and error is None:
            error = "the model gave no reply"
        captured = CapturedCall(
            request=request, response=call.response, error=error, api=GEMINI_API,
            source=SOURCE, model=llm_request.model or None, started_at=call.started_at,
            latency=call.latency, streamed=call.streamed,
            for_version=call.context["for_version"], reconstructed=reconstructed,
        )  # fmt: skip
        self.recorder.submit(call.context["target"], captured)


def plugin(store: Any) -> CtxStoreCapturePlugin:
    """The plugin recording a Runner's model calls into `store` (any face)."""
    return CtxStoreCapturePlugin(store)


def _target(callback_context: CallbackContext) -> tuple[str, int | None]:
    """The key of the context a call is recorded into, and the session's version there."""
    invocation = callback_context._invocation_context
    session = invocation.session
    service = invocation.session_service
    if isinstance(service, CtxStoreSessionService):
        marker = session._storage_update_marker
        version = int(marker) if marker is not None and str(marker).isdigit() else None
        key = service.context_key(session.app_name, session.user_id, session.id)
        return key, (version if version else None)
    return FALLBACK_PREFIX + session.id, None


def _json(value: Any) -> Any:
    """A google-genai object as its wire JSON (camelCase keys, no unset fields)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.loads(json.dumps(value, default=str))


def built_request(llm_request: LlmRequest) -> dict[str, Any]:
    """A generateContent body built from the LlmRequest the way ADK's Gemini model hands it
    to google-genai (contents; the config's system instruction, tools, tool config and
    generation settings), for a call whose body was not seen on its way out."""
    body: dict[str, Any] = {"contents": [_json(c) for c in llm_request.contents]}
    config = llm_request.config
    if config is not None:
        system = config.system_instruction
        if system is not None:
            body["systemInstruction"] = (
                {"parts": [{"text": system}]} if isinstance(system, str) else _json(system)
            )
        if config.tools:
            body["tools"] = [_json(t) for t in config.tools]
        if config.tool_config is not None:
            body["toolConfig"] = _json(config.tool_config)
        rest = _json(config.model_copy(update={
            "system_instruction": None, "tools": None, "tool_config": None,
            "http_options": None, "labels": None}))  # fmt: skip
        if rest:
            body["generationConfig"] = rest
    if llm_request.model:
        body["model"] = llm_request.model
    return body


def _reply(response: LlmResponse) -> dict[str, Any] | None:
    """An LlmResponse as the generateContent reply it stands for."""
    if response.content is None:
        return None
    candidate: dict[str, Any] = {}
    if response.content is not None:
        candidate["content"] = _json(response.content)
    if response.finish_reason is not None:
        candidate["finishReason"] = _json(response.finish_reason)
    reply: dict[str, Any] = {"candidates": [candidate]}
    if response.usage_metadata is not None:
        reply["usageMetadata"] = _json(response.usage_metadata)
    if response.model_version is not None:
        reply["modelVersion"] = response.model_version
    return reply


__all__ = ["CtxStoreCapturePlugin", "built_request", "plugin"]
