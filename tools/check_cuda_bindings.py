#!/usr/bin/env python3
"""Does the installed cuda-bindings have every driver name the project uses, with the arity
the project calls it with?

    python3 tools/check_cuda_bindings.py [FILE.py ...]

Reads the project's Python sources (default: tilelang/, benchmarks/, tests/, tools/), finds
every `drv.NAME` / `driver.NAME` attribute (functions, types, enums and their members such as
`CUresult.CUDA_SUCCESS`) and every call `drv.cuXxx(...)`, and checks them against
`cuda.bindings.driver` of the interpreter that runs it: the name must exist, and a call's
positional argument count must match the parameters in the binding's signature (cuda-bindings
writes it on the first line of each function's docstring). Run it under cuda-bindings 12.x
and 13.x to learn whether the runtime works on both; no GPU is needed (nothing is called).
Exit status 1 lists what is missing or called with the wrong number of arguments.
"""

from __future__ import annotations

import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("tilelang", "benchmarks", "tests", "tools")
# names that hold cuda.bindings.driver in the project's sources
ALIASES = {"drv", "driver", "_drv"}
# modules whose `driver` is something else (tilelang.driver: the compiler's entry point)
OTHER_DRIVER = re.compile(r"^\s*(import tilelang\.driver as driver|from tilelang import driver"
                          r"|import tilelang\.driver)", re.M)
# stand-ins of the tests that are not the driver (their own attributes)
NOT_DRIVER = {"launches", "calls", "thread_ctx", "fail_next", "mem", "last_params_addr"}


def sources(paths=None) -> list[str]:
    if paths:
        return list(paths)
    out = []
    for folder in FOLDERS:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            out += [os.path.join(dirpath, f) for f in files if f.endswith(".py")]
    return sorted(out)


def uses(path: str) -> list[tuple[str, int | None, int]]:
    """(dotted name under the driver, positional argument count of a call or None, line)."""
    text = open(path, encoding="utf-8").read()
    if "cuda.bindings" not in text and "drv." not in text:
        return []
    tree = ast.parse(text, path)
    out = []
    skip_driver = bool(OTHER_DRIVER.search(text))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if not isinstance(base, ast.Name) or base.id not in ALIASES:
                # self.drv.X / backend.drv.X / timer.drv.X
                if not (isinstance(base, ast.Name) and chain[-1] == "drv" and len(chain) > 1):
                    continue
                chain = chain[:-1]
            elif base.id == "driver" and skip_driver:
                continue
            name = ".".join(reversed(chain))
            if name.split(".")[0] in NOT_DRIVER or not re.match(r"^(cu|CU)", name):
                continue
            out.append((name, None, node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            base = f.value
            direct = isinstance(base, ast.Name) and base.id in ALIASES and not (
                base.id == "driver" and skip_driver)
            via = isinstance(base, ast.Attribute) and base.attr == "drv"
            if (direct or via) and f.attr.startswith("cu") and \
                    not any(isinstance(a, ast.Starred) for a in node.args):
                out.append((f.attr, len(node.args) + len(node.keywords), node.lineno))
    return out


def arity(fn) -> int | None:
    """Parameters of a binding from its docstring's first line `name(a, b: T, ...)`."""
    first = (getattr(fn, "__doc__", None) or "").strip().splitlines()
    m = re.match(r"^\w+\((.*)\)\s*$", first[0]) if first else None
    if m is None:
        return None
    inner = m.group(1).strip()
    if not inner:
        return 0
    depth, count = 0, 1
    for ch in inner:                           # commas inside [...] belong to a type
        depth += ch in "[(" and 1 or 0
        depth -= ch in "])" and 1 or 0
        count += ch == "," and depth == 0
    return count


def check(paths=None) -> list[str]:
    from cuda.bindings import driver as drv
    problems, seen, missing = [], set(), set()
    for path in sources(paths):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(os.path.join("tests", "runtime", "test_rt_cuda_mock")):
            continue                           # the recording stand-in's own fakes
        for name, nargs, line in uses(path):
            key = (name, nargs)
            if key in seen:
                continue
            seen.add(key)
            obj, ok = drv, True
            for part in name.split("."):
                if not hasattr(obj, part):
                    if name not in missing:
                        missing.add(name)
                        problems.append(f"{rel}:{line}: cuda.bindings.driver has no `{name}`")
                    ok = False
                    break
                obj = getattr(obj, part)
            if ok and nargs is not None:
                want = arity(obj)
                if want is not None and want != nargs:
                    problems.append(f"{rel}:{line}: `{name}` takes {want} arguments here, "
                                    f"the call passes {nargs}")
    return problems


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        from cuda.bindings import __version__ as version
    except ImportError as e:
        print(f"cuda-bindings is not importable: {e}", file=sys.stderr)
        return 1
    problems = check(argv or None)
    for p in problems:
        print(p)
    print(f"cuda-bindings {version}: " + ("every name and call shape the project uses exists"
                                           if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
