"""CLI commands for recorded model calls: calls, call (the prompt sent, the response, the
prompt diff), and `show --call N`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ctxstore.adapters.cli.common import (
    SHAPE_NAMES,
    JsonFlag,
    handles_errors,
    open_store,
    out,
    preview,
    print_json,
    print_table,
)
from ctxstore.adapters.cli.terminal import shown_text
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.shapes import FORMATS

if TYPE_CHECKING:  # annotations only: the command line starts without them
    from ctxstore.domain.messages import Message
    from ctxstore.projections.calls import ModelCall, PromptDiff


def show_call(ctx: typer.Context, context: str, number: int, openai: bool, as_json: bool) -> None:
    """`show --call N`: exactly the messages a recorded model call sent."""
    with open_store(ctx) as store:
        call = store.call(context, number)
    messages = call.messages or []
    if as_json:
        if openai:
            print_json([m.to_openai() for m in messages])
        else:
            print_json(call.model_dump(mode="json", exclude_none=True))
        return
    title = (
        f"call #{call.number}: {call.model}, context version {call.for_version}, "
        f"provider {call.prompt_tokens} prompt tokens, ctxstore {call.counted_tokens}"
        + ("" if call.whole_context else " (a built prompt)")
    )
    out.print(message_table(title, messages))


@handles_errors
def calls(ctx: typer.Context, context: str, as_json: JsonFlag = False) -> None:
    """The model calls recorded against a context (see `show --call N`)."""
    with open_store(ctx) as store:
        found = store.calls(context)
    if as_json:
        print_json([c.model_dump(mode="json", exclude_none=True) for c in found])
        return
    table = Table(title="model calls")
    for col in ("#", "time", "model", "sent version", "in", "out", "ctxstore", "latency", "cost",
                "what"):  # fmt: skip
        table.add_column(col)
    for c in found:
        table.add_row(
            str(c.number), c.timestamp.isoformat(timespec="seconds"), c.model,
            str(c.for_version), str(c.prompt_tokens), str(c.completion_tokens),
            str(c.counted_tokens), latency_text(c.latency_ms),
            "" if c.cost is None else f"${c.cost:.6f}",
            _what(c),
        )  # fmt: skip
    print_table(table, "no recorded calls")


@handles_errors
def call(
    ctx: typer.Context,
    context: str,
    number: Annotated[int, typer.Argument(help="The call: 1 the first, -1 the last.")],
    diff: Annotated[
        bool, typer.Option("--diff", help="What changed in the prompt since the call before.")
    ] = False,
    shape: Annotated[
        str | None,
        typer.Option(help=f"Print only the prompt, as JSON in this shape: {SHAPE_NAMES} "
                     "(as you would send it again)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:  # fmt: skip
    """One recorded model call: exactly the prompt it sent, its response, and (--diff) what
    compaction, rollback or editing changed in the prompt since the call before."""
    if shape is not None and shape not in FORMATS:
        raise InvalidOperationError(f"--shape must be one of {', '.join(FORMATS)}, not {shape!r}")
    with open_store(ctx) as store:
        found = store.call(context, number)
        changes = store.call_diff(context, found.number) if diff else None
    if shape is not None:
        from ctxstore.domain.conversions import convert

        print_json(convert(found.messages or [], shape).payload)
        return
    if as_json:
        shown = found.model_dump(mode="json", exclude_none=True)
        if changes is not None:
            shown["diff"] = changes.model_dump(mode="json")
        print_json(shown)
        return
    cost = "" if found.cost is None else f", ${found.cost:.6f}"
    if found.latency_ms is not None:
        cost += f", {latency_text(found.latency_ms)}"
    out.print(
        f"call #{found.number}: {found.model} at {found.timestamp.isoformat(timespec='seconds')}"
        f" by {found.actor}, context version {found.for_version}; tokens in "
        f"{found.prompt_tokens} (ctxstore {found.counted_tokens}), out "
        f"{found.completion_tokens}{cost}",
        highlight=False,
    )
    if found.source is not None:
        out.print(f"{_what(found)}; api {found.api or 'unknown'}, call id {found.call_id}",
                  highlight=False)  # fmt: skip
        if found.reconstructed:
            out.print("read back from the transcript: its system prompt and tools are not in it",
                      highlight=False)  # fmt: skip
    if changes is not None:
        out.print(prompt_changes(changes))
        return
    label = " (as sent)" if found.source is not None else " (built)"
    out.print(message_table("prompt" + ("" if found.whole_context else label),
                            found.messages or []))  # fmt: skip
    if found.request is not None:
        tools = found.request.get("tools") or []
        names = [str(t.get("name") or (t.get("function") or {}).get("name") or t.get("type"))
                 for t in tools if isinstance(t, dict)]  # fmt: skip
        settings = {k: v for k, v in found.request.items()
                    if k not in ("messages", "input", "instructions", "system", "contents",
                                 "tools", "system_instruction")}  # fmt: skip
        out.print(f"tools: {', '.join(names) or 'none'}; settings: "
                  f"{shown_text(preview(str(settings)))}", highlight=False)  # fmt: skip
    out.print(message_table("response", found.response or []))


def _what(c: ModelCall) -> str:
    """How the call was recorded: captured (by what; failed), or by hand."""
    if c.source is None:
        return "whole context" if c.whole_context else "built prompt"
    said = f"captured ({c.source})"
    if c.reconstructed:
        said = f"reconstructed ({c.source})"
    if c.failed:
        said += f" FAILED: {(c.error or '')[:60]}"
    elif c.streamed:
        said += ", streamed"
    return said


def latency_text(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def message_table(title: str, messages: list[Message]) -> Table:
    table = Table(title=title)
    for col in ("#", "id", "role", "content"):
        table.add_column(col, overflow="fold")
    for n, m in enumerate(messages):
        table.add_row(
            str(n), m.id or "", m.role, shown_text(preview(m.text()) or ", ".join(m.call_ids))
        )
    return table


def prompt_changes(changes: PromptDiff) -> Table:
    since = "the first call" if changes.previous is None else f"call #{changes.previous}"
    delta = changes.tokens_after - changes.tokens_before
    table = Table(
        title=f"prompt of call #{changes.number} against {since}: {len(changes.added)} added, "
        f"{len(changes.removed)} removed, {len(changes.changed)} changed, {changes.unchanged} "
        f"unchanged; tokens {changes.tokens_before} -> {changes.tokens_after} ({delta:+d})"
    )
    for col in ("", "id", "role", "content"):
        table.add_column(col, overflow="fold")
    for sign, found in (("+", changes.added), ("-", changes.removed), ("~", changes.changed)):
        for m in found:
            table.add_row(sign, m.id, m.role, shown_text(m.preview))
    return table
