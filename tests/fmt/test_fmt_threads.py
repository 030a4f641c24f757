"""The formatter raises the process's recursion limit for its layout; calls in several threads
(the language server formats on a worker thread) must leave it as it was."""

from __future__ import annotations

import sys
import threading

from tilelang.fmt import format_source

SOURCE = "kernel k(a: Array[f32, 1]) {\n    let t = load(a, index = (0,), shape = (128,));\n" \
         "    store(a, index = (0,), tile = ((((t + 1.0)))));\n}\n"


def test_threads_leave_the_recursion_limit_as_it_was():
    before = sys.getrecursionlimit()
    expected = format_source(SOURCE, "k.tile")
    results, barrier = [], threading.Barrier(8)

    def work():
        barrier.wait()
        for _ in range(20):
            results.append(format_source(SOURCE, "k.tile"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sys.getrecursionlimit() == before
    assert results == [expected] * 160
