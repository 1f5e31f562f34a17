"""The commands that change a context and the reads of one: create, insert, delete, replace,
compress, batches, show, log, prompt, usage, compact, demo."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from ctxstore.adapters.cli.common import (
    ExpectedVersion,
    JsonFlag,
    NameOption,
    ToolCallIdOption,
    actor,
    err,
    handles_errors,
    json_option,
    message_from_flags,
    open_store,
    options,
    out,
    parse_ref,
    print_json,
    print_table,
    print_written,
    read_messages_from_stdin,
    render_history,
    render_visible,
)
from ctxstore.domain.errors import InvalidMessageError


@handles_errors
def create(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Option(help="A name to find the context by.")] = None,
    metadata: Annotated[str | None, typer.Option(help="Metadata as a JSON object.")] = None,
    encoding: Annotated[
        str | None, typer.Option(help="Token encoding (default: CTXSTORE_ENCODING).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="The model it is for: chooses the encoding.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an empty context and print its id."""
    meta = json_option(metadata, "--metadata")
    with open_store(ctx) as store:
        cid = store.create(
            name=name, metadata=meta, encoding=encoding, model=model, actor=actor(ctx)
        )
    print_json({"context_id": str(cid)}) if as_json else out.print(str(cid), highlight=False)


@handles_errors
def contexts(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 1000,
    search: Annotated[str | None, typer.Option(help="Only those whose name holds this.")] = None,
    after: Annotated[str | None, typer.Option(help="Page on after this context's id.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List contexts in creation order (paged as over HTTP: --limit, --after)."""
    with open_store(ctx) as store:
        found = store.contexts(limit=limit, search=search, after=after)
    if as_json:
        print_json([c.model_dump(mode="json") for c in found])
        return
    table = Table(title="contexts")
    for col in ("id", "name", "created", "by", "forked from"):
        table.add_column(col)
    for c in found:
        origin = c.forked_from
        table.add_row(
            str(c.context_id),
            c.name or "",
            c.created_at.isoformat(timespec="seconds"),
            c.created_by,
            f"{origin['context_id']} v{origin['version']}" if origin else "",
        )
    print_table(table, "no contexts" + (f" named with {search!r}" if search else ""))


@handles_errors
def insert(
    ctx: typer.Context,
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
    with open_store(ctx) as store:
        w = store.insert(
            context,
            messages,
            after=None if after is None else parse_ref(after),
            actor=actor(ctx),
            expected_version=expected_version,
        )
    print_written(w, as_json)


@handles_errors
def delete(
    ctx: typer.Context,
    context: str,
    refs: Annotated[list[str], typer.Argument(help="Message ids or #positions.")],
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Hide messages from the visible context (they stay in the log)."""
    with open_store(ctx) as store:
        w = store.delete(
            context,
            [parse_ref(r) for r in refs],
            actor=actor(ctx),
            expected_version=expected_version,
        )
    print_written(w, as_json)


@handles_errors
def replace(
    ctx: typer.Context,
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
    with open_store(ctx) as store:
        w = store.replace(
            context, parse_ref(ref), new, actor=actor(ctx), expected_version=expected_version
        )
    print_written(w, as_json)


@handles_errors
def compress(
    ctx: typer.Context,
    context: str,
    refs: Annotated[
        list[str], typer.Argument(help="The contiguous run: message ids or #positions.")
    ],
    summary: Annotated[str, typer.Option(help="Text of the summary message.")],
    role: Annotated[
        str, typer.Option(help="Role of the summary message (a summary's: system).")
    ] = "system",
    stats: Annotated[str | None, typer.Option(help="Free-form stats as a JSON object.")] = None,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace a contiguous run of messages by one summary message."""
    parsed_stats = json_option(stats, "--stats")
    from ctxstore.domain.compaction import summary_message  # (the command line starts light)

    message = summary_message(summary, role=role)
    with open_store(ctx) as store:
        w = store.compress(
            context,
            [parse_ref(r) for r in refs],
            message,
            stats=parsed_stats,
            actor=actor(ctx),
            expected_version=expected_version,
        )
    print_written(w, as_json)


@handles_errors
def expand(
    ctx: typer.Context,
    context: str,
    summary: Annotated[str, typer.Argument(help="The summary: its id or #position.")],
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Put the messages a summary covers back in its place; later messages stay."""
    with open_store(ctx) as store:
        w = store.expand(
            context, parse_ref(summary), actor=actor(ctx), expected_version=expected_version
        )
    print_written(w, as_json)


@handles_errors
def batch_start(
    ctx: typer.Context,
    context: str,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Open a batch (a savepoint) on top of the current one."""
    with open_store(ctx) as store:
        w = store.batch_start(context, actor=actor(ctx), expected_version=expected_version)
    print_written(w, as_json)


@handles_errors
def batch_end(
    ctx: typer.Context,
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
    with open_store(ctx) as store:
        w = store.batch_end(
            context, to=to, keep=keep, actor=actor(ctx), expected_version=expected_version
        )
    print_written(w, as_json)


LatencyOption = Annotated[
    float | None, typer.Option(help="The call's duration in seconds, as you measured it.")
]


@handles_errors
def usage(
    ctx: typer.Context,
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
    latency: LatencyOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Record a provider's usage for a call made with the context."""
    with open_store(ctx) as store:
        w = store.record_usage(
            context, model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            version=version, counted_tokens=counted, actor=actor(ctx), latency=latency,
        )  # fmt: skip
    print_written(w, as_json)


@handles_errors
def record_response(
    ctx: typer.Context,
    context: str,
    request: Annotated[
        str | None, typer.Option(help="The request sent, as JSON (its messages or input).")
    ] = None,
    latency: LatencyOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Record a model call from its response JSON on stdin (a ChatCompletion, a Responses
    Response or an Anthropic Message): its output inserted, its usage recorded."""
    response = json_option(sys.stdin.read(), "the response on stdin")
    with open_store(ctx) as store:
        w = store.record_response(
            context,
            response,
            request=json_option(request, "--request"),
            actor=actor(ctx),
            latency=latency,
        )
    print_written(w, as_json)


@handles_errors
def record_call(ctx: typer.Context, context: str, as_json: JsonFlag = False) -> None:
    """Record a captured model call from its JSON on stdin ({"request": <the body as sent>,
    "response": <the reply> or "error": ..., "source", "api", "latency", ...}): nothing is
    inserted; `calls` and `call` show it."""
    call = json_option(sys.stdin.read(), "the call on stdin")
    with open_store(ctx) as store:
        w = store.record_call(context, call, actor=actor(ctx))
    print_written(w, as_json)


@handles_errors
def usage_report(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    context: Annotated[str | None, typer.Option(help="Only this context.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Per model: the provider's prompt tokens against ctxstore's own counts."""
    with open_store(ctx) as store:
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
    print_table(table, "no recorded calls")


@handles_errors
def compact(
    ctx: typer.Context,
    context: str,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; write nothing.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Summarize the older half of the conversation (the half-window rule)."""
    with open_store(ctx) as store:
        if dry_run or as_json:
            done = store.compact(context, dry_run=dry_run, actor=actor(ctx))
        else:
            with err.status("summarizing..."):
                done = store.compact(context, actor=actor(ctx))
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


@handles_errors
def demo(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Play a scripted agent conversation through every operation and explain each step;
    it writes into a new throwaway store in the temporary folder unless --url names one.
    With --json: only what it wrote (the store, its contexts, the commands to try)."""
    import dataclasses
    import io
    import tempfile
    from pathlib import Path

    from rich.console import Console

    from ctxstore.adapters.cli.demo import run_demo
    from ctxstore.adapters.store.facade import ContextStore

    url = options(ctx).url
    if url is None:
        folder = Path(tempfile.mkdtemp(prefix="ctxstore-demo-"))
        url = f"sqlite:///{folder / 'demo.db'}"
    console = Console(file=io.StringIO()) if as_json else out
    with ContextStore.from_url(url) as store:
        if as_json:  # nothing shown: only what was written
            done = run_demo(store, console, lambda _: None, lambda _: None)
        else:
            done = run_demo(store, console, render_visible, render_history)
    if as_json:
        print_json(dataclasses.asdict(done))
