"""Front-end speed: parse throughput on a generated 5,000-line file, and the whole-process
time of `tilec check` on each example (start-up, parsing and semantic analysis; the grammar's
parse tables ship with the package as JSON).

    python3 benchmarks/frontend_bench.py
"""

from __future__ import annotations

import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tilelang.frontend.parser import parse  # noqa: E402


def generated_source(lines: int) -> str:
    body = (ROOT / "examples" / "layernorm.tile").read_text()
    out, n, i = [], 0, 0
    while n < lines:
        chunk = body.replace("kernel layernorm(", f"kernel layernorm_{i}(")
        out.append(chunk)
        n += chunk.count("\n")
        i += 1
    return "".join(out)


def main() -> None:
    src = generated_source(5000)
    nlines = src.count("\n")
    parse(src)  # load the parse tables and warm Python's caches
    times = []
    for _ in range(5):
        t = time.perf_counter()
        parse(src, "gen.tile")
        times.append(time.perf_counter() - t)
    best = min(times)

    rows = [
        ("parse throughput (5,000-line file)", f"{nlines / best:,.0f} lines/s",
         f"best of 5: {best * 1e3:.0f} ms for {nlines:,} lines"),
    ]
    # Whole-process `tilec check` (parse + semantic analysis) on every example, start-up
    # included; the first run warms the OS file cache and is not counted.
    for example in sorted((ROOT / "examples").glob("*.tile")):
        cmd = [sys.executable, "-m", "tilelang.cli", "check", str(example)]
        subprocess.run(cmd, check=True)
        procs = []
        for _ in range(7):
            t = time.perf_counter()
            subprocess.run(cmd, check=True)
            procs.append(time.perf_counter() - t)
        rows.append((f"tilec check examples/{example.name}",
                     f"{statistics.median(procs) * 1e3:.0f} ms",
                     f"whole process, median of 7 (min {min(procs) * 1e3:.0f} ms)"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'measure':<{w0}}  {'value':>{w1}}  notes")
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:>{w1}}  {c}")


if __name__ == "__main__":
    main()
