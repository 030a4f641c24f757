"""The runtime's diagnostics: launch validation, argument checks, back-end selection, device
errors. Codes E09xx. This module is light (no NumPy, no driver) because `tilelang/__init__.py`
imports it, so the codes are registered in every process that imports the package and the
generated code table of docs/language.md is the same whoever imports what first.

Runtime errors are about a launch, not a source position; their span is the kernel parameter
or the kernel when the signature carries one, else None, and each has a help line.
"""

from __future__ import annotations

from tilelang.diagnostics import (Diagnostic, Severity, Span, TileError, TileLaunchError,
                                  TileUsageError, register_codes)

register_codes({
    "E0901": "launch block shape breaks the kernel's .reqntid/.maxntid or the device limits",
    "E0902": "launch grid is not divisible by the kernel's cluster shape",
    "E0903": "launch grid is malformed, negative or exceeds the device's grid limits",
    "E0904": "kernel needs thread-block clusters but the device is older than sm_90",
    "E0905": "kernel's shared memory exceeds the device's per-block limit",
    "E0906": "cluster shape exceeds the device's cluster size limit",
    "E0910": "wrong number of kernel arguments, or an unknown keyword",
    "E0911": "array argument has the wrong dtype",
    "E0912": "array argument has the wrong rank",
    "E0913": "array argument lives on the wrong device for the back end",
    "E0914": "argument is not an array the back end can pass",
    "E0915": "scalar argument has the wrong type or does not fit its dtype",
    "E0916": "`const` parameter value is missing, unknown or of the wrong type",
    "E0917": "stream argument is not a stream",
    "E0918": "a list of arrays needs a new device table while the stream captures a CUDA graph",
    "E0919": "a kernel with symmetric arrays launched on one device, or a wrong world launch",
    "E0920": "the CUDA back end has no driver or no GPU",
    "E0921": "unknown back end name",
    "E0922": "the module has no kernel of that name",
    "E0923": "`tilelang.compile` input is neither a source text nor a readable .tile file",
    "E0924": "the compiler entry points are not available",
    "E0925": "invalid value for a tilelang API call (dtype, shape, facts, option)",
    "E0930": "the device refused the launch or reported an error (CUDA driver, emulator)",
    "E0931": "the kernel faulted while running",
    "E0940": "autotuning found no configuration that compiles, fits the device and runs",
    "E0941": "an autotuning compile worker process died",
})


def _diag(code: str, message: str, help: str | None, span: Span | None = None,
          notes: tuple[str, ...] = ()) -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, message, span, None, help, notes)


class _WithHelp:
    """Runtime errors render like every TileError (`str(error)` is the diagnostic as tilec
    prints it: code, message, the kernel parameter in the source when known, help)."""


class LaunchConfigError(_WithHelp, TileLaunchError):
    """A launch the driver would refuse (block, grid, cluster, shared memory)."""


class KernelArgumentError(_WithHelp, TileUsageError, TypeError):
    """An argument that does not match the kernel signature (a TypeError too, as in Python)."""


class RuntimeUsageError(_WithHelp, TileUsageError):
    """The API was called wrongly (unknown back end, unreadable input)."""


class ArrayUsageError(RuntimeUsageError, ValueError):
    """A value given to the API is invalid: an unknown dtype, a negative extent, unknown facts
    (a ValueError too, as NumPy raises for such mistakes)."""


class BackendUnavailable(RuntimeUsageError):
    """The requested back end cannot run here (no CUDA driver or no GPU)."""


class KernelNotFound(RuntimeUsageError, AttributeError):
    """`module.name` names no kernel (an AttributeError too, so `hasattr` works)."""


class DeviceError(_WithHelp, TileError):
    """The device reported a failure: a CUDA driver error or a fault in the emulator."""


def launch_error(code: str, message: str, help: str, span: Span | None = None
                 ) -> LaunchConfigError:
    return LaunchConfigError(_diag(code, message, help, span))


def arg_error(code: str, message: str, help: str, span: Span | None = None
              ) -> KernelArgumentError:
    return KernelArgumentError(_diag(code, message, help, span))


def usage_error(code: str, message: str, help: str, span: Span | None = None
                ) -> RuntimeUsageError:
    return RuntimeUsageError(_diag(code, message, help, span))


def value_error(message: str, help: str, span: Span | None = None) -> ArrayUsageError:
    return ArrayUsageError(_diag("E0925", message, help, span))


def device_error(code: str, message: str, help: str, notes: tuple[str, ...] = ()
                 ) -> DeviceError:
    return DeviceError(_diag(code, message, help, None, notes))
