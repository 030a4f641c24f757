"""Front-end speed: parse throughput on a generated 5,000-line file, and the whole-process
time of `tilec check` on each example (start-up, parsing and semantic analysis), next to the
interpreter's own start-up, and the number of modules the check imports.

    python3 benchmarks/frontend_bench.py            # the fast path (what `parse` does)
    python3 benchmarks/frontend_bench.py --lark     # also the Lark path, for the ratio

Parse times are best-of-N process CPU time (`time.process_time`), which other work on a
shared machine disturbs less than wall time; the whole-process times are wall-clock medians.
"""

from __future__ import annotations

import json
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


def best_cpu(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def whole_process(cmd: list[str], runs: int = 7) -> tuple[float, float]:
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)   # warm the caches
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


IMPORTS = """
import json, sys
before = set(sys.modules)
from tilelang.cli import main
main(["check", sys.argv[1]])
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def main() -> None:
    src = generated_source(5000)
    nlines = src.count("\n")
    parse(src)  # warm Python's caches
    best = best_cpu(lambda: parse(src, "gen.tile"), 7)
    rows = [("parse throughput (5,000-line file)", f"{nlines / best:,.0f} lines/s",
             f"best of 7: {best * 1e3:.0f} ms CPU for {nlines:,} lines")]
    if "--lark" in sys.argv:
        from tilelang.frontend import lark_parse
        slow = best_cpu(lambda: lark_parse.parse(src, "gen.tile"), 2)
        rows.append(("  the Lark path, same file", f"{nlines / slow:,.0f} lines/s",
                     f"best of 2: {slow * 1e3:.0f} ms CPU ({slow / best:.1f}x the fast path)"))
    med, low = whole_process([sys.executable, "-c", "pass"])
    rows.append(("python -c pass", f"{med * 1e3:.0f} ms",
                 f"the interpreter's own start, median of 7 (min {low * 1e3:.0f} ms)"))
    for example in sorted((ROOT / "examples").glob("*.tile")):
        cmd = [sys.executable, "-m", "tilelang.cli", "check", str(example)]
        med, low = whole_process(cmd)
        rows.append((f"tilec check examples/{example.name}", f"{med * 1e3:.0f} ms",
                     f"whole process, median of 7 (min {low * 1e3:.0f} ms)"))
    out = subprocess.run([sys.executable, "-c", IMPORTS, "examples/softmax.tile"], cwd=ROOT,
                         check=True, capture_output=True, text=True)
    modules = json.loads(out.stdout.splitlines()[-1])
    rows.append(("modules imported by tilec check", str(len(modules)),
                 "beyond the interpreter's start (tests/frontend/test_startup.py)"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'measure':<{w0}}  {'value':>{w1}}  notes")
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:>{w1}}  {c}")


if __name__ == "__main__":
    main()
