"""Records: dataclass-like classes made without the `dataclasses` module.

`@dataclass` compiles an `__init__`, `__repr__`, `__eq__` (and for frozen classes `__hash__`,
`__setattr__`, `__delattr__`) from source text for every class, and importing `dataclasses`
imports `inspect` (and with it `ast`, `dis`, `tokenize`). For the 80-odd classes that
`tilec check` loads that was about half of its start-up. `record` gives a class the same
behaviour from methods written once here and shared by every record class, which costs
a few microseconds per class.

What a record keeps of a dataclass: the fields are the annotated class attributes in order
(those of record base classes first), a class attribute is the field's default, `field()`
spells `default_factory`, `compare=False` and `repr=False`; `__post_init__` runs after
`__init__`; a method the class defines itself is never replaced; `frozen`, `eq` and hashing
follow dataclasses' rules. `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work
on records too: `__dataclass_fields__` is built (importing `dataclasses`) on first use.
`replace` here is the cheap equivalent for code that should not import `dataclasses`.
"""

from __future__ import annotations

from operator import attrgetter

__all__ = ["FrozenInstanceError", "field", "fields_of", "record", "replace"]

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (like `dataclasses.FrozenInstanceError`)."""


class field:  # noqa: N801 - spelled like dataclasses.field, which it stands for
    """A field's options, written as its default: `x: int = field(compare=False)`."""

    __slots__ = ("default", "default_factory", "compare", "repr", "hash")

    def __init__(self, *, default=_MISSING, default_factory=_MISSING, compare: bool = True,
                 repr: bool = True, hash: bool | None = None):  # noqa: A002 - dataclasses'
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.default = default
        self.default_factory = default_factory
        self.compare = compare
        self.repr = repr
        self.hash = compare if hash is None else hash


def fields_of(cls_or_obj) -> tuple[str, ...]:
    """The names of a record's fields, in order."""
    return cls_or_obj._fields


# ---- the shared methods: each reads the per-class tables `record` stores on the class ----

def _init(self, *args, **kwargs):
    cls = self.__class__
    names = cls._fields
    # `object.__setattr__` passes a frozen class's guard and keeps the values inline (reading
    # `__dict__` would make every instance allocate a dict of its own)
    put = _setattr
    if not kwargs and len(args) == len(names):
        for name, value in zip(names, args):
            put(self, name, value)
    else:
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} arguments but {len(args)} "
                            f"were given")
        values = cls._defaults.copy()
        values.update(zip(names, args))
        if kwargs:
            if args and not kwargs.keys().isdisjoint(names[:len(args)]):
                name = next(n for n in names[:len(args)] if n in kwargs)
                raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument "
                                f"{name!r}")
            values.update(kwargs)
        if values.keys() != cls._field_set:
            for name in kwargs:
                if name not in cls._field_set:
                    raise TypeError(f"{cls.__name__}() got an unexpected or repeated "
                                    f"argument {name!r}")
            for name in names:
                if name not in values:
                    factory = cls._factories.get(name)
                    if factory is None:
                        raise TypeError(f"{cls.__name__}() missing argument {name!r}")
                    values[name] = factory()
        for name in names:
            put(self, name, values[name])
    if cls._post_init:
        self.__post_init__()


_setattr = object.__setattr__


def _repr(self) -> str:
    return (f"{self.__class__.__qualname__}("
            + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._shown) + ")")


def _eq(self, other) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self._compare_key
    return key(self) == key(other)


def _hash(self) -> int:
    return hash(self._hash_key(self))


def _key(names: tuple[str, ...]):
    """The tuple of `names`' values of an instance (a tuple also for one name, so that, as in
    dataclasses, an identical NaN still compares equal)."""
    if len(names) > 1:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


# As in dataclasses: an instance of the frozen class itself refuses every attribute, one of a
# plain (undecorated) subclass only the fields.
def _frozen_setattr(self, name, value):
    if self.__class__ is self._frozen_cls or name in self._fields:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self, name):
    if self.__class__ is self._frozen_cls or name in self._fields:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


class _DataclassFields:
    """`__dataclass_fields__` of one record class, built on first use so that the
    `dataclasses` functions accept records while checking a file never imports the module."""

    def __init__(self, cls, frozen: bool, eq: bool, unsafe_hash: bool):
        self.cls, self.frozen, self.eq, self.unsafe_hash = cls, frozen, eq, unsafe_hash

    def __get__(self, obj, owner=None):
        import dataclasses
        cls = self.cls
        ns: dict = {"__annotations__": dict(cls._types)}
        for name in cls._fields:
            kw = {"compare": name in cls._compared, "repr": name in cls._shown,
                  "hash": name in cls._hashed}
            if name in cls._defaults:
                kw["default"] = cls._defaults[name]
            elif name in cls._factories:
                kw["default_factory"] = cls._factories[name]
            ns[name] = dataclasses.field(**kw)
        shadow = dataclasses.dataclass(frozen=self.frozen, eq=self.eq,
                                       unsafe_hash=self.unsafe_hash)(
            type(cls.__name__, (), ns))
        # replace this descriptor by the table itself (and the parameters beside it)
        type.__setattr__(cls, "__dataclass_fields__", shadow.__dataclass_fields__)
        type.__setattr__(cls, "__dataclass_params__", shadow.__dataclass_params__)
        return shadow.__dataclass_fields__


class _DataclassParams:
    """`__dataclass_params__`, built together with the fields."""

    def __init__(self, cls):
        self.cls = cls

    def __get__(self, obj, owner=None):
        self.cls.__dataclass_fields__    # noqa: B018 - builds both tables
        return self.cls.__dict__["__dataclass_params__"]


def record(cls=None, /, *, frozen: bool = False, eq: bool = True, unsafe_hash: bool = False):
    """Make `cls` a record (see the module's docstring); `@record` or `@record(frozen=True)`.
    `unsafe_hash` hashes a class that is not frozen by its compared fields, as dataclasses do:
    for classes whose instances are never changed, where the guard against assignment would
    cost more than the rest of making one (the syntax tree, `Span`)."""
    if cls is None:
        return lambda c: _make(c, frozen, eq, unsafe_hash)
    return _make(cls, frozen, eq, unsafe_hash)


def _make(cls, frozen: bool, eq: bool, unsafe_hash: bool = False):
    own = cls.__dict__
    names: list[str] = []
    types: dict[str, object] = {}
    defaults: dict[str, object] = {}
    factories: dict = {}
    compared: set[str] = set()
    shown: set[str] = set()
    hashed: set[str] = set()
    for base in reversed(cls.__mro__[1:]):
        if "_fields" in base.__dict__ and "_types" in base.__dict__:
            for name in base._fields:
                if name not in types:
                    names.append(name)
                types[name] = base._types[name]
                defaults.pop(name, None)
                factories.pop(name, None)
                if name in base._defaults:
                    defaults[name] = base._defaults[name]
                if name in base._factories:
                    factories[name] = base._factories[name]
                for have, table in ((compared, base._compared), (shown, base._shown),
                                    (hashed, base._hashed)):
                    if name in table:
                        have.add(name)
                    else:
                        have.discard(name)
    # (`cls.__annotations__` is the class's own, never a base's; 3.14 computes it on demand)
    annotations = own["__annotations__"] if "__annotations__" in own else cls.__annotations__
    for name, typ in annotations.items():
        if name not in types:
            names.append(name)
        types[name] = typ
        defaults.pop(name, None)
        factories.pop(name, None)
        spec = own.get(name, _MISSING)
        compare = show = hashed_too = True
        if isinstance(spec, field):
            compare, show, hashed_too = spec.compare, spec.repr, spec.hash
            if spec.default is not _MISSING:
                defaults[name] = spec.default
                setattr(cls, name, spec.default)
            else:
                if spec.default_factory is not _MISSING:
                    factories[name] = spec.default_factory
                delattr(cls, name)
        elif spec is not _MISSING:
            defaults[name] = spec
        for have, on in ((compared, compare), (shown, show), (hashed, hashed_too)):
            if on:
                have.add(name)
            else:
                have.discard(name)

    seen_default = False
    for n in names:
        if n in defaults or n in factories:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}: field {n!r} without a default follows one with "
                            f"a default")
    cls._fields = tuple(names)
    cls._field_set = frozenset(names)
    cls._types = types
    cls._defaults = defaults
    cls._factories = factories
    cls._compared = tuple(n for n in names if n in compared)
    cls._shown = tuple(n for n in names if n in shown)
    cls._hashed = tuple(n for n in names if n in hashed)
    cls._compare_key = staticmethod(_key(cls._compared))
    cls._hash_key = staticmethod(_key(cls._hashed))
    cls._post_init = hasattr(cls, "__post_init__")
    cls.__match_args__ = tuple(names)
    cls.__dataclass_fields__ = _DataclassFields(cls, frozen, eq, unsafe_hash)
    cls.__dataclass_params__ = _DataclassParams(cls)

    def put(name, fn):
        # (a subclass of a record usually inherits the very function: setting a special
        # method on a class costs a few microseconds of slot updates)
        if name not in own and getattr(cls, name, None) is not fn:
            setattr(cls, name, fn)

    put("__init__", _init)
    put("__repr__", _repr)
    if eq:
        put("__eq__", _eq)
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if unsafe_hash or (eq and not explicit_hash):
        wanted = _hash if unsafe_hash or frozen else None
        if getattr(cls, "__hash__", None) is not wanted:
            cls.__hash__ = wanted
    if frozen:
        cls._frozen_cls = cls
        put("__setattr__", _frozen_setattr)
        put("__delattr__", _frozen_delattr)
    return cls


def replace(obj, /, **changes):
    """A copy of the record `obj` with some fields changed (`dataclasses.replace`)."""
    cls = obj.__class__
    names = cls._fields
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    if cls._post_init or cls.__init__ is not _init:
        return cls(**{n: changes[n] if n in changes else getattr(obj, n) for n in names})
    new = object.__new__(cls)     # what `_init` would do, without matching arguments
    for n in names:
        _setattr(new, n, changes[n] if n in changes else getattr(obj, n))
    return new
