"""The command line's start-up: `ctxstore --help` and a simple read (`show`) on a SQLite file,
each the median of several runs in fresh processes, beside a bare `python -c pass`.

    python bench/bench_cli.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def median_seconds(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "ctxstore"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CTXSTORE_URL": f"sqlite:///{Path(tmp) / 'cli.db'}"}
        made = subprocess.run([*cli, "create"], env=env, check=True, capture_output=True, text=True)
        cid = made.stdout.strip()
        subprocess.run([*cli, "insert", cid, "--content", "hello"], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        bare = median_seconds([sys.executable, "-c", "pass"], env, args.runs)
        helped = median_seconds([*cli, "--help"], env, args.runs)
        shown = median_seconds([*cli, "show", cid], env, args.runs)
    print(
        f"start-up, median of {args.runs}: python itself {bare:.3f} s; ctxstore --help "
        f"{helped:.3f} s ({helped / bare:.1f}x); ctxstore show {shown:.3f} s "
        f"({shown / bare:.1f}x)"
    )


if __name__ == "__main__":
    main()
