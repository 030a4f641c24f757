"""A Tile kernel whose lock is never released fails with the emulator's no-progress error
through the Python API (E0931), and the back end's step limit is an option."""

import re

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


def test_no_progress_names_the_tile_source_line(tmp_path):
    # the emulator back end compiles with line information by default: the error names the
    # .tile file and the line of the spinning `while` (line 3 of STUCK)
    src = tmp_path / "stuck.tile"
    src.write_text(STUCK)
    m = tilelang.compile(str(src), backend=EmulatorBackend(max_steps=2_000_000),
                         cache_dir=str(tmp_path / "cache"))
    acc, lock = np.zeros(64, np.float32), np.zeros(1, np.int32)
    with pytest.raises(DeviceError, match=r"spin in the loop at PTX lines \d+-\d+ \(source "
                       + re.escape(f"{src}:3)")):
        m.stuck[(2,)](acc, lock)


LOCKED = """
kernel locked_sum(x: Array[f32, 2], acc: Array[f32, 1], lock: Array[i32, 1]) {
    let t = reshape(load(x, index = (bid(0), 0), shape = (1, 64)), (64,));
    while atomic_cas(lock, 0, 0, 1, sem = "ACQ") != 0 {}
    store(acc, index = (0,), tile = load(acc, index = (0,), shape = (64,)) + t);
    atomic_xchg(lock, 0, 0, sem = "REL");
}
"""


@pytest.mark.parametrize("acq,rel,racy", [("acquire", "release", False),
                                          ("relaxed", "relaxed", True),
                                          ("acquire", "relaxed", True)])
def test_lock_memory_order_through_the_api(tmp_path, acq, rel, racy):
    be = EmulatorBackend()
    be.device.global_race_check = True
    m = tilelang.compile(LOCKED.replace("ACQ", acq).replace("REL", rel), backend=be,
                         cache_dir=str(tmp_path))
    x = np.arange(4 * 64, dtype=np.float32).reshape(4, 64) % 7
    acc, lock = np.zeros(64, np.float32), np.zeros(1, np.int32)
    if not racy:
        m.locked_sum[(4,)](x, acc, lock)
        np.testing.assert_array_equal(acc, x.sum(0))
        return
    with pytest.raises(DeviceError, match=r"E0931\]: kernel `locked_sum` faulted on the "
                       r"emulator: global-memory data race: this block reads a word that "
                       r"block \(\d, 0, 0\) wrote"):
        m.locked_sum[(4,)](x, acc, lock)
