"""A per-test time limit for pytest where pytest-timeout is not installed (a lent GPU machine
is offline and may not have it):

    python3 -m pytest -p pytest_test_alarm --test-alarm=SECONDS ...     (tools/ on sys.path)

Each test's set-up, call and tear-down get SECONDS each. When one runs past them, SIGALRM
raises TestAlarm inside it, so the test fails with that message and the run goes on to the
next test (the junit XML and the -v log keep every outcome). A call blocked inside C code (a
driver call that never returns) cannot be interrupted that way: after a further SECONDS the
process dumps every thread's stack to stderr and exits, so the caller's own timeout and
log show where it hung. POSIX main thread only; elsewhere the option does nothing.
See docs/python-api.md, "A GPU session".
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading

import pytest


class TestAlarm(Exception):
    """A test phase ran past --test-alarm."""

    __test__ = False                       # not a test class, despite its name


def pytest_addoption(parser):
    parser.addoption("--test-alarm", type=float, default=0.0, metavar="SECONDS",
                     help="fail a test whose set-up, call or tear-down runs longer than this "
                          "(0: no limit)")


def _armed(item) -> float:
    s = item.config.getoption("test_alarm") or 0.0
    if s <= 0 or not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread():
        return 0.0
    return s


def _limit(item, when: str):
    seconds = _armed(item)
    if not seconds:
        yield
        return

    def ring(signum, frame):
        raise TestAlarm(f"{item.nodeid}: {when} ran past --test-alarm={seconds:g} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    # the hard stop for a call that never returns to Python
    faulthandler.dump_traceback_later(2 * seconds, exit=True, file=sys.stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _limit(item, "set-up")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _limit(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _limit(item, "tear-down")
