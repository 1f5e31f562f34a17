"""What the web view reads: version windows of the audit, the token series, the static page."""

from __future__ import annotations

import httpx
import pytest

from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError

from .conftest import Service


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def seeded(service: Service) -> tuple[str, int]:
    """A context with a rollback undoing a compaction, then a kept compaction."""
    c = service.client()
    cid = str(c.create(name="web seed"))
    for n in range(6):
        c.insert(cid, user(f"message {n} " + "words " * n))
    c.batch_start(cid)  # v8
    first = [str(m.id) for m in c.visible(cid).messages[:2]]
    c.compress(cid, first, {"role": "user", "content": "summary of two"})  # v9, undone
    c.insert(cid, user("inside the batch"))  # v10, undone
    c.batch_end(cid)  # v11: rollback
    c.compress(cid, first, {"role": "user", "content": "kept summary"})  # v12
    return cid, c.visible(cid).version


def test_the_audit_reads_a_window_of_one_contexts_versions(service):
    cid, head = seeded(service)
    c = service.client()
    page = c.audit(context_id=cid, from_version=8, to_version=11)
    assert [e.version for e in page.entries] == [8, 9, 10, 11]
    assert [e.reverted for e in page.entries] == [True, True, True, False]  # batch_start too
    assert [e.version for e in c.audit(context_id=cid, from_version=head).entries] == [head]
    assert c.audit(context_id=cid, from_version=head + 1).entries == []
    with pytest.raises(InvalidOperationError, match="needs context_id"):
        c.audit(from_version=2)
    # The in-process facade refuses the same, and names the bound.
    with pytest.raises(InvalidOperationError, match="from_version"):
        service.store.audit(context_id=cid, from_version="2")


def test_the_token_series_matches_every_versions_visible_context(service):
    cid, head = seeded(service)
    c = service.client()
    series = c.token_series(cid, points=2000)
    assert series.version == head
    assert [p.version for p in series.points] == list(range(1, head + 1))
    for p in series.points:
        seen = c.visible(cid, at_version=p.version)
        assert (p.tokens, p.messages) == (seen.tokens, len(seen.messages)), p.version
    assert [(m.version, m.type, m.reverted) for m in series.marks] == [
        (9, "compress", True),
        (11, "rollback", False),
        (12, "compress", False),
    ]
    # New events are folded on top of what was folded before.
    c.insert(cid, user("after the chart was drawn"))
    again = c.token_series(cid, points=2000)
    assert again.version == head + 1
    assert again.points[-1].tokens == c.visible(cid).tokens


def test_a_long_series_is_thinned_but_keeps_its_extremes(service):
    c = service.client()
    cid = str(c.create())
    for n in range(40):
        c.insert(cid, user("x " * (1 + n % 7)))
    full = c.token_series(cid, points=2000).points
    thin = c.token_series(cid, points=10).points
    assert len(thin) <= 10
    assert thin[0] == full[0] and thin[-1] == full[-1]
    assert [p.version for p in thin] == sorted(p.version for p in thin)
    assert max(p.tokens for p in thin) == max(p.tokens for p in full)
    assert min(p.tokens for p in thin) == min(p.tokens for p in full)
    assert set(thin) <= set(full)
    assert c.token_series(cid, points=2).points == [full[0], full[-1]]


def test_the_series_is_the_callers_own_and_its_bounds_are_checked(service):
    cid, _ = seeded(service)
    with pytest.raises(ContextNotFoundError):
        service.client("token-globex").token_series(cid)
    for points in (1, 2001):
        r = httpx.get(
            f"{service.url}/v1/contexts/{cid}/tokens",
            params={"points": points},
            headers={"Authorization": "Bearer token-acme"},
        )
        assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    with pytest.raises(InvalidOperationError, match="points"):
        service.store.token_series(cid, points=0)


def test_the_web_view_is_served_without_data_and_confined(service):
    home = httpx.get(service.url, follow_redirects=False)
    assert home.status_code in (302, 307) and home.headers["location"] == "/ui/"
    page = httpx.get(f"{service.url}/ui/")
    assert page.status_code == 200 and "<title>ctxstore</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    for asset in ("app.js", "app.css"):
        r = httpx.get(f"{service.url}/ui/{asset}")
        assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff"
    # Nothing is loaded from elsewhere: the machine may be offline.
    for asset in ("", "app.js", "app.css"):
        text = httpx.get(f"{service.url}/ui/{asset}").text
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text
    # The data still needs the token.
    assert httpx.get(f"{service.url}/v1/contexts").status_code == 401
