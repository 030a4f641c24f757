"""A per-test time limit for pytest where pytest-timeout is not installed (a lent GPU machine
is offline and may not have it):

    python3 -m pytest -p pytest_test_alarm --test-alarm=SECONDS [--test-deadline=EPOCH] ...
    (tools/ on sys.path)

Each test's set-up, call and tear-down get SECONDS each. When one runs past them, SIGALRM
raises TestAlarm inside it, so the test fails with that message and the run goes on to the
next test (the junit XML and the -v log keep every outcome). A call blocked inside C code (a
driver call that never returns) cannot be interrupted that way: after a further SECONDS the
process dumps every thread's stack to stderr and exits, so the caller's own timeout and
log show where it hung. POSIX main thread only; elsewhere the option does nothing.

--test-deadline (seconds since the epoch, as `date +%s`) ends the run in time for its
outcomes to be written: a test that would start after it is skipped ("no time left"), and
the limit of one that starts before it is cut to what is left (a test stopped there is
skipped, not failed: its own limit was not reached), so the junit XML is complete when a time
box ends the session's tests.
See docs/python-api.md, "A GPU session".
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
import time

import pytest


class TestAlarm(Exception):
    """A test phase ran past --test-alarm."""

    __test__ = False                       # not a test class, despite its name


def pytest_addoption(parser):
    parser.addoption("--test-alarm", type=float, default=0.0, metavar="SECONDS",
                     help="fail a test whose set-up, call or tear-down runs longer than this "
                          "(0: no limit)")
    parser.addoption("--test-deadline", type=float, default=0.0, metavar="EPOCH",
                     help="skip the tests that would start after this time (seconds since "
                          "the epoch), and cut a test's limit to it (0: none)")


def _left(item) -> float | None:
    deadline = item.config.getoption("test_deadline") or 0.0
    return deadline - time.time() if deadline > 0 else None


def _armed(item) -> tuple[float, bool]:
    """(the phase's limit in seconds or 0 for none, whether the deadline set it)."""
    s = item.config.getoption("test_alarm") or 0.0
    left = _left(item)
    cut = left is not None and (s <= 0 or left < s)
    if cut:
        s = max(left, 1.0)
    if s <= 0 or not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread():
        return 0.0, False
    return s, cut


def _limit(item, when: str):
    seconds, cut = _armed(item)
    if not seconds:
        yield
        return

    def ring(signum, frame):
        if cut:     # the session's time ran out, not the test's: skipped, not failed
            pytest.skip(f"stopped after {seconds:.0f} s at --test-deadline (no time left)")
        raise TestAlarm(f"{item.nodeid}: {when} ran past --test-alarm={seconds:g} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    # the hard stop for a call that never returns to Python
    # (to the process's own stderr: pytest's capture stands in for sys.stderr, with no fd)
    faulthandler.dump_traceback_later(2 * seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    left = _left(item)
    if left is not None and left <= 0:
        pytest.skip("no time left before --test-deadline")
    yield from _limit(item, "set-up")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _limit(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _limit(item, "tear-down")
