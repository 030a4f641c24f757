"""`tilec tune`: autotune one kernel's `const` values from the shell.

    tilec tune examples/matmul.tile --kernel matmul --arg a=randn:512x512 \\
        --arg b=randn:512x512 --arg c=zeros:512x512 \\
        --space BM=64,128 --space BN=64,128 --grid "cdiv(512,BM),cdiv(512,BN)"

The arguments are made as for `tilec run` (KIND:SHAPE, FILE.npy, scalars). `--space NAME=V,...`
(repeatable) spans the product of values; `--config NAME=V,NAME=V` (repeatable) adds one
configuration. `--grid` is one to three expressions over the const names, the scalar
arguments, integers, + - * // %, min, max, cdiv and dim(array, axis). Progress goes to
stderr, the table and the choice to stdout (`--json`: one JSON object). Exit status 0, 1
when the input has errors or no configuration runs, 2 when the command line is wrong.
"""

from __future__ import annotations

import ast
import json
import os
import sys

from tilelang.diagnostics import TileError


def _parser():
    from tilelang.runtime.cli_run import _Parser
    p = _Parser(prog="tilec tune", description="Autotune a kernel's const parameters over "
                "configurations, for one launch key (the arguments' shapes and dtypes).")
    p.add_argument("file", metavar="FILE.tile")
    p.add_argument("--kernel", required=True, metavar="NAME")
    p.add_argument("--grid", required=True, metavar="EXPR[,EXPR[,EXPR]]",
                   help="blocks per grid dimension: expressions over const names, scalar "
                        "arguments and dim(ARRAY, AXIS), e.g. "
                        "\"cdiv(dim(c,0),BM),cdiv(dim(c,1),BN)\"")
    p.add_argument("--space", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="values of one const parameter (the configurations are the product)")
    p.add_argument("--config", action="append", default=[], metavar="NAME=V,NAME=V",
                   help="one configuration")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="an argument, as for `tilec run`: KIND:SHAPE, FILE.npy or a scalar")
    p.add_argument("--shape", metavar="SHAPE", help="shape of every array not given by --arg")
    p.add_argument("--backend", choices=("cuda", "emulator"),
                   help="default: TILELANG_BACKEND, else cuda")
    p.add_argument("--arch", metavar="TARGET", help="default: the device's")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR")
    p.add_argument("-O", dest="opt", type=int, choices=range(4), default=3, metavar="LEVEL")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=float, default=25.0, metavar="MS")
    p.add_argument("--rep", type=float, default=100.0, metavar="MS")
    p.add_argument("--no-check", action="store_true",
                   help="on the emulator, do not check each configuration's answer")
    p.add_argument("--force", action="store_true",
                   help="tune again even when a result is stored")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the kernel cache and the stored results")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes compiling the configurations ahead (default: up to 8; 0: "
                        "none)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


class _Usage(Exception):
    pass


def _value(text: str, where: str, name: str = ""):
    t = text.strip()
    if name == "precision" and t in ("ieee", "fast", "approx"):
        return t                   # the math mode, a compile option (docs/numerics.md)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    try:
        return int(t, 0)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        raise _Usage(f"{where}: `{text}` is not a number or true/false") from None


def _space(items: list[str]) -> dict:
    out: dict = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier() or not values.strip():
            raise _Usage(f"--space expects NAME=V1,V2,..., got `{item}`")
        if name in out:
            raise _Usage(f"--space {name} is given twice")
        out[name] = [_value(v, f"--space {name}", name) for v in values.split(",")
                     if v.strip()]
    return out


def _configs(items: list[str]) -> list[dict]:
    out = []
    for item in items:
        cfg: dict = {}
        for part in item.split(","):
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq or not name.isidentifier() or not value.strip():
                raise _Usage(f"--config expects NAME=V,NAME=V, got `{item}`")
            if name in cfg:
                raise _Usage(f"--config `{item}` gives {name} twice")
            cfg[name] = _value(value, f"--config {name}", name)
        out.append(cfg)
    return out


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
           ast.Mod: lambda a, b: a % b}
_FUNCS = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}


def grid_function(text: str):
    """`--grid` as a function of meta: 1 to 3 integer expressions (no Python is run: only
    numbers, names, + - * // %, unary -, and the calls cdiv, min, max, dim(array, axis))."""
    parts = [t for t in _split_top(text)]
    if not 1 <= len(parts) <= 3 or any(not t.strip() for t in parts):
        raise _Usage(f"--grid takes 1 to 3 comma-separated expressions, got `{text}`")
    trees = []
    for t in parts:
        try:
            tree = ast.parse(t.strip(), mode="eval").body
        except SyntaxError:
            raise _Usage(f"--grid: `{t.strip()}` is not an expression") from None
        _check(tree, t.strip())
        trees.append(tree)

    def grid(meta):
        return tuple(_eval(tr, meta, text) for tr in trees)
    return grid


def _split_top(text: str) -> list[str]:
    """`8x4` or `8,4` (sizes), else the expressions between top-level commas."""
    import re
    if re.fullmatch(r"\s*\d+(\s*[x,]\s*\d+){0,2}\s*", text):
        return re.split(r"[x,]", text)
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _check(node, text: str) -> None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return
    if isinstance(node, ast.Name):
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        _check(node.left, text)
        _check(node.right, text)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand, text)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "dim" and not node.keywords and len(node.args) == 2 and \
            isinstance(node.args[0], ast.Name):
        _check(node.args[1], text)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in _FUNCS and not node.keywords and len(node.args) >= 1:
        for a in node.args:
            _check(a, text)
        return
    raise _Usage(f"--grid: `{text}` may use integers, const and scalar names, + - * // %, "
                 "cdiv(a, b), min, max and dim(array, axis) only")


def _eval(node, meta: dict, text: str) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in meta:
            raise _Usage(f"--grid `{text}`: `{node.id}` is no const or scalar of the kernel")
        v = meta[node.id]
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Usage(f"--grid `{text}`: `{node.id}` is not an integer")
        return v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, meta, text), _eval(node.right, meta, text)
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0:
            raise _Usage(f"--grid `{text}` divides by zero")
        return _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, meta, text)
        return -v if isinstance(node.op, ast.USub) else v
    if node.func.id == "dim":
        name = node.args[0].id
        shape = meta.get("__shapes__", {}).get(name)
        if shape is None:
            raise _Usage(f"--grid `{text}`: `{name}` is no array argument of the kernel")
        axis = _eval(node.args[1], meta, text)
        if not 0 <= axis < len(shape):
            raise _Usage(f"--grid `{text}`: `{name}` has {len(shape)} "
                         f"dimension{'s' if len(shape) != 1 else ''}, not an axis {axis}")
        return int(shape[axis])
    args = [_eval(a, meta, text) for a in node.args]
    if node.func.id == "cdiv":
        if len(args) != 2:
            raise _Usage(f"--grid `{text}`: cdiv takes two arguments")
        if args[1] == 0:
            raise _Usage(f"--grid `{text}` divides by zero")
    return _FUNCS[node.func.id](*args)


def main(argv: list[str]) -> int:
    p = _parser()
    args = p.parse_args(argv)
    from tilelang.runtime.cli_run import (_Usage as RunUsage, _arg_specs, _defines, _dims,
                                          _make_args)
    try:
        grid = grid_function(args.grid)
        space = _space(args.space)
        configs = _configs(args.config)
        if not space and not configs:
            raise _Usage("give the configurations: --space NAME=V1,V2 or --config NAME=V,...")
        default_shape = _dims(args.shape, "--shape", 0) if args.shape else None
        specs = _arg_specs(args.arg)
        defines = _defines(args.defines)
        tuned_names = set(space) | {n for c in configs for n in c}
        both = tuned_names & set(defines)
        if both:
            raise _Usage(f"-D {sorted(both)[0]} fixes a const that --space/--config tunes")
        for d in args.include:
            if not os.path.isdir(d):
                raise _Usage(f"-I {d}: the folder does not exist")
        if args.seed < 0:            # NumPy's generators take non-negative seeds only
            raise _Usage(f"--seed must be a non-negative integer, got {args.seed}")
        if args.workers is not None and args.workers < 0:
            raise _Usage("--workers is a number of processes, at least 0")
        for name, v in (("--warmup", args.warmup), ("--rep", args.rep)):
            if not v >= 0:
                raise _Usage(f"{name} is a time in ms, at least 0")
        from tilelang.targets import TARGETS
        if args.arch is not None and args.arch not in TARGETS:
            raise _Usage(f"--arch {args.arch}: not a supported target; use one of "
                         f"{', '.join(TARGETS)}")
    except (_Usage, RunUsage) as e:
        p.error(str(e))
    import numpy as np

    from tilelang.runtime.module import compile as compile_module, get_backend

    from .space import config_text
    from .tuner import autotune
    try:
        backend = get_backend(args.backend)
        mod = compile_module(args.file, arch=args.arch, defines=defines or None,
                             include_dirs=args.include, opt_level=args.opt, backend=backend,
                             cache=not args.no_cache)
        kernel = getattr(mod, args.kernel)
        for n in tuned_names:
            if n not in {q.name for q in kernel.info.const_params} and n != "precision":
                consts = ", ".join(q.name for q in kernel.info.const_params) or "none"
                p.error(f"kernel `{kernel.name}` has no const parameter `{n}` (its const "
                        f"parameters: {consts})")
        try:
            kargs = _make_args(kernel, specs, default_shape, backend,
                               np.random.default_rng(args.seed))
        except RunUsage as e:
            p.error(str(e))
        if backend.name == "emulator":
            kargs = [a.numpy() if type(a).__name__ == "DeviceArray" and
                     a.dtype not in ("bf16", "f8e4m3", "f8e5m2") else a for a in kargs]
        write = None if args.quiet else (lambda line: (sys.stderr.write(line + "\n"),
                                                       sys.stderr.flush()))
        tuned = autotune(kernel, configs or None, space=space or None, grid=_grid(grid),
                         warmup=args.warmup, rep=args.rep, check=not args.no_check,
                         cache=not args.no_cache, progress=write or False,
                         workers=args.workers)
        try:
            res = tuned.tune(kargs, force=args.force)
        except _Usage as e:
            p.error(str(e))
    except TileError as e:
        from tilelang.runtime.cli_run import report
        return report(e)
    out = sys.stdout
    if args.json:
        out.write(json.dumps({**res.to_json(), "cached": res.cached}, sort_keys=True) + "\n")
        return 0
    unit = "ms" if res.metric == "ms" else "emulator cost"
    out.write(f"kernel    {kernel.info.show()}\n")
    out.write(f"device    {res.key['device']}, target {res.key['target']}\n")
    out.write("key       " + ", ".join(f"{n}: {d}[{'x'.join(map(str, s))}]"
                                       for n, (d, s) in res.key["arrays"].items())
              + "".join(f", {n}={v}" for n, v in res.key["scalars"].items()) + "\n")
    out.write(res.table() + "\n")
    v = res.value
    shown = "" if v is None else (f"{v:.4f} ms" if res.metric == "ms" else f"cost {v:.0f}")
    out.write(f"best      {config_text(res.config)}  ({shown}, by {unit}"
              + (", stored before" if res.cached else f", tuned in {res.seconds:.1f} s")
              + ")\n")
    return 0


def _grid(fn):
    """The grid function with only what an expression may use: const values and scalar
    arguments by name, and the arrays' shapes for dim()."""
    def grid(meta):
        names = {k: v for k, v in meta.items() if isinstance(v, (int, float, bool))}
        names["__shapes__"] = {k: tuple(v.shape) for k, v in meta.items()
                               if hasattr(v, "shape") and not isinstance(v, (int, float))}
        return fn(names)
    return grid
