"""The curl session of docs/how-to/http-service.md runs as written against a live service,
answer by answer."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "http-service.md"


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq")
def test_the_curl_session_works(sqlite_service):
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    session = next(b for b in blocks if "H='Authorization" in b)
    # One answer per line, and the status of each.
    script = session.replace("http://127.0.0.1:8080", sqlite_service.url)
    marked = 'curl -s -w "\\n%{http_code}\\n" '
    script = re.sub(r"(?<!\$\()\bcurl -s ", lambda _: marked, script)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    answers = [(json.loads(lines[i]), int(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]
    statuses = [status for _, status in answers]
    # (the dry-run compaction answers what it would do: nothing yet, and why; the robot is refused)
    assert statuses == [200, 200, 200, 200, 200, 200, 200, 200, 200, 201, 200, 422], statuses
    visible_at_2 = answers[4][0]
    assert [m["content"] for m in visible_at_2["messages"]] == ["My order is late."]
    diff = answers[6][0]
    assert diff["added"] == [] and diff["removed"] == []  # the batch was rolled back
    plan = answers[8][0]
    assert plan["dry_run"] and "nothing to summarize" in plan["skipped"]
    assert {e["type"] for e in answers[10][0]["entries"]} >= {"create", "insert", "batch_end"}
    assert answers[11][0]["error"] == "InvalidMessageError"
