"""FIFOs, devices, sockets and folders where a source, a module, an array or a knobs file is
expected: every reader refuses them at once with a clear message (tilelang/infile.py opens
without blocking and judges what it opened), where `open()` on a FIFO used to wait forever."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import tilelang
from tilelang.diagnostics import TileError, source_line
from tilelang.infile import FileTooLarge, NotRegularFile, read_regular

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")

KERNEL = "kernel k(a: Array[f32, 1]) {\n    store(a, index = (0,), tile = zeros((4,), f32));\n}\n"
FIFO_WHY = "it is a FIFO (named pipe), not a regular file"


def tilec(*args, cwd=None):
    # a hang is the failure this guards against: 60 s is far beyond any answer
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "k.tile"
    os.mkfifo(path)
    return path


@pytest.fixture
def sock(tmp_path):
    path = tmp_path / "s.tile"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
    except OSError as e:            # a path too long for AF_UNIX on some systems
        pytest.skip(f"cannot bind a socket here: {e}")
    yield path
    s.close()


def test_read_regular_names_what_it_refuses(fifo, sock, tmp_path):
    for path, kind in ((fifo, "a FIFO (named pipe)"), (sock, "a socket"),
                       ("/dev/zero", "a character device"), (tmp_path, "a directory")):
        with pytest.raises(NotRegularFile) as e:
            read_regular(str(path))
        assert e.value.strerror == f"it is {kind}, not a regular file"
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(FileTooLarge) as e:
        read_regular(str(big), max_bytes=99)
    assert e.value.size == 100
    assert read_regular(str(big), max_bytes=100) == b"x" * 100


@pytest.mark.parametrize("command", [["check"], [], ["--emit", "ptx"]])
def test_check_and_compile_refuse_a_fifo(fifo, command):
    r = tilec(*command, fifo)
    assert r.returncode == 1
    assert f"error[E0001]: cannot read `{fifo}`: {FIFO_WHY}" in r.stderr
    assert "Traceback" not in r.stderr


def test_check_refuses_devices_and_sockets(sock):
    r = tilec("check", "/dev/zero", "/dev/null", sock)
    assert r.returncode == 1
    assert "cannot read `/dev/zero`: it is a character device, not a regular file" in r.stderr
    assert "cannot read `/dev/null`: it is a character device, not a regular file" in r.stderr
    assert f"cannot read `{sock}`: it is a socket, not a regular file" in r.stderr


def test_fmt_refuses_a_fifo(fifo):
    r = tilec("fmt", fifo)
    assert r.returncode == 1 and r.stderr == f"tilec fmt: {fifo}: {FIFO_WHY}\n"


def test_an_imported_module_that_is_a_fifo(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    os.mkfifo(lib / "m.tile")
    main = tmp_path / "main.tile"
    main.write_text("import m;\n" + KERNEL)
    r = tilec("check", "-I", lib, main)       # only a regular file is a module
    assert r.returncode == 1 and "error[E0601]: cannot find module `m`" in r.stderr


def test_ptxas_knobs_must_be_a_regular_file(fifo, tmp_path):
    src = tmp_path / "ok.tile"
    src.write_text(KERNEL)
    r = tilec(src, "--ptxas-knobs", fifo, "--emit", "ptx")
    assert r.returncode == 2
    assert r.stderr.endswith(f"tilec: error: --ptxas-knobs {fifo}: cannot read it: {FIFO_WHY}\n")
    r = tilec(src, "--ptxas-knobs", "/dev/zero", "--emit", "ptx")
    assert r.returncode == 2 and "it is a character device, not a regular file" in r.stderr


def test_run_refuses_fifo_sources_and_arrays(fifo, tmp_path):
    r = tilec("run", fifo, "--backend", "emulator", "--kernel", "k", "--grid", "1")
    assert r.returncode == 1 and FIFO_WHY in r.stderr and "Traceback" not in r.stderr
    src = tmp_path / "ok.tile"
    src.write_text(KERNEL)
    arr = tmp_path / "a.npy"
    os.mkfifo(arr)
    r = tilec("run", src, "--backend", "emulator", "--kernel", "k", "--grid", "1",
              "--arg", f"a={arr}")
    assert r.returncode == 2, r.stderr
    assert f"--arg a: cannot load `{arr}`: {FIFO_WHY}" in r.stderr


def test_python_api_and_diagnostics_never_block(fifo):
    with pytest.raises(TileError) as e:
        tilelang.compile(str(fifo), backend="emulator")
    assert FIFO_WHY in str(e.value.diagnostics[0].message)
    assert source_line(str(fifo), 1) is None      # a span naming a FIFO shows no line


def test_a_regular_array_still_loads(tmp_path):
    from tilelang.runtime.cli_run import _load_npy
    path = tmp_path / "x.npy"
    np.save(path, np.arange(5, dtype=np.float32))
    assert _load_npy(str(path), "x").tolist() == [0, 1, 2, 3, 4]
