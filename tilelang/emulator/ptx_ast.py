"""Data classes for parsed PTX: what the parser produces and the decoder consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reg:
    name: str                 # unique within the function (scoped names are renamed)


@dataclass(frozen=True)
class Imm:
    text: str                 # kept as text: its meaning depends on the instruction type


@dataclass(frozen=True)
class Sym:
    name: str                 # a variable, parameter, function or label name


@dataclass(frozen=True)
class Addr:
    base: "Reg | Sym | Imm"
    offset: int = 0


@dataclass(frozen=True)
class TensorAddr:
    """`[tensorMap, {c0, c1, ...}]`: a tensor map address and box coordinates (TMA)."""
    map: Addr
    coords: "Vec"


@dataclass(frozen=True)
class Vec:
    items: tuple


@dataclass(frozen=True)
class Not:
    """`!%p` as a source operand (vote.sync, setp's combining predicate)."""
    reg: object


@dataclass(frozen=True)
class Sink:
    """The `_` operand: a result nobody reads."""


@dataclass(frozen=True)
class PredPair:
    """`%p|%q` destination of setp (the predicate and its complement)."""
    p: object
    q: object


@dataclass(frozen=True)
class Instr:
    opcode: str               # full dotted opcode, e.g. "mul.wide.s32"
    operands: tuple
    guard: tuple | None       # (Reg, negated) or None
    line: int
    call: tuple | None = None  # for call: (rets tuple, callee name, args tuple)


@dataclass(frozen=True)
class VarDecl:
    """A `.global`/`.shared`/`.const`/`.local`/`.param` variable."""
    name: str
    space: str                # "global", "shared", "const", "local", "param"
    type: str                 # element type suffix, e.g. "b8", "u32", "f32"
    count: int | None         # elements; None for a scalar, 0 for `[]` (extern/dynamic)
    align: int
    init: tuple | None        # initializer texts (numbers) or None
    extern: bool
    line: int

    @property
    def elem_size(self) -> int:
        return type_size(self.type)

    @property
    def nbytes(self) -> int:
        return self.elem_size * (1 if self.count is None else self.count)


@dataclass
class Function:
    name: str
    kind: str                 # "entry" or "func"
    params: list              # VarDecl (space "param") in order
    rets: list                # VarDecl for .func return values
    regs: dict                # register name -> type suffix ("pred", "b32", ...)
    locals: list              # VarDecl in .local/.shared/.param declared inside the body
    instrs: list
    labels: dict              # label -> instruction index
    directives: dict          # ".maxntid" -> tuple of ints, ...
    line: int
    defined: bool = True      # False for `.extern .func` declarations
    branchtargets: dict = field(default_factory=dict)   # brx.idx table label -> labels
    locs: dict = field(default_factory=dict)   # instruction index -> (.file number, line)


@dataclass
class Module:
    version: str | None = None
    target: tuple = ()
    address_size: int = 64
    variables: list = field(default_factory=list)
    functions: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)  # .file number -> source path

    def kernels(self) -> list:
        return [f.name for f in self.functions.values() if f.kind == "entry"]


_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


def type_size(t: str) -> int:
    """Byte size of a PTX fundamental type suffix such as "u32", "f16x2", "pred"."""
    if t == "pred":
        return 1
    if t.endswith("x2"):                  # f16x2, bf16x2
        return 4
    if t == "tf32":
        return 4
    if t in ("e4m3", "e5m2"):
        return 1
    return _SIZES[t.lstrip("bsuf")]
