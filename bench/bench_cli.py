"""The command line's start-up: `ctxstore --help` and the read commands (`contexts`, `show`,
`log`, `calls`) on a small SQLite store, each the median of several runs in fresh processes,
beside a bare `python -c pass`; wall time and CPU time (user + system, which a loaded machine
disturbs less).

With `--old CHECKOUT` (another checkout of this repository, e.g. made with
`git worktree add /tmp/cli-old HEAD`), every command runs old and new in turn, interleaved,
and the ratios are printed; `--importtime` adds the import time of the command line's module
(`python -X importtime`), old and new.

    python bench/bench_cli.py [--runs 9] [--old /tmp/cli-old] [--importtime]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READS = ("contexts", "show", "log", "calls")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def import_ms(env: dict[str, str]) -> float:
    """Milliseconds `import ctxstore.adapters.cli.app` takes, by `-X importtime`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import ctxstore.adapters.cli.app"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"\|\s*(\d+) \| ctxstore\.adapters\.cli\.app$", done.stderr, re.MULTILINE)
    return int(found.group(1)) / 1000 if found else float("nan")


def old_env(checkout: Path, base: dict[str, str], tmp: Path) -> dict[str, str]:
    """An environment whose `ctxstore` is the other checkout (the repo root is the package)."""
    link = tmp / "old-path" / "ctxstore"
    link.parent.mkdir()
    link.symlink_to(checkout.resolve())
    return {**base, "PYTHONPATH": str(link.parent)}


def small_store(cli: list[str], env: dict[str, str]) -> str:
    """A store with one context of two messages and one recorded call; its id."""
    made = subprocess.run([*cli, "create"], env=env, check=True, capture_output=True, text=True)
    cid = made.stdout.strip()
    for role, text in (("user", "hello"), ("assistant", "hi there")):
        subprocess.run([*cli, "insert", cid, "--role", role, "--content", text], env=env,
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    subprocess.run([*cli, "usage", cid, "--model", "gpt-4o", "--prompt-tokens", "12",
                    "--completion-tokens", "3"], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return cid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--old", type=Path, help="another checkout to compare with")
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "ctxstore"]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = {**os.environ, "CTXSTORE_URL": f"sqlite:///{tmp / 'cli.db'}"}
        env.pop("PYTHONPATH", None)
        sides = (
            {"new": env} if args.old is None else {"old": old_env(args.old, env, tmp), "new": env}
        )
        cid = small_store(cli, env)
        cases = {"python -c pass": [sys.executable, "-c", "pass"], "--help": [*cli, "--help"]}
        cases |= {read: [*cli, read] + ([] if read == "contexts" else [cid]) for read in READS}
        for label, argv in cases.items():
            runs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
            for _ in range(args.runs):
                for side, side_env in sides.items():  # interleaved: the same load for both
                    runs[side].append(timed(argv, side_env))
            said = []
            for side, got in runs.items():
                wall = statistics.median(w for w, _ in got)
                cpu = statistics.median(c for _, c in got)
                said.append(f"{side} {wall:.3f} s wall, {cpu:.3f} s CPU")
            if len(runs) == 2:
                before, after = (statistics.median(w for w, _ in runs[s]) for s in ("old", "new"))
                said.append(f"new/old {after / before:.2f}")
            print(f"{label:>16}: " + "; ".join(said))
        if args.importtime:
            for side, side_env in sides.items():
                ms = statistics.median(import_ms(side_env) for _ in range(args.runs))
                print(f"import ctxstore.adapters.cli.app ({side}): {ms:.1f} ms")
    print(f"(medians of {args.runs} runs; load average {os.getloadavg()[0]:.2f} at the end)")


if __name__ == "__main__":
    main()
