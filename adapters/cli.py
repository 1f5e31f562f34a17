"""The `ctxstore` command line: every operation and read, with --json for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxstore.adapters.store import ContextStore, Written
from ctxstore.domain.context import MessageRef
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    InvalidMessageError,
    StoreUnavailableError,
    UnknownMessageError,
    VersionConflictError,
)
from ctxstore.projections.history import HistoryEntry
from ctxstore.projections.visible import VisibleContext

app = typer.Typer(
    name="ctxstore",
    help="Event-sourced store for LLM conversation context.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, soft_wrap=True)

# One table maps error classes to exit codes (usage errors from typer exit with 2).
EXIT_CODES: list[tuple[type[CtxStoreError], int]] = [
    (ContextNotFoundError, 3),
    (UnknownMessageError, 3),
    (VersionConflictError, 4),
    (StoreUnavailableError, 5),
    (CtxStoreError, 1),
]

F = TypeVar("F", bound=Callable[..., Any])


class State:
    url: str | None = None
    actor: str | None = None


state = State()

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
NameOption = Annotated[str | None, typer.Option(help="The message's name field.")]
ToolCallIdOption = Annotated[
    str | None, typer.Option(help="For a tool message: the call it answers.")
]
ExpectedVersion = Annotated[
    int | None,
    typer.Option("--expected-version", help="Refuse unless the context is at this version."),
]


def fail(message: str, code: int) -> None:
    """Print a one-line error and exit."""
    err.print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(code)


def handles_errors(fn: F) -> F:
    """Turn ctxstore errors into a one-line message and the exit code of their class."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CtxStoreError as exc:
            code = next(c for cls, c in EXIT_CODES if isinstance(exc, cls))
            fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, code)

    return wrapper  # type: ignore[return-value]


def open_store() -> ContextStore:
    return ContextStore.from_url(state.url)


def parse_ref(token: str) -> MessageRef:
    """`#N` names the N-th visible message (negative counts from the end); else an id."""
    if token.startswith("#"):
        try:
            return int(token[1:])
        except ValueError:
            raise UnknownMessageError(f"not a position: {token!r} (use #0, #1, #-1)") from None
    return token


def json_option(text: str | None, flag: str) -> Any:
    """The JSON value given to an option, or None when the option was not given."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidMessageError(f"{flag} is not JSON: {exc.msg}") from None


def read_messages_from_stdin() -> list[dict[str, Any]]:
    """Messages from stdin: one JSON object, a JSON array, or JSON lines."""
    text = sys.stdin.read()
    if not text.strip():
        raise InvalidMessageError("no message given: pass --content or JSON/JSONL on stdin")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidMessageError(f"stdin line {n} is not JSON: {exc.msg}") from None
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidMessageError(f"stdin message {i} is not a JSON object: {item!r:.60}")
    return items


def message_from_flags(
    role: str | None, content: str | None, name: str | None, tool_call_id: str | None
) -> dict[str, Any] | None:
    if content is None:
        return None
    message: dict[str, Any] = {"role": role or "user", "content": content}
    if name is not None:
        message["name"] = name
    if tool_call_id is not None:
        message["tool_call_id"] = tool_call_id
    return message


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str, ensure_ascii=False))


def print_written(w: Written, as_json: bool) -> None:
    if as_json:
        print_json(w.model_dump(mode="json"))
    else:
        out.print(f"version {w.version}  batch {w.batch}  " + " ".join(w.ids), highlight=False)


def preview(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def token_label(tokens: int, estimated: bool) -> str:
    return f"~{tokens} (estimated)" if estimated else str(tokens)


def render_visible(v: VisibleContext) -> None:
    title = (
        f"context {v.context_id}  version {v.version}  batch {v.batch}  "
        f"tokens {token_label(v.tokens, v.estimated)} ({v.encoding})"
    )
    table = Table(title=title)
    for col in ("#", "id", "role", "tokens", "content"):
        table.add_column(col, overflow="fold")
    for n, m in enumerate(v.messages):
        body = preview(m.text())
        if m.tool_calls:
            calls = ", ".join(
                f"{c.function.name}({preview(c.function.arguments, 30)})" for c in m.tool_calls
            )
            body = (body + " " if body else "") + f"[calls {calls}]"
        if m.tool_call_id:
            body = f"[{m.tool_call_id}] {body}"
        if m.id in v.summaries:
            body = f"[summary of {len(v.summaries[m.id])}] {body}"
        tokens = str(v.token_counts.get(m.id or "", ""))
        table.add_row(str(n), m.id or "", m.role, tokens, Text(body))
    out.print(table)


def render_history(entries: list[HistoryEntry]) -> None:
    table = Table(title="history")
    for col in ("v", "time", "type", "actor", "batch", "messages", "reverted"):
        table.add_column(col, overflow="fold")
    for h in entries:
        ids = h.message_ids
        what = ", ".join(ids) if len(ids) <= 1 else f"{len(ids)}: {ids[0]} .. {ids[-1]}"
        if h.type == "batch_end":
            what = f"to {h.details['to']}" + (" keep" if h.details["keep"] else " rollback")
        elif h.type == "batch_start":
            what = f"opens {h.details['opened']}"
        table.add_row(
            str(h.version),
            h.timestamp.strftime("%H:%M:%S"),
            h.type,
            h.actor,
            str(h.batch),
            Text(what),
            f"by v{h.reverted_by}" if h.reverted else "",
            style="dim" if h.reverted else None,
        )
    out.print(table)


@app.callback()
def main_options(
    url: Annotated[
        str | None,
        typer.Option(help="Store URL (default: CTXSTORE_URL, else the embedded SQLite file)."),
    ] = None,
    actor: Annotated[
        str | None, typer.Option(help="Who runs the commands (default: CTXSTORE_ACTOR).")
    ] = None,
) -> None:
    """ctxstore: every change to an LLM context is an event; replay, roll back, audit."""
    state.url = url
    state.actor = actor


@app.command()
@handles_errors
def create(
    name: Annotated[str | None, typer.Option(help="A name to find the context by.")] = None,
    metadata: Annotated[str | None, typer.Option(help="Metadata as a JSON object.")] = None,
    encoding: Annotated[
        str | None, typer.Option(help="Token encoding (default: CTXSTORE_ENCODING).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an empty context and print its id."""
    meta = json_option(metadata, "--metadata")
    with open_store() as store:
        cid = store.create(name=name, metadata=meta, encoding=encoding, actor=state.actor)
    print_json({"context_id": str(cid)}) if as_json else out.print(str(cid), highlight=False)


@app.command()
@handles_errors
def contexts(as_json: JsonFlag = False) -> None:
    """List contexts in creation order."""
    with open_store() as store:
        found = store.contexts()
    if as_json:
        print_json([c.model_dump(mode="json") for c in found])
        return
    table = Table(title="contexts")
    for col in ("id", "name", "created", "by"):
        table.add_column(col)
    for c in found:
        table.add_row(
            str(c.context_id),
            c.name or "",
            c.created_at.isoformat(timespec="seconds"),
            c.created_by,
        )
    out.print(table)


@app.command()
@handles_errors
def insert(
    context: str,
    role: Annotated[str | None, typer.Option(help="Role of a message given by --content.")] = None,
    content: Annotated[
        str | None, typer.Option(help="Text of one message; else JSON/JSONL on stdin.")
    ] = None,
    name: NameOption = None,
    tool_call_id: ToolCallIdOption = None,
    after: Annotated[
        str | None, typer.Option(help="Insert after this message id or #position.")
    ] = None,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Append messages (or insert them after one); prints their ids."""
    one = message_from_flags(role, content, name, tool_call_id)
    messages = [one] if one is not None else read_messages_from_stdin()
    with open_store() as store:
        w = store.insert(
            context,
            messages,
            after=None if after is None else parse_ref(after),
            actor=state.actor,
            expected_version=expected_version,
        )
    print_written(w, as_json)


@app.command()
@handles_errors
def delete(
    context: str,
    refs: Annotated[list[str], typer.Argument(help="Message ids or #positions.")],
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Hide messages from the visible context (they stay in the log)."""
    with open_store() as store:
        w = store.delete(
            context,
            [parse_ref(r) for r in refs],
            actor=state.actor,
            expected_version=expected_version,
        )
    print_written(w, as_json)


@app.command()
@handles_errors
def replace(
    context: str,
    ref: Annotated[str, typer.Argument(help="Message id or #position.")],
    role: Annotated[str | None, typer.Option(help="Role of the new message.")] = None,
    content: Annotated[
        str | None, typer.Option(help="New text; else one JSON message on stdin.")
    ] = None,
    name: NameOption = None,
    tool_call_id: ToolCallIdOption = None,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Give a message new content under the same id."""
    if content is not None and role is None and name is None and tool_call_id is None:
        new: dict[str, Any] | str = content  # only the text changes; the role and the rest stay
    else:
        one = message_from_flags(role, content, name, tool_call_id)
        messages = [one] if one is not None else read_messages_from_stdin()
        if len(messages) != 1:
            raise InvalidMessageError(f"replace takes exactly one message, got {len(messages)}")
        new = messages[0]
    with open_store() as store:
        w = store.replace(
            context, parse_ref(ref), new, actor=state.actor, expected_version=expected_version
        )
    print_written(w, as_json)


@app.command()
@handles_errors
def compress(
    context: str,
    refs: Annotated[
        list[str], typer.Argument(help="The contiguous run: message ids or #positions.")
    ],
    summary: Annotated[str, typer.Option(help="Text of the summary message.")],
    role: Annotated[str, typer.Option(help="Role of the summary message.")] = "user",
    stats: Annotated[str | None, typer.Option(help="Free-form stats as a JSON object.")] = None,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace a contiguous run of messages by one summary message."""
    parsed_stats = json_option(stats, "--stats")
    message = {"role": role, "content": summary, "metadata": {"ctxstore": "summary"}}
    with open_store() as store:
        w = store.compress(
            context,
            [parse_ref(r) for r in refs],
            message,
            stats=parsed_stats,
            actor=state.actor,
            expected_version=expected_version,
        )
    print_written(w, as_json)


@app.command("batch-start")
@handles_errors
def batch_start(
    context: str, expected_version: ExpectedVersion = None, as_json: JsonFlag = False
) -> None:
    """Open a batch (a savepoint) on top of the current one."""
    with open_store() as store:
        w = store.batch_start(context, actor=state.actor, expected_version=expected_version)
    print_written(w, as_json)


@app.command("batch-end")
@handles_errors
def batch_end(
    context: str,
    to: Annotated[
        int | None, typer.Option(help="Batch to return to (default: the one below the top).")
    ] = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="Close the batches but keep their changes.")
    ] = False,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Close batches: roll back to the moment batch TO+1 opened, or keep the changes."""
    with open_store() as store:
        w = store.batch_end(
            context, to=to, keep=keep, actor=state.actor, expected_version=expected_version
        )
    print_written(w, as_json)


@app.command()
@handles_errors
def show(
    context: str,
    at_version: Annotated[
        int | None, typer.Option(help="Show the context as it was at this version.")
    ] = None,
    at_time: Annotated[
        datetime | None,
        typer.Option(
            help="Show it as it was at this time (ISO 8601 with zone).",
            formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z"],
        ),
    ] = None,
    openai: Annotated[
        bool,
        typer.Option("--openai", help="With --json: only the messages, as the API takes them."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Print the visible context (now, or at a past version)."""
    with open_store() as store:
        v = store.visible(context, at_version=at_version, at_time=at_time)
    if as_json:
        print_json(v.to_openai() if openai else v.model_dump(mode="json", exclude_none=True))
    else:
        render_visible(v)


@app.command()
@handles_errors
def log(
    context: str,
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="Only these event types.")
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="Only events of this actor.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the context's history: every event, rolled-back ones marked."""
    with open_store() as store:
        entries = store.history(context, types=type_ or None, actor=by)
    if as_json:
        print_json([h.model_dump(mode="json") for h in entries])
    else:
        render_history(entries)


@app.command()
@handles_errors
def prompt(
    context: str,
    budget: Annotated[int, typer.Option(help="The model's token budget for this request.")],
    strategy: Annotated[
        str | None,
        typer.Option(
            help="full, compressed, adaptive or semantic (default: CTXSTORE_PROMPT__STRATEGY)."
        ),
    ] = None,
    query: Annotated[
        str | None, typer.Option(help="For semantic: what relevance is measured against.")
    ] = None,
    safety: Annotated[
        float | None, typer.Option(help="Share of the budget to fill (default 0.9).")
    ] = None,
    resources: Annotated[
        str | None,
        typer.Option(
            help='Optional items as JSON: [{"id": .., "tokens" or "text": .., "priority": ..}].'
        ),
    ] = None,
    at_version: Annotated[
        int | None, typer.Option(help="Build from the context as it was at this version.")
    ] = None,
    openai: Annotated[
        bool,
        typer.Option("--openai", help="With --json: only the messages, as the API takes them."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Choose what to send under a token budget, and say what was left out and why."""
    items = json_option(resources, "--resources") or []
    if not isinstance(items, list):
        raise InvalidMessageError("--resources must be a JSON list")
    with open_store() as store:
        p = store.build_prompt(
            context,
            budget,
            strategy,  # type: ignore[arg-type]  # checked by build_prompt
            query=query,
            resources=items,
            safety=safety,
            at_version=at_version,
        )
    if as_json:
        print_json(p.to_openai() if openai else p.model_dump(mode="json", exclude_none=True))
        return
    table = Table(
        title=f"prompt: {p.strategy}, {token_label(p.tokens, p.estimated)} of {p.limit} tokens "
        f"(budget {p.budget})"
    )
    for col in ("id", "role", "content"):
        table.add_column(col, overflow="fold")
    for m in p.messages:
        table.add_row(m.id or "", m.role, Text(preview(m.text()) or ", ".join(m.call_ids)))
    out.print(table)
    for o in p.omitted:
        out.print(Text(f"left out {o.id}: {o.reason}"), style="dim")
    if p.resources or p.omitted_resources:
        out.print(
            f"resources kept: {', '.join(p.resources) or '-'} "
            f"({p.resource_tokens} tokens, {p.resource_utilization:.0%} of what was left)"
        )
        for r in p.omitted_resources:
            out.print(Text(f"resource {r.id} left out: {r.reason}"), style="dim")


@app.command()
@handles_errors
def usage(
    context: str,
    model: Annotated[str, typer.Option(help="The model that answered.")],
    prompt_tokens: Annotated[int, typer.Option(help="Prompt tokens the provider reported.")],
    completion_tokens: Annotated[
        int, typer.Option(help="Completion tokens the provider reported.")
    ] = 0,
    version: Annotated[
        int | None, typer.Option(help="The context version that was sent (default: the head).")
    ] = None,
    counted: Annotated[
        int | None,
        typer.Option(help="ctxstore's count of what was sent, if not the whole visible context."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Record a provider's usage for a call made with the context."""
    with open_store() as store:
        w = store.record_usage(
            context, model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            version=version, counted_tokens=counted, actor=state.actor,
        )  # fmt: skip
    print_written(w, as_json)


@app.command("usage-report")
@handles_errors
def usage_report(
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    context: Annotated[str | None, typer.Option(help="Only this context.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Per model: the provider's prompt tokens against ctxstore's own counts."""
    with open_store() as store:
        report = store.usage_report(model=model, context_id=context)
    if as_json:
        print_json([r.model_dump(mode="json") for r in report])
        return
    table = Table(title="provider usage against ctxstore's counts")
    for col in (
        "model",
        "calls",
        "provider prompt",
        "ctxstore",
        "ratio",
        "mean error",
        "estimated",
    ):
        table.add_column(col)
    for r in report:
        table.add_row(
            r.model, str(r.calls), str(r.prompt_tokens), str(r.counted_tokens),
            f"{r.ratio:.3f}", f"{r.mean_error:+.1%}", str(r.estimated_calls),
        )  # fmt: skip
    out.print(table)


@app.command()
@handles_errors
def compact(
    context: str,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; write nothing.")
    ] = False,
    no_batch: Annotated[
        bool, typer.Option("--no-batch", help="Do not open a batch for it.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Summarize the older half of the conversation (seed 000's half window)."""
    with open_store() as store:
        if dry_run or as_json:
            done = store.compact(context, dry_run=dry_run, in_batch=not no_batch, actor=state.actor)
        else:
            with err.status("summarizing..."):
                done = store.compact(context, in_batch=not no_batch, actor=state.actor)
    if as_json:
        print_json(done.model_dump(mode="json"))
        return
    plan = done.plan
    out.print(
        f"plan: {plan['mode']}, {plan['summarized_rounds']} of {plan['total_rounds']} rounds "
        f"summarized, {plan['kept_rounds']} kept ({plan['split_strategy']}, "
        f"{plan['boundary_adjustment']}"
        + (f", fallback: {plan['fallback_reason']}" if plan["fallback_reason"] else "")
        + f"); {len(done.replaced)} messages",
        highlight=False,
    )
    if done.skipped:
        out.print(f"skipped: {done.skipped}", highlight=False)
    elif done.dry_run:
        out.print("dry run: nothing written", highlight=False)
    else:
        st = done.stats
        out.print(
            f"summary {done.summary_id}: tokens {done.tokens_before} -> {done.tokens_after}, "
            f"{st['chunk_count']} chunk(s), depth {st['max_depth']}"
            + (", truncated" if st["truncated"] else "")
            + f"; version {done.version}, batch {done.batch}",
            highlight=False,
        )


@app.command()
@handles_errors
def demo() -> None:
    """Play a scripted agent conversation through every operation and print what happens."""
    from ctxstore.adapters.demo import run_demo

    with open_store() as store:
        run_demo(store, out, render_visible, render_history)


def main() -> None:
    """Console entry point."""
    app()
