"""The language server's check scheduling (tilelang/lsp/scheduler.py), with a controllable
stand-in for the check: debouncing, stale checks skipped or discarded, requests that do not
wait for a long check, a document closed and opened again during a check."""

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from tilelang.lsp import scheduler  # noqa: E402
from tilelang.lsp.analysis import Analysis  # noqa: E402

URI = "file:///tmp/sched.tile"


class FakeCheck:
    """analyze() that records what it checked and blocks on texts starting with "slow"
    until released."""

    def __init__(self):
        self.checked: list[str] = []
        self.release = threading.Event()

    def __call__(self, text, uri, encoding="utf-16"):
        self.checked.append(text)
        if text.startswith("slow"):
            self.release.wait(10)
        return Analysis(uri, text, diagnostics=[f"diag of {text}"])


@pytest.fixture
def fake(monkeypatch):
    f = FakeCheck()
    monkeypatch.setattr(scheduler, "analyze", f)
    yield f
    f.release.set()


def run(coro_fn):
    return asyncio.run(coro_fn())


def make_checker(published):
    loop = asyncio.get_running_loop()
    return scheduler.Checker(loop, lambda uri, v, d: published.append((uri, v, list(d))),
                             lambda: "utf-16")


async def until(cond, timeout=10.0):
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def test_rapid_changes_are_checked_once_after_the_pause(fake):
    async def main():
        published = []
        c = make_checker(published)
        for v in range(1, 11):
            c.update(URI, f"text {v}", v, delay=0.5)  # (a 0.5 s stall here breaks the test)
            await asyncio.sleep(0.005)
        await until(lambda: published)
        await asyncio.sleep(0.1)
        return published

    assert run(main) == [(URI, 10, ["diag of text 10"])]
    assert fake.checked == ["text 10"]


def test_a_newer_version_discards_the_running_check_and_skips_queued_ones(fake):
    async def main():
        published = []
        c = make_checker(published)
        c.update(URI, "slow 1", 1, delay=0)
        await until(lambda: fake.checked == ["slow 1"])
        c.update(URI, "text 2", 2, delay=0)  # queued behind the running check
        c.update(URI, "text 3", 3, delay=0)  # makes the queued one stale
        fake.release.set()
        await until(lambda: published)
        await asyncio.sleep(0.1)
        return published

    assert run(main) == [(URI, 3, ["diag of text 3"])]
    assert fake.checked == ["slow 1", "text 3"]  # "text 2" was skipped, "slow 1" discarded


def test_closed_and_reopened_during_a_check(fake):
    async def main():
        published = []
        c = make_checker(published)
        c.update(URI, "slow old", 1, delay=0)
        await until(lambda: fake.checked == ["slow old"])
        c.close(URI)
        c.update(URI, "new", 1, delay=0)  # the same uri and version number again
        fake.release.set()
        await until(lambda: published)
        await asyncio.sleep(0.1)
        return published

    assert run(main) == [(URI, 1, ["diag of new"])]


def test_requests_do_not_wait_for_a_long_check(fake):
    async def main():
        published = []
        c = make_checker(published)
        c.update(URI, "slow doc", 1, delay=0.05)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        a = await c.current(URI, wait=0.2)  # starts the check at once, waits 0.2 s at most
        waited = loop.time() - t0
        assert fake.checked == ["slow doc"]
        fake.release.set()
        await until(lambda: published)
        b = await c.current(URI, wait=0.2)
        assert await c.current("file:///not/open.tile", wait=0.2) is None
        return a, waited, b

    a, waited, b = run(main)
    assert a.text == "slow doc" and not a.checked and a.diagnostics == []
    assert 0.15 < waited < 2
    assert b.checked and b.diagnostics == ["diag of slow doc"]


def test_a_request_gets_the_check_of_the_current_text(fake):
    async def main():
        published = []
        c = make_checker(published)
        c.update(URI, "text 1", 1, delay=5)  # a long pause: the request starts the check
        a = await c.current(URI, wait=5)
        return a, published

    a, published = run(main)
    assert a.checked and a.text == "text 1" and published == [(URI, 1, ["diag of text 1"])]


def test_a_file_that_is_not_open_is_checked_once_per_contents(fake):
    async def main():
        c = make_checker([])
        first = await asyncio.gather(*(c.once(URI, "on disk", wait=5) for _ in range(5)))
        again = await c.once(URI, "on disk", wait=5)
        changed = await c.once(URI, "on disk, edited", wait=5)
        return first, again, changed

    first, again, changed = run(main)
    assert all(a.checked and a.text == "on disk" for a in first + [again])
    assert changed.text == "on disk, edited"
    assert fake.checked == ["on disk", "on disk, edited"]


def test_the_last_parsed_module_outlives_syntax_errors_and_running_checks(monkeypatch):
    parsed = object()

    def check(text, uri, encoding="utf-16"):
        if text.startswith("slow"):
            gate.wait(10)
        return Analysis(uri, text, module=parsed if text == "parses" else None)

    gate = threading.Event()
    monkeypatch.setattr(scheduler, "analyze", check)

    async def main():
        c = make_checker([])
        c.update(URI, "parses", 1, delay=0)
        first = await c.current(URI, wait=5)
        c.update(URI, "does not", 2, delay=0)
        broken = await c.current(URI, wait=5)
        c.update(URI, "slow check", 3, delay=0)
        running = await c.current(URI, wait=0.1)
        gate.set()
        return first, broken, running

    try:
        first, broken, running = run(main)
    finally:
        gate.set()
    assert first.module is parsed
    assert broken.module is None and broken.checked and broken.earlier_module is parsed
    assert not running.checked and running.text == "slow check"
    assert running.earlier_module is parsed
