"""The web debugger on a long history, in Chromium (Debian's, driven by Playwright).

A context of 100,000 events with 1,000 recorded model calls (the realistic agent workload of
bench/workload.py) is served on loopback; the page is opened afresh several times and the
time to its first screen — the header, a timeline page with what each event did and the
visible context at the head — is taken in the browser. Then the calls tab, one call with its
prompt diff, and the live tail under 10 appends a second with "follow" on: how long a written
event takes to be selected on the page.

Usage: python bench/bench_web.py [--events 100000] [--calls 1000] [--opens 7]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).parent))
from workload import build_history

from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.store.facade import ContextStore

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FIRST_SCREEN = """() => {
  const rows = document.querySelectorAll('#timeline tbody tr td.what').length;
  const messages = document.querySelectorAll('#messages > li').length;
  const range = document.querySelector('#page-range')?.textContent || '';
  return rows > 0 && messages > 0 && range.includes('of');
}"""


@contextmanager
def served(store: ContextStore) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = ServiceConfig(audit_refresh_seconds=0.2)
    server = uvicorn.Server(
        uvicorn.Config(create_app(store, config), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def first_screens(browser: Any, url: str, opens: int) -> list[float]:
    """Seconds from navigation to the first screen, each in a fresh browser context."""
    seconds = []
    for _ in range(opens):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.goto(url.split("#")[0])  # the page's own files loaded (as a user's tab has them)
        page.wait_for_load_state("networkidle")
        start = page.evaluate("performance.now()")
        page.evaluate(f"location.hash = {url.split('#', 1)[1]!r}")
        page.wait_for_function(FIRST_SCREEN, polling="raf", timeout=60_000)
        seconds.append((page.evaluate("performance.now()") - start) / 1000)
        context.close()
    return seconds


def timed_in_page(page: Any, action: Any, ready: str) -> float:
    start = page.evaluate("performance.now()")
    action()
    page.wait_for_function(ready, polling="raf", timeout=60_000)
    return float(page.evaluate("performance.now()") - start) / 1000


def live_lag(page: Any, store: ContextStore, cid: Any, appends: int) -> list[float]:
    """Seconds from each append (10 a second) until the page selects it, following."""
    page.check("#follow")
    lags = []
    for n in range(appends):
        written = store.insert(cid, {"role": "user", "content": f"live {n}"}, actor="bench")
        t = time.perf_counter()
        page.wait_for_selector(
            f'#timeline tr.selected[data-version="{written.version}"]', timeout=30_000
        )
        lags.append(time.perf_counter() - t)
        time.sleep(max(0.0, 0.1 - lags[-1]))
    return lags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--opens", type=int, default=7)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory() as tmp,
        ContextStore.from_url(f"sqlite:///{Path(tmp) / 'web.db'}") as store,
    ):
        t = time.perf_counter()
        cid = build_history(store, args.events, calls=args.calls)
        store.refresh_audit_index()  # a running service keeps it caught up
        calls = store.calls(cid)
        print(
            f"built {store.visible(cid).version:,} events with {len(calls):,} calls in "
            f"{time.perf_counter() - t:.0f} s (SQLite)"
        )
        with served(store) as base, sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            url = f"{base}/ui/#/context/{cid}"
            opens = first_screens(browser, url, args.opens)
            print(
                f"first screen of the {args.events:,}-event context: median "
                f"{statistics.median(opens) * 1000:.0f} ms, first {opens[0] * 1000:.0f} ms, "
                f"max {max(opens) * 1000:.0f} ms over {len(opens)} opens (target <= 300 ms)"
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.wait_for_function(FIRST_SCREEN, timeout=60_000)
            listed = timed_in_page(
                page, lambda: page.click('[data-tab="calls"]'),
                f"() => document.querySelectorAll('#calls tbody tr').length === {len(calls)}",
            )  # fmt: skip
            middle = len(calls) // 2
            opened = timed_in_page(
                page, lambda: page.click(f'#calls tr[data-call="{middle}"]'),
                f"() => (document.querySelector('#call-head')?.textContent || '')"
                f".includes('Call #{middle}:') && document.querySelector('#call-diff-head')"
                ".textContent.length > 0",
            )  # fmt: skip
            print(
                f"calls tab, {len(calls):,} calls listed: {listed * 1000:.0f} ms; call "
                f"#{middle} with its prompt ({len(store.call(cid, middle).messages or []):,} "
                f"messages), response and prompt diff: {opened * 1000:.0f} ms"
            )
            page.click('[data-tab="visible"]')
            lags = live_lag(page, store, cid, 50)
            print(
                f"live tail, 10 appends/s while following: written -> selected on the page "
                f"median {statistics.median(lags) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
                "(the page redraws at most every 250 ms)"
            )
            browser.close()


if __name__ == "__main__":
    main()
