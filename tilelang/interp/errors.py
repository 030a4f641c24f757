"""Errors the reference interpreter raises."""

from __future__ import annotations


class InterpreterError(Exception):
    """The kernel could not be executed: bad arguments, or an operation failed (the message
    names the kernel, the block and the op as the IR printer writes it)."""


class InterpreterAssertionError(InterpreterError, AssertionError):
    """A device `assert` failed: `block` is the grid index, `message` the assert's text."""

    def __init__(self, kernel: str, block: tuple[int, int, int], message: str, where: str = ""):
        self.kernel, self.block, self.message = kernel, block, message
        super().__init__(f"kernel `{kernel}`, block {block}: assertion failed: {message}"
                         + (f" (at {where})" if where else ""))
