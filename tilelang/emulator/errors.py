"""Exceptions raised by the PTX emulator.

Every error the emulator reports is an `EmulatorError`; the subclasses say which check fired so
the runtime can turn them into diagnostics without parsing messages.
"""

from __future__ import annotations


class EmulatorError(Exception):
    """Base class of every emulator error."""


class PTXParseError(EmulatorError):
    """The PTX text is malformed or uses something the emulator does not support."""

    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class LaunchRefused(EmulatorError):
    """The launch configuration breaks a rule the CUDA driver enforces."""


class ExecutionError(EmulatorError):
    """A fault while running a kernel; carries where it happened."""

    def __init__(self, message: str, *, kernel: str | None = None, line: int | None = None,
                 block: tuple | None = None, thread: tuple | None = None,
                 address: int | None = None):
        self.kernel, self.line, self.block, self.thread, self.address = (
            kernel, line, block, thread, address)
        where = []
        if kernel is not None:
            where.append(f"kernel {kernel}")
        if line is not None:
            where.append(f"PTX line {line}")
        if block is not None:
            where.append(f"block {tuple(block)}")
        if thread is not None:
            where.append(f"thread {tuple(thread)}")
        if address is not None:
            where.append(f"address {address:#x}")
        super().__init__(message + (" (" + ", ".join(where) + ")" if where else ""))


class MemoryFault(ExecutionError):
    """An out-of-bounds or misaligned access to global, shared, local or param memory."""


class BarrierDivergence(ExecutionError):
    """A barrier not reached by every live thread of a block."""


class WarpDivergence(ExecutionError):
    """A `.sync.aligned` warp operation executed by a diverged warp, or a bad member mask."""


class GlobalMemoryRace(ExecutionError):
    """A plain access to a global word another block wrote, with no release/acquire
    synchronization between them (only with `EmulatorDevice(global_race_check=True)`)."""


class NoProgress(ExecutionError):
    """Every live thread spins (a loop repeating itself on memory no thread changes) or waits
    for something that can no longer happen: the kernel would hang on a GPU."""


class UnsupportedInstruction(ExecutionError):
    """An instruction the parser accepted but the executor cannot run in this form."""


class DeviceAssertion(ExecutionError):
    """A thread called `__assertfail` (a failed device-side assert) or executed `trap`."""


class SharedMemoryRace(ExecutionError):
    """Two warps of a block access the same shared word, at least one writing, with no
    barrier of the whole block between them (only with `EmulatorDevice(race_check=True)`)."""


class TensorMemoryRace(SharedMemoryRace):
    """Two agents (warps, a warp group's tcgen05 operations) access the same tensor-memory
    cells, at least one writing, with nothing ordering them (only with
    `EmulatorDevice(race_check=True)`; emulator/tmemrace.py)."""
