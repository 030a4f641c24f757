"""Seeded mutation fuzzing of the front end: `tilec check`'s in-process path (parse, check,
render) on random edits of every .tile source of the project (examples, stdlib, the tests'
fixtures). Edits delete, swap, duplicate and insert tokens and characters, put in `\\x00`,
unicode, huge numbers and odd constants, and nest deeply. Every input must end, within a time
limit, in success or in diagnostics that render; any other exception (a traceback reaching a
user) fails with the input that caused it.

The default run makes 300 inputs; `-m slow` runs the full 100,000 (in chunks). A failure names
the seed and index; `reproduce(seed, index)` rebuilds the input."""

from __future__ import annotations

import pathlib
import random
import resource
import signal
import subprocess
import sys
import time

import pytest

from tilelang.diagnostics import Severity, known_codes, render_all
from tilelang.driver import check_source
from tilelang.frontend.parser import _lark

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = [p.read_text("utf-8") for p in
           sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("stdlib/**/*.tile")) +
           sorted(ROOT.glob("tests/**/*.tile"))]
SOURCES = [s for s in SOURCES if s.strip()]

HUGE = ["9" * 40, "9" * 4301, "1" + "0" * 5000, str(2**63), str(2**64), str(2**31),
        str(2**31 - 1), str(2**63 - 1), "0x" + "f" * 64, "0b" + "1" * 200, "1e999", "1e-999",
        "1" * 400 + ".5", "0", "-1", "1 << 62", "2**63"]
SNIPPETS = ["(", ")", "{", "}", "[", "]", ";", ",", ":", ".", "->", "@", "=", "+=", "**", "-",
            "<<", ">>", "//", "/*", "*/", '"', "'", "\\", "$", "#", "let", "var", "fn", "kernel",
            "const", "static", "for", "in", "range(", "if", "else", "while", "break", "return",
            "import", "from", "@launch", "@host", "Tile[", "Array[f32,", "f32", "bf16", "i64",
            "inf", "nan", "true", "not", "load(", "store(", "bid(0)", "shape", "index", "\x00",
            "\x01", "\x7f", "\t", "\r", "\x0b", "\x0c", "\n", "é", "中", "😀", "\u202e", "\u0301",
            "\ufeff", "\u2028", "\u00a0", "ﬁ", "Ω", "İ", *HUGE]
NEST = [10, 100, 1000, 3000]
LIMIT_S = 10.0  # per input: a compile that takes longer is a hang
DEFAULT_COUNT, FULL_COUNT, CHUNK = 300, 100_000, 2_000


def _tokens(src: str):
    try:
        return [(t.start_pos, t.end_pos, t.type) for t in _lark().lex(src)]
    except Exception:  # noqa: BLE001 - an unlexable text is mutated by characters instead
        return []


def mutate(rng: random.Random, src: str) -> str:
    toks = _tokens(src)
    kind = rng.randrange(12) if toks else rng.choice([4, 5, 6, 9])
    if toks:
        a, b, ty = toks[rng.randrange(len(toks))]
    if kind == 0:                               # delete a token
        return src[:a] + src[b:]
    if kind == 1:                               # swap two tokens
        (a, b, _), (c, d, _) = sorted([toks[rng.randrange(len(toks))] for _ in range(2)])
        return src if c < b else src[:a] + src[c:d] + src[b:c] + src[a:b] + src[d:]
    if kind == 2:                               # duplicate a token elsewhere
        c, d, _ = toks[rng.randrange(len(toks))]
        return src[:a] + " " + src[c:d] + " " + src[a:]
    if kind == 3:                               # insert a snippet between tokens
        return src[:a] + rng.choice(SNIPPETS) + " " + src[a:]
    i = rng.randrange(len(src) + 1)
    if kind == 4:                               # delete characters
        return src[:i] + src[i + rng.randrange(1, 20):]
    if kind == 5:                               # reverse a stretch
        j = i + rng.randrange(1, 40)
        return src[:i] + src[i:j][::-1] + src[j:]
    if kind == 6:                               # insert a snippet anywhere
        return src[:i] + rng.choice(SNIPPETS) + src[i:]
    if kind == 7:                               # an odd number for a number
        nums = [t for t in toks if t[2] in ("DEC_INT", "HEX_INT", "BIN_INT", "FLOAT")]
        if nums:
            a, b, _ = rng.choice(nums)
        return src[:a] + rng.choice(HUGE) + src[b:]
    if kind == 8:                               # nest a token deeply
        n = rng.choice(NEST)
        o, c = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ("-", ""), ("not ", ""),
                           ("(", ""), ("Tile[", "]")])
        return src[:a] + o * n + src[a:b] + c * n + src[b:]
    if kind == 9:                               # duplicate or delete a line
        lines = src.split("\n")
        k = rng.randrange(len(lines))
        if rng.random() < 0.5:
            lines.insert(k, lines[rng.randrange(len(lines))])
        else:
            del lines[k]
        return "\n".join(lines)
    if kind == 10:                              # one name for another
        names = [t for t in toks if t[2] == "NAME"]
        if names:
            a, b, _ = rng.choice(names)
            c, d, _ = rng.choice(names)
            return src[:a] + src[c:d] + src[b:]
        return src
    # a non-ASCII or invisible character inside a token
    i = rng.randrange(a, b + 1)
    return src[:i] + rng.choice(["é", "\u200b", "\x00", "𝑥", "\u0301", "ı"]) + src[i:]


def make(seed: int, index: int) -> str:
    rng = random.Random(seed * 1_000_003 + index)
    src = rng.choice(SOURCES)
    for _ in range(rng.choice([1, 1, 2, 3, 5])):
        src = mutate(rng, src)
    return src


def reproduce(seed: int, index: int) -> str:
    """The input of one fuzz case, for a bug report."""
    return make(seed, index)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run(src: str) -> None:
    """`tilec check` on `src`: it must end in time, in success or in diagnostics that render."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        result = check_source(src, "fuzz.tile")
        render_all(result.diagnostics)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    codes = known_codes()
    for d in result.diagnostics:
        assert d.severity in Severity and d.message
        if d.severity is Severity.ERROR:
            assert d.code in codes, d


def fuzz(seed: int, start: int, count: int) -> None:
    failures = []
    for index in range(start, start + count):
        src = make(seed, index)
        t0 = time.perf_counter()
        try:
            run(src)
        except _Timeout:
            failures.append((index, f"took over {LIMIT_S:.0f} s"))
        except Exception as e:  # noqa: BLE001 - that is what we look for
            failures.append((index, f"{type(e).__name__}: {e}"[:300]))
        else:
            if time.perf_counter() - t0 > LIMIT_S:
                failures.append((index, "too slow"))
        if len(failures) >= 5:
            break
    assert not failures, "\n".join(
        f"seed {seed} index {i}: {why}\n  input: {make(seed, i)[:400]!r}" for i, why in failures)


def test_default_mutations():
    fuzz(1, 0, DEFAULT_COUNT)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(FULL_COUNT // CHUNK))
def test_full_mutations(chunk, request):
    """About 20 minutes of CPU: only when asked for with `-m slow`."""
    if "slow" not in request.config.option.markexpr.replace("not slow", ""):
        pytest.skip("the full fuzz run needs `-m slow`")
    fuzz(2, chunk * CHUNK, CHUNK)


def test_mutations_are_deterministic_and_varied():
    assert make(1, 7) == make(1, 7)
    assert len({make(1, i) for i in range(50)}) > 40


def test_deep_nesting_is_a_diagnostic():
    run("const X = " + "(" * 5000 + "1" + ")" * 5000 + ";")
    run("fn f() {" + "{" * 3000 + "}" * 3000 + "}")
    run("const X = " + "-" * 20000 + "1;")
    run("kernel k(a: Array[f32, 1]) { let t = " + "[" * 3000 + "1" + "]" * 3000 + "; }")


@pytest.mark.parametrize("number", HUGE)
def test_odd_numbers_everywhere(number):
    """A number in each place that takes one: a const, a type, a shape, @launch, a range."""
    for src in (f"const X = {number};",
                f"const X: i32 = {number};",
                f"kernel k(a: Array[f32, {number}]) {{ }}",
                f"kernel k(a: Array[f32, 1]) {{ let t = zeros(({number},), f32); }}",
                f"@launch(maxntid = ({number}, 1, 1))\nkernel k(a: Array[f32, 1]) {{ }}",
                f"kernel k() {{ static for i in range({number}) {{ }} }}",
                f"fn f() -> Tile[f32, {number}] {{ return zeros(({number},), f32); }}",
                f"kernel k(a: Array[f32, 1], const T: i32 = {number}) {{ }}"):
        run(src)


# Deep nesting as a whole `tilec check` process sees it, up to the 8 MiB source limit: every
# shape is answered (E0112, or the syntax error the Lark path finds below the parser's stack)
# within 2 s of CPU, start-up included. CPU time, not wall time: the machine may be shared.
MIB8 = 8 * 1024 * 1024 - 64
KERNEL = "kernel k(a: Array[f32, 1]) {\n"
TOO_DEEP = "nests expressions or blocks too deeply for the compiler"
NESTING = {
    "unclosed-if-5000": (lambda: KERNEL + "if true {\n" * 5_000, TOO_DEEP),
    "unclosed-if-40000": (lambda: KERNEL + "if true {\n" * 40_000, TOO_DEEP),
    "unclosed-if-8MiB": (lambda: KERNEL + "if true {\n" * (MIB8 // 10), TOO_DEEP),
    "closed-if-40000": (lambda: KERNEL + "if true {\n" * 40_000 + "}\n" * 40_001, TOO_DEEP),
    "parens-8MiB": (lambda: KERNEL + "let x = " + "(" * MIB8, TOO_DEEP),
    "type-brackets-8MiB": (lambda: "kernel k(a: " + "Array[" * (MIB8 // 6), TOO_DEEP),
    "minus-8MiB": (lambda: KERNEL + "let x = " + "-" * MIB8 + "1;\n}\n", TOO_DEEP),
    "not-8MiB": (lambda: KERNEL + "let x = " + "not " * (MIB8 // 4) + "true;\n}\n", TOO_DEEP),
    "lex-error-then-8MiB": (lambda: KERNEL + "$\n" + "if true {\n" * (MIB8 // 10), TOO_DEEP),
    # a syntax error first: the Lark path's recovery walks a nest just below the stack
    "syntax-error-then-2990": (lambda: KERNEL + "let = ;\n" + "{\n" * 2990 + "}\n" * 2991,
                               "expected `(` or an identifier, found `=`"),
}
QUICK = ("unclosed-if-40000", "parens-8MiB", "syntax-error-then-2990")


def _check_process(tmp_path, name: str) -> tuple[float, subprocess.CompletedProcess]:
    make_text, _ = NESTING[name]
    src = tmp_path / f"{name}.tile"
    src.write_text(make_text(), "utf-8")
    assert src.stat().st_size <= 8 * 1024 * 1024
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "tilelang.cli", "check", str(src)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done


def _assert_answered(tmp_path, name):
    cpu, done = _check_process(tmp_path, name)
    assert done.returncode == 1, done.stderr[-2000:]
    assert NESTING[name][1] in done.stderr and "Traceback" not in done.stderr
    assert cpu < 2.0, f"{name}: {cpu:.2f} s of CPU"


@pytest.mark.parametrize("name", QUICK)
def test_deep_nesting_answered_within_2s(tmp_path, name):
    _assert_answered(tmp_path, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NESTING if n not in QUICK])
def test_deep_nesting_answered_within_2s_every_shape(tmp_path, name):
    _assert_answered(tmp_path, name)
