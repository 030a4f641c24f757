"""Language-server latency: how long after an edit of a 1,000-line document its diagnostics
arrive, and what the check of one version costs, whole and in its parts.

    python3 benchmarks/lsp_bench.py [--edits N]

* in process: `tilec check`'s check of the text (`driver.check_source`: every item parsed),
  and the server's check after a one-line edit (items parsed one by one and kept,
  tilelang/lsp/incremental.py): its parse and its semantic analysis;
* over stdio with the real server (`tilec lsp`): the time from sending `didChange` to
  receiving `publishDiagnostics` for that version, for edits made after a pause (the first
  keystroke after a pause is checked at once; a burst of keystrokes waits for the debounce
  pause, DEBOUNCE_S, and is checked once), median and worst.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def document(lines: int = 1000) -> str:
    """Kernels and functions of the examples and the standard library, renamed apart, until
    the text has `lines` lines."""
    kernels = [(ROOT / "examples" / n).read_text() for n in ("softmax.tile", "layernorm.tile",
                                                            "vadd.tile")]
    fns = (ROOT / "stdlib" / "std" / "math.tile").read_text().replace("@host\n", "")
    parts, i = ["import std.math;\n"], 0
    while sum(p.count("\n") for p in parts) < lines:
        src = kernels[i % len(kernels)]
        parts.append(re.sub(r"\bkernel (\w+)", lambda m: f"kernel {m.group(1)}_{i}", src))
        parts.append(re.sub(r"\bfn (\w+)", lambda m: f"fn {m.group(1)}_{i}", fns))
        i += 1
    return "".join(parts)


def edited(text: str, k: int) -> str:
    """`text` with the k-th `let r = bid(0);` changed (one line, one item)."""
    spots = [m.start() for m in re.finditer(r"let r = bid\(0\);", text)]
    at = spots[k % len(spots)]
    return text[:at] + f"let r = bid(0) + {k % 7} * 0;" + text[at + len("let r = bid(0);"):]


def in_process(text: str, edits: int) -> list[tuple[str, str, str]]:
    from tilelang.driver import check_source
    from tilelang.lsp.incremental import ItemCache, check_module

    path = "/tmp/bench.tile"
    check_source(text, path)  # warm: parse tables, the checker's tables
    full = []
    for _ in range(5):
        t = time.perf_counter()
        check_source(text, path)
        full.append(time.perf_counter() - t)
    cache = ItemCache()
    cache.parse(text, path)
    items, parsed0 = cache.parsed, cache.parsed
    parse_s, sema_s = [], []
    for k in range(edits):
        new = edited(text, k)
        t = time.perf_counter()
        module = cache.parse(new, path)
        t1 = time.perf_counter()
        check_module(module)
        t2 = time.perf_counter()
        parse_s.append(t1 - t)
        sema_s.append(t2 - t1)
    med = statistics.median
    return [
        ("tilec check's check of the document", f"{med(full) * 1e3:.0f} ms",
         f"check_source, median of 5 (min {min(full) * 1e3:.0f} ms)"),
        ("server: parse after a one-line edit", f"{med(parse_s) * 1e3:.1f} ms",
         f"items parsed again per edit: {(cache.parsed - parsed0) / edits:g} of {items}; "
         f"median of {edits}"),
        ("server: semantic analysis of the module", f"{med(sema_s) * 1e3:.0f} ms",
         f"median of {edits} (min {min(sema_s) * 1e3:.0f} ms)"),
    ]


def over_stdio(text: str, edits: int) -> list[tuple[str, str, str]]:
    sys.path.insert(0, str(ROOT / "tests" / "editors"))
    from lsp_wire import Wire  # the tests' raw JSON-RPC client of the real server

    from tilelang.lsp.scheduler import DEBOUNCE_S

    w = Wire()
    uri = "file:///tmp/bench.tile"
    try:
        w.initialize()
        w.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1, "text": text}})
        w.diagnostics(uri, timeout=60)
        times = []
        for k in range(edits):
            time.sleep(DEBOUNCE_S + 0.05)  # a user's pause before the edit
            version = k + 2
            seen = len(w.notifications)
            sent = time.perf_counter()
            w.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"text": edited(text, k)}]})
            w.diagnostics(uri, timeout=60, after=seen, where=lambda p, v=version:
                          p.get("version") == v)
            times.append(time.perf_counter() - sent)
    finally:
        w.close()
    return [("edit → diagnostics over stdio", f"{statistics.median(times) * 1e3:.0f} ms",
             f"median of {edits} edits after a pause, worst {max(times) * 1e3:.0f} ms")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edits", type=int, default=15)
    args = p.parse_args()
    text = document(1000)
    rows = [("document", f"{text.count(chr(10)):,} lines", f"{len(text):,} characters")]
    rows += in_process(text, args.edits)
    rows += over_stdio(text, args.edits)
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'measure':<{w0}}  {'value':>{w1}}  notes")
    for name, value, note in rows:
        print(f"{name:<{w0}}  {value:>{w1}}  {note}")


if __name__ == "__main__":
    main()
