"""Compiling imports no NumPy (nor ml_dtypes): its import was a third of a cold compile.

Each check runs in a fresh interpreter, since this one has NumPy loaded by other tests. The
emulator, the interpreter and launching with NumPy arrays use NumPy; compiling never does, for
any example or target, through `compile_source` or `tilec FILE.tile` (issue 18). Nor does it
import `dataclasses` (with `inspect`, ~8 ms: the IR and code generation's classes are
`tilelang.record`s) or `hashlib` (through `secrets`, ~5 ms: cache keys only).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tilelang import nvjitlink

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "ml_dtypes", "dataclasses", "inspect", "hashlib", "secrets")

try:
    nvjitlink.library()
    UNTIL = "cubin"
except nvjitlink.NvJitLinkUnavailable:      # PTX is the whole of code generation then
    UNTIL = "ptx"


def _run(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


COMPILE = """\
import json, sys
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
out = {{}}
for path, target in {cases!r}:
    r = compile_source(open(path).read(), path, CompileOptions(target=target),
                       until={until!r})
    assert r.ok, [str(d) for d in r.diagnostics]
    assert {until!r} == "ptx" or r.cubin[:4] == b"\\x7fELF"
    out[path + " " + target] = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps(out))
"""


def test_compiling_the_examples_imports_no_numpy():
    cases = [("examples/softmax.tile", "sm_90a"), ("examples/matmul.tile", "sm_80"),
             ("examples/matmul.tile", "sm_90a"), ("examples/attention.tile", "sm_80"),
             ("examples/attention.tile", "sm_90a")]
    got = _run(COMPILE.format(cases=cases, until=UNTIL, heavy=HEAVY))
    assert got == {f"{p} {t}": [] for p, t in cases}


@pytest.mark.slow
def test_compiling_every_example_imports_no_numpy():
    cases = [(str(p.relative_to(ROOT)), t) for p in sorted((ROOT / "examples").glob("*.tile"))
             for t in ("sm_80", "sm_89", "sm_90a")]
    got = _run(COMPILE.format(cases=cases, until=UNTIL, heavy=HEAVY))
    assert got == {f"{p} {t}": [] for p, t in cases}


def test_constants_of_every_dtype_and_print_import_no_numpy():
    """What used NumPy at compile time: f16/bf16/tf32/f8 constants (rounding, bit patterns),
    a constant divisor's reciprocal, erf's fitted coefficients, `print` of constants, layout
    conversions through shared memory and shuffles, and sema's folding of float constant
    arithmetic (`1.0 / 3.0`)."""
    src = """\
kernel k(a: Array[f32, 2], h: Array[f16, 1], e: Array[f8e4m3, 1], o: Array[f32, 2]) {
    let x = load(a, index = (0, 0), shape = (32, 32), padding = 0.1);
    let y = load(h, index = (0,), shape = (64,), padding = f16(0.3));
    store(h, index = (0,), tile = y * f16(3.14159) - bf16(0.7).astype(f16));
    store(e, index = (0,), tile = (y.astype(f32) * 0.33).astype(f8e4m3));
    let c = 1.0 / 3.0 + 7.5 % 2.0 - floordiv(-7.0, 2.0) + f32(0.1) * f32(3.0) - 2.0 * 0.25
            + minimum(1.0 / 0.0, 2.0) + maximum(-inf + 1.0, 3.0);
    store(o, index = (0, 0), tile = transpose(x) / 3.0 + erf(x) + tf32(0.1).astype(f32) + c
                                   + f8e5m2(300.0).astype(f32) + sum(x, axis = 0));
    print("{} {} {} {} {}", 0.1, f32(1.0e-5), f16(0.1), bf16(0.1), f8e4m3(0.3));
}
"""
    code = (f"import json, sys\nfrom tilelang.driver import compile_source\n"
            f"from tilelang.options import CompileOptions\n"
            f"r = compile_source({src!r}, 'k.tile', CompileOptions(target='sm_90a'),\n"
            f"                   until={UNTIL!r})\n"
            "assert r.ok, [str(d) for d in r.diagnostics]\n"
            "assert '1e-05 0.1 0.100097656 0.3125' in r.llvm_ir\n"
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    assert _run(code) == []


def test_tilec_imports_no_numpy(tmp_path):
    """The whole `tilec examples/softmax.tile` (and --emit ptx)."""
    out = tmp_path / "softmax.cubin"
    emit = [] if UNTIL == "cubin" else ["--emit", "ptx"]
    code = ("import json, sys\nfrom tilelang.cli import main\n"
            f"rc = main({emit + ['examples/softmax.tile', '-o', str(out)]!r})\n"
            "assert rc == 0, rc\n"
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    assert _run(code) == []
    data = out.read_bytes()
    assert data[:4] == b"\x7fELF" if UNTIL == "cubin" else b".version" in data


def test_a_kernel_without_math_functions_imports_no_decimal():
    """The math library's constants are made on first use (scalar/consts.py): the tensor-core
    matmul, which calls no math function, imports neither `decimal` nor `fractions` (~3 ms of
    its cold compile); softmax's exp does."""
    code = ("import json, sys\nfrom tilelang.driver import compile_source\n"
            "from tilelang.options import CompileOptions\nout = []\n"
            "for path in ('examples/matmul.tile', 'examples/softmax.tile'):\n"
            "    r = compile_source(open(path).read(), path, CompileOptions(target='sm_90a'),\n"
            f"                       until={UNTIL!r})\n"
            "    assert r.ok, [str(d) for d in r.diagnostics]\n"
            "    out.append(sorted(m for m in ('decimal', 'fractions') if m in sys.modules))\n"
            "print(json.dumps(out))\n")
    assert _run(code) == [[], ["decimal"]]


def test_lazy_math_constants():
    import math

    from tilelang.codegen.scalar import consts as K
    assert float(K.LN2) == math.log(2) and float(K.LOG2E) == 1 / math.log(2)
    assert float(K.LN10) == math.log(10) and float(K.LOG10_2) == math.log10(2)
    assert float(K.PI) == math.pi and K.Decimal(1) / 3 == K.Decimal("0." + "3" * 60)
    # 60-digit arithmetic: pi right to 55 decimal places (the series stops at 1e-58)
    assert str(K.PI).startswith("3.1415926535897932384626433832795028841971693993751058209")
    assert K.split(K.PI / 2, 2, None, False) == [math.pi / 2, 6.123233995736766e-17]
    with pytest.raises(AttributeError):
        K.E
