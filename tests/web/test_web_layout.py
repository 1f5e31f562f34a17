"""The web view at ordinary window sizes, in Chromium: nothing hidden under the sticky
header, the page not scrolled by opening a context, the calls table's headers apart, long
tool outputs collapsed, the contexts list's columns sortable, what the token field says,
unknown pages and ids, the token chart following the live head, and the search box in the
header with a hit opened in view."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from . import test_web_view as view
from .test_web_view import expect, sign_in, user

browser = view.browser  # the same Chromium


@pytest.fixture(scope="module")
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The seeded service on SQLite: the layout is the page's, whatever the database (the
    views' reads run on both in test_web_view.py)."""
    yield from view.seeded_site("sqlite", request, tmp_path_factory)


pytestmark = pytest.mark.slow  # the browser

SIZES = [(1400, 900), (1920, 1080)]


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def sized(browser: Any, site: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from view.opened(browser, site, *request.param)


def box(page: Any, selector: str) -> dict[str, float]:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, selector
    return found


def test_opening_a_context_hides_nothing_under_the_header(sized, site):
    page = sized
    sign_in(page, "token-gamma")
    page.goto(f"{site['url']}/ui/#/context/{site['gamma']}")
    expect(page.locator("#live")).to_have_text("● live")
    expect(page.locator("#chart path.line")).to_have_count(1)
    page.wait_for_timeout(300)  # whatever scrolling the page would do is done
    assert page.evaluate("window.scrollY") == 0
    header = box(page, "body > header")
    assert header["y"] == 0  # no band above the navigation
    head = box(page, "#context-head")
    title = box(page, "#context-title")
    chart = box(page, "#chart-box")
    assert head["y"] >= header["y"] + header["height"] - 1
    assert title["y"] >= header["y"] + header["height"]
    assert chart["y"] >= head["y"] + head["height"]
    # The calls table: every header fits its column and none overlaps the next.
    page.click('[data-tab="calls"]')
    expect(page.locator("#calls tbody tr")).to_have_count(2)
    heads = page.locator("#calls thead th")
    rects = [heads.nth(i).bounding_box() for i in range(heads.count())]
    for left, right in itertools.pairwise(rects):
        assert left["x"] + left["width"] <= right["x"] + 1
    clipped = page.evaluate(
        "[...document.querySelectorAll('#calls thead th')]"
        ".filter((th) => th.scrollWidth > th.clientWidth).map((th) => th.textContent)"
    )
    assert clipped == []


def test_a_long_tool_output_is_collapsed_until_expanded(sized, site):
    page = sized
    store = site["store"]
    cid = store.create(name="long output", tenant="gamma")
    log = "\n".join(f"line {n}: all 212 tests passed in job {n}" for n in range(80))
    store.insert(cid, [
        user("Run the suite."),
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": log},
    ])  # fmt: skip
    sign_in(page, "token-gamma")
    page.goto(f"{site['url']}/ui/#/context/{cid}")
    tool = page.locator("#messages li", has_text="line 0:")
    expect(tool.locator("pre.collapsed")).to_have_count(1)
    expect(tool).not_to_contain_text("line 79:")
    tool.locator("button.expand").click()
    expect(tool).to_contain_text("line 79:")
    expect(tool.locator("button.expand")).to_have_text("show less")


def test_the_contexts_list_shows_each_head_and_sorts(sized, site):
    page = sized
    store = site["store"]
    small = store.create(name="small one", tenant="alpha")
    store.insert(small, user("hi"))
    sign_in(page)
    heads = page.locator("#contexts thead th")
    expect(heads).to_have_text(
        ["Name", "Context id", "Version", "Messages", "Tokens", "Last change", "Created", "By"]
    )
    big = store.visible(site["cid"])
    row = page.locator(f'#contexts tr[data-context="{site["cid"]}"]')
    expect(row.locator("td").nth(2)).to_have_text(f"{big.version:,}")
    expect(row.locator("td").nth(3)).to_have_text(f"{len(big.messages):,}")
    expect(row.locator("td").nth(4)).to_have_text(f"{big.tokens:,}")
    page.click('#contexts th[data-sort="messages"] button')  # most messages first
    expect(page.locator("#contexts tbody tr").first).to_have_attribute("data-context", site["cid"])
    page.click('#contexts th[data-sort="messages"] button')  # then fewest first
    expect(page.locator("#contexts tbody tr").first.locator("td").nth(3)).to_have_text("1")
    expect(page.locator('#contexts th[data-sort="messages"]')).to_have_attribute(
        "aria-sort", "ascending"
    )


def test_the_token_field_says_a_token_is_needed(sized, site):
    page = sized
    expect(page.locator("#notice")).to_contain_text("bearer token")
    expect(page.locator("#token")).to_have_attribute("placeholder", "this service needs a token")


def test_an_unknown_page_and_an_unknown_context_say_so_and_offer_nothing(sized, site):
    page = sized
    sign_in(page)
    page.goto(f"{site['url']}/ui/#/nowhere/at/all")
    expect(page.locator("h1")).to_have_text("No page here")
    page.goto(f"{site['url']}/ui/#/context/not-a-context")
    expect(page.locator("#context-title")).to_have_text("No such context")
    expect(page.locator("#live")).to_have_text("○ not live")
    for button in ("#fork", "#export", "#copy-link"):
        expect(page.locator(button)).to_be_disabled()
    expect(page.locator("#chart-box")).to_be_hidden()


def test_the_token_chart_follows_the_live_head(sized, site):
    page = sized
    store = site["store"]
    cid = store.create(name="growing", tenant="gamma")
    store.insert(cid, user("one"))
    sign_in(page, "token-gamma")
    page.goto(f"{site['url']}/ui/#/context/{cid}")
    expect(page.locator("#live")).to_have_text("● live")
    expect(page.locator("#chart .last-version")).to_have_text("v2")
    for n in range(5):
        store.insert(cid, user(f"more {n}"))
    expect(page.locator("#chart .last-version")).to_have_text("v7", timeout=20_000)
    expect(page.locator("#chart")).to_have_attribute("data-last", "7")


def test_the_search_box_fits_the_header_and_a_hit_opens_in_view(sized, site):
    page = sized
    sign_in(page, "token-epsilon")
    header = box(page, "body > header")
    form = box(page, "#find-form")
    assert header["y"] <= form["y"] and form["y"] + form["height"] <= header["y"] + header["height"]
    nav, token = box(page, "body > header nav"), box(page, "#token-form")
    assert nav["x"] + nav["width"] <= form["x"] and form["x"] + form["width"] <= token["x"]
    page.fill("#find", "parcel")
    page.press("#find", "Enter")
    expect(page.locator("#find-hits > li")).to_have_count(1)
    results = box(page, "#find-results")
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    assert results["y"] >= header["y"] + header["height"]  # under the header, not over it
    assert results["x"] >= 0 and results["x"] + results["width"] <= width
    assert results["y"] + results["height"] <= height
    page.click("#find-hits a")
    marked = page.locator("#messages > li.hit")
    expect(marked).to_be_in_viewport(ratio=0.95)
    page.wait_for_timeout(300)  # whatever scrolling the page would do is done
    assert page.evaluate("window.scrollY") == 0  # the list scrolled, not the page
    head, found = box(page, "#context-head"), box(page, "#messages > li.hit")
    assert found["y"] >= head["y"] + head["height"]  # not under the sticky title
    assert found["y"] + found["height"] <= height
