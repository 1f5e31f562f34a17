"""The web view in a real browser: Debian's Chromium, headless, driven by Playwright, over a
service on SQLite and on PostgreSQL.

`CTXSTORE_SCREENSHOTS=docs/screenshots pytest tests/web` also saves the main views there.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.settings import ServiceConfig, Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.conversions import convert

from ..conftest import DURABLE_BACKENDS, make_url
from ..service.conftest import serve

pytestmark = pytest.mark.slow  # the browser

playwright_api = pytest.importorskip("playwright.sync_api")
# An assertion waits up to 15 s (Playwright's default: 5 s): the whole suite runs beside the
# browser on this machine's few cores.
playwright_api.expect.set_options(timeout=15_000)

TOKENS = {
    "token-alpha": "alpha", "token-beta": "beta", "token-gamma": "gamma", "token-delta": "delta",
    "token-epsilon": "epsilon",
}  # fmt: skip
PRICES = {"gpt-4o": {"input": 2.5, "output": 10.0}}
CHROMIUM = os.environ.get("CTXSTORE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = os.environ.get("CTXSTORE_SCREENSHOTS")
HOSTILE = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium; or set CTXSTORE_CHROMIUM)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])  # fmt: skip
        yield browser
        browser.close()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def seed(store: ContextStore) -> dict[str, Any]:
    """Alpha's support conversation: a tool call, a rolled-back attempt, a kept compaction,
    and enough events for two timeline pages; Beta's private context."""
    cid = store.create(name="support chat", tenant="alpha", actor="agent")
    store.insert(cid, {"role": "system", "content": "You are a careful support agent."})
    store.insert(cid, user("My order #1042 has not arrived. Can you check?"))
    store.insert(cid, {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "track_order", "arguments": '{"order": 1042}'}}]})  # fmt: skip
    store.insert(cid, {"role": "tool", "tool_call_id": "call_1",
                       "content": '{"status": "in transit", "eta": "Friday"}'})  # fmt: skip
    store.insert(cid, {"role": "assistant", "content": "It is in transit and due on Friday."})
    store.insert(cid, user(HOSTILE))
    start = store.batch_start(cid, actor="planner").version
    attempt = store.insert(cid, {"role": "system", "content": "Temporary: offer a refund."},
                           actor="planner")  # fmt: skip
    store.batch_end(cid, actor="planner")  # rolled back
    head_ids = [str(m.id) for m in store.visible(cid).messages]
    store.compress(cid, head_ids[1:5], {"role": "user", "content": "Summary: order 1042 is in "
                   "transit, due Friday."}, actor="compactor")  # fmt: skip
    for n in range(130):
        store.insert(cid, user(f"follow-up {n}: still waiting?"), actor="customer")
    other = store.create(name="beta secrets", tenant="beta")
    store.insert(other, user("beta's private plan"))
    return {"cid": str(cid), "other": str(other), "batch_start": start,
            "attempt": attempt.version, "attempt_id": attempt.ids[0],
            "head": store.visible(cid).version}  # fmt: skip


def completion(text: str, prompt: int, completion: int) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "gpt-4o-2024-08-06", "usage": {"prompt_tokens": prompt,
            "completion_tokens": completion, "total_tokens": prompt + completion},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}  # fmt: skip


def seed_agent_run(store: ContextStore) -> dict[str, Any]:
    """Gamma's agent run: two recorded calls with the system prompt edited between them, an
    Anthropic turn with thinking and a tool call, Responses items with reasoning and a hosted
    tool."""
    cid = store.create(name="agent run", tenant="gamma", actor="agent")
    store.insert(cid, [{"role": "system", "content": "You are terse."},
                       user("What is the weather in Paris?")])  # fmt: skip
    sent = [m.to_openai() for m in store.visible(cid).messages]
    store.record_response(cid, completion("Sunny, 21C.", 20, 5), request={"messages": sent})
    store.insert(cid, user("And tomorrow?"))
    store.replace(cid, 0, {"role": "system", "content": "You are terse and kind."})
    sent = [m.to_openai() for m in store.visible(cid).messages]
    store.record_response(
        cid, completion("Rain, sorry.", 40, 7), request={"messages": sent}, latency=1.234
    )
    store.insert(cid, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "The user wants a forecast; call the tool.",
         "signature": "sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "forecast",
         "input": {"city": "Paris", "days": 2}}]}, format="anthropic")  # fmt: skip
    store.insert(cid, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain, 14C"}]},
        format="anthropic")  # fmt: skip
    store.insert(cid, [
        {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": "Searching the web for the forecast."}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "Paris weather"}},
    ], format="openai-responses")  # fmt: skip
    photo = "data:image/png;base64," + base64.b64encode(png(64, 48)).decode()
    store.insert(cid, {"role": "user", "content": [
        {"type": "text", "text": "Here is the sky now."},
        {"type": "image_url", "image_url": {"url": photo}}]})  # fmt: skip
    return {"gamma": str(cid)}


def seed_search(store: ContextStore) -> dict[str, Any]:
    """Epsilon's conversations for the search box: a meeting in Chinese, a parcel asked about
    among a hundred messages, a deleted message, hostile text, and enough invoices (in an
    unnamed context) for two pages of hits."""
    meeting = store.create(name="weekly sync", tenant="epsilon", actor="agent")
    store.insert(meeting, [user("明天的会议在几点开始？"),
                           {"role": "assistant", "content": "会议在上午十点开始。"}])  # fmt: skip
    desk = store.create(name="order desk", tenant="epsilon", actor="agent")
    store.insert(desk, [user(f"chatter {n}: nothing to see") for n in range(60)])
    parcel = store.insert(desk, user("Where is my parcel? The tracking number is 7731."))
    store.insert(desk, [user(f"more chatter {n}") for n in range(40)])
    secret = store.insert(desk, user("The launch codeword is heliotrope."))
    store.delete(desk, secret.ids[0])
    store.insert(desk, user(f"hostile: {HOSTILE}"))
    ledger = store.create(tenant="epsilon", actor="agent")
    store.insert(ledger, [user(f"invoice {n} is due") for n in range(25)])
    return {"desk": str(desk), "parcel_id": parcel.ids[0], "secret_id": secret.ids[0],
            "secret_version": secret.version, "ledger": str(ledger)}  # fmt: skip


def png(width: int, height: int) -> bytes:
    """A noisy RGB picture as PNG bytes (large enough to be kept in the blob store)."""
    rng = random.Random(7)
    rows = b"".join(b"\0" + bytes(rng.randrange(256) for _ in range(width * 3))
                    for _ in range(height))  # fmt: skip

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))  # fmt: skip


@pytest.fixture(scope="module", params=DURABLE_BACKENDS)
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    yield from seeded_site(request.param, request, tmp_path_factory)


def seeded_site(
    kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The service over a seeded store of this kind, and what the seed wrote."""
    url = make_url(kind, tmp_path_factory.mktemp("web"), request)
    config = ServiceConfig(tokens=TOKENS, audit_refresh_seconds=0.2)
    with ContextStore.from_url(url, Settings(prices=PRICES)) as store:
        facts = {**seed(store), **seed_agent_run(store), **seed_search(store)}
        for base in serve(store, config):
            yield {**facts, "url": base, "store": store}


def opened(browser: Any, site: dict[str, Any], width: int, height: int) -> Iterator[Any]:
    """A page of the web view in a window of this size; no script error may happen on it."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{site['url']}/ui/")
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture
def page(browser: Any, site: dict[str, Any]) -> Iterator[Any]:
    yield from opened(browser, site, 1400, 900)


def sign_in(page: Any, token: str = "token-alpha") -> None:
    page.fill("#token", token)
    page.click("#token-form button")


def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


def expect(locator: Any) -> Any:
    return playwright_api.expect(locator)


def test_a_token_is_asked_for_and_a_tenant_lists_only_its_contexts(page, site):
    expect(page.locator("#notice")).to_contain_text("bearer token")
    sign_in(page)
    rows = page.locator("#contexts tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("support chat")
    expect(page.locator("#contexts")).not_to_contain_text("beta secrets")
    page.fill("#search", "nothing like this")
    page.click("#search-form button")
    expect(page.locator("#contexts tbody tr")).to_have_count(0)
    page.fill("#search", "support")
    page.click("#search-form button")
    expect(page.locator("#contexts tbody tr")).to_have_count(1)
    shot(page, "contexts")


def test_the_timeline_shows_what_the_model_saw_at_a_rolled_back_version(page, site):
    sign_in(page)
    page.click("#contexts tbody tr >> nth=0")
    head = site["head"]
    expect(page.locator("#page-range")).to_have_text(re.compile(rf"v{head - 99}.v{head} of {head}"))
    # Page back to the start and pick the event inside the rolled-back batch.
    page.click('[data-page="first"]')
    expect(page.locator("#page-range")).to_have_text(re.compile(rf"v1.v100 of {head}"))
    attempt = page.locator(f'#timeline tr[data-version="{site["attempt"]}"]')
    expect(attempt).to_have_class(re.compile("reverted"))
    expect(page.locator(f'#timeline tr[data-version="{site["batch_start"]}"]')).to_have_class(
        re.compile("reverted")
    )
    attempt.click()
    expect(attempt).to_have_class(re.compile("selected"))
    shown = site["store"].visible(site["cid"], at_version=site["attempt"])
    messages = page.locator("#messages > li")
    expect(messages).to_have_count(len(shown.messages))
    expect(page.locator(f'#messages li[data-id="{site["attempt_id"]}"]')).to_contain_text(
        "Temporary: offer a refund."
    )
    # Each message's text and token count, and the total, are the API's.
    for m in shown.messages:
        shown_at = page.locator(f'#messages li[data-id="{m.id}"]')
        expect(shown_at.locator(".tokens")).to_have_text(f"{shown.token_counts[m.id]:,} tokens")
        expect(shown_at.locator(".role")).to_have_text(m.role)
        if isinstance(m.content, str):
            expect(shown_at.locator("pre")).to_have_text(m.content)
    call = page.locator("#messages li", has_text="track_order")
    expect(call.locator("pre")).to_have_text('→ track_order({"order": 1042})')
    expect(page.locator("#visible-head")).to_contain_text(f"{shown.tokens:,} tokens in total")
    # Hostile content is shown as text, never run.
    expect(page.locator("#messages")).to_contain_text('<img src=x onerror="window.__pwned = 1">')
    assert page.evaluate("window.__pwned") is None
    shot(page, "timeline")
    # After the rollback the temporary instruction is gone.
    page.click(f'#timeline tr[data-version="{site["attempt"] + 1}"]')
    expect(page.locator(f'#messages li[data-id="{site["attempt_id"]}"]')).to_have_count(0)


def test_the_diff_between_two_selected_events(page, site):
    sign_in(page)
    page.goto(f"{site['url']}/ui/#/context/{site['cid']}?v=20")
    before, after = site["batch_start"] - 1, site["attempt"] + 2  # around rollback + compaction
    page.click(f'#timeline tr[data-version="{before}"] .diff-from-button')
    page.click(f'#timeline tr[data-version="{after}"]')
    diff = site["store"].diff(site["cid"], before, after)
    head = page.locator("#diff-head")
    expect(head).to_contain_text(f"v{before} → v{after}")
    expect(head).to_contain_text(f"{len(diff.added)} added, {len(diff.removed)} removed")
    expect(head).to_contain_text(f"tokens {diff.tokens_before:,} → {diff.tokens_after:,}")
    for m in diff.added:
        expect(page.locator(f'#diff-list li.diff-added[data-id="{m.id}"]')).to_have_count(1)
    for m in diff.removed:
        expect(page.locator(f'#diff-list li.diff-removed[data-id="{m.id}"]')).to_have_count(1)
    assert diff.removed and diff.added  # the compaction replaced four messages by a summary
    shot(page, "diff")


def test_the_token_chart_marks_compactions_and_rollbacks(page, site):
    sign_in(page)
    page.goto(f"{site['url']}/ui/#/context/{site['cid']}")
    expect(page.locator("#chart path.line")).to_have_count(1)
    series = site["store"].token_series(site["cid"], points=600)
    assert page.locator("#chart path.line").get_attribute("data-points") == str(len(series.points))
    expect(page.locator('#chart .mark[data-type="rollback"]')).to_have_count(1)
    expect(page.locator('#chart .mark[data-type="compress"]')).to_have_count(1)
    # Clicking the chart selects a version and shows the context then.
    page.locator("#chart").click(position={"x": 80, "y": 60})
    expect(page.locator("#timeline tr.selected")).to_have_count(1)
    expect(page.locator("#visible-head")).to_contain_text("At v")
    page.fill("#goto", "7")
    page.click("#goto-form button")
    expect(page.locator('#timeline tr[data-version="7"]')).to_have_class(re.compile("selected"))
    expect(page.locator("#visible-head")).to_contain_text("At v7:")
    shot(page, "context")


def test_the_audit_view_filters_across_contexts(page, site):
    sign_in(page)
    page.click('[data-nav="audit"]')
    expect(page.locator("#audit tbody tr")).to_have_count(100)
    expect(page.locator("#audit-more")).to_be_visible()
    page.click("#audit-more")
    expect(page.locator("#audit tbody tr")).to_have_count(site["head"])  # alpha's events only
    page.fill('#audit-form input[name="actor"]', "planner")
    page.check('#audit-form input[value="batch_start"]')
    page.check('#audit-form input[value="batch_end"]')
    page.click("#audit-form button")
    rows = page.locator("#audit tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("batch_start")
    expect(rows.nth(0)).to_have_class(re.compile("reverted"))
    expect(rows.nth(1)).to_contain_text("batch_end")
    shot(page, "audit")
    rows.nth(1).click()
    expect(page.locator("#timeline tr.selected")).to_contain_text("batch_end")


def test_another_tenants_context_is_not_reachable(page, site):
    sign_in(page)
    page.goto(f"{site['url']}/ui/#/context/{site['other']}")
    expect(page.locator("#notice")).to_contain_text("no context")
    expect(page.locator("#messages li")).to_have_count(0)
    page.goto(f"{site['url']}/ui/#/audit?context_id={site['other']}")
    expect(page.locator("#notice")).to_contain_text("no context")
    expect(page.locator("#audit tbody tr")).to_have_count(0)
    # Beta sees its own and not alpha's.
    sign_in(page, "token-beta")
    page.goto(f"{site['url']}/ui/#/")
    expect(page.locator("#contexts tbody tr")).to_have_count(1)
    expect(page.locator("#contexts")).to_contain_text("beta secrets")


def test_a_view_left_while_it_loads_leaves_the_next_one_alone(page, site):
    held: list[Any] = []
    page.route(re.compile(r".*/v1/contexts(/overview)?\?.*"), lambda route: held.append(route))
    sign_in(page)
    while not held:
        page.wait_for_timeout(20)
    page.goto(f"{site['url']}/ui/#/context/{site['other']}")
    expect(page.locator("#notice")).to_contain_text("no context")
    held[0].continue_()  # the list arrives after its view was left
    page.wait_for_timeout(300)
    expect(page.locator("#notice")).to_contain_text("no context")
    expect(page.locator("#contexts")).to_have_count(0)


# ---- the debugger: calls, previews, keys, live, copying out, native shapes ----------------


def open_gamma(page: Any, site: dict[str, Any], query: str = "") -> None:
    sign_in(page, "token-gamma")
    page.goto(f"{site['url']}/ui/#/context/{site['gamma']}{query}")
    expect(page.locator("#live")).to_have_text("● live")


def test_calls_list_and_a_call_shows_its_prompt_response_and_prompt_diff(page, site):
    open_gamma(page, site)
    page.click('[data-tab="calls"]')
    rows = page.locator("#calls tbody tr")
    expect(rows).to_have_count(2)
    calls = site["store"].calls(site["gamma"])
    newest = rows.nth(0)  # the newest first
    expect(newest).to_have_attribute("data-call", "2")
    expect(newest).to_contain_text("gpt-4o-2024-08-06")
    expect(newest).to_contain_text(f"${calls[1].cost:.6f}")  # priced by the table
    newest.click()
    expect(page.locator("#call-head")).to_contain_text("Call #2")
    expect(page.locator("#call-head")).to_contain_text("40 tokens in")
    expect(page.locator("#call-head")).to_contain_text("7 out in 1234 ms")
    expect(newest).to_contain_text("1234 ms")
    # Against call 1: the edited system prompt changed, the reply and the question added.
    diff = site["store"].call_diff(site["gamma"], 2)
    head = page.locator("#call-diff-head")
    expect(head).to_contain_text(f"{len(diff.added)} added, 0 removed, 1 changed, 1 unchanged")
    expect(page.locator("#call-diff li.diff-changed")).to_contain_text("You are terse and kind.")
    expect(page.locator("#call-prompt > li")).to_have_count(4)
    expect(page.locator("#call-response > li")).to_have_count(1)
    expect(page.locator("#call-response")).to_contain_text("Rain, sorry.")
    # The link names the call: opened afresh, it shows the same call.
    assert "call=2" in page.url
    page.goto(page.url.replace("call=2", "call=1"))
    expect(page.locator("#call-head")).to_contain_text("Call #1")
    expect(page.locator("#call-diff-head")).to_contain_text("Against nothing (the first call)")
    shot(page, "calls")


def test_a_captured_call_shows_what_captured_it_and_the_request_as_sent(page, site):
    store = site["store"]
    cid = store.create(name="captured run", tenant="delta", actor="agent")
    store.insert(cid, user("Weather in Paris?"))
    request = {
        "model": "gpt-4o",
        "instructions": "Be brief.",
        "input": [user("Weather in Paris?")],
        "temperature": 0.2,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
    }
    reply = {"object": "response", "model": "gpt-4o", "usage": {"input_tokens": 9,
             "output_tokens": 2}, "output": [{"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "14C."}]}]}  # fmt: skip
    store.record_call(cid, {"request": request, "response": reply, "source": "agents",
                            "api": "openai.responses", "streamed": True})  # fmt: skip
    store.record_call(cid, {"request": request, "error": "APIError: 500", "source": "agents"})
    sign_in(page, "token-delta")
    page.goto(f"{site['url']}/ui/#/context/{cid}")
    page.click('[data-tab="calls"]')
    rows = page.locator("#calls tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("failed")
    rows.nth(1).click()
    head = page.locator("#call-head")
    expect(head).to_contain_text("captured by agents (openai.responses), streamed")
    expect(page.locator("#call-prompt > li")).to_have_count(2)  # the instructions, the question
    expect(page.locator("#call-response")).to_contain_text("14C.")
    page.locator("#call-request summary").click()
    expect(page.locator("#call-request-body")).to_contain_text('"get_weather"')
    expect(page.locator("#call-request-body")).to_contain_text('"temperature": 0.2')
    rows.nth(0).click()
    expect(head).to_contain_text("FAILED: APIError: 500")


def test_a_tab_chosen_while_the_page_loads_is_the_one_shown(page, site):
    """A click on the Calls tab before the page's first reads have answered (a loaded
    service) shows the calls: the tabs answer from the start (the click was lost)."""
    store = site["store"]
    cid = store.create(name="slow page", tenant="delta", actor="agent")
    store.insert(cid, user("Weather in Paris?"))
    store.record_call(cid, {"request": {"model": "gpt-4o", "input": [user("Weather?")]},
                            "error": "APIError: 500", "source": "agents"})  # fmt: skip
    sign_in(page, "token-delta")
    held: list[Any] = []
    released = []

    def hold(route: Any) -> None:  # the page's first reads wait until the tab is clicked
        if released:
            route.continue_()
        else:
            held.append(route)

    page.route("**/v1/audit?*", hold)
    page.goto(f"{site['url']}/ui/#/context/{cid}")
    page.wait_for_function("document.querySelector('[data-tab=\"calls\"]') !== null")
    page.wait_for_timeout(200)  # (the request is made and held)
    assert held, "the page's first read was not held"
    page.click('[data-tab="calls"]')
    released.append(True)
    for route in held:
        route.continue_()
    expect(page.locator("#calls tbody tr")).to_have_count(1)


def test_timeline_rows_say_what_each_event_did_and_filter(page, site):
    sign_in(page)
    page.goto(f"{site['url']}/ui/#/context/{site['cid']}?v=20")
    row = page.locator('#timeline tr[data-version="2"] td.what')
    expect(row).to_have_text("system: You are a careful support agent.")
    compress = page.locator("#timeline tr", has=page.locator("td.type-compress"))
    expect(compress.locator("td.what")).to_contain_text("4 messages → summary: Summary: order 1042")
    rollback = page.locator("#timeline tr", has=page.locator("td.type-batch_end"))
    expect(rollback.locator("td.what")).to_contain_text(
        f"rolled back to batch 0: undid v{site['batch_start']}–v{site['attempt']}"
    )
    # Filters search the whole history (the audit index), not the page shown.
    page.goto(f"{site['url']}/ui/#/context/{site['cid']}")
    expect(page.locator("#page-range")).to_contain_text(f"v{site['head'] - 99}")
    page.select_option("#type-filter", "compress")
    expect(page.locator("#timeline tbody tr")).to_have_count(1)
    expect(page.locator("#timeline tbody tr td.what")).to_contain_text("4 messages → summary")
    page.select_option("#type-filter", "insert")
    page.fill("#actor-filter", "planner")
    page.press("#actor-filter", "Enter")
    expect(page.locator("#timeline tbody tr")).to_have_count(1)
    expect(page.locator("#timeline tbody tr td.what")).to_contain_text("Temporary: offer a refund.")
    page.fill("#actor-filter", "customer")
    page.press("#actor-filter", "Enter")
    expect(page.locator("#page-range")).to_have_text("100+ matching")
    page.click('[data-page="next"]')
    expect(page.locator("#timeline tbody tr")).to_have_count(30)  # 130 follow-ups in all
    expect(page.locator("#timeline tbody tr").last).to_contain_text("follow-up 129")
    page.click('[data-page="prev"]')
    expect(page.locator("#timeline tbody tr").first).to_contain_text("follow-up 0:")
    page.fill("#actor-filter", "")
    page.press("#actor-filter", "Enter")
    page.select_option("#type-filter", "")
    expect(page.locator("#page-range")).to_contain_text(f"of {site['head']}")


def test_keyboard_moves_through_the_timeline(page, site):
    sign_in(page)
    page.goto(f"{site['url']}/ui/#/context/{site['cid']}?v=5")
    expect(page.locator('#timeline tr[data-version="5"]')).to_have_class(re.compile("selected"))
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(page.locator('#timeline tr[data-version="6"]')).to_have_class(re.compile("cursor-row"))
    page.keyboard.press("Enter")
    expect(page.locator('#timeline tr[data-version="6"]')).to_have_class(re.compile("selected"))
    expect(page.locator("#visible-head")).to_contain_text("At v6:")
    # Past the window's end, j pages on.
    page.fill("#goto", "100")
    page.click("#goto-form button")
    expect(page.locator("#visible-head")).to_contain_text("At v100:")
    page.evaluate("document.activeElement.blur()")
    for _ in range(50):
        page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(page.locator("#visible-head")).to_contain_text("At v141:")


def test_live_events_appear_and_a_streamed_reply_grows_in_one_row(page, site):
    store = site["store"]
    cid = store.create(name="live run", tenant="gamma", actor="agent")
    store.insert(cid, user("Tell me a story."))
    sign_in(page, "token-gamma")
    page.goto(f"{site['url']}/ui/#/context/{cid}")
    expect(page.locator("#live")).to_have_text("● live")
    page.check("#follow")
    begun = store.begin(cid, actor="agent")
    reply = begun.ids[0]
    for n in range(30):  # ten deltas a second, as a model streams
        store.append(cid, reply, [{"content": f"word{n} "}], actor="agent")
        page.wait_for_timeout(100)
    expect(page.locator("#timeline tr", has=page.locator("td.type-append"))).to_have_count(1)
    streamed = page.locator("#timeline tr", has=page.locator("td.type-append"))
    expect(streamed.locator("td.what")).to_contain_text("in 30 deltas (30 events)")
    # Following: the newest event is selected, the reply shown as it grew.
    head = store.visible(cid).version
    expect(page.locator("#timeline tr.selected")).to_have_attribute("data-version", str(head))
    expect(page.locator(f'#messages li[data-id="{reply}"]')).to_contain_text("word29")
    store.finish(cid, reply, actor="agent")
    expect(page.locator("#timeline tr.selected td.type-finish")).to_have_count(1)
    expect(page.locator("#context-facts")).to_contain_text(f"{head + 1} events")
    # A rollback arriving live strikes through what it undid, as the index says.
    store.batch_start(cid, actor="planner")
    tried = store.insert(cid, user("a temporary instruction"), actor="planner").version
    expect(page.locator(f'#timeline tr[data-version="{tried}"]')).to_have_count(1)
    store.batch_end(cid, actor="planner")
    expect(page.locator(f'#timeline tr[data-version="{tried}"]')).to_have_class(
        re.compile("reverted")
    )
    expect(page.locator("#timeline tr.selected td.what")).to_contain_text("rolled back")


def test_copy_out_in_a_shape_and_fork_from_a_version(page, site):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_gamma(page, site, "?v=5")
    store = site["store"]
    page.select_option("#copy-shape", "anthropic")
    page.click("#copy-visible")
    expect(page.locator(".toast")).to_contain_text("Copied the context at v5 (anthropic)")
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    shown = store.visible(site["gamma"], at_version=5)
    assert copied == convert(shown.messages, "anthropic").payload
    first = shown.messages[0]
    page.select_option("#copy-shape", "stored")
    page.click(f'#messages li[data-id="{first.id}"] .copy-message')
    expect(page.locator(".toast")).to_contain_text(f"message {first.id}")
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == [first.as_given()]
    with page.expect_download() as download:
        page.click("#export")
    exported = Path(download.value.path()).read_text().splitlines()
    assert exported == list(store.export_events(site["gamma"]))
    page.click("#copy-link")
    assert page.evaluate("navigator.clipboard.readText()") == page.url
    assert f"#/context/{site['gamma']}?v=5" in page.url
    page.click("#fork")
    expect(page).to_have_url(re.compile(r"#/context/(?!" + site["gamma"] + ")"))
    forked = page.url.split("#/context/")[1].split("?")[0]
    expect(page.locator("#messages > li")).to_have_count(len(shown.messages))
    assert [m.as_given() for m in store.visible(forked).messages] == [
        m.as_given() for m in shown.messages
    ]


def test_native_shapes_are_shown_as_people_read_them(page, site):
    open_gamma(page, site)
    thinking = page.locator("#messages details.thinking").first
    expect(thinking).to_be_visible()
    assert thinking.get_attribute("open") is None  # collapsed
    expect(thinking.locator("summary")).to_have_text("thinking")
    args = page.locator("#messages .tool-call pre.args").first
    expect(args).to_have_text(json.dumps({"city": "Paris", "days": 2}, indent=2))
    expect(page.locator("#messages .tool-result")).to_contain_text("rain, 14C")
    expect(page.locator("#messages details.thinking", has_text="Searching the web")).to_have_count(
        1
    )
    expect(page.locator("#messages .tool-call.hosted")).to_contain_text(
        "hosted tool: web_search_call (completed)"
    )
    # The picture is kept in the blob store; the page reads it with the token, small.
    sky = site["store"].visible(site["gamma"]).messages[-1]
    assert "ctxstore-blob:sha256:" in json.dumps(sky.stored())
    thumb = page.locator(f'#messages li[data-id="{sky.id}"] img.thumb')
    expect(thumb).to_have_count(1)
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth === 64", arg=thumb.element_handle()
    )
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    thumb.scroll_into_view_if_needed()
    shot(page, "native-shapes")


# ---- search across conversations ----------------------------------------------------------


def find(page: Any, query: str) -> Any:
    """The header's search run with Enter; the hits listed."""
    page.fill("#find", query)
    page.press("#find", "Enter")
    return page.locator("#find-hits > li")


def test_search_lists_hits_with_the_match_marked(page, site):
    sign_in(page, "token-epsilon")
    hits = find(page, '"tracking number"')
    expect(hits).to_have_count(1)
    expect(page.locator("#find-results")).to_be_visible()
    expect(page.locator("#find")).to_have_attribute("aria-expanded", "true")
    hit = hits.first
    expect(hit.locator(".hit-where")).to_have_text("order desk")
    expect(hit.locator(".role")).to_have_text("user")
    # The snippet is the service's with its markers dropped and the match in a <mark>.
    (said,) = site["store"].search('"tracking number"', include_hidden=False).hits
    expect(hit.locator(".snippet")).to_have_text(said.snippet.replace("«", "").replace("»", ""))
    expect(hit.locator(".snippet mark")).to_have_text("tracking number")
    # Chinese: matched by its characters, every hit's match marked.
    hits = find(page, "会议")
    expect(hits).to_have_count(2)
    expect(page.locator("#find-head")).to_have_text("2 messages for “会议”")
    expect(page.locator("#find-hits mark")).to_have_text(["会议", "会议"])
    expect(page.locator("#find-hits")).to_contain_text("明天的会议在几点开始？")
    expect(page.locator("#find-hits")).not_to_contain_text("«")
    expect(page.locator("#find-hits")).not_to_contain_text("»")
    shot(page, "search")
    # Hostile text is shown as text, never run.
    hits = find(page, "onerror")
    expect(hits).to_have_count(1)
    expect(hits.first.locator(".snippet")).to_contain_text('<img src=x onerror="window.__pwned')
    expect(page.locator("#find-hits img")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
    # Escape closes the results and keeps the query.
    page.press("#find", "Escape")
    expect(page.locator("#find-results")).to_be_hidden()
    expect(page.locator("#find")).to_have_value("onerror")
    expect(page.locator("#find")).to_have_attribute("aria-expanded", "false")


def test_a_hit_opens_its_context_with_the_message_in_view(page, site):
    sign_in(page, "token-epsilon")
    hits = find(page, "parcel")
    expect(hits).to_have_count(1)
    hits.first.locator("a").click()
    expect(page).to_have_url(re.compile(rf"#/context/{site['desk']}\?msg={site['parcel_id']}$"))
    expect(page.locator("#find-results")).to_be_hidden()
    head = site["store"].visible(site["desk"]).version
    expect(page.locator("#visible-head")).to_contain_text(f"At v{head}:")  # the context now
    marked = page.locator("#messages > li.hit")
    expect(marked).to_have_count(1)
    expect(marked).to_have_attribute("data-id", site["parcel_id"])
    expect(marked).to_be_in_viewport(ratio=0.95)  # scrolled to, sixty messages down the list
    assert page.evaluate("document.querySelector('#messages').scrollTop") > 0
    # Opened afresh, the link shows the same message.
    page.reload()
    expect(page.locator("#messages > li.hit")).to_be_in_viewport(ratio=0.95)


def test_hidden_too_finds_a_deleted_message_and_opens_where_it_was_shown(page, site):
    sign_in(page, "token-epsilon")
    hits = find(page, "heliotrope")
    expect(page.locator("#find-head")).to_have_text("No message matches “heliotrope”.")
    expect(hits).to_have_count(0)
    page.check("#find-hidden")  # searches again, hidden messages too
    expect(hits).to_have_count(1)
    hit = hits.first
    expect(hit).to_have_class(re.compile("hidden-hit"))
    expect(hit.locator(".hidden-mark")).to_have_text(f"hidden · v{site['secret_version']}")
    expect(hit.locator(".snippet mark")).to_have_text("heliotrope")
    hit.locator("a").click()
    v = site["secret_version"]
    expect(page).to_have_url(re.compile(rf"#/context/{site['desk']}\?v={v}&msg="))
    expect(page.locator(f'#timeline tr[data-version="{v}"]')).to_have_class(re.compile("selected"))
    expect(page.locator("#visible-head")).to_contain_text(f"At v{v}:")
    marked = page.locator("#messages > li.hit")
    expect(marked).to_have_attribute("data-id", site["secret_id"])
    expect(marked).to_contain_text("The launch codeword is heliotrope.")
    expect(marked).to_be_in_viewport(ratio=0.95)
    # Now (the head) the message is gone, and the page says so.
    page.goto(f"{site['url']}/ui/#/context/{site['desk']}?msg={site['secret_id']}")
    expect(page.locator("#notice")).to_contain_text(f"Message {site['secret_id']} is not in")
    expect(page.locator("#messages > li.hit")).to_have_count(0)


def test_more_pages_through_the_hits(page, site):
    sign_in(page, "token-epsilon")
    hits = find(page, "invoice")
    expect(hits).to_have_count(20)
    expect(page.locator("#find-head")).to_have_text("20+ messages for “invoice”")
    expect(hits.first.locator(".hit-where")).to_have_text(site["ledger"][:8])  # unnamed
    page.click("#find-more")
    expect(hits).to_have_count(25)
    expect(page.locator("#find-more")).to_be_hidden()
    expect(page.locator("#find-head")).to_have_text("25 messages for “invoice”")
    shown = hits.evaluate_all("(items) => items.map((li) => li.dataset.message)")
    written = [str(m.id) for m in site["store"].visible(site["ledger"]).messages]
    assert sorted(shown) == sorted(written)
    # A new search starts again from its first page.
    expect(find(page, "invoice")).to_have_count(20)


def test_a_refused_query_is_reported(page, site):
    sign_in(page, "token-epsilon")
    find(page, "!!!")
    expect(page.locator("#notice")).to_contain_text("the query '!!!' holds no letters or digits")
    expect(page.locator("#find-results")).to_be_hidden()
    find(page, "")
    expect(page.locator("#notice")).to_contain_text("a search needs a query")
    # A search that answers puts its error away.
    expect(find(page, "parcel")).to_have_count(1)
    expect(page.locator("#notice")).to_be_hidden()
