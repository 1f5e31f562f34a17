"""`ctxstore demo`: a scripted agent conversation through every operation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from rich.console import Console
from rich.rule import Rule

from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.compaction import summary_message
from ctxstore.domain.errors import CtxStoreError
from ctxstore.projections.history import HistoryEntry
from ctxstore.projections.visible import VisibleContext

# What a test runner prints after its verdict: the bulk of an agent's tool output.
SUITE_LOG = " ".join(
    f"tests/test_{m}.py ........ ok" for m in ("api", "billing", "cli", "db", "auth", "web")
)


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@dataclass(frozen=True)
class Tour:
    """Where the demo writes and how it shows what it did."""

    store: ContextStore
    console: Console
    show: Callable[[VisibleContext], None]
    show_log: Callable[[list[HistoryEntry]], None]

    def step(self, text: Any) -> None:
        self.console.print(text)

    def said(self, text: str) -> None:
        self.console.print(text, style="italic", highlight=False)


@dataclass(frozen=True)
class DemoRun:
    """What the demo wrote: the store, its contexts by name, the commands to try next."""

    url: str
    contexts: dict[str, str]
    commands: list[str]


def run_demo(
    store: ContextStore,
    console: Console,
    show: Callable[[VisibleContext], None],
    show_log: Callable[[list[HistoryEntry]], None],
) -> DemoRun:
    """Play the script on `store`, printing each step, what it showed in plain words, and
    the next commands to try on the same store."""
    p = Tour(store, console, show, show_log)
    cid = _conversation(p)
    for section in (_refusal, _savepoint, _edits, _time_travel, _tokens):
        section(p, cid)
    run = _compaction(p)
    _log(p, cid)
    _audit(p, cid, run)
    commands = _next_commands(p, cid)
    named = {c.name or str(c.context_id): str(c.context_id) for c in store.contexts()}
    return DemoRun(store.url, named, commands)


def _conversation(p: Tour) -> UUID:
    """A conversation with tool calls; its id."""
    cid = p.store.create(name="demo: travel agent", metadata={"model": "gpt-4o"}, actor="demo-sdk")
    p.step(Rule("1. a conversation with tool calls"))
    p.step(f"store {p.store.url}\ncontext {cid}")
    p.store.insert(
        cid,
        [
            {"role": "system", "content": "You are a travel assistant. Use tools for facts."},
            {"role": "user", "content": "Weather in Paris and Tokyo tomorrow? Which is warmer?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call("call_paris", "get_weather", '{"city": "Paris"}'),
                    _call("call_tokyo", "get_weather", '{"city": "Tokyo"}'),
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_paris",
                "content": '{"high_c": 14, "sky": "rain"}',
            },
            {
                "role": "tool",
                "tool_call_id": "call_tokyo",
                "content": '{"high_c": 19, "sky": "sun"}',
            },
            {
                "role": "assistant",
                "content": "Tokyo: 19°C and sunny; Paris: 14°C with rain. Tokyo is warmer.",
            },
        ],
        actor="agent",
    )
    p.show(p.store.visible(cid))
    p.said(
        "The agent's conversation is stored message by message: a system prompt, the user's "
        "question, the assistant asking two tools, their answers, and the reply. The table is "
        "what the model would be sent next; 'tokens' is what each message costs."
    )

    return cid


def _refusal(p: Tour, cid: UUID) -> None:
    """A write the transcript rules refuse, and nothing of it kept."""
    p.step(Rule("2. refused: a user message between a tool call and its result"))
    asked = p.store.insert(
        cid,
        [{"role": "assistant", "tool_calls": [_call("call_fx", "get_rate", '{"pair": "EURJPY"}')]}],
        actor="agent",
    )
    try:
        p.store.insert(cid, [{"role": "user", "content": "never mind"}], actor="user")
    except CtxStoreError as exc:
        p.step(f"[red]{type(exc).__name__}[/red]: {exc}")
    p.store.insert(
        cid, [{"role": "tool", "tool_call_id": "call_fx", "content": "162.4"}], actor="agent"
    )
    p.step(f"the call {asked.ids[0]} got its result; nothing else was written")
    p.said(
        "A model API rejects a conversation where a tool call is not followed by its answer, "
        "so the store refused that insert and kept nothing of it."
    )


def _savepoint(p: Tour, cid: UUID) -> None:
    """A temporary instruction in a batch, then rolled back."""
    p.step(Rule("3. a savepoint: a temporary instruction, then undo it"))
    p.store.batch_start(cid, actor="planner")
    p.store.insert(
        cid, [{"role": "system", "content": "Temporary: answer in French."}], actor="planner"
    )
    p.store.insert(cid, [{"role": "user", "content": "Et demain soir ?"}], actor="user")
    p.store.insert(
        cid,
        [{"role": "assistant", "content": "Demain soir : Tokyo 15°C, Paris 9°C."}],
        actor="agent",
    )
    p.show(p.store.visible(cid))
    w = p.store.batch_end(cid, to=0, actor="planner")
    p.step(f"rolled back: the context is at change number {w.version}, no savepoint open")
    p.show(p.store.visible(cid))
    p.said(
        "batch-start marked a savepoint; the French instruction and the two messages after "
        "it were then undone by batch-end in one step. Nothing is deleted from the history: "
        "the log below shows them, marked as rolled back."
    )


def _edits(p: Tour, cid: UUID) -> None:
    """Replace, delete and compress."""
    p.step(Rule("4. replace, delete, compress"))
    user_id = p.store.visible(cid).messages[1].id
    assert user_id is not None
    p.store.replace(
        cid,
        user_id,
        {"role": "user", "content": "Weather in Paris and Tokyo tomorrow? Which one is warmer?"},
        actor="user",
    )
    p.store.delete(cid, [-2, -1], actor="agent")  # the exchange-rate call and its result, together
    first_round = [m.id for m in p.store.visible(cid).messages[1:6] if m.id]
    p.store.compress(
        cid,
        first_round,
        summary_message("Summary: Tokyo (19°C, sun) is warmer than Paris (14°C, rain) tomorrow."),
        stats={"algorithm": "manual", "covered": len(first_round)},
        actor="compactor",
    )
    p.show(p.store.visible(cid))
    p.said(
        "The user's question was edited in place (same id), the exchange-rate call and its "
        "answer were hidden together, and the first exchange was replaced by one summary."
    )


def _time_travel(p: Tour, cid: UUID) -> None:
    """The context as it was at an earlier version."""
    p.step(Rule("5. time travel: the context as it was after the third change"))
    p.show(p.store.visible(cid, at_version=3))
    p.said(
        "Every change has a number (its version); any earlier state can be read back exactly "
        "as the model saw it then."
    )


def _tokens(p: Tour, cid: UUID) -> None:
    """Prompts for two budgets, and a provider's billed count."""
    p.step(Rule("6. tokens: what fits a small budget, and the provider's own count"))
    p.said(
        "A prompt is built for a token budget (a model's window): below, once with room to "
        "spare and once with 60 tokens, where older messages are left out and the store says "
        "why. Then the provider's billed count is recorded and compared with the store's."
    )
    at3 = p.store.visible(cid, at_version=3)
    for budget in (at3.tokens * 2, 60):
        prompt = p.store.build_prompt(cid, budget, "full", at_version=3)
        p.step(
            f"budget {budget}: {len(prompt.messages)} messages, {prompt.tokens} of {prompt.limit} "
            f"tokens; left out {len(prompt.omitted)}"
            + (f" ({prompt.omitted[0].reason})" if prompt.omitted else "")
        )
    p.store.record_usage(
        cid, model="gpt-4o", prompt_tokens=at3.tokens + 2, version=3, actor="agent"
    )
    for row in p.store.usage_report(context_id=cid):
        p.step(
            f"usage {row.model}: provider {row.prompt_tokens} vs ctxstore {row.counted_tokens} "
            f"prompt tokens ({row.mean_error:+.1%})"
        )


def _compaction(p: Tour) -> UUID:
    """A longer agent run compacted, then expanded; its id."""
    p.step(Rule("7. compaction: a longer agent run, its older half summarized, then undone"))
    run = p.store.create(name="demo: compaction", actor="demo-sdk")
    for n in range(6):
        p.store.insert(
            run,
            [
                {"role": "user", "content": f"Step {n}: run the test suite and report."},
                {"role": "assistant", "tool_calls": [_call(f"ci_{n}", "run_tests", "{}")]},
                {
                    "role": "tool",
                    "tool_call_id": f"ci_{n}",
                    "content": f"{40 + n} passed, 0 failed in {3 + n}.2s. " + SUITE_LOG,
                },
                {
                    "role": "assistant",
                    "content": f"Step {n} is green: {40 + n} tests pass. Coverage held at 91%"
                    " and no test was flaky, so the branch can merge once it is reviewed.",
                },
            ],
            actor="agent",
        )
    done = p.store.compact(run, actor="compactor")
    plan = done.plan
    p.step(
        f"{plan['summarized_rounds']} of the {plan['total_rounds']} tool rounds were summarized; "
        f"the context went from {done.tokens_before} to {done.tokens_after} tokens"
    )
    p.show(p.store.visible(run))
    p.said(
        "When a conversation grows too long for the model, its older half is replaced by a "
        "summary (the newest turns stay word for word). The summarized messages are kept in "
        "the history, so the summary can be undone:"
    )
    assert done.summary_id is not None
    p.store.expand(run, done.summary_id, actor="user")
    p.step(f"expanded: all {len(p.store.visible(run).messages)} messages are back in place")

    return run


def _log(p: Tour, cid: UUID) -> None:
    """Every change, who made it, what was rolled back."""
    p.step(Rule("8. the log: every change, who made it, and what was rolled back"))
    p.show_log(p.store.history(cid))


def _audit(p: Tour, cid: UUID, run: UUID) -> None:
    """The audit, a diff, a fork and the chain's check."""
    p.step(Rule("9. audit and debugging: who did what, what changed, a fork, the chain"))
    page = p.store.audit(actor="planner", context_id=cid)
    p.step(
        "the audit, asked what 'planner' did: "
        + ", ".join(
            f"change {e.version} {e.type}" + (" (rolled back)" if e.reverted else "")
            for e in page.entries
        )
    )
    d = p.store.diff(run, 2, p.store.visible(run).version)
    p.step(
        f"the compaction run from its second change to now: {len(d.added)} messages added, "
        f"{len(d.removed)} removed, {d.tokens_delta:+d} tokens"
    )
    branch = p.store.fork(cid, at_version=3, name="demo: what if", actor="developer")
    p.step(
        f"fork of the travel agent at version 3: {len(p.store.visible(branch).messages)} messages"
    )
    checked = p.store.verify()
    p.step(f"verify: {checked.events} events, {len(checked.broken)} broken links")
    p.said(
        "The audit answers who changed what and when; the diff shows what the compaction "
        "changed; the fork is an independent copy of an earlier state to try something else; "
        "verify recomputes the chain of hashes that links every stored change, so any edit "
        "behind the store's back is found."
    )


def _next_commands(p: Tour, cid: UUID) -> list[str]:
    """Three commands to try next on the same store."""
    p.step(Rule("next: three commands to try on this store"))
    url = p.store.url
    tried = (
        ("the conversation now", f"ctxstore --url {url} show {cid}"),
        ("what each change did", f"ctxstore --url {url} log {cid} --changes"),
        ("walk it change by change", f"ctxstore --url {url} replay {cid} --step"),
    )
    for why, command in tried:
        p.console.print(f"# {why}", style="dim", highlight=False)
        p.console.print(command, markup=False, highlight=False, soft_wrap=True)
    return [command for _, command in tried]
