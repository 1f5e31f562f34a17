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
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from workload import build_history

from ctxstore.adapters.store.facade import ContextStore

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FIRST_SCREEN = """() => {
  const rows = document.querySelectorAll('#timeline tbody tr td.what').length;
  const messages = document.querySelectorAll('#messages > li').length;
  const range = document.querySelector('#page-range')?.textContent || '';
  return rows > 0 && messages > 0 && range.includes('of');
}"""


@contextmanager
def served(url: str) -> Iterator[str]:
    """`ctxstore serve` on a free loopback port, in a process of its own (as deployed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = subprocess.Popen(
        [sys.executable, "-m", "ctxstore", "--url", url, "serve", "--port", str(port),
         "--log-level", "warning"],
        env={**os.environ, "CTXSTORE_SERVICE__AUDIT_REFRESH_SECONDS": "0.2"},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the service did not start")
            time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=20)


PHASES = (("head and name", "ctxstore:open", "ctxstore:head"),
          ("timeline page fetched", "ctxstore:head", "ctxstore:page-fetched"),
          ("drawn", "ctxstore:page-fetched", "ctxstore:first-screen"))  # fmt: skip
MARKS = "Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name, m.startTime]))"


def first_screens(browser: Any, url: str, opens: int) -> list[float]:
    """Seconds from navigation to the first screen, each in a fresh browser context (the
    page's own marks split each into its phases, printed as medians)."""
    seconds = []
    phases: dict[str, list[float]] = {name: [] for name, _, _ in PHASES}
    for _ in range(opens):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.goto(url.split("#")[0])  # the page's own files loaded (as a user's tab has them)
        page.wait_for_load_state("networkidle")
        start = page.evaluate("performance.now()")
        page.evaluate(f"location.hash = {url.split('#', 1)[1]!r}")
        page.wait_for_function(FIRST_SCREEN, polling="raf", timeout=60_000)
        seconds.append((page.evaluate("performance.now()") - start) / 1000)
        marks = page.evaluate(MARKS)
        for name, begin, end in PHASES:
            phases[name].append(marks[end] - marks[begin])
        context.close()
    print("  phases (median ms): " + ", ".join(
        f"{name} {statistics.median(ms):.0f}" for name, ms in phases.items()))  # fmt: skip
    return seconds


def timed_in_page(page: Any, action: Any, ready: str) -> float:
    start = page.evaluate("performance.now()")
    action()
    page.wait_for_function(ready, polling="raf", timeout=60_000)
    return float(page.evaluate("performance.now()") - start) / 1000


def live_lag(page: Any, base: str, cid: Any, appends: int) -> list[float]:
    """Seconds from each append (10 a second, through the service, as an agent writes)
    until the page selects it, following."""
    page.check("#follow")
    lags = []
    for n in range(appends):
        reply = httpx.post(
            f"{base}/v1/contexts/{cid}/insert",
            json={"messages": [{"role": "user", "content": f"live {n}"}]},
        )
        written = reply.json()
        t = time.perf_counter()
        page.wait_for_selector(
            f'#timeline tr.selected[data-version="{written["version"]}"]', timeout=30_000
        )
        lags.append(time.perf_counter() - t)
        time.sleep(max(0.0, 0.1 - lags[-1]))
    return lags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--opens", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="build into this file, or reuse it if there")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "web.db"
        url = f"sqlite:///{path}"
        built = path.exists()
        with ContextStore.from_url(url) as store:
            t = time.perf_counter()
            if built:
                cid = store.contexts(limit=1)[0].context_id
            else:
                cid = build_history(store, args.events, calls=args.calls)
            store.admin.refresh_audit_index()  # a running service keeps it caught up
            calls = store.calls(cid)
            middle = max(1, len(calls) - 50)  # among the newest listed
            sent = len(store.call(cid, middle).messages or [])
            print(
                f"built {store.visible(cid).version:,} events with {len(calls):,} calls in "
                f"{time.perf_counter() - t:.0f} s (SQLite)"
            )
        with served(url) as base, sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            page_url = f"{base}/ui/#/context/{cid}"
            opens = first_screens(browser, page_url, args.opens)
            print(
                f"first screen of the {args.events:,}-event context: median "
                f"{statistics.median(opens) * 1000:.0f} ms, first {opens[0] * 1000:.0f} ms, "
                f"max {max(opens) * 1000:.0f} ms over {len(opens)} opens (target <= 300 ms)"
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(page_url)
            page.wait_for_function(FIRST_SCREEN, timeout=60_000)
            listed = timed_in_page(
                page, lambda: page.click('[data-tab="calls"]'),
                f"() => document.querySelectorAll('#calls tbody tr[data-call]').length === "
                f"{min(100, len(calls))}",
            )  # fmt: skip
            opened = timed_in_page(
                page, lambda: page.click(f'#calls tr[data-call="{middle}"]'),
                f"() => (document.querySelector('#call-head')?.textContent || '')"
                f".includes('Call #{middle}:') && document.querySelector('#call-diff-head')"
                ".textContent.length > 0",
            )  # fmt: skip
            print(
                f"calls tab, {len(calls):,} calls listed (the newest 100 drawn): "
                f"{listed * 1000:.0f} ms; call "
                f"#{middle} with its prompt ({sent:,} messages), response and prompt diff: "
                f"{opened * 1000:.0f} ms"
            )
            page.click('[data-tab="visible"]')
            lags = live_lag(page, base, cid, 50)
            print(
                f"live tail, 10 appends/s while following: written -> selected on the page "
                f"median {statistics.median(lags) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
                "(the page redraws at most every 100 ms)"
            )
            browser.close()


if __name__ == "__main__":
    main()
