"""MkDocs hooks: the Python API page reads the package's source where the repository's root
is the package itself (its folder may have any name), through a link named `ctxstore`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
_VIEW = tempfile.TemporaryDirectory(prefix="ctxstore-docs-")  # removed when the build ends


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config: Any) -> Any:
    link = Path(_VIEW.name) / "ctxstore"
    if not link.exists():
        link.symlink_to(ROOT, target_is_directory=True)
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    python = handlers.setdefault("python", {})
    python["paths"] = [_VIEW.name, *python.get("paths", [])]
    return config
