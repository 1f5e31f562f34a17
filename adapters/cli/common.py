"""Shared pieces of the command line: the app, consoles, error handling, rendering."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.table import Table

from ctxstore.adapters.cli.terminal import SafeConsole, json_shown, shown_text
from ctxstore.domain.errors import (
    ConfigurationError,
    ContextNotFoundError,
    CtxStoreError,
    DamagedContextError,
    InvalidMessageError,
    StoreUnavailableError,
    UnknownMessageError,
    VersionConflictError,
    first_line,
)
from ctxstore.domain.shapes import FORMATS
from ctxstore.domain.streaming import incomplete_state

if TYPE_CHECKING:  # annotations only: the command line starts without them
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.adapters.store.results import Written
    from ctxstore.domain.context import MessageRef
    from ctxstore.projections.history import HistoryEntry
    from ctxstore.projections.visible import VisibleContext

out = SafeConsole(width=None if sys.stdout.isatty() else 120)
err = SafeConsole(stderr=True, soft_wrap=True)
# The shapes a message is read or written in, for help texts (the registry's, in order).
SHAPE_NAMES = f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]}"

# One table maps error classes to exit codes (usage errors from typer exit with 2).
EXIT_CODES: list[tuple[type[CtxStoreError], int]] = [
    (ContextNotFoundError, 3),
    (UnknownMessageError, 3),
    (VersionConflictError, 4),
    (StoreUnavailableError, 5),
    (DamagedContextError, 7),
    (ConfigurationError, 8),
    (CtxStoreError, 1),
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Options:
    """The options given before the command (`ctxstore --url ... --actor ... COMMAND`)."""

    url: str | None = None
    actor: str | None = None


def options(ctx: typer.Context) -> Options:
    """The global options of the command being run, carried in Typer's context."""
    found = ctx.find_root().obj
    return found if isinstance(found, Options) else Options()


def actor(ctx: typer.Context) -> str | None:
    """The actor the command records (None: CTXSTORE_ACTOR, else the default)."""
    return options(ctx).actor


JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
NameOption = Annotated[str | None, typer.Option(help="The message's name field.")]
ToolCallIdOption = Annotated[
    str | None, typer.Option(help="For a tool message: the call it answers.")
]
ExpectedVersion = Annotated[
    int | None,
    typer.Option("--expected-version", help="Refuse unless the context is at this version."),
]


def print_table(table: Any, empty: str) -> None:
    """A table, or the line saying there is nothing to show (not an empty frame)."""
    if table.row_count:
        out.print(table)
    else:
        out.print(empty, highlight=False)


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
            said = first_line(exc) or type(exc).__name__
            if kwargs.get("as_json"):  # a script reading JSON gets its error as JSON too
                problem = {"error": type(exc).__name__, "detail": said, "exit": code}
                sys.stderr.write(json.dumps(problem, ensure_ascii=False) + "\n")
                raise typer.Exit(code) from None
            fail(said, code)

    return wrapper  # type: ignore[return-value]


# Commands that only read: on a SQLite path that does not exist they make nothing (a typo
# in --url says so instead of creating folders and an empty store).
def _read_only() -> frozenset[str]:
    """The commands that only read, as the operations' spec says (a command that also runs
    a write, such as `key`, is not one)."""
    from ctxstore.adapters.store.contract import OPERATIONS

    reads = {op.cli for op in OPERATIONS.values() if op.cli and op.kind == "read"}
    return frozenset(reads - {op.cli for op in OPERATIONS.values() if op.kind != "read"})


def open_store(ctx: typer.Context) -> ContextStore:
    """The store the command's --url names (default: CTXSTORE_URL, else the SQLite file)."""
    # Imported here: `--help` and usage errors need none of the storage stack.
    from ctxstore.adapters.store.facade import ContextStore

    # A read neither creates a store nor migrates one: it says what is missing.
    reads = ctx.command.name in _read_only()
    made = None if reads or options(ctx).url is not None else _default_store_to_make()
    store = ContextStore.from_url(options(ctx).url, create=not reads, migrate=not reads)
    if made is not None:  # said once: the first command that writes made it
        err.print(f"created the store {made} (the default: --url or CTXSTORE_URL names another)",
                  highlight=False)  # fmt: skip
    return store


def _default_store_to_make() -> str | None:
    """The default store's file when no URL is set and the file does not exist yet."""
    from ctxstore.adapters.settings import load_settings

    settings = load_settings()
    path = settings.data_dir / "ctxstore.db"
    return None if settings.url is not None or path.exists() else str(path)


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
    except RecursionError:
        raise InvalidMessageError(f"{flag}: JSON nested too deeply") from None


def read_messages_from_stdin() -> list[dict[str, Any]]:
    """Messages from stdin: one JSON object, a JSON array, or JSON lines."""
    text = sys.stdin.read()
    if not text.strip():
        raise InvalidMessageError("no message given: pass --content or JSON/JSONL on stdin")
    from ctxstore.adapters.store.transfer import transcript_messages  # (see open_store)

    return transcript_messages(text)


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
    # Written as it is (rich's highlighter would decode the escapes json_shown wrote).
    text = json.dumps(data, default=str, ensure_ascii=False, indent=2)
    sys.stdout.write(json_shown(text) + "\n")
    sys.stdout.flush()


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


LimitOption = Annotated[
    int | None, typer.Option("--limit", min=0, help="Show at most this many (default: all).")
]
OffsetOption = Annotated[int, typer.Option("--offset", min=0, help="Skip this many first.")]


def page_of(items: list[Any], offset: int, limit: int | None) -> list[Any]:
    return items[offset:] if limit is None else items[offset : offset + limit]


def paged() -> AbstractContextManager[Any]:
    """Long output through the terminal's pager ($PAGER, else less); as it is elsewhere."""
    return out.pager(styles=True) if out.is_terminal else nullcontext()


def render_visible(v: VisibleContext, offset: int = 0, limit: int | None = None) -> None:
    title = (
        f"context {v.context_id}  version {v.version}  batch {v.batch}  "
        f"tokens {token_label(v.tokens, v.estimated)} ({v.encoding})"
    )
    shown_count = len(page_of(v.messages, offset, limit))
    if shown_count < len(v.messages):
        title += f"  messages {offset}..{offset + shown_count - 1} of {len(v.messages)}"
    table = Table(title=title)
    for col in ("#", "id", "role", "tokens", "content"):
        table.add_column(col, overflow="fold")
    for n, m in enumerate(page_of(v.messages, offset, limit), start=offset):
        body = preview(m.text())
        if m.tool_calls:
            calls = ", ".join(f"{c.tool_name}({preview(c.tool_input, 30)})" for c in m.tool_calls)
            body = (body + " " if body else "") + f"[calls {calls}]"
        if m.tool_call_id:
            body = f"[{m.tool_call_id}] {body}"
        if m.refusal:
            body = (body + " " if body else "") + f"[refusal] {preview(m.refusal)}"
        if m.audio:
            body = (body + " " if body else "") + f"[audio reply {m.audio.id}]"
        if m.id in v.summaries:
            body = f"[summary of {len(v.summaries[m.id])}] {body}"
        state = incomplete_state(m)
        if state is not None:
            body = f"[{state}] {body}"
        tokens = str(v.token_counts.get(m.id or "", ""))
        table.add_row(str(n), m.id or "", m.role, tokens, shown_text(body))
    out.print(table)


def event_summary(kind: str, ids: list[str], details: dict[str, Any]) -> str:
    """One cell saying what an event did: its messages, or what a batch event did."""
    if kind == "batch_end":
        return f"to {details['to']}" + (" keep" if details["keep"] else " rollback")
    if kind == "batch_start":
        return f"opens {details['opened']}"
    return ", ".join(ids) if len(ids) <= 1 else f"{len(ids)}: {ids[0]} .. {ids[-1]}"


def render_history(entries: list[HistoryEntry]) -> None:
    table = Table(title="history")
    for col in ("v", "time", "type", "actor", "batch", "messages", "reverted"):
        table.add_column(col, overflow="fold")
    for h in entries:
        table.add_row(
            str(h.version),
            h.timestamp.strftime("%H:%M:%S"),
            h.type,
            h.actor,
            str(h.batch),
            shown_text(event_summary(h.type, h.message_ids, h.details)),
            f"by v{h.reverted_by}" if h.reverted else "",
            style="dim" if h.reverted else None,
        )
    out.print(table)
