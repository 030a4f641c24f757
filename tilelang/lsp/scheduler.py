"""Checking off the request path.

Every check runs on one daemon thread, so requests (hover, completion, shutdown) are answered
while a large document is being checked, and the compiler never runs on two threads at once.
A change is checked ``DEBOUNCE_S`` after the last keystroke, or at once when it is the first
after a pause and nothing else is being checked (`quiet`); each open or change gives the
document a new generation, a queued check of an older generation is skipped, and a finished
check of an older generation is discarded: the client never sees stale diagnostics.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from lsprotocol import types as lsp

from .analysis import Analysis, analyze, too_large

log = logging.getLogger(__name__)

#: The pause after a change before it is checked: typing does not queue one check per key.
DEBOUNCE_S = 0.2
#: A request waits for the check of the current text only in a document up to this long
#: (characters): checking takes some microseconds per character.
QUICK_CHARS = 32 * 1024
#: Checks of files that are not open (requests about them) kept, by URI.
ONCE_CACHE = 8


class Worker:
    """One daemon thread running jobs in order; results come back on the event loop. A daemon,
    so a check in progress never holds up the server's exit."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.pending = 0  # jobs submitted and not finished

    def submit(self, fn: Callable, *args, skip: Callable[[], bool] = lambda: False
               ) -> asyncio.Future:
        """Run `fn(*args)` on the worker; when `skip()` is true as the job comes up, the
        job's result is None without running it."""
        fut = self._loop.create_future()
        with self._lock:
            self.pending += 1
        self._jobs.put((fut, fn, args, skip))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tilec-lsp-check",
                                            daemon=True)
            self._thread.start()
        return fut

    def _run(self) -> None:
        while True:
            fut, fn, args, skip = self._jobs.get()
            result = error = None
            try:
                if not skip():
                    result = fn(*args)
            except BaseException as exc:  # handed to the loop; nothing escapes this thread
                error = exc
            with self._lock:
                self.pending -= 1
            try:
                self._loop.call_soon_threadsafe(_settle, fut, result, error)
            except RuntimeError:  # the loop is closed: the server is exiting
                return


def _settle(fut: asyncio.Future, result, error) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


@dataclass
class _Doc:
    text: str = ""
    version: int | None = None
    gen: int = 0
    timer: asyncio.TimerHandle | None = None
    queued: int = -1  # the generation whose check is queued or running
    analysis: Analysis | None = None
    analysis_gen: int = -1
    parsed: object | None = None  # the module of the last check that parsed
    parsed_analysis: Analysis | None = None  # and that check
    changed_at: float = float("-inf")  # when its text last changed (time.monotonic())
    waiters: list[asyncio.Future] = field(default_factory=list)
    out_of_sync: str | None = None  # why the text is no longer the editor's (lsp/sync.py)


class Checker:
    """The open documents, their latest analyses and the checks in flight.

    `publish(uri, version, diagnostics)` is called on the event loop with each fresh result;
    `encoding()` is the negotiated position encoding.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 publish: Callable[[str, int | None, list[lsp.Diagnostic]], None],
                 encoding: Callable[[], str]):
        self._loop = loop
        self._publish = publish
        self._encoding = encoding
        self.worker = Worker(loop)
        self.docs: dict[str, _Doc] = {}
        self._generations = itertools.count(1)
        self._once: dict[str, tuple[str, asyncio.Future]] = {}  # unopened files' checks

    def update(self, uri: str, text: str, version: int | None, delay: float) -> None:
        """The document's new contents: check them after `delay` seconds."""
        d = self.docs.setdefault(uri, _Doc())
        d.text, d.version, d.out_of_sync = text, version, None
        d.changed_at = time.monotonic()
        # one counter for all documents: a check of a document closed and opened again meanwhile
        # cannot pass for a check of the new one
        d.gen = next(self._generations)
        if d.timer is not None:
            d.timer.cancel()
            d.timer = None
        if too_large(text):  # no check: the note is known at once
            self._finish(uri, d.gen, analyze(text, uri, self._encoding()))
        elif delay <= 0:
            self._start(uri, d.gen)
        else:
            d.timer = self._loop.call_later(delay, self._start, uri, d.gen)

    def lose_sync(self, uri: str, why: str) -> bool:
        """The document's text is no longer the editor's: its checks in flight are discarded
        and it is not checked again until a whole text arrives. True the first time."""
        d = self.docs.get(uri)
        if d is None or d.out_of_sync is not None:
            return False
        d.out_of_sync = why
        d.gen = next(self._generations)  # a check in flight is of a text that is wrong
        if d.timer is not None:
            d.timer.cancel()
            d.timer = None
        d.analysis = d.parsed = d.parsed_analysis = None
        waiters, d.waiters = d.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
        return True

    def quiet(self, uri: str) -> bool:
        """Whether a change of `uri` now is the first after a pause (none for DEBOUNCE_S) and
        nothing is being checked: then it is checked at once; the changes that follow it
        quickly (typing) wait for the pause and are checked once."""
        d = self.docs.get(uri)
        return (self.worker.pending == 0 and all(x.timer is None for x in self.docs.values())
                and (d is None or time.monotonic() - d.changed_at >= DEBOUNCE_S))

    def close(self, uri: str) -> None:
        d = self.docs.pop(uri, None)
        if d is None:
            return
        if d.timer is not None:
            d.timer.cancel()
        for w in d.waiters:
            if not w.done():
                w.set_result(None)

    def _stale(self, uri: str, gen: int) -> bool:
        d = self.docs.get(uri)
        return d is None or d.gen != gen

    def _start(self, uri: str, gen: int) -> None:
        d = self.docs.get(uri)
        if d is None or d.gen != gen or d.queued == gen:
            return
        d.timer, d.queued = None, gen
        fut = self.worker.submit(analyze, d.text, uri, self._encoding(),
                                 skip=lambda: self._stale(uri, gen))
        fut.add_done_callback(lambda f: self._done(uri, gen, f))

    def _done(self, uri: str, gen: int, fut: asyncio.Future) -> None:
        if fut.cancelled():
            return
        if fut.exception() is not None:  # analyze() catches compiler errors; this is a bug here
            exc = fut.exception()
            log.error("check of %s failed: %s: %s", uri, type(exc).__name__, exc)
            return
        if fut.result() is not None:
            self._finish(uri, gen, fut.result())

    def _finish(self, uri: str, gen: int, a: Analysis) -> None:
        d = self.docs.get(uri)
        if d is None or d.gen != gen:
            return  # a newer version arrived meanwhile: never publish a stale result
        d.analysis, d.analysis_gen = a, gen
        if a.module is not None:
            d.parsed, d.parsed_analysis = a.module, a
        else:  # a syntax error while typing: completion still knows the document's names
            a.earlier_module, a.earlier = d.parsed, d.parsed_analysis
        waiters, d.waiters = d.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(a)
        self._publish(uri, d.version, a.diagnostics)

    async def current(self, uri: str, wait: float) -> Analysis | None:
        """The analysis of the document's current contents, waiting at most `wait` seconds for
        its check; after that, an unchecked analysis (answers that need no parse). None when
        the document is not open."""
        d = self.docs.get(uri)
        if d is None:
            return None
        if d.analysis is not None and d.analysis_gen == d.gen:
            return d.analysis
        if d.queued != d.gen:  # still in its debounce pause: a request wants it now
            if d.timer is not None:
                d.timer.cancel()
                d.timer = None
            self._start(uri, d.gen)
        a = None
        if len(d.text) <= QUICK_CHARS:  # a longer document's check takes seconds: no wait
            w = self._loop.create_future()
            d.waiters.append(w)
            try:
                a = await asyncio.wait_for(w, wait)
            except asyncio.TimeoutError:
                pass
        cur = self.docs.get(uri)
        if cur is None:
            return None
        if a is not None and a.text == cur.text:
            return a
        return Analysis(uri, cur.text, checked=False, earlier_module=cur.parsed,
                        earlier=cur.parsed_analysis)

    async def once(self, uri: str, text: str, wait: float) -> Analysis:
        """An analysis of a document that is not open (read from disk), within `wait`."""
        if too_large(text):
            return analyze(text, uri, self._encoding())
        # one check per file contents, however many requests ask: a client hovering over a
        # large closed file must not queue a check per request ahead of the open documents
        cached = self._once.get(uri)
        if cached is not None and cached[0] == text:
            fut = cached[1]
        else:
            fut = self.worker.submit(analyze, text, uri, self._encoding())
            self._once.pop(uri, None)
            self._once[uri] = (text, fut)
            while len(self._once) > ONCE_CACHE:
                self._once.pop(next(iter(self._once)))
        try:
            a = await asyncio.wait_for(asyncio.shield(fut), wait)
        except asyncio.TimeoutError:
            a = None
        return a if a is not None else Analysis(uri, text, checked=False)
