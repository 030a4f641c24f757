"""Device functions that write a float as NumPy prints a scalar of its type (`str` of a 0-d
array: the interpreter's `print`) into a local char buffer, for `print` (lower/debug.py).

    call void @__tile_format_f32(float %x, ptr %buf)      ; NUL-terminated text, <= 32 bytes

Digits: the shortest that read back to the same value, nearest to it, ties to the even digit,
exactly as NumPy's Dragon4 in "unique" mode (Steele & White's free-format algorithm; the
rounding interval includes its ends when the mantissa is even, as round-to-even reads them
back; an exponent estimate corrected by one; a final carry through 9s).
The big integers are LLVM integers wide enough for the type (i128 f16, i192 f32, i1152 f64),
multiplied only by small constants, so the NVPTX back end expands them into a few
instructions per 64-bit limb. Layout: positional for 0 and 1e-4 <= |x| < 1e3 (f16), 1e6 (f32),
1e16 (f64) — "0.1", "100.0", "-0.0" — else scientific with the shortest mantissa and a signed
exponent of at least two digits ("1e+16", "1.5e-05"); "nan", "inf", "-inf".
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.record import record

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F64 = ir.DoubleType()
LOG10_2 = 0.30102999566398119521373889472449
BUF_BYTES = 32


@record(frozen=True)
class FloatFormat:
    name: str
    bits: int            # storage width
    mant: int            # explicit mantissa bits
    bias: int
    wide: int            # big-integer width
    positional_below: float

    @property
    def emax(self) -> int:
        return (1 << (self.bits - 1 - self.mant)) - 1


FORMATS = {
    "f16": FloatFormat("f16", 16, 10, 15, 128, 1e3),
    "f32": FloatFormat("f32", 32, 23, 127, 192, 1e6),
    "f64": FloatFormat("f64", 64, 52, 1023, 1152, 1e16),
}


def float_type(f: FloatFormat) -> ir.Type:
    return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[f.bits]


def format_function(module: ir.Module, fmt: FloatFormat) -> ir.Function:
    """`void @__tile_format_<name>(<float> x, ptr buf)`, defined once per module."""
    name = f"__tile_format_{fmt.name}"
    if name in module.globals:
        return module.globals[name]
    fnty = ir.FunctionType(ir.VoidType(), [float_type(fmt), ir.PointerType(I8)])
    fn = ir.Function(module, fnty, name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")       # one copy however many elements a print formats
    _Writer(module, fn, fmt).emit()
    return fn


class _Writer:
    def __init__(self, module: ir.Module, fn: ir.Function, fmt: FloatFormat):
        self.module, self.fn, self.f = module, fn, fmt
        self.W = ir.IntType(fmt.wide)
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))

    # -- small helpers ----------------------------------------------------------------------
    def c(self, ty, v):
        return ir.Constant(ty, v)

    def block(self, name):
        return self.fn.append_basic_block(name)

    def intrinsic(self, name, ret, args):
        m = self.module
        fn = m.globals.get(name) or ir.Function(m, ir.FunctionType(ret, [a.type for a in args]),
                                                name)
        return self.b.call(fn, args)

    def put(self, pos, byte):
        """buf[pos] = byte (i8 value or a character); returns pos + 1."""
        b = self.b
        v = byte if isinstance(byte, ir.Value) else self.c(I8, ord(byte))
        b.store(v, b.gep(self.buf, [pos]))
        return b.add(pos, self.c(I32, 1))

    def put_text(self, pos, text):
        for ch in text:
            pos = self.put(pos, ch)
        return pos

    def loop(self, name, init: list, cond_fn, body_fn):
        """while cond_fn(*vars): vars = body_fn(*vars); returns the final vars."""
        b = self.b
        pre = b.block
        head, body, out = self.block(name), self.block(name + ".body"), self.block(name + ".end")
        b.branch(head)
        b.position_at_end(head)
        phis = []
        for v in init:
            p = b.phi(v.type)
            p.add_incoming(v, pre)
            phis.append(p)
        b.cbranch(cond_fn(*phis), body, out)
        b.position_at_end(body)
        nxt = body_fn(*phis)
        for p, v in zip(phis, nxt):
            p.add_incoming(v, b.block)
        b.branch(head)
        b.position_at_end(out)
        return phis

    def if_else(self, cond, then_fn, else_fn, name="if"):
        """Values from whichever branch ran (lists of equal types)."""
        b = self.b
        t, e, j = self.block(name + ".then"), self.block(name + ".else"), self.block(name + ".end")
        b.cbranch(cond, t, e)
        b.position_at_end(t)
        tv = then_fn()
        tb = b.block
        b.branch(j)
        b.position_at_end(e)
        ev = else_fn()
        eb = b.block
        b.branch(j)
        b.position_at_end(j)
        out = []
        for x, y in zip(tv, ev):
            p = b.phi(x.type)
            p.add_incoming(x, tb)
            p.add_incoming(y, eb)
            out.append(p)
        return out

    def mul_pow10(self, x, k):
        """x * 10**k for a run-time k >= 0: by 10**19 while k >= 19, then by 10 (< 19 steps)."""
        b, W = self.b, self.W
        big = self.c(W, 10 ** 19)

        def steps(step, limit, factor):
            def cond(v, n):
                return b.icmp_signed(">=", n, self.c(I32, limit))

            def body(v, n):
                return [b.mul(v, factor), b.sub(n, self.c(I32, step))]
            return cond, body
        x, k = self.loop("p10big", [x, k], *steps(19, 19, big))
        x, k = self.loop("p10", [x, k], *steps(1, 1, self.c(W, 10)))
        return x

    # -- the function ------------------------------------------------------------------------
    def emit(self):
        f, b, W = self.f, self.b, self.W
        x, buf = self.fn.args
        self.buf = buf
        self.digits = b.alloca(ir.ArrayType(I8, 24))
        self.dptr = b.bitcast(self.digits, ir.PointerType(I8))
        ity = ir.IntType(f.bits)
        bits = b.bitcast(x, ity)
        neg = b.icmp_unsigned("!=", b.lshr(bits, self.c(ity, f.bits - 1)), self.c(ity, 0))
        expf = b.and_(b.lshr(bits, self.c(ity, f.mant)), self.c(ity, f.emax))
        man = b.and_(bits, self.c(ity, (1 << f.mant) - 1))
        expf, man = b.zext(expf, I64) if f.bits < 64 else expf, \
            b.zext(man, I64) if f.bits < 64 else man
        zero64 = self.c(I64, 0)

        special, finite = self.block("special"), self.block("finite")
        b.cbranch(b.icmp_unsigned("==", expf, self.c(I64, f.emax)), special, finite)
        b.position_at_end(special)
        nan, inf = self.block("nan"), self.block("inf")
        b.cbranch(b.icmp_unsigned("!=", man, zero64), nan, inf)
        b.position_at_end(nan)
        self.put(self.put_text(self.c(I32, 0), "nan"), "\0")
        b.ret_void()
        b.position_at_end(inf)
        pos = b.select(neg, self.put(self.c(I32, 0), "-"), self.c(I32, 0))
        self.put(self.put_text(pos, "inf"), "\0")
        b.ret_void()

        b.position_at_end(finite)
        pos0 = b.select(neg, self.put(self.c(I32, 0), "-"), self.c(I32, 0))
        zero_bb, num_bb = self.block("zero"), self.block("number")
        b.cbranch(b.and_(b.icmp_unsigned("==", expf, zero64), b.icmp_unsigned("==", man, zero64)),
                  zero_bb, num_bb)
        b.position_at_end(zero_bb)
        self.put(self.put_text(pos0, "0.0"), "\0")
        b.ret_void()

        b.position_at_end(num_bb)
        n, exp10 = self.digits_of(expf, man)
        xd = b.fpext(x, F64) if f.bits < 64 else x
        ax = self.intrinsic("llvm.fabs.f64", F64, [xd])
        positional = b.and_(b.fcmp_ordered(">=", ax, ir.Constant(F64, 1e-4)),
                            b.fcmp_ordered("<", ax, ir.Constant(F64, f.positional_below)))
        pos_bb, sci_bb = self.block("positional"), self.block("scientific")
        b.cbranch(positional, pos_bb, sci_bb)
        b.position_at_end(pos_bb)
        self.put(self.positional(pos0, n, exp10), "\0")
        b.ret_void()
        b.position_at_end(sci_bb)
        self.put(self.scientific(pos0, n, exp10), "\0")
        b.ret_void()

    def digit(self, i):
        return self.b.gep(self.dptr, [i])

    def digits_of(self, expf, man):
        """Dragon4 (see the module docstring): fills self.digits with ASCII digits; returns
        (count i32, decimal exponent i32 of the first digit)."""
        f, b, W = self.f, self.b, self.W
        c = self.c
        normal = b.icmp_unsigned("!=", expf, c(I64, 0))
        m = b.select(normal, b.or_(man, c(I64, 1 << f.mant)), man)
        e = b.sub(b.trunc(b.select(normal, expf, c(I64, 1)), I32), c(I32, f.bias + f.mant))
        unequal = b.and_(b.icmp_unsigned("==", man, c(I64, 0)),
                         b.icmp_unsigned(">", expf, c(I64, 1)))
        u = b.zext(unequal, W)
        mW = b.zext(m, W)
        one = c(W, 1)
        pos_e = b.icmp_signed(">", e, c(I32, 0))
        eW = b.zext(b.select(pos_e, e, c(I32, 0)), W)
        neW = b.zext(b.select(pos_e, c(I32, 0), b.neg(e)), W)
        # e > 0: r = m 2^(e+1+u), s = 2^(1+u), low = 2^e;  e <= 0: r = m 2^(1+u),
        # s = 2^(1-e+u), low = 1;  high = low 2^u.
        r = b.shl(mW, b.add(eW, b.add(one, u)))
        s = b.shl(one, b.add(neW, b.add(one, u)))
        low = b.shl(one, eW)
        # digit exponent estimate: ceil((highbit(m) + e) log10(2) - 0.69), at most one low
        hb = b.sub(c(I64, 63), self.intrinsic("llvm.ctlz.i64", I64, [m, c(I1, 0)]))
        est = b.sitofp(b.add(b.trunc(hb, I32), e), F64)
        est = b.fsub(b.fmul(est, ir.Constant(F64, LOG10_2)), ir.Constant(F64, 0.69))
        k = b.fptosi(self.intrinsic("llvm.ceil.f64", F64, [est]), I32)
        kpos = b.icmp_signed(">", k, c(I32, 0))
        s = b.select(kpos, self.mul_pow10(s, b.select(kpos, k, c(I32, 0))), s)
        kneg = b.select(kpos, c(I32, 0), b.neg(k))
        r = self.mul_pow10(r, kneg)
        low = self.mul_pow10(low, kneg)
        ten = c(W, 10)
        too_low = b.icmp_unsigned(">=", r, s)
        k = b.select(too_low, b.add(k, c(I32, 1)), k)
        r = b.select(too_low, r, b.mul(r, ten))
        low = b.select(too_low, low, b.mul(low, ten))
        exp10 = b.sub(k, c(I32, 1))

        def divmod9(r):
            """(r mod s, r div s) for r < 10 s."""
            d = c(I32, 0)
            for q in (8, 4, 2, 1):
                sq = b.shl(s, c(W, q.bit_length() - 1))
                ge = b.icmp_unsigned(">=", r, sq)
                r = b.select(ge, b.sub(r, sq), r)
                d = b.select(ge, b.add(d, c(I32, q)), d)
            return r, d

        # An even mantissa reads back from its interval's ends too (ties to even): inclusive.
        even_m = b.icmp_unsigned("==", b.and_(m, c(I64, 1)), c(I64, 0))

        def margins(r, low, high):
            """(rounding down stays inside, rounding up stays inside)."""
            rh = b.add(r, high)
            lo = b.select(even_m, b.icmp_unsigned("<=", r, low), b.icmp_unsigned("<", r, low))
            hi = b.select(even_m, b.icmp_unsigned(">=", rh, s), b.icmp_unsigned(">", rh, s))
            return lo, hi

        # Generate digits until one can be rounded to; `go` is the loop condition.
        def cond(r, low, n, go):
            return go

        def body(r, low, n, go):
            r, d = divmod9(r)
            high = b.shl(low, u)
            lo_ok, hi_ok = margins(r, low, high)
            stop = b.or_(lo_ok, hi_ok)
            # store the digit only when continuing; the last one is rounded below
            b.store(b.trunc(b.add(d, c(I32, 48)), I8), self.digit(n))
            n2 = b.select(stop, n, b.add(n, c(I32, 1)))
            return [b.select(stop, r, b.mul(r, ten)), b.select(stop, low, b.mul(low, ten)),
                    n2, b.not_(stop)]

        r_f, low_f, n_f, _ = self.loop("digits", [r, low, c(I32, 0), c(I1, 1)], cond, body)
        # The last step's flags again, from the final state (the loop exits right after it).
        high = b.shl(low_f, u)
        # r_f is the remainder after the last digit; the digit was stored at n_f.
        d = b.sub(b.zext(b.load(self.digit(n_f)), I32), c(I32, 48))
        lo_ok, hi_ok = margins(r_f, low_f, high)
        twice = b.shl(r_f, one)
        below = b.icmp_unsigned("<", twice, s)
        tie = b.icmp_unsigned("==", twice, s)
        even = b.icmp_unsigned("==", b.and_(d, c(I32, 1)), c(I32, 0))
        nearest_down = b.or_(below, b.and_(tie, even))
        round_down = b.select(b.icmp_unsigned("==", lo_ok, hi_ok), nearest_down, lo_ok)

        def keep():
            return [b.add(n_f, c(I32, 1)), exp10]

        def up():
            nine = b.icmp_unsigned("==", d, c(I32, 9))

            def plain():
                b.store(b.trunc(b.add(d, c(I32, 49)), I8), self.digit(n_f))
                return [b.add(n_f, c(I32, 1)), exp10]

            def carry():
                # back over the 9s before it; all 9s: "1" and one more in the exponent
                def cond(i):
                    prev = b.sub(i, c(I32, 1))
                    ok = b.icmp_signed(">", i, c(I32, 0))
                    safe = b.select(ok, prev, c(I32, 0))
                    is9 = b.icmp_unsigned("==", b.load(self.digit(safe)), c(I8, ord("9")))
                    return b.and_(ok, is9)

                def body(i):
                    return [b.sub(i, c(I32, 1))]
                (i,) = self.loop("carry", [n_f], cond, body)

                def at_start():
                    b.store(c(I8, ord("1")), self.digit(c(I32, 0)))
                    return [c(I32, 1), b.add(exp10, c(I32, 1))]

                def bump():
                    p = self.digit(b.sub(i, c(I32, 1)))
                    b.store(b.add(b.load(p), c(I8, 1)), p)
                    return [i, exp10]
                return self.if_else(b.icmp_signed("==", i, c(I32, 0)), at_start, bump, "carry0")
            return self.if_else(nine, carry, plain, "nine")

        n, exp10 = self.if_else(round_down, keep, up, "round")
        return n, exp10

    def copy_digits(self, pos, start, stop):
        """buf[pos...] = digits[start:stop]; returns the new pos."""
        b, c = self.b, self.c

        def cond(p, i):
            return b.icmp_signed("<", i, stop)

        def body(p, i):
            return [self.put(p, b.load(self.digit(i))), b.add(i, c(I32, 1))]
        p, _ = self.loop("copy", [pos, start], cond, body)
        return p

    def put_zeros(self, pos, count):
        b, c = self.b, self.c

        def cond(p, i):
            return b.icmp_signed("<", i, count)

        def body(p, i):
            return [self.put(p, "0"), b.add(i, c(I32, 1))]
        p, _ = self.loop("zeros", [pos, c(I32, 0)], cond, body)
        return p

    def positional(self, pos, n, x):
        """d.ddd x 10^x written out: integer digits (padded with zeros), '.', fraction or 0."""
        b, c = self.b, self.c

        def nonneg():
            intlen = b.add(x, c(I32, 1))
            have = b.select(b.icmp_signed("<", n, intlen), n, intlen)
            p = self.copy_digits(pos, c(I32, 0), have)
            p = self.put_zeros(p, b.sub(intlen, have))
            p = self.put(p, ".")
            more = b.icmp_signed(">", n, intlen)
            return self.if_else(more, lambda: [self.copy_digits(p, intlen, n)],
                                lambda: [self.put(p, "0")], "fraction")

        def negative():
            p = self.put_text(pos, "0.")
            p = self.put_zeros(p, b.sub(b.neg(x), c(I32, 1)))
            return [self.copy_digits(p, c(I32, 0), n)]
        (p,) = self.if_else(b.icmp_signed(">=", x, c(I32, 0)), nonneg, negative, "pos")
        return p

    def scientific(self, pos, n, x):
        b, c = self.b, self.c
        p = self.copy_digits(pos, c(I32, 0), c(I32, 1))

        def frac():
            return [self.copy_digits(self.put(p, "."), c(I32, 1), n)]

        (p,) = self.if_else(b.icmp_signed(">", n, c(I32, 1)), frac, lambda: [p], "frac")
        p = self.put(p, "e")
        negx = b.icmp_signed("<", x, c(I32, 0))
        p = self.put(p, b.select(negx, c(I8, ord("-")), c(I8, ord("+"))))
        ax = b.select(negx, b.neg(x), x)
        hundreds = b.udiv(ax, c(I32, 100))
        p2 = self.put(p, b.trunc(b.add(hundreds, c(I32, 48)), I8))
        p = b.select(b.icmp_unsigned(">=", ax, c(I32, 100)), p2, p)
        tens = b.urem(b.udiv(ax, c(I32, 10)), c(I32, 10))
        p = self.put(p, b.trunc(b.add(tens, c(I32, 48)), I8))
        return self.put(p, b.trunc(b.add(b.urem(ax, c(I32, 10)), c(I32, 48)), I8))
