"""`tilelang.record` against `dataclasses`: every class below is made both ways and must behave
the same (construction, defaults, equality, hashing, repr, frozenness, inheritance, the
`dataclasses` functions), and the check path must not import `dataclasses` at all."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import subprocess
import sys

import pytest

from tilelang.record import FrozenInstanceError, field, record, replace


def both(frozen=False, eq=True):
    """The same class body as a record and as a dataclass."""
    def make(body):
        return (record(frozen=frozen, eq=eq)(body(field)),
                dataclasses.dataclass(frozen=frozen, eq=eq)(body(dataclasses.field)))
    return make


def point(f):
    class Point:
        x: int
        y: int = 2
        tags: list = f(default_factory=list)
        note: str = f(default="", compare=False)
        secret: int = f(default=0, repr=False)
    return Point


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the exception's type is what is compared
        return ("raises", type(e).__name__)


@pytest.mark.parametrize("frozen", [False, True])
def test_same_as_dataclass(frozen):
    R, D = both(frozen=frozen)(point)
    for cls in (R, D):
        a, b = cls(1), cls(1, 2, [], "other note", 0)
        assert a == b and not (a != b)
        assert a != cls(1, 3) and a != cls(1, secret=5)
        assert cls(1).tags is not cls(1).tags            # a fresh list each time
        assert (a == (1, 2)) is False
    assert repr(R(1, 5, ["t"], "n", 9)) == repr(D(1, 5, ["t"], "n", 9))
    assert repr(R(1)) == "point.<locals>.Point(x=1, y=2, tags=[], note='')"
    # wrong calls fail alike
    for args, kwargs in [((), {}), ((1, 2, [], "", 0, 9), {}), ((1,), {"x": 2}),
                         ((1,), {"nope": 2})]:
        assert outcome(lambda: R(*args, **kwargs))[0] == "raises"
        assert outcome(lambda: D(*args, **kwargs))[0] == "raises"
    if frozen:
        assert hash(R(1, tags=(), note="a")) == hash(R(1, tags=(), note="b")) \
            == hash(D(1, tags=(), note="c"))
        with pytest.raises(FrozenInstanceError):
            R(1).x = 2
        with pytest.raises(AttributeError):          # what code catching dataclasses' sees
            del R(1).y
        with pytest.raises(FrozenInstanceError):
            R(1).other = 2
    else:
        assert R.__hash__ is None and D.__hash__ is None
        r = R(1)
        r.x = 7
        assert r.x == 7


def test_dataclass_functions_accept_records():
    R, D = both(frozen=True)(point)
    r = R(1, 2, ["a"], "n", 3)
    assert dataclasses.is_dataclass(R) and dataclasses.is_dataclass(r)
    assert [(f.name, f.compare, f.repr) for f in dataclasses.fields(R)] == \
        [(f.name, f.compare, f.repr) for f in dataclasses.fields(D)]
    assert dataclasses.asdict(r) == dataclasses.asdict(D(1, 2, ["a"], "n", 3))
    assert dataclasses.replace(r, y=9) == R(1, 9, ["a"], "n", 3)
    assert R.__dataclass_params__.frozen is True
    assert R.__match_args__ == D.__match_args__


def test_replace():
    R, _ = both(frozen=True)(point)
    r = R(1, 2, ["a"], "n", 3)
    s = replace(r, x=5, note="m")
    assert (s.x, s.y, s.tags, s.note, s.secret) == (5, 2, ["a"], "m", 3)
    assert (r.x, r.note) == (1, "n")
    with pytest.raises(TypeError):
        replace(r, nope=1)


def test_post_init_runs_on_init_and_replace():
    @record(frozen=True)
    class Loose:
        value: object
        kind: str | None = None

        def __post_init__(self):
            if self.kind is None:
                object.__setattr__(self, "kind", type(self.value).__name__)

    assert Loose(1.5).kind == "float"
    assert replace(Loose(1.5), value=2, kind=None).kind == "int"


def test_own_methods_are_kept_and_hash_rules():
    @record(frozen=True, eq=False)
    class Ident:
        a: int

    x = Ident(1)
    assert x == x and x != Ident(1)

    @record(frozen=True)
    class Custom:
        a: float

        def __eq__(self, other):
            return isinstance(other, Custom) and str(self.a) == str(other.a)

        def __hash__(self):
            return hash(str(self.a))

        def __repr__(self):
            return "custom"

    nan = float("nan")
    assert Custom(nan) == Custom(nan) and hash(Custom(nan)) == hash(Custom(nan))
    assert repr(Custom(1.0)) == "custom"

    @record(frozen=True)
    class PartHash:
        key: str
        values: dict = field(hash=False)

    assert PartHash("k", {"a": 1}) != PartHash("k", {"a": 2})
    assert hash(PartHash("k", {"a": 1})) == hash(PartHash("k", {"a": 2}))


def test_inheritance():
    @record(frozen=True)
    class Base:
        a: int
        b: int = 1

    @record(frozen=True)
    class Child(Base):
        c: int = 2
        b: int = 5

    @dataclasses.dataclass(frozen=True)
    class DBase:
        a: int
        b: int = 1

    @dataclasses.dataclass(frozen=True)
    class DChild(DBase):
        c: int = 2
        b: int = 5

    assert Child._fields == tuple(f.name for f in dataclasses.fields(DChild))
    assert (Child(0).a, Child(0).b, Child(0).c) == (DChild(0).a, DChild(0).b, DChild(0).c)
    assert Child(0) != Base(0, 5)                      # different classes never compare equal
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b", "c"]
    assert [f.name for f in dataclasses.fields(Base)] == ["a", "b"]


def test_pickle_and_copy():
    from tilelang.diagnostics import Diagnostic, Severity, Span
    d = Diagnostic(Severity.ERROR, "E0101", "m", Span("f", 1, 2, 1, 3), notes=("n",))
    assert pickle.loads(pickle.dumps(d)) == d
    assert copy.deepcopy(d) == d and copy.copy(d) == d


def test_check_does_not_import_dataclasses():
    probe = ("import json, sys\nfrom tilelang.cli import main\n"
             "status = main(['check', 'examples/softmax.tile'])\n"
             "print(json.dumps([status, 'dataclasses' in sys.modules, 'inspect' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [0, False, False]


def test_unsafe_hash_and_plain_attributes():
    """The syntax tree's and `Span`'s form: hashed by value, fields stored as attributes."""
    @record(unsafe_hash=True)
    class Node:
        name: str
        span: object = field(default=None, compare=False)

    a, b = Node("x", 1), Node("x", 2)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert Node("x") != Node("y")
    assert dataclasses.fields(Node)[1].compare is False
    assert Node.__dataclass_params__.unsafe_hash is True
    # what the fast parser does: make one without `__init__`, set the fields
    c = object.__new__(Node)
    c.name = "x"
    c.span = 3
    assert c == a and hash(c) == hash(a) and repr(c) == "test_unsafe_hash_and_plain_" \
        "attributes.<locals>.Node(name='x', span=3)"


def test_a_field_without_default_after_one_with_is_refused():
    class Bad:
        a: int = 0
        b: int

    with pytest.raises(TypeError):
        record(Bad)
