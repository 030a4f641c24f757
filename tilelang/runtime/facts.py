"""The specialization facts of one array argument (docs/abi.md): what a launch computes from an
array's address, extents and strides to choose the kernel built for them, `ArrayFacts.key()`
spelled as the runtime caches it."""

from __future__ import annotations

# three characters (c: contiguous, a: 16-byte aligned, e: last extent a multiple of 16 bytes),
# then `s` (small) and `n` (no tensor map) when they apply;
# the two-character keys from before `e` existed are accepted and claim no `e`
FACT_KEYS = tuple(c + a + e + s + t for c in "c-" for a in "a-" for e in "e-" for s in ("", "s")
                  for t in ("", "n")) + ("ca", "c-", "-a", "--")

SMALL_SPAN = 1 << 31           # the `small` fact: every element's offset (in elements) below
TMA_DIM, TMA_STRIDE = 1 << 32, 1 << 40    # a tensor map's extents and byte strides are below


def facts_key(ptr: int, shape: tuple, strides: tuple, itemsize: int) -> str:
    """ArrayFacts.key() of one argument: 'c' when the last stride is 1 (or the last extent is
    at most 1, so the stride is never used), 'a' when the address and every other stride with
    an extent above 1 are multiples of 16 bytes, 'e' when the last extent in bytes is a
    multiple of 16 (a 0-d array has no last axis: 'e'), then 's' when every element's offset
    from the address, in elements, lies in [-2^31, 2^31) and every extent is below 2^31
    (`small`), then 'n' when no tensor
    map describes the array (`tensor_map` fails, below)."""
    n = len(shape)
    contiguous = n == 0 or strides[-1] == 1 or shape[-1] <= 1
    aligned = ptr % 16 == 0
    if aligned:
        for i in range(n - 1):
            if shape[i] > 1 and (strides[i] * itemsize) % 16:
                aligned = False
                break
    extent = n == 0 or (shape[-1] * itemsize) % 16 == 0
    return ("c" if contiguous else "-") + ("a" if aligned else "-") + \
        ("e" if extent else "-") + ("s" if small(shape, strides) else "") + \
        ("" if mappable(shape, strides, itemsize) else "n")


def mappable(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """The `tensor_map` fact: cuTensorMapEncodeTiled takes positive strides below 2^40 bytes
    and extents below 2^32 (runtime/tensormap.py). An axis of extent 1 never uses its stride
    (the map packs one in its place), so a zero or negative stride there is fine; over a
    longer axis (a reversed view, a broadcast) it is not, and such an array must get a kernel
    that reaches it without TMA."""
    for n, s in zip(shape, strides):
        if n >= TMA_DIM or (n > 1 and not 0 < s * itemsize < TMA_STRIDE):
            return False
    return True


def small(shape: tuple, strides: tuple) -> bool:
    """Every element's offset from the address, in elements, fits in a signed 32-bit integer
    (the kernel computes it in 32 bits and widens it once): the elements span fewer than 2^31
    elements either way; and every extent is below 2^31, so that bounds tests can be made in
    32 bits too (a broadcast axis spans nothing at any extent). An empty array has no element
    to reach: a bounds test fails on its empty axis whatever the others say."""
    if 0 in shape:
        return True
    span = 0
    for n, s in zip(shape, strides):
        if n >= SMALL_SPAN:
            return False
        span += (n - 1) * abs(s)
    return span < SMALL_SPAN


# The facts key of an optional array given None (docs/abi.md, "Optional arrays"): it has no
# facts, and its presence pattern is part of the specialization's key.
ABSENT = "None"


def shape_links(keys: list[str], shapes: list[tuple]) -> list[str]:
    """The facts keys of a launch's arrays (in parameter order) with `=k` appended to each
    whose shape equals that of an earlier array k (the first such; counting arrays only),
    the `same_shape` fact. A 0-d array has no extent to share."""
    out = list(keys)
    for j in range(1, len(shapes)):
        sj = tuple(shapes[j])
        if sj and keys[j] != ABSENT:
            for i in range(j):
                if keys[i] != ABSENT and tuple(shapes[i]) == sj:
                    out[j] += f"={i}"
                    break
    return out


def facts_of(ptr: int, shape, strides, size: int) -> str:
    """`facts_key` with the one-dimensional case, the common one, unrolled (the fast path)."""
    if len(shape) == 1:                     # the common case, without the loop
        n = shape[0]
        return ("c" if strides[0] == 1 or n <= 1 else "-") + \
            ("a" if ptr % 16 == 0 else "-") + ("e" if (n * size) % 16 == 0 else "-") + \
            ("s" if n <= 1 or (n < SMALL_SPAN and (n - 1) * abs(strides[0]) < SMALL_SPAN)
             else "") + \
            ("" if n <= 1 or (n < TMA_DIM and 0 < strides[0] * size < TMA_STRIDE) else "n")
    return facts_key(ptr, shape, strides, size)
