"""A Tile kernel whose lock is never released fails with the emulator's no-progress error
through the Python API (E0931), and the back end's step limit is an option."""

import numpy as np
import pytest

import tilelang
from tilelang.runtime.emulator_backend import EmulatorBackend
from tilelang.runtime.errors import DeviceError

STUCK = """
kernel stuck(acc: Array[f32, 1], lock: Array[i32, 1]) {
    while atomic_cas(lock, 0, 0, 1, sem = "acquire") != 0 {}
    store(acc, index = (0,), tile = load(acc, index = (0,), shape = (64,)) + 1.0);
}
"""


def test_lock_never_released_through_the_api(tmp_path):
    be = EmulatorBackend(max_steps=2_000_000)
    assert be.device.max_steps == 2_000_000
    m = tilelang.compile(STUCK, backend=be, cache_dir=str(tmp_path))
    acc, lock = np.zeros(64, np.float32), np.zeros(1, np.int32)
    with pytest.raises(DeviceError, match=r"E0931\]: kernel `stuck` faulted on the emulator: "
                       r"no progress: \d+ thread\(s\) spin in the loop at PTX lines \d+-\d+"):
        m.stuck[(2,)](acc, lock)
    m.stuck[(1,)](acc, np.zeros(1, np.int32))          # one block: takes the lock, finishes
