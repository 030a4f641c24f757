"""CPU emulator for the PTX the Tile compiler produces (see docs/emulator.md).

Public interface (the same shape the CUDA driver back end offers):

    from tilelang.emulator import EmulatorDevice
    dev = EmulatorDevice()
    ptr = dev.malloc(nbytes); dev.memcpy_htod(ptr, array); dev.memcpy_dtoh(array, ptr)
    fn = dev.load_module(ptx_text).get_function("kernel")
    report = dev.launch(fn, grid, block, args, cluster=None, shared_mem=0)
"""

from .counters import LaunchReport
from .device import DevicePtr, EmulatorDevice, Function, Module
from .errors import (BarrierDivergence, DeviceAssertion, EmulatorError, ExecutionError,
                     LaunchRefused, MemoryFault, PTXParseError, SharedMemoryRace,
                     TensorMemoryRace, UnsupportedInstruction, WarpDivergence)
from .parser import parse_ptx

__all__ = [
    "EmulatorDevice", "DevicePtr", "Module", "Function", "LaunchReport", "parse_ptx",
    "EmulatorError", "PTXParseError", "LaunchRefused", "ExecutionError", "MemoryFault",
    "BarrierDivergence", "WarpDivergence", "DeviceAssertion", "UnsupportedInstruction",
    "SharedMemoryRace", "TensorMemoryRace",
]
