"""Several processes appending to one context: nothing lost, nothing duplicated."""

import json
import subprocess
import sys

import pytest

from ctxstore.adapters.store.facade import ContextStore

pytestmark = pytest.mark.slow  # writer processes racing

WRITERS = 3
APPENDS = 20
WRITER = """
import json, sys
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
url, cid, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with ContextStore.from_url(url, Settings(snapshot_interval=8, actor=tag)) as store:
    acked = [store.insert(cid, [{"role": "user", "content": f"{tag}-{i}"}]).version for i in range(n)]
print(json.dumps(acked))
"""


def test_processes_racing_on_one_context(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, durable_url, str(cid), f"w{i}", str(APPENDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WRITERS)
    ]
    acked = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        acked.append(json.loads(out))
    with ContextStore.from_url(durable_url) as store:
        history = store.history(cid)
        texts = [m.text() for m in store.visible(cid).messages]
    total = WRITERS * APPENDS
    # Versions contiguous, every acknowledged write present exactly once.
    assert [h.version for h in history] == list(range(1, total + 2))
    assert sorted(v for vs in acked for v in vs) == list(range(2, total + 2))
    assert sorted(texts) == sorted(f"w{i}-{n}" for i in range(WRITERS) for n in range(APPENDS))
    for i in range(WRITERS):  # each writer's own messages keep their order
        assert [t for t in texts if t.startswith(f"w{i}-")] == [f"w{i}-{n}" for n in range(APPENDS)]
    by_version = {h.version: h.actor for h in history}
    for i, vs in enumerate(acked):
        assert all(by_version[v] == f"w{i}" for v in vs)


OPENER = """
import sys
from ctxstore.adapters.store.facade import ContextStore

with ContextStore.from_url(sys.argv[1]) as store:
    print(store.create())
"""


def test_processes_opening_a_new_store_together(durable_url):
    """The first use of a database creates its tables; processes starting at once must not race."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, durable_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    with ContextStore.from_url(durable_url) as store:
        assert len(store.contexts()) == 6
