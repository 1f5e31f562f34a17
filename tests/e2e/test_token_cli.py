"""`ctxstore token create|list|revoke` on a SQLite file."""

from __future__ import annotations

import json


def test_the_command_line_manages_tokens(cli):
    made = cli("token", "create", "--tenant", "acme", "--scopes", "audit", "--json")
    found = json.loads(made.stdout)
    assert found["scopes"] == ["audit"] and found["token"].startswith("ctxs_")
    listed = json.loads(cli("token", "list", "--json").stdout)
    assert [t["id"] for t in listed] == [found["id"]] and "token" not in listed[0]
    cli("token", "revoke", found["id"])
    assert json.loads(cli("token", "list", "--json").stdout)[0]["revoked"] is not None
    cli("token", "revoke", "nope", code=1)
    cli("token", "create", "--tenant", "acme", "--scopes", "root", code=1)
