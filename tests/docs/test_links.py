"""No page links to itself (a link that goes nowhere reads as a dead end)."""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
LINK = re.compile(r"\]\(([^)#\s]+\.md)\)")  # a link to a page, no anchor


def test_no_page_links_to_itself():
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for target in LINK.findall(page.read_text()):
            if (page.parent / target).resolve() == page.resolve():
                found.append(f"{page.relative_to(DOCS)} -> {target}")
    assert not found, found


def test_the_backup_page_names_every_file_a_sqlite_store_keeps(tmp_path):
    import ctxstore

    store = ctxstore.open(f"sqlite:///{tmp_path / 'ctxstore.db'}")
    store.insert(store.create(), {"role": "user", "content": "hi"})
    suffixes = {p.name.removeprefix("ctxstore.db") for p in tmp_path.iterdir()} - {""}
    store.close()
    page = (DOCS / "how-to" / "backup.md").read_text()
    assert suffixes and all(f"<file>{s}" in page for s in suffixes), suffixes


def test_reference_tables_point_where_they_mean():
    """A table row cannot say "see above": each names the page that holds what it means."""
    for page in (DOCS / "reference").glob("*.md"):
        assert "(see above)" not in page.read_text(), page.name
