"""The Tile abstract syntax tree: immutable nodes, each with a source span.

Spans are excluded from equality so that a printed-and-reparsed module compares equal to the
original; literal spellings (`0x2A` vs `42`) are excluded too, only their values count.

The classes are records (`tilelang.record`): they behave as dataclasses (and
`dataclasses.fields`, `replace` and `asdict` work on them) but their methods are written once
instead of generated per class: generating them compiled some 200 small functions at every
start-up, a quarter of what `tilec check` did before it read its file. Nodes are hashed by
value and never changed once made (`replace` makes a changed copy); they are not guarded by a
frozen `__setattr__`, which made building a node in the fast parser twice as expensive
(parsing makes some 30,000 nodes and as many spans for 5,000 lines).
"""

from __future__ import annotations

from typing import Iterator, Union

from ..diagnostics import Span
from ..record import field, record

_NOSPAN = Span("<none>", 0, 0, 0, 0)


def _span() -> Span:
    return field(default=_NOSPAN, compare=False, repr=False)


_node = record(unsafe_hash=True)


@_node
class Node:
    def children(self) -> Iterator["Node"]:
        """Direct child nodes, in source order."""
        for name in self._fields:
            value = getattr(self, name)
            if isinstance(value, Node):
                yield value
            elif isinstance(value, tuple):
                for v in value:
                    if isinstance(v, Node):
                        yield v

    def walk(self) -> Iterator["Node"]:
        """This node and all its descendants, depth first."""
        yield self
        for c in self.children():
            yield from c.walk()


# ---- expressions ----------------------------------------------------------------------------


@_node
class Expr(Node):
    pass


@_node
class Name(Expr):
    id: str
    span: Span = _span()


@_node
class IntLit(Expr):
    value: int
    text: str = field(default="", compare=False)
    span: Span = _span()


@_node
class FloatLit(Expr):
    """A float literal; `inf` and `nan` are FloatLit with text "inf"/"nan"."""

    value: float
    text: str = field(default="", compare=False)
    span: Span = _span()

    def __eq__(self, other: object) -> bool:  # nan == nan for AST comparison
        if not isinstance(other, FloatLit):
            return NotImplemented
        return self.value == other.value or (self.value != self.value and other.value != other.value)

    def __hash__(self) -> int:
        return hash(("FloatLit", repr(self.value)))


@_node
class BoolLit(Expr):
    value: bool
    span: Span = _span()


@_node
class StrLit(Expr):
    value: str
    span: Span = _span()


@_node
class TupleExpr(Expr):
    elts: tuple[Expr, ...]
    span: Span = _span()


@_node
class UnaryOp(Expr):
    op: str  # "+", "-", "~", "not"
    operand: Expr
    span: Span = _span()


@_node
class BinOp(Expr):
    op: str  # + - * / % ** @ & | ^ << >>
    left: Expr
    right: Expr
    span: Span = _span()


@_node
class BoolOp(Expr):
    op: str  # "and", "or"
    left: Expr
    right: Expr
    span: Span = _span()


@_node
class Compare(Expr):
    op: str  # == != < <= > >=
    left: Expr
    right: Expr
    span: Span = _span()


@_node
class IfExpr(Expr):
    cond: Expr
    then: Expr
    orelse: Expr
    span: Span = _span()


@_node
class Arg(Node):
    """A call argument; `name` is set for keyword arguments."""

    value: Expr
    name: str | None = None
    span: Span = _span()


@_node
class Call(Expr):
    func: Expr
    args: tuple[Arg, ...]
    span: Span = _span()

    @property
    def positional(self) -> tuple[Expr, ...]:
        return tuple(a.value for a in self.args if a.name is None)

    @property
    def keywords(self) -> dict[str, Expr]:
        return {a.name: a.value for a in self.args if a.name is not None}


@_node
class Index(Expr):
    value: Expr
    indices: tuple[Expr, ...]
    span: Span = _span()


@_node
class Slice(Expr):
    """`lo:hi` inside an index (either bound may be left out: `:` is the whole axis). Only an
    index holds one; the checker gives it meaning (docs/language.md, "Indexing tiles")."""
    lower: Expr | None = None
    upper: Expr | None = None
    span: Span = _span()


@_node
class Member(Expr):
    value: Expr
    attr: str
    span: Span = _span()


# ---- types ----------------------------------------------------------------------------------


@_node
class TypeExpr(Node):
    """`f32`, `Tile[f32, 128, N]`, `Array[f16, 2]`: a name with optional arguments.

    Arguments are expressions (a dtype is a Name, a dimension any constant expression); the
    checker gives them meaning.
    """

    name: str
    args: tuple[Expr, ...] | None = None
    span: Span = _span()


@_node
class TupleTypeExpr(Node):
    elts: tuple["AnyTypeExpr", ...]
    span: Span = _span()


AnyTypeExpr = Union[TypeExpr, TupleTypeExpr]


# ---- statements -----------------------------------------------------------------------------


@_node
class Stmt(Node):
    pass


@_node
class Block(Stmt):
    stmts: tuple[Stmt, ...]
    span: Span = _span()


@_node
class Let(Stmt):
    """`let x = e;` (immutable) or `var x = e;` (re-bindable); `names` has several entries
    for a tuple pattern `let (a, b) = e;`."""

    mutable: bool
    names: tuple[str, ...]
    is_tuple: bool
    type: AnyTypeExpr | None
    value: Expr
    span: Span = _span()
    name_spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)


@_node
class Assign(Stmt):
    target: Expr
    value: Expr
    span: Span = _span()


@_node
class AugAssign(Stmt):
    target: Expr
    op: str  # the binary operator, e.g. "+" for "+="
    value: Expr
    span: Span = _span()


@_node
class ExprStmt(Stmt):
    expr: Expr
    span: Span = _span()


@_node
class If(Stmt):
    cond: Expr
    then: Block
    orelse: "Block | If | None"
    span: Span = _span()


@_node
class While(Stmt):
    cond: Expr
    body: Block
    span: Span = _span()


@_node
class For(Stmt):
    var: str
    iter: Expr
    body: Block
    is_static: bool = False
    span: Span = _span()
    var_span: Span = field(default=_NOSPAN, compare=False, repr=False)


@_node
class Break(Stmt):
    span: Span = _span()


@_node
class Continue(Stmt):
    span: Span = _span()


@_node
class Return(Stmt):
    value: Expr | None
    span: Span = _span()


# ---- items ----------------------------------------------------------------------------------


@_node
class Item(Node):
    pass


@_node
class ImportName(Node):
    name: str
    alias: str | None = None
    span: Span = _span()


@_node
class Import(Item):
    """`import std.math;` or `import std.math as m;`"""

    path: tuple[str, ...]
    alias: str | None = None
    span: Span = _span()


@_node
class FromImport(Item):
    """`from std.nn import softmax_rows, gelu as g;`"""

    path: tuple[str, ...]
    names: tuple[ImportName, ...]
    span: Span = _span()


@_node
class ConstDef(Item):
    name: str
    type: AnyTypeExpr | None
    value: Expr
    span: Span = _span()
    name_span: Span = field(default=_NOSPAN, compare=False, repr=False)


@_node
class Attribute(Node):
    """`@launch(maxntid = (256, 1, 1))` or `@host`; `args` is None without parentheses."""

    name: str
    args: tuple[Arg, ...] | None = None
    span: Span = _span()


@_node
class Param(Node):
    name: str
    type: AnyTypeExpr | None
    default: Expr | None = None
    is_const: bool = False
    span: Span = _span()


@_node
class FnDef(Item):
    name: str
    params: tuple[Param, ...]
    ret: AnyTypeExpr | None
    body: Block
    attrs: tuple[Attribute, ...] = ()
    span: Span = _span()
    name_span: Span = field(default=_NOSPAN, compare=False, repr=False)


@_node
class KernelDef(Item):
    name: str
    params: tuple[Param, ...]
    body: Block
    attrs: tuple[Attribute, ...] = ()
    span: Span = _span()
    name_span: Span = field(default=_NOSPAN, compare=False, repr=False)


@_node
class Module(Node):
    items: tuple[Item, ...]
    file: str = field(default="<input>", compare=False)
    span: Span = _span()
