"""The tile-level reference interpreter: executes Tile IR with NumPy through the registry's
reference semantics. The semantic oracle of the tests, and a debugging aid for users."""

from tilelang.interp.errors import InterpreterAssertionError, InterpreterError
from tilelang.interp.interpreter import Interpreter, run_kernel

__all__ = ["Interpreter", "InterpreterAssertionError", "InterpreterError", "run_kernel"]
