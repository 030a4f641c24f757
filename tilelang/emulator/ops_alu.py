"""Arithmetic, logic, comparison, conversion and move instructions."""

from __future__ import annotations

import numpy as np

from .decode import op
from .fpmath import ROUNDINGS, f32_halves, f32_join, float_to_int, lanes, pack
from .ptx_types import TYPE_NAMES, TypeInfo, f32_to_tf32, type_info, uint_dtype


def _last_type(ctx, parts) -> TypeInfo:
    ts = [p for p in parts if p in TYPE_NAMES]
    if not ts:
        ctx.error(f"{ctx.ins.opcode}: missing type suffix")
    return ctx.type(ts[-1])


def _mode(parts, default="rn"):
    for p in parts:
        if p in ROUNDINGS:
            return p
    return default


def _nops(ctx, ins, n):
    if len(ins.operands) != n:
        ctx.error(f"{ins.opcode} takes {n} operands, found {len(ins.operands)}")
    return ins.operands


# -- integer helpers -----------------------------------------------------------------------
def _signed(ti):
    return np.dtype(f"i{ti.size}")


def _unsigned(ti):
    return uint_dtype(ti.size)


def _mulhi(a, b, ti):
    """High half of the full product, vectorized (64-bit via 32-bit limbs)."""
    if ti.size < 8:
        wide = np.dtype("i8") if ti.kind == "s" else np.dtype("u8")
        p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
        return (p >> (8 * ti.size)).astype(ti.dtype)
    ua, ub = np.asarray(a).view(np.uint64), np.asarray(b).view(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m32, ua >> s32, ub & m32, ub >> s32
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if ti.kind == "s":   # signed correction: subtract b if a<0, a if b<0
        hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) \
            - np.where(np.asarray(b) < 0, ua, np.uint64(0))
    return hi.view(ti.dtype)


def _idiv(a, b, ti):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    zero = b == 0
    bb = np.where(zero, 1, b).astype(b.dtype)
    if ti.kind == "s":
        q = a // bb
        q = np.where((a % bb != 0) & ((a < 0) != (bb < 0)), q + 1, q).astype(ti.dtype)
        return np.where(zero, ti.dtype.type(-1), q).astype(ti.dtype)
    return np.where(zero, np.iinfo(ti.dtype).max, a // bb).astype(ti.dtype)


def _irem(a, b, ti):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    zero = b == 0
    bb = np.where(zero, 1, b).astype(b.dtype)
    q = _idiv(a, bb, ti)
    return np.where(zero, a, a - q * bb).astype(ti.dtype)


def _sat32(x64):
    return np.clip(x64, -2**31, 2**31 - 1).astype(np.int32)


# -- add / sub / mul / mad / fma / div / rem / min / max -----------------------------------
def _float_binary(ctx, ins, parts, ti, f):
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    mode, sat = _mode(parts), "sat" in parts
    if ti.name == "f32" and mode == "rn" and not sat and f is not None and f[1] is not None:
        g = f[1]
        return lambda st, m: put(st, g(ga(st), gb(st)), m)
    if ti.kind == "f32x2" and "ftz" in parts:
        ctx.error(f"{ins.opcode}: the emulator does not support .ftz on .f32x2")
    if ti.kind == "f32x2" and mode == "rn" and not sat and f is not None and f[1] is not None:
        g = f[1]                               # each half in float32: one correct rounding

        def run2(st, m):
            (al, ah), (bl, bh) = f32_halves(ga(st)), f32_halves(gb(st))
            put(st, f32_join(g(al, bl), g(ah, bh)), m)
        return run2
    h = f[0]

    def run(st, m):
        res = [h(x, y) for x, y in zip(lanes(ga(st), ti), lanes(gb(st), ti))]
        put(st, pack(res, ti, mode, sat), m)
    return run


_FLOAT_BIN = {
    "add": (np.add, np.add), "sub": (np.subtract, np.subtract),
    "mul": (np.multiply, np.multiply), "div": (np.divide, None),
    "min": (np.fmin, np.fmin), "max": (np.fmax, np.fmax),
}


def _mixed_types(ctx, parts):
    """(f32, half type) for the mixed-precision forms (`add.rn.f32.f16 d, a, c`: a of the half
    type, c and d f32; sm_100+, LLVM emits them for sm_120), else None."""
    ts = [p for p in parts if p in TYPE_NAMES]
    if len(ts) == 2 and ts[0] == "f32" and ts[1] in ("f16", "bf16"):
        return ctx.type("f32"), ctx.type(ts[1])
    return None


def _build_mixed(ctx, ins, parts, mixed):
    """add/sub/fma with half-precision a (and b) and f32 c, d: computed exactly in float64
    from the operands' values and rounded once to f32 in the instruction's mode."""
    f32, half = mixed
    is_fma = parts[0] in ("fma", "mad")
    ops = _nops(ctx, ins, 4 if is_fma else 3)
    gh = [ctx.src(o, half) for o in ops[1:3 if is_fma else 2]]
    gc, put = ctx.src(ops[-1], f32), ctx.dst(ops[0], f32)
    mode, sat = _mode(parts), "sat" in parts
    sign = -1.0 if parts[0] == "sub" else 1.0

    def run(st, m):
        hs = [lanes(g(st), half)[0] for g in gh]
        c = np.asarray(gc(st)).astype(np.float64)
        r = hs[0] * hs[1] + c if is_fma else hs[0] + sign * c
        put(st, pack([r], f32, mode, sat), m)
    return run


@op("add", "sub", "addc", "subc")
def build_addsub(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    root = parts[0]
    mixed = _mixed_types(ctx, parts)
    if mixed is not None:
        return _build_mixed(ctx, ins, parts, mixed)
    if ti.is_float:
        return _float_binary(ctx, ins, parts, ti, _FLOAT_BIN[root])
    if "cc" in parts or root in ("addc", "subc"):
        return _build_carry(ctx, ins, parts, ti)
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    f = np.add if root == "add" else np.subtract
    if "sat" in parts:
        def run(st, m):
            put(st, _sat32(f(np.asarray(ga(st)).astype(np.int64), gb(st))), m)
        return run
    return lambda st, m: put(st, f(ga(st), gb(st)), m)


def _build_carry(ctx, ins, parts, ti):
    """Extended-precision add/sub (LLVM's i128 arithmetic): the carry flag CC.CF lives in a
    per-thread array of the state; `.cc` writes it, `addc`/`subc` read it."""
    d, a, b = _nops(ctx, ins, 3)
    ut = type_info(f"u{ti.size * 8}")
    ga, gb, put = ctx.src(a, ut), ctx.src(b, ut), ctx.dst(d, ut)
    use_cf = parts[0] in ("addc", "subc")
    set_cf = "cc" in parts
    is_add = parts[0] in ("add", "addc")
    one = ut.dtype.type(1)

    def run(st, m):
        x, y = np.asarray(ga(st)), np.asarray(gb(st))
        cf = st.carry.astype(ut.dtype) if use_cf else ut.dtype.type(0)
        if is_add:
            r = x + y + cf
            carry = (r < x) | ((cf == one) & (r == x))
        else:                                  # the flag is the borrow
            r = x - y - cf
            carry = (x < y) | ((cf == one) & (x == y))
        put(st, r, m)
        if set_cf:
            c = np.broadcast_to(carry, (st.T,)).astype(np.uint8)
            st.carry = c if m is None else np.where(m, c, st.carry)
    return run


def _build_mad_carry(ctx, ins, parts, ti):
    """`mad{.lo,.hi}.cc` / `madc{.lo,.hi}{.cc}` (PTX ISA, extended-precision arithmetic): the
    chosen half of a*b (signed product for .s types) plus c, plus CC.CF for `madc`; `.cc`
    writes the unsigned carry out of that sum to CC.CF. libdevice's range reduction of f32
    sin/cos (Payne-Hanek) chains them."""
    if ti.kind not in ("u", "s") or ti.size not in (4, 8):
        ctx.error(f"{ins.opcode}: carry chains take .u32, .s32, .u64 or .s64")
    half = next((p for p in parts[1:] if p in ("lo", "hi")), None)
    if half is None:
        ctx.error(f"{ins.opcode}: .lo or .hi is required")
    d, a, b, c = _nops(ctx, ins, 4)
    ut = type_info(f"u{ti.size * 8}")
    ga, gb = ctx.src(a, ti), ctx.src(b, ti)
    gc, put = ctx.src(c, ut), ctx.dst(d, ut)
    use_cf, set_cf = parts[0] == "madc", "cc" in parts
    one = ut.dtype.type(1)

    def run(st, m):
        x, y = np.asarray(ga(st)), np.asarray(gb(st))
        prod = _mulhi(x, y, ti) if half == "hi" else np.multiply(x, y)
        p = np.asarray(prod).view(ut.dtype) if np.asarray(prod).dtype != ut.dtype else prod
        z = np.asarray(gc(st))
        cf = st.carry.astype(ut.dtype) if use_cf else ut.dtype.type(0)
        r = p + z + cf
        put(st, r, m)
        if set_cf:
            carry = (r < p) | ((cf == one) & (r == p))
            cb = np.broadcast_to(carry, (st.T,)).astype(np.uint8)
            st.carry = cb if m is None else np.where(m, cb, st.carry)
    return run


@op("mul")
def build_mul(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    if ti.is_float:
        return _float_binary(ctx, ins, parts, ti, _FLOAT_BIN["mul"])
    d, a, b = _nops(ctx, ins, 3)
    ga, gb = ctx.src(a, ti), ctx.src(b, ti)
    if "wide" in parts:
        wt = type_info(f"{ti.kind if ti.kind != 'b' else 'u'}{ti.size * 16}")
        put = ctx.dst(d, wt)
        return lambda st, m: put(st, np.asarray(ga(st)).astype(wt.dtype) * wt.dtype.type(1)
                                 * np.asarray(gb(st)).astype(wt.dtype), m)
    put = ctx.dst(d, ti)
    if "hi" in parts:
        return lambda st, m: put(st, _mulhi(ga(st), gb(st), ti), m)
    return lambda st, m: put(st, np.multiply(ga(st), gb(st)), m)


@op("mul24", "mad24")
def build_mul24(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    ops = ins.operands
    gs = [ctx.src(o, ti) for o in ops[1:]]
    put = ctx.dst(ops[0], ti)
    sh = 40                                  # sign-extend the low 24 bits in int64

    def run(st, m):
        a = (np.asarray(gs[0](st)).astype(np.int64) << sh) >> sh if ti.kind == "s" else \
            np.asarray(gs[0](st)).astype(np.int64) & 0xFFFFFF
        b = (np.asarray(gs[1](st)).astype(np.int64) << sh) >> sh if ti.kind == "s" else \
            np.asarray(gs[1](st)).astype(np.int64) & 0xFFFFFF
        p = a * b
        r = (p >> 16) if "hi" in parts else p
        if len(gs) == 3:
            r = r + np.asarray(gs[2](st)).astype(np.int64)
        put(st, (r & 0xFFFFFFFF).astype(np.uint32).view(ti.dtype), m)
    return run


@op("shf")
def build_shf(ctx, ins, parts):
    """Funnel shift of the 64-bit value b:a (LLVM's rotates and wide shifts)."""
    d, a, b, c = _nops(ctx, ins, 4)
    u32 = type_info("u32")
    ga, gb, gc, put = ctx.src(a, u32), ctx.src(b, u32), ctx.src(c, u32), ctx.dst(d, u32)
    left, clamp = parts[1] == "l", "clamp" in parts

    def run(st, m):
        v = (np.asarray(gb(st)).astype(np.uint64) << np.uint64(32)) | \
            np.asarray(ga(st)).astype(np.uint64)
        c = np.asarray(gc(st)).astype(np.uint64)
        n = np.minimum(c, np.uint64(32)) if clamp else c & np.uint64(31)
        r = (v << n) >> np.uint64(32) if left else v >> n
        put(st, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), m)
    return run


@op("mad", "fma", "madc")
def build_mad(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    if "cc" in parts or parts[0] == "madc":
        return _build_mad_carry(ctx, ins, parts, ti)
    mixed = _mixed_types(ctx, parts)
    if mixed is not None:
        return _build_mixed(ctx, ins, parts, mixed)
    d, a, b, c = _nops(ctx, ins, 4)
    ga, gb = ctx.src(a, ti), ctx.src(b, ti)
    if ti.is_float:
        gc, put = ctx.src(c, ti), ctx.dst(d, ti)
        mode, sat = _mode(parts), "sat" in parts

        def run(st, m):
            res = []
            for x, y, z in zip(lanes(ga(st), ti), lanes(gb(st), ti), lanes(gc(st), ti)):
                if ti.size == 8 and ti.kind == "f":
                    res.append(_fma64(x, y, z))
                else:
                    res.append(x * y + z)     # exact product in f64, one rounding of the sum
            put(st, pack(res, ti, mode, sat), m)
        return run
    if "wide" in parts:
        wt = type_info(f"{ti.kind if ti.kind != 'b' else 'u'}{ti.size * 16}")
        gc, put = ctx.src(c, wt), ctx.dst(d, wt)
        return lambda st, m: put(st, np.asarray(ga(st)).astype(wt.dtype)
                                 * np.asarray(gb(st)).astype(wt.dtype) + gc(st), m)
    gc, put = ctx.src(c, ti), ctx.dst(d, ti)
    if "hi" in parts:
        if "sat" in parts:
            return lambda st, m: put(st, _sat32(_mulhi(ga(st), gb(st), ti).astype(np.int64)
                                                + gc(st)), m)
        return lambda st, m: put(st, _mulhi(ga(st), gb(st), ti) + gc(st), m)
    return lambda st, m: put(st, np.multiply(ga(st), gb(st)) + gc(st), m)


def _fma64(x, y, z):
    """Double fma: exact via Python fractions would be slow; use the two-product trick."""
    p = x * y
    # Dekker split gives the rounding error of the product; adding it makes the fused result
    # correct except in rare double-rounding cases.
    c = 134217729.0
    xs = c * x
    xh = xs - (xs - x)
    xl = x - xh
    ys = c * y
    yh = ys - (ys - y)
    yl = y - yh
    err = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
    with np.errstate(all="ignore"):
        r = (p + z) + err
    return np.where(np.isfinite(p), r, p + z)


@op("div")
def build_div(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    if ti.is_float:
        return _float_binary(ctx, ins, parts, ti, _FLOAT_BIN["div"])
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    return lambda st, m: put(st, _idiv(ga(st), gb(st), ti), m)


@op("rem")
def build_rem(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    return lambda st, m: put(st, _irem(ga(st), gb(st), ti), m)


@op("min", "max")
def build_minmax(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    root = parts[0]
    if ti.is_float:
        f = _FLOAT_BIN[root]
        if "NaN" in parts:
            f = (np.minimum, np.minimum) if root == "min" else (np.maximum, np.maximum)
        if len(ins.operands) == 4:             # min/max.f32 d, a, b, c (sm_100+)
            if ti.name != "f32":
                ctx.error(f"{ins.opcode}: three sources are an .f32 form")
            d, a, b, c = ins.operands
            ga, gb, gc, put = ctx.src(a, ti), ctx.src(b, ti), ctx.src(c, ti), ctx.dst(d, ti)
            g = f[1]
            return lambda st, m: put(st, g(g(ga(st), gb(st)), gc(st)), m)
        return _float_binary(ctx, ins, parts, ti, f)
    if ti.kind == "b":
        ti = type_info(f"u{ti.size * 8}")
    d, a, b = ins.operands[:3]
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    f = np.minimum if root == "min" else np.maximum
    if "relu" in parts:
        return lambda st, m: put(st, np.maximum(f(ga(st), gb(st)), 0), m)
    return lambda st, m: put(st, f(ga(st), gb(st)), m)


# -- unary ---------------------------------------------------------------------------------
@op("neg", "abs")
def build_negabs(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a = _nops(ctx, ins, 2)
    ga, put = ctx.src(a, ti), ctx.dst(d, ti)
    if ti.is_float:   # sign-bit operations: exact, NaN payload kept
        sign = ti.bits.type(1 << (8 * ti.size - 1)) if ti.kind in ("f", "bf16") \
            else np.uint32(0x80008000)
        bits = ti.bits
        if parts[0] == "neg":
            return lambda st, m: put(st, np.asarray(ga(st)).view(bits) ^ sign, m)
        return lambda st, m: put(st, np.asarray(ga(st)).view(bits) & ~sign, m)
    if parts[0] == "neg":
        return lambda st, m: put(st, np.negative(ga(st)), m)
    return lambda st, m: put(st, np.abs(ga(st)), m)


@op("not", "cnot")
def build_not(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a = _nops(ctx, ins, 2)
    ga, put = ctx.src(a, ti), ctx.dst(d, ti)
    if parts[0] == "cnot":
        return lambda st, m: put(st, (np.asarray(ga(st)) == 0).astype(ti.dtype), m)
    if ti.kind == "pred":
        return lambda st, m: put(st, np.logical_not(ga(st)), m)
    return lambda st, m: put(st, np.invert(ga(st)), m)


@op("and", "or", "xor")
def build_logic(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[parts[0]]
    return lambda st, m: put(st, f(ga(st), gb(st)), m)


@op("lop3")
def build_lop3(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b, c, lut = ins.operands[:5]
    ga, gb, gc, put = ctx.src(a, ti), ctx.src(b, ti), ctx.src(c, ti), ctx.dst(d, ti)
    table = int(ctx.src(lut, type_info("u32"))(None))

    def run(st, mm):
        x, y, z = np.asarray(ga(st)), np.asarray(gb(st)), np.asarray(gc(st))
        r = np.zeros(np.broadcast(x, y, z).shape, ti.dtype)
        for i in range(8):
            if table >> i & 1:
                r |= (x if i & 4 else ~x) & (y if i & 2 else ~y) & (z if i & 1 else ~z)
        put(st, r, mm)
    return run


@op("shl", "shr")
def build_shift(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, type_info("u32")), ctx.dst(d, ti)
    width = 8 * ti.size
    if parts[0] == "shl":
        dt = ti.bits

        def run(st, m):
            n = np.asarray(gb(st))
            v = np.asarray(ga(st)).view(dt) << np.minimum(n, width - 1).astype(dt)
            put(st, np.where(n >= width, dt.type(0), v), m)
        return run
    if ti.kind == "s":
        dt = ti.dtype
        return lambda st, m: put(st, np.asarray(ga(st)) >> np.minimum(np.asarray(gb(st)),
                                                                     width - 1).astype(dt), m)
    dt = ti.bits

    def run(st, m):
        n = np.asarray(gb(st))
        v = np.asarray(ga(st)).view(dt) >> np.minimum(n, width - 1).astype(dt)
        put(st, np.where(n >= width, dt.type(0), v), m)
    return run


# -- comparisons and selects ---------------------------------------------------------------
_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
    "hi": np.greater, "hs": np.greater_equal,
}


def _compare(cmp, ti):
    if ti.is_float:
        if cmp == "num":
            return lambda x, y: ~(np.isnan(x) | np.isnan(y))
        if cmp == "nan":
            return lambda x, y: np.isnan(x) | np.isnan(y)
        unordered = cmp.endswith("u")
        base = cmp[:-1] if unordered else cmp
        f = _CMP[base]
        if unordered:
            return lambda x, y: f(x, y) | np.isnan(x) | np.isnan(y)
        if base == "ne":
            return lambda x, y: (x != y) & ~(np.isnan(x) | np.isnan(y))
        return f
    return _CMP[cmp]


@op("setp", "set")
def build_setp(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    cmp = parts[1]
    if ti.kind in ("b", "u") and cmp in ("lt", "le", "gt", "ge"):
        ti = type_info(f"{'s' if ti.kind == 's' else 'u'}{ti.size * 8}")
    if ti.kind == "b" and cmp in ("lo", "ls", "hi", "hs"):
        ti = type_info(f"u{ti.size * 8}")
    boolop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    ops = ins.operands
    from .ptx_ast import PredPair
    dst = ops[0]
    f = _compare(cmp, ti)
    ga, gb = ctx.src(ops[1], ti), ctx.src(ops[2], ti)
    gc = ctx.src(ops[3], type_info("pred")) if boolop else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop)
    packed = ti.kind in ("f16x2", "bf16x2")
    ftz = "ftz" in parts and ti.is_float

    def operands(st):
        """The compared values: one pair of arrays per lane (two for packed halves)."""
        if ti.kind == "bf16" or packed or ftz:
            xs, ys = lanes(ga(st), ti), lanes(gb(st), ti)
            if ftz:                # .ftz: subnormal inputs compare as zeros of their sign
                xs, ys = [_flush(x, ti) for x in xs], [_flush(y, ti) for y in ys]
            return list(zip(xs, ys))
        return [(ga(st), gb(st))]

    def results(st):
        out = []
        for x, y in operands(st):
            r = np.asarray(f(x, y))
            out.append(comb(r, gc(st)) if comb is not None else r)
        return out

    if parts[0] == "set":
        return _build_set(ctx, parts, dst, results, packed)
    if packed:                     # setp.f16x2 p|q: p the low halves' result, q the high's
        if not isinstance(dst, PredPair):
            ctx.error("setp on packed halves writes a predicate pair p|q")
        put_lo, put_hi = ctx.dst(dst.p), ctx.dst(dst.q)

        def run_packed(st, m):
            lo, hi = results(st)
            put_lo(st, lo, m)
            put_hi(st, hi, m)
        return run_packed
    if isinstance(dst, PredPair):
        put, put_q = ctx.dst(dst.p), ctx.dst(dst.q)
    else:
        put, put_q = ctx.dst(dst), None

    def run(st, m):
        (x, y), = operands(st)
        r = np.asarray(f(x, y))
        put(st, comb(r, gc(st)) if comb is not None else r, m)
        if put_q is not None:
            nr = ~r
            put_q(st, comb(nr, gc(st)) if comb is not None else nr, m)
    return run


def _flush(x, ti):
    """A lane's subnormal values as zeros of the same sign (the .ftz input rule)."""
    tiny = np.finfo(np.float16 if ti.kind in ("f16x2",) or ti.name == "f16" else
                    np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(0.0, x), x)


def _build_set(ctx, parts, dst, results, packed):
    """`set`: true is 1.0 in a float destination, all ones in an integer one; with packed half
    sources each half of the destination holds its own comparison (1.0 per half for an
    .f16x2/.bf16x2 destination, 0xFFFF per half for .u32/.s32), as the PTX ISA's half
    precision comparison instructions define."""
    dti = ctx.type(parts[-2])
    put = ctx.dst(dst, dti)
    if packed:
        if dti.kind not in ("f16x2", "bf16x2") and dti.name not in ("u32", "s32", "b32"):
            ctx.error(f"set with packed halves writes .f16x2, .bf16x2, .u32 or .s32, "
                      f"not .{dti.name}")
        one = {"f16x2": 0x3C00, "bf16x2": 0x3F80}.get(dti.kind, 0xFFFF)

        def run_packed(st, m):
            lo, hi = results(st)
            bits = (np.where(lo, np.uint32(one), np.uint32(0))
                    | (np.where(hi, np.uint32(one), np.uint32(0)) << np.uint32(16)))
            put(st, bits.view(dti.dtype), m)
        return run_packed
    if dti.kind == "bf16":
        one = np.uint16(0x3F80)
    elif dti.is_float:
        one = dti.dtype.type(1.0)
    else:
        one = np.array((1 << (8 * dti.size)) - 1, uint_dtype(dti.size)).view(dti.dtype)[()]
    zero = dti.dtype.type(0)

    def run_set(st, m):
        r, = results(st)
        put(st, np.where(r, one, zero), m)
    return run_set


@op("selp")
def build_selp(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b, c = _nops(ctx, ins, 4)
    ga, gb, gc = ctx.src(a, ti), ctx.src(b, ti), ctx.src(c, type_info("pred"))
    put = ctx.dst(d, ti)
    return lambda st, m: put(st, np.where(gc(st), ga(st), gb(st)), m)


@op("slct")
def build_slct(ctx, ins, parts):
    ti, ct = ctx.type(parts[-2]), ctx.type(parts[-1])
    d, a, b, c = _nops(ctx, ins, 4)
    ga, gb, gc, put = ctx.src(a, ti), ctx.src(b, ti), ctx.src(c, ct), ctx.dst(d, ti)
    return lambda st, m: put(st, np.where(np.asarray(gc(st)) >= 0, ga(st), gb(st)), m)


# -- moves and conversions -----------------------------------------------------------------
@op("mov")
def build_mov(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a = _nops(ctx, ins, 2)
    ga = ctx.src(a, ti)
    put = ctx.dst(d, ti)
    return lambda st, m: put(st, ga(st), m)


@op("cvt")
def build_cvt(ctx, ins, parts):
    ts = [p for p in parts if p in TYPE_NAMES]
    if len(ts) != 2:
        ctx.error(f"{ins.opcode}: cvt needs a destination and a source type")
    dt, at = ctx.type(ts[0]), ctx.type(ts[1])
    if dt.kind in ("e4m3x2", "e5m2x2") or at.kind in ("e4m3x2", "e5m2x2"):
        return _build_cvt_fp8(ctx, ins, parts, dt, at)
    if dt.kind in _MX or at.kind in _MX:
        return _build_cvt_mx(ctx, ins, parts, dt, at)
    d, a = ins.operands[:2]
    ga, put = ctx.src(a, at), ctx.dst(d, dt)
    mode = next((p for p in parts[1:] if p in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi",
                                                 "rpi", "rna", "rs")), None)
    sat = "sat" in parts
    relu = "relu" in parts
    if len(ins.operands) == 3:       # cvt.rn.f16x2.f32 d, hi, lo
        gb = ctx.src(ins.operands[2], at)

        def run2(st, m):
            hi, lo = np.asarray(ga(st)).astype(np.float64), np.asarray(gb(st)).astype(np.float64)
            if relu:
                hi, lo = np.maximum(hi, 0), np.maximum(lo, 0)
            put(st, pack([lo, hi], dt, mode or "rn", sat), m)
        return run2
    if dt.name == "tf32":
        if at.name != "f32" or mode not in ("rna", "rn", "rz"):
            ctx.error(f"{ins.opcode}: tf32 is converted from .f32 with .rna, .rn or .rz")
        return lambda st, m: put(st, f32_to_tf32(ga(st), mode), m)
    if at.is_float and dt.is_float:
        r = mode or "rn"

        def run(st, m):
            x = lanes(ga(st), at)[0]
            if r in ("rni", "rzi", "rmi", "rpi"):
                x = float_to_int_round(x, r)
                put(st, pack([x], dt, "rn", sat), m)
            else:
                put(st, pack([x], dt, r, sat), m)
        return run
    if at.is_float:                  # float → int
        idt = dt.dtype
        r = mode or "rzi"

        def run(st, m):
            x = lanes(ga(st), at)[0]
            put(st, float_to_int(x, idt, r), m)
        return run
    if dt.is_float:                  # int → float
        r = mode or "rn"

        def run(st, m):
            x = np.asarray(ga(st))
            if x.dtype.itemsize == 8 and dt.name == "f32" and r == "rn" and not sat:
                # int64 → f64 would round first; a direct cast rounds once
                put(st, x.astype(np.float32), m)
                return
            # ints up to 32 bits are exact in float64, so one rounding to the target remains
            put(st, pack([x.astype(np.float64)], dt, r, sat), m)
        return run
    # int → int: truncate or extend according to the source type; .sat clamps.
    if sat:
        info = np.iinfo(dt.dtype)

        def run(st, m):
            x = np.asarray(ga(st))
            if x.dtype.kind == "u":
                c = np.minimum(x, np.uint64(info.max) if info.max > 0 else 0)
            else:
                c = np.clip(x.astype(np.int64), max(info.min, -2**63), min(info.max, 2**63 - 1))
            put(st, np.asarray(c).astype(dt.dtype), m)
        return run
    return lambda st, m: put(st, np.asarray(ga(st)).astype(dt.dtype), m)


def _build_cvt_fp8(ctx, ins, parts, dt, at):
    """cvt to and from packed 8-bit floats (sm_89+): e4m3x2 / e5m2x2 ⇄ f32 pairs, f16x2."""
    from . import fp8
    relu = "relu" in parts
    ops = ins.operands
    put = ctx.dst(ops[0], dt)
    if dt.kind in ("e4m3x2", "e5m2x2"):
        fmt = dt.kind[:4]
        if "satfinite" not in parts:
            ctx.error("conversions to e4m3x2/e5m2x2 need .satfinite")
        if at.name == "f32":                       # d = {a → high byte, b → low byte}
            if len(ops) != 3:
                ctx.error(f"{ins.opcode} takes two f32 sources")
            ga, gb = ctx.src(ops[1], at), ctx.src(ops[2], at)

            def run(st, m):
                hi = fp8.encode(ga(st), fmt, relu).astype(np.uint16)
                lo = fp8.encode(gb(st), fmt, relu).astype(np.uint16)
                put(st, (hi << np.uint16(8)) | lo, m)
            return run
        if at.kind == "f16x2":
            ga = ctx.src(ops[1], at)

            def run(st, m):
                lo, hi = lanes(ga(st), at)
                put(st, (fp8.encode(hi, fmt, relu).astype(np.uint16) << np.uint16(8))
                    | fp8.encode(lo, fmt, relu).astype(np.uint16), m)
            return run
        ctx.error(f"{ins.opcode}: unsupported source type")
    fmt = at.kind[:4]
    if dt.kind != "f16x2":
        ctx.error(f"{ins.opcode}: 8-bit floats convert to f16x2 only")
    ga = ctx.src(ops[1], at)

    def run(st, m):
        v = np.asarray(ga(st)).astype(np.uint16)
        lo = fp8.decode(v & np.uint16(0xFF), fmt)
        hi = fp8.decode(v >> np.uint16(8), fmt)
        if relu:
            lo, hi = np.maximum(lo, 0), np.maximum(hi, 0)
        put(st, pack([lo, hi], dt), m)
    return run


# the packed OCP MX formats (sm_100a, sm_120a): bits per element in the register, its mask
_MX = {"e2m1x2": (4, 0xF), "e2m3x2": (8, 0x3F), "e3m2x2": (8, 0x3F), "ue8m0x2": (8, 0xFF)}


def _build_cvt_mx(ctx, ins, parts, dt, at):
    """cvt to and from two packed e2m1 (4 bits each), e2m3/e3m2 (6 bits in 8, the top two 0)
    and ue8m0 values (PTX ISA: a's value in the upper half, b's in the lower)."""
    from . import fp8
    relu = "relu" in parts
    ops = ins.operands
    put = ctx.dst(ops[0], dt)
    mode = next((p for p in parts[1:] if p in ("rn", "rz", "rm", "rp")), None)
    if dt.kind in _MX:
        shift, _ = _MX[dt.kind]
        fmt = dt.kind[:-2]
        if fmt == "ue8m0":
            if mode not in ("rz", "rp") or relu:
                ctx.error(f"{ins.opcode}: ue8m0x2 is converted with .rz or .rp")
            enc = lambda x: fp8.encode_ue8m0(x, mode, "satfinite" in parts)   # noqa: E731
        else:
            if mode != "rn" or "satfinite" not in parts:
                ctx.error(f"{ins.opcode}: conversions to {dt.kind} are .rn.satfinite")
            enc = lambda x: fp8.encode(x, fmt, relu)                          # noqa: E731
        wide = np.uint16 if dt.size == 2 else np.uint8
        if at.name == "f32":
            if len(ops) != 3:
                ctx.error(f"{ins.opcode} takes two f32 sources")
            ga, gb = ctx.src(ops[1], at), ctx.src(ops[2], at)

            def run(st, m):
                hi, lo = enc(ga(st)).astype(wide), enc(gb(st)).astype(wide)
                put(st, (hi << wide(shift)) | lo, m)
            return run
        if at.kind == "bf16x2" and fmt == "ue8m0":
            ga = ctx.src(ops[1], at)

            def run(st, m):
                lo, hi = lanes(ga(st), at)
                put(st, (enc(hi).astype(wide) << wide(8)) | enc(lo).astype(wide), m)
            return run
        ctx.error(f"{ins.opcode}: unsupported source type")
    shift, mask = _MX[at.kind]
    fmt = at.kind[:-2]
    want = "bf16x2" if fmt == "ue8m0" else "f16x2"
    if dt.kind != want or mode != "rn" or (relu and fmt == "ue8m0"):
        ctx.error(f"{ins.opcode}: {at.kind} converts to {want} with .rn")
    ga = ctx.src(ops[1], at)
    dec = fp8.decode_ue8m0 if fmt == "ue8m0" else (lambda c: fp8.decode(c, fmt))  # noqa: E731

    def run(st, m):
        v = np.asarray(ga(st)).astype(np.uint16)
        lo, hi = dec(v & np.uint16(mask)), dec((v >> np.uint16(shift)) & np.uint16(mask))
        if relu:
            lo, hi = np.maximum(lo, 0), np.maximum(hi, 0)
        put(st, pack([lo, hi], dt), m)
    return run


def float_to_int_round(x, mode):
    return {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode](x)


@op("cvta")
def build_cvta(ctx, ins, parts):
    from .memory import LOCAL_WINDOW, SHARED_WINDOW
    ti = _last_type(ctx, parts)
    to = "to" in parts
    space = next((p for p in parts if p.split("::")[0] in ("global", "shared", "local", "const",
                                                             "param")), None)
    space = space.split("::")[0] if space else None
    base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
    d, a = _nops(ctx, ins, 2)
    u64 = type_info("u64")
    ga = ctx.src(a, ti if ti.size == 8 else type_info("u32"))
    put = ctx.dst(d, ti)
    off = np.uint64(base)
    if space == "param":
        # a 32-bit param-space address (mov.b32 %r, param) is the offset in the parameter
        # buffer; the generic window adds PARAM_WINDOW (a 64-bit mov already includes it)
        from .memory import PARAM_WINDOW
        win = np.uint64(PARAM_WINDOW)
        if to:
            return lambda st, m: put(st, np.asarray(ga(st)).astype(np.uint64).astype(ti.dtype),
                                     m)
        return lambda st, m: put(st, np.where(np.asarray(ga(st)).astype(np.uint64) < win,
                                              np.asarray(ga(st)).astype(np.uint64) + win,
                                              np.asarray(ga(st)).astype(np.uint64)), m)
    if to:
        return lambda st, m: put(st, (np.asarray(ga(st)).astype(np.uint64) - off)
                                 .astype(ti.dtype), m)
    return lambda st, m: put(st, np.asarray(ga(st)).astype(np.uint64) + off, m)


# -- bit manipulation ----------------------------------------------------------------------
_M1, _M2, _M4 = np.uint64(0x5555555555555555), np.uint64(0x3333333333333333), \
    np.uint64(0x0F0F0F0F0F0F0F0F)


def _popcount(u: np.ndarray) -> np.ndarray:
    """Set bits per element of an unsigned array, as u32. `np.bitwise_count` where NumPy has it
    (2.0+); the project supports NumPy 1.24, so else the classic SWAR sum on 64 bits."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(u).astype(np.uint32)
    v = u.astype(np.uint64)
    v = v - ((v >> np.uint64(1)) & _M1)
    v = (v & _M2) + ((v >> np.uint64(2)) & _M2)
    v = (v + (v >> np.uint64(4))) & _M4
    return ((v * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.uint32)


@op("popc", "clz", "brev", "bfind")
def build_bits(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a = _nops(ctx, ins, 2)
    ga = ctx.src(a, ti)
    out_t = type_info("u32")
    put = ctx.dst(d, ti if parts[0] == "brev" else out_t)
    width = 8 * ti.size
    bits = ti.bits

    def popc(x):
        return _popcount(np.asarray(x).view(bits))

    def clz(x):
        u = np.asarray(x).view(bits)
        # bit length via float64 log2 is inexact for 64-bit; use a shift cascade instead.
        n = np.zeros(u.shape, np.uint32)
        v = u.copy()
        for s in (32, 16, 8, 4, 2, 1):
            if s >= width:
                continue
            hi = v >> bits.type(s)
            has = hi != 0
            n = n + np.where(has, s, 0).astype(np.uint32)
            v = np.where(has, hi, v)
        length = np.where(u == 0, 0, n + 1)
        return (width - length).astype(np.uint32)

    def brev(x):
        u = np.asarray(x).view(bits)
        r = np.zeros(u.shape, bits)
        for i in range(width):
            r |= ((u >> bits.type(i)) & bits.type(1)) << bits.type(width - 1 - i)
        return r

    def bfind(x):
        v = np.asarray(x)
        if ti.kind == "s":
            v = np.where(v < 0, ~v, v)
        c = clz(v)
        return np.where(c == width, np.uint32(0xFFFFFFFF), (width - 1 - c.astype(np.int64))
                        .astype(np.uint32))

    f = {"popc": popc, "clz": clz, "brev": brev, "bfind": bfind}[parts[0]]
    return lambda st, m: put(st, f(ga(st)), m)


@op("bfe")
def build_bfe(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b, c = _nops(ctx, ins, 4)
    u32 = type_info("u32")
    ga, gb, gc, put = ctx.src(a, ti), ctx.src(b, u32), ctx.src(c, u32), ctx.dst(d, ti)
    width = 8 * ti.size
    bits = ti.bits

    def run(st, m):
        x = np.asarray(ga(st))
        pos = np.asarray(gb(st)).astype(np.int64) & 0xFF
        ln = np.asarray(gc(st)).astype(np.int64) & 0xFF
        u = x.view(bits).astype(np.uint64) if width < 64 else x.view(np.uint64)
        shifted = np.where(pos >= width, np.uint64(0),
                           u >> np.minimum(pos, 63).astype(np.uint64))
        lnc = np.minimum(ln, np.maximum(width - pos, 0))
        mask = np.where(lnc >= 64, np.uint64(~0 & (2**64 - 1)),
                        (np.uint64(1) << np.minimum(lnc, 63).astype(np.uint64)) - np.uint64(1))
        r = shifted & mask
        if ti.kind == "s":
            # sign bit is bit (pos+len-1) of the source, or the source's msb if beyond
            sbit_pos = np.minimum(pos + ln - 1, width - 1)
            sbit = (u >> sbit_pos.astype(np.uint64)) & np.uint64(1)
            sbit = np.where(ln == 0, np.uint64(0), sbit)
            r = np.where(sbit == 1, r | ~mask, r)
        put(st, r.astype(bits).view(ti.dtype) if width < 64 else r.view(ti.dtype), m)
    return run


@op("bfi")
def build_bfi(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b, c, e = _nops(ctx, ins, 5)
    u32 = type_info("u32")
    ga, gb, gc, ge = ctx.src(a, ti), ctx.src(b, ti), ctx.src(c, u32), ctx.src(e, u32)
    put = ctx.dst(d, ti)
    width = 8 * ti.size

    def run(st, m):
        x = np.asarray(ga(st)).astype(np.uint64)
        y = np.asarray(gb(st)).astype(np.uint64)
        pos = np.asarray(gc(st)).astype(np.int64) & 0xFF
        ln = np.asarray(ge(st)).astype(np.int64) & 0xFF
        ln = np.minimum(ln, np.maximum(width - pos, 0))
        fmask = np.where(ln >= 64, np.uint64(2**64 - 1),
                         (np.uint64(1) << np.minimum(ln, 63).astype(np.uint64)) - np.uint64(1))
        sh = np.minimum(pos, 63).astype(np.uint64)
        r = (y & ~(fmask << sh)) | ((x & fmask) << sh)
        r = np.where(pos >= width, y, r)
        put(st, r.astype(ti.bits), m)
    return run


@op("prmt")
def build_prmt(ctx, ins, parts):
    d, a, b, c = _nops(ctx, ins, 4)
    u32 = type_info("u32")
    ga, gb, gc, put = ctx.src(a, u32), ctx.src(b, u32), ctx.src(c, u32), ctx.dst(d, u32)
    mode = next((p for p in parts[2:] if p in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)

    def run(st, m):
        x = np.asarray(ga(st)).astype(np.uint64)
        y = np.asarray(gb(st)).astype(np.uint64)
        sel = np.asarray(gc(st)).astype(np.uint64)
        x, y, sel = np.broadcast_arrays(x, y, sel)
        tmp = x | (y << np.uint64(32))                       # bytes b0..b7
        byte = [(tmp >> np.uint64(8 * k)) & np.uint64(0xFF) for k in range(8)]
        stack = np.stack(byte)                                # (8, T)
        if mode is None:
            out = np.zeros(x.shape, np.uint64)
            for k in range(4):
                s = (sel >> np.uint64(4 * k)) & np.uint64(0xF)
                idx = (s & np.uint64(7)).astype(np.intp)
                v = np.take_along_axis(stack, idx[None, :], 0)[0]
                sign = (v >> np.uint64(7)) & np.uint64(1)
                v = np.where(s & np.uint64(8), sign * np.uint64(0xFF), v)
                out |= v << np.uint64(8 * k)
        else:
            s = (sel & np.uint64(3)).astype(np.intp)
            pat = {"f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
                   "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
                   "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
                   "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
                   "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
                   "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]]}[mode]
            pat = np.asarray(pat, np.intp)
            out = np.zeros(x.shape, np.uint64)
            for k in range(4):
                idx = pat[s, k]
                v = np.take_along_axis(stack, idx[None, :], 0)[0]
                out |= v << np.uint64(8 * k)
        put(st, out.astype(np.uint32), m)
    return run


@op("copysign")
def build_copysign(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a, b = _nops(ctx, ins, 3)
    ga, gb, put = ctx.src(a, ti), ctx.src(b, ti), ctx.dst(d, ti)
    return lambda st, m: put(st, np.copysign(gb(st), ga(st)), m)


@op("testp")
def build_testp(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a = _nops(ctx, ins, 2)
    ga, put = ctx.src(a, ti), ctx.dst(d)
    f = {"finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
         "notanumber": np.isnan, "normal": lambda x: np.isfinite(x) & (np.abs(x) >=
                                                                        np.finfo(x.dtype).tiny),
         "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(x.dtype).tiny)}[parts[1]]
    return lambda st, m: put(st, f(np.asarray(ga(st))), m)


# -- transcendental and special functions --------------------------------------------------
# .approx results are computed in float64 and rounded once: at least as accurate as the GPU's
# documented bounds (see docs/emulator.md), so tests on the emulator never depend on the GPU's
# exact approximation error.
_UNARY = {
    "ex2": np.exp2, "lg2": np.log2, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
    "tanh": np.tanh, "rcp": lambda x: 1.0 / x, "rsqrt": lambda x: 1.0 / np.sqrt(x),
}


@op("ex2", "lg2", "sqrt", "sin", "cos", "tanh", "rcp", "rsqrt")
def build_unary_float(ctx, ins, parts):
    ti = _last_type(ctx, parts)
    d, a = _nops(ctx, ins, 2)
    ga, put = ctx.src(a, ti), ctx.dst(d, ti)
    f = _UNARY[parts[0]]
    mode = _mode(parts)
    ftz = "ftz" in parts

    def run(st, m):
        res = []
        for x in lanes(ga(st), ti):
            if ftz and ti.size == 4:       # subnormal inputs flush to a zero of their sign
                x = np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(0.0, x), x)
            r = f(x)
            if ftz and ti.size == 4:       # .ftz flushes subnormal results too, keeping the sign
                r = np.where(np.abs(r) < np.finfo(np.float32).tiny, np.copysign(0.0, r), r)
            res.append(r)
        put(st, pack(res, ti, mode), m)
    return run
