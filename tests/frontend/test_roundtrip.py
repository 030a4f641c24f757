"""The printer's output re-parses to an equal AST: on every example, every stdlib module, and
on randomly generated programs."""

import pathlib
import random

import pytest

from tilelang.frontend import ast as A
from tilelang.frontend.parser import keywords, parse
from tilelang.frontend.printer import print_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("stdlib/**/*.tile"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_examples_round_trip(path):
    m = parse(path.read_text(), str(path))
    text = print_module(m)
    again = parse(text, "printed.tile")
    assert again == m
    assert print_module(again) == text  # the printer is a fixed point


class Gen:
    """A random program generator covering every expression, statement and item form."""

    NAMES = ["a", "b", "x1", "acc", "_t", "N"]
    BIN = ["+", "-", "*", "/", "%", "**", "@", "&", "|", "^", "<<", ">>"]
    CMP = ["==", "!=", "<", "<=", ">", ">="]

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def name(self):
        return self.r.choice(self.NAMES)

    def expr(self, depth=0):
        r = self.r
        if depth > 3 or r.random() < 0.25:
            k = r.randrange(7)
            if k == 0:
                return A.IntLit(r.choice([0, 1, 7, 255, 2**40, 10**30]))
            if k == 1:
                return A.FloatLit(r.choice([0.5, 1e-5, 3.0, 1e20, float("inf"), float("nan")]))
            if k == 2:
                return A.BoolLit(r.random() < 0.5)
            if k == 3:
                return A.StrLit(r.choice(["", "x = {}", 'q"\\\n\t', "\x01z"]))
            return A.Name(self.name())
        k = r.randrange(11)
        d = depth + 1
        if k == 0:
            return A.BinOp(r.choice(self.BIN), self.expr(d), self.expr(d))
        if k == 1:
            return A.UnaryOp(r.choice(["-", "+", "~", "not"]), self.expr(d))
        if k == 2:
            return A.Compare(r.choice(self.CMP), self.expr(d), self.expr(d))
        if k == 3:
            return A.BoolOp(r.choice(["and", "or"]), self.expr(d), self.expr(d))
        if k == 4:
            return A.IfExpr(self.expr(d), self.expr(d), self.expr(d))
        if k == 5:
            args = [A.Arg(self.expr(d)) for _ in range(r.randrange(3))]
            args += [A.Arg(self.expr(d), n) for n in r.sample(["axis", "shape", "padding"],
                                                              r.randrange(3))]
            return A.Call(self.expr(d) if r.random() < 0.2 else A.Name(self.name()), tuple(args))
        if k == 6:
            return A.Index(self.expr(d), tuple(self.expr(d) for _ in range(r.randrange(1, 3))))
        if k == 7:
            return A.Member(self.expr(d), r.choice(["shape", "dtype", "astype"]))
        if k == 8:
            return A.TupleExpr(tuple(self.expr(d) for _ in range(r.randrange(0, 4))))
        return A.Name(self.name())

    def type(self):
        r = self.r
        k = r.randrange(4)
        if k == 0:
            return A.TypeExpr(r.choice(["f32", "i8", "bf16"]))
        if k == 1:
            return A.TypeExpr("Tile", (A.Name("f32"), A.IntLit(128), A.Name("N")))
        if k == 2:
            return A.TypeExpr("Array", (A.Name("f16"), A.IntLit(2)))
        return A.TupleTypeExpr(tuple(A.TypeExpr("i32") for _ in range(r.randrange(0, 3))))

    def block(self, depth):
        return A.Block(tuple(self.stmt(depth + 1) for _ in range(self.r.randrange(0, 4))))

    def stmt(self, depth=0):
        r = self.r
        k = r.randrange(12 if depth < 3 else 6)
        if k == 0:
            names = tuple(r.sample(self.NAMES, r.randrange(1, 3)))
            is_tuple = len(names) > 1 or r.random() < 0.2
            return A.Let(r.random() < 0.5, names, is_tuple,
                         self.type() if r.random() < 0.3 else None, self.expr())
        if k == 1:
            return A.Assign(A.Name(self.name()), self.expr())
        if k == 2:
            return A.AugAssign(A.Name(self.name()), r.choice(self.BIN), self.expr())
        if k == 3:
            return A.ExprStmt(self.expr())
        if k == 4:
            return r.choice([A.Break(), A.Continue()])
        if k == 5:
            return A.Return(self.expr() if r.random() < 0.7 else None)
        if k == 6:
            orelse = None
            if r.random() < 0.5:
                orelse = self.block(depth) if r.random() < 0.5 else A.If(
                    self.expr(), self.block(depth), None)
            return A.If(self.expr(), self.block(depth), orelse)
        if k == 7:
            return A.While(self.expr(), self.block(depth))
        if k == 8:
            return A.For(self.name(), self.expr(), self.block(depth), r.random() < 0.3)
        return self.block(depth)

    def item(self):
        r = self.r
        k = r.randrange(5)
        if k == 0:
            return A.Import(("std", "math"), r.choice([None, "m"]))
        if k == 1:
            return A.FromImport(("std", "nn"), (A.ImportName("x"), A.ImportName("y", "z")))
        if k == 2:
            return A.ConstDef("C", self.type() if r.random() < 0.5 else None, self.expr())
        params = tuple(A.Param(self.name(), self.type() if r.random() < 0.7 else None,
                               self.expr() if r.random() < 0.3 else None, r.random() < 0.3)
                       for _ in range(r.randrange(0, 4)))
        attrs = tuple(A.Attribute(r.choice(["launch", "host"]),
                                  r.choice([None, (), (A.Arg(self.expr(), "maxnreg"),)]))
                      for _ in range(r.randrange(0, 2)))
        if k == 3:
            return A.FnDef("f", params, self.type() if r.random() < 0.5 else None,
                           self.block(0), attrs)
        return A.KernelDef("k", params, self.block(0), attrs)

    def module(self):
        return A.Module(tuple(self.item() for _ in range(self.r.randrange(1, 6))))


def test_generator_avoids_keywords():
    assert not set(Gen.NAMES) & keywords()


@pytest.mark.parametrize("seed", range(300))
def test_generated_programs_round_trip(seed):
    m = Gen(seed).module()
    text = print_module(m)
    assert parse(text, "gen.tile") == m, text
