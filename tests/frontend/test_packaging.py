"""Installing on a platform without CUDA wheels (macOS): the CUDA packages carry environment
markers, and everything that needs no GPU works when they cannot be imported."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import tomllib

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[2]
CUDA = {"cuda-python", "cuda-bindings", "nvidia-nvjitlink", "nvidia-nvjitlink-cu12"}


def requirements(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    deps = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(r) for r in deps]


def env(sys_platform: str, machine: str, **more: str) -> dict[str, str]:
    e = dict(default_environment())
    e.update(sys_platform=sys_platform, platform_machine=machine,
             platform_system={"darwin": "Darwin", "linux": "Linux", "win32": "Windows"}[
                 sys_platform],
             os_name="nt" if sys_platform == "win32" else "posix", **more)
    return e


def required(environment: dict[str, str], extra: str | None = None) -> set[str]:
    out = set()
    for r in requirements(extra):
        if r.marker is None or r.marker.evaluate({**environment, "extra": extra or ""}):
            out.add(r.name.lower())
    return out


@pytest.mark.parametrize("machine", ["arm64", "x86_64"])
def test_macos_requires_no_cuda_package(machine):
    needed = required(env("darwin", machine))
    assert not needed & CUDA, needed
    assert {"lark", "llvmlite", "numpy", "ml_dtypes", "pygments"} <= needed
    for extra in ("lsp", "test"):
        assert not required(env("darwin", machine), extra) & CUDA


@pytest.mark.parametrize("platform,machine", [("linux", "x86_64"), ("linux", "aarch64"),
                                              ("win32", "AMD64")])
def test_cuda_platforms_still_get_the_cuda_packages(platform, machine):
    needed = required(env(platform, machine))
    assert {"cuda-python", "nvidia-nvjitlink"} <= needed


def test_unconditional_dependencies_have_no_marker():
    for r in requirements():
        if r.name.lower() not in CUDA:
            assert r.marker is None, r


# ---- running without the CUDA packages ------------------------------------------------------

# Makes `cuda` and `nvidia` unimportable, as on a machine where they could not be installed.
BLOCK = """
import sys
class _NoCuda:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("cuda", "nvidia"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoCuda())
for m in [m for m in sys.modules if m.split(".")[0] in ("cuda", "nvidia")]:
    del sys.modules[m]
"""


def run_blocked(script: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TILELANG_CACHE_DIR": str(cwd / "cache"), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-c", BLOCK + script, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


CLI = "from tilelang.cli import main\nsys.exit(main(sys.argv[1:]))\n"


@pytest.fixture
def vadd(tmp_path):
    (tmp_path / "vadd.tile").write_text((ROOT / "examples" / "vadd.tile").read_text())
    return tmp_path


def test_blocker_really_blocks(vadd):
    r = run_blocked("import cuda.bindings\n", cwd=vadd)
    assert r.returncode == 1 and "ModuleNotFoundError" in r.stderr


def test_check_and_ptx_without_cuda(vadd):
    r = run_blocked(CLI, "check", "vadd.tile", cwd=vadd)
    assert r.returncode == 0, r.stderr
    r = run_blocked(CLI, "--emit", "ptx", "vadd.tile", cwd=vadd)
    assert r.returncode == 0, r.stderr
    assert ".entry vadd(" in r.stdout and ".target sm_90" in r.stdout
    # The same PTX as with the CUDA packages present: the linker plays no part in it.
    from tilelang.cli import main
    assert main(["--emit", "ptx", "-o", str(vadd / "with.ptx"), str(vadd / "vadd.tile")]) == 0
    assert (vadd / "with.ptx").read_text() == r.stdout
    r = run_blocked(CLI, "--emit", "ptx", "-o", "out.ptx", "vadd.tile", cwd=vadd)
    assert r.returncode == 0, r.stderr
    assert ".entry vadd" in (vadd / "out.ptx").read_text()


def test_cubin_without_nvjitlink_is_a_diagnostic(vadd):
    r = run_blocked(CLI, "vadd.tile", cwd=vadd)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "nvJitLink is not available" in r.stderr and "--ptxas" in r.stderr
    assert not (vadd / "vadd.cubin").exists()


def test_emulator_without_cuda(vadd):
    script = (
        "import numpy as np, tilelang\n"
        "m = tilelang.compile('vadd.tile', backend='emulator')\n"
        "n = 3000\n"
        "a = np.arange(n, dtype=np.float32); b = np.full(n, 0.5, np.float32)\n"
        "c = np.zeros(n, np.float32)\n"
        "m.vadd[((n + 1023) // 1024,)](a, b, c)\n"
        "print(np.array_equal(c, a + b))\n")
    r = run_blocked(script, cwd=vadd)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "True"


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_message(stream) -> dict:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its output")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(stream.read(length))


def test_language_server_without_cuda(vadd):
    """A session over stdio: the server reports a syntax error in an opened document."""
    pytest.importorskip("pygls")
    uri = (vadd / "bad.tile").as_uri()
    env = {**os.environ, "TILELANG_CACHE_DIR": str(vadd / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", BLOCK + CLI, "lsp"], cwd=vadd, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    timer = threading.Timer(120, proc.kill)  # a hung server fails the test, not the suite
    timer.start()
    try:
        def send(msg: dict) -> None:
            proc.stdin.write(_frame(msg))
            proc.stdin.flush()
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1,
            "text": "fn f() { let x = (1 + 2; }\n"}}})
        codes = []
        while not codes:
            msg = _read_message(proc.stdout)
            if msg.get("method") == "textDocument/publishDiagnostics":
                codes = [d.get("code") for d in msg["params"]["diagnostics"]]
        assert "E0101" in codes, codes
        send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        while _read_message(proc.stdout).get("id") != 2:
            pass
        send({"jsonrpc": "2.0", "method": "exit"})
        proc.stdin.close()
        assert proc.wait(60) == 0
        assert b"Traceback" not in proc.stderr.read()
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
