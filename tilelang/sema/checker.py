"""The semantic checker: names, scopes, types, shapes, constants, control flow, functions,
imports, kernel parameters and `@launch` keys.

It walks each kernel as an abstract interpreter: every expression evaluates to an `ArgInfo`
(type, constant value, span), the form the built-in registry's typing rules take, so `a + b`,
`load(...)` and `x.astype(f16)` are typed by the one registry entry each. A generic `fn` is
checked again for each call signature (it is inlined there), which is also how recursion is
found. Errors are collected per statement; an expression that failed gets the error type,
which silences the errors that would only follow from it.

Decisions (language reference §Names, §Constants):
- `let` binds a value that never changes; a `let` of a constant expression stays a constant
  (loose constants stay loose). `var` may be re-bound; its dtype and shape are fixed by its
  first value (a loose constant takes the default dtype: i32 or f32) and every re-binding must
  keep them, so loop-carried values have one type.
- A name may be shadowed by a later `let`/`var`, in the same or an inner block.
- A `const` kernel parameter acts as the literal it is replaced by (docs/language.md
  §10.2, "`const` parameters"): its value is checked against the declared type, then it is a loose constant.
  Without a value (no default, no -D) it is symbolic: shapes may use it, and what needs its
  value is checked at specialization (a note says so).
- An `if` on a constant condition checks only the branch taken (like `static if`), so code
  guarded by a const parameter may use shapes only valid when the guard holds.
"""

from __future__ import annotations

from collections.abc import Collection

from ..diagnostics import Diagnostic, Severity, Span, TileError, register_codes
from ..frontend import ast
from ..frontend.imports import ModuleLoader
from ..options import CompileOptions
from .check_combine import CombineChecks
from .check_context import BindingRecord, TypedProgram
from .check_decl import DeclarationChecks
from .check_expr import ExpressionChecks
from .check_stmt import StatementChecks
from .values import ModuleInfo

register_codes({
    "E0261": "this construct cannot be compiled yet",  # also ir/build.py's: check = compile
    "E0201": "unknown name",
    "E0202": "a top-level name is defined twice",
    "E0203": "assignment to a name that is not a `var`",
    "E0204": "a `var` re-bound with another dtype or shape",
    "E0205": "invalid assignment target",
    "E0206": "a tuple pattern does not match the value",
    "E0210": "`break` or `continue` outside a loop",
    "E0211": "`return` with a value in a kernel",
    "E0212": "`for` does not iterate over `range(...)`",
    "E0213": "`range` step is not strictly positive",
    "E0214": "`static for` is not bounded by constants or has too many iterations",
    "E0215": "returns of one function disagree in type",
    "E0216": "a kernel or function is too large once `static for` is unrolled and calls inlined",
    "E0220": "a kernel is called",
    "E0221": "unknown member",
    "E0222": "a subscript that does not fit the value (one integer or slice per axis, in range)",
    "E0223": "a value is not callable",
    "E0224": "wrong arguments to a function",
    "E0230": "recursive call",
    "E0240": "invalid kernel parameter",
    "E0241": "tile-only operation in a @host function",
    "E0242": "invalid @host function signature",
    "E0243": "invalid `const` parameter value",
    "E0246": "an optional array is used where its specialization passes `None`",
    "E0247": "a list of arrays is used in a way it cannot be",
    "E0248": "rank() or world_size() in a kernel without a symmetric array",
    "E0250": "unknown or misplaced attribute",
    "E0320": "unknown type",
    "E0321": "a value does not match its declared type",
    "E0322": "a condition is not a bool scalar",
    "E0410": "a `const` item is not a constant expression",
    "W0201": "unused variable",
    "W0202": "an expression's value is unused",
    "N0201": "checking stopped where a const parameter's value is needed",
})


class Checker(DeclarationChecks, StatementChecks, ExpressionChecks, CombineChecks):
    """The semantic checker, assembled from its three parts (check_decl.py, check_stmt.py,
    check_expr.py; each calls the others through `self`), and the public base of the IR
    builder (tilelang/ir/build.py), which walks checked source the same way.

    A subclass extends the walk by overriding these methods and calling `super()` (docs/ir.md,
    "Building IR from source"):
    - declarations: `check_kernel`, `kernel_param`, `const_param_value`, `dtype_param_value`,
      `check_fn_alone`, `instantiate`;
    - statements: `block`, `stmts`, `stmt`, `assign`, `fix_var_type`, `if_stmt`, `else_part`,
      `for_body`, `while_stmt`, `return_stmt`;
    - expressions: `call_builtin`, `member`, `combine_fn` and `call_combine` (a built-in's
      function argument, check_combine.py).
    It may call `expr`, `condition`, `coerce`, `resolve_type`, `declare_local`, `child`,
    `report` and `forget_instances`, and read `options`, `diags`, `error_count` and
    `call_stack` (the functions being inlined, innermost last). `NeedsValue` and `TooLarge`
    (check_context.py) are the exceptions a walk may end with. Everything else is the
    checker's own."""

    def __init__(self, options: CompileOptions | None = None):
        options = options if options is not None else CompileOptions()
        self.options = options
        self.loader = ModuleLoader(list(options.include_dirs))
        self.defines = options.define_map()
        self.target = options.target
        self.diags: list[Diagnostic] = []
        self._seen: set = set()
        self.records: list[BindingRecord] = []
        self._record_keys: set = set()
        self.call_stack: list[tuple[ast.FnDef, Span | None]] = []
        self.instances: dict = {}
        self.instance_cost: dict = {}  # statements one check of each instance walked
        self.modules: dict[str, ModuleInfo] = {}
        self.statements = 0  # eighths of statements walked in the current kernel or function
        self.in_body = False  # expressions are charged only inside a body being walked
        self.only_kernels: frozenset[str] | None = None   # check_module's `kernels`

    # ---- diagnostics ----
    def report(self, diags) -> None:
        for d in diags:
            # An error is reported once per place: a generic `fn` checked again for each call
            # signature (or a `static for` body for each iteration) fails at the same span
            # with the types of each instance in the message; the first says it all.
            key = (d.code, d.span) if d.severity is Severity.ERROR and d.span is not None \
                else (d.code, d.span, d.message)
            if key in self._seen:
                continue
            self._seen.add(key)
            self.diags.append(d)

    def warn(self, code: str, message: str, span: Span | None, help: str | None = None,
             label: str | None = None) -> None:
        self.report([Diagnostic(Severity.WARNING, code, message, span, label, help)])

    @property
    def error_count(self) -> int:
        return sum(d.severity is Severity.ERROR for d in self.diags)

    def forget_instances(self) -> None:
        """Drop the checked instances of functions (kept per call signature), so that the
        next call of each is walked again: the IR builder inlines every call."""
        self.instances.clear()


def check_module(module: ast.Module, options: CompileOptions,
                 kernels: Collection[str] | None = None
                 ) -> tuple[TypedProgram, list[Diagnostic]]:
    """Check a parsed module (the driver's entry point). Returns the typed program and every
    diagnostic (errors, warnings, notes); raises nothing for user mistakes. With `kernels`
    (a launch compiles one kernel with its own `const` values, docs/python-api.md) the
    other kernels are declared but not walked: their errors under those values are not
    the launched kernel's."""
    checker = Checker(options)
    checker.only_kernels = None if kernels is None else frozenset(kernels)
    try:
        program = checker.check_root(module)
    except TileError as e:
        checker.report(e.diagnostics)
        program = TypedProgram(ModuleInfo(module.file, module.file, module))
    return program, checker.diags
