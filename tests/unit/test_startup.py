"""The command line starts light: `ctxstore --help` loads neither the event store library,
the settings model nor the database drivers (each command loads what it uses)."""

import subprocess
import sys


def test_the_command_line_loads_no_store_module_until_a_command_runs():
    probe = (
        "import sys; import ctxstore.adapters.cli.app; "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in "
        "('eventsourcing', 'pydantic_settings', 'psycopg', 'sqlite3', 'tiktoken') "
        "or m.startswith('ctxstore.adapters.store')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []
