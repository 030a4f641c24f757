"""The canonical layout of a token stream (see `tilelang.fmt`).

The tokens are grouped by their brackets: blocks (`{ }`) hold statements, bracket groups
(`( )`, `[ ]`) hold comma-separated elements. A statement is written on one line when it fits
in `WIDTH` columns and holds no comment that must end a line; otherwise its longest bracket
group (and every group holding such a comment) is written one element per line, each element
followed by a comma, and the rest of the statement is laid out again the same way. The layout
depends only on the tokens and on where comments and blank lines stand, never on the other
line breaks of the input: that is what makes it canonical and idempotent. Comments after the
code of consecutive lines are aligned in one column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tokens import Tok

WIDTH = 100
INDENT = "    "
_OPEN = {"(": ")", "[": "]"}


class LayoutError(Exception):
    """The tokens do not have the shape of a parsed program (a bug of the formatter)."""


@dataclass
class Group:
    open: Tok
    items: list  # Tok (commas and comments included) and Group
    close: Tok


@dataclass
class Block:
    open: Tok
    open_comments: list[Tok]  # comments on the line of `{`
    entries: list  # Stmt and standalone comment Tok
    close: Tok


@dataclass
class Stmt:
    nodes: list  # Tok, Group, Block
    blank_before: bool
    trailing: list[Tok] = field(default_factory=list)


@dataclass
class _Elem:
    leading: list[Tok] = field(default_factory=list)
    nodes: list = field(default_factory=list)
    comma: Tok | None = None
    trailing: list[Tok] = field(default_factory=list)


# ---- spacing ----------------------------------------------------------------------------------
def mark_spacing(tokens: list[Tok]) -> None:
    """Set `space` (a space goes before the token within a line), `unary`, `call` (a bracket
    that follows an operand: call, index, parameters, generic type) and `attr` on each token."""
    prev: Tok | None = None
    depth = 0  # brackets and braces
    state = "item"  # at the start of a top-level item: "item", "at", "name", "args", "body"
    args_depth = 0
    subscripts: list[bool] = []  # per open bracket: a subscript `x[...]` (slices: `lo:hi`)
    for t in tokens:
        if t.is_comment:
            t.space = True
            continue
        t.unary = t.attr = t.call = False
        if state == "item" and t.text == "@" and depth == 0:
            t.attr, state = True, "at"
        elif state == "at":
            state = "name"
        elif state == "name" and t.text == "(":
            state, args_depth = "args", depth
        elif state == "name" and t.text == "@":
            t.attr, state = True, "at"
        elif state == "name":
            state = "body"
        elif state == "item":
            state = "body"
        if t.text in "+-~" and (prev is None or not prev.ends_operand):
            t.unary = True
        if t.text in _OPEN:
            t.call = prev is not None and prev.ends_operand
        t.space = _space(prev, t, bool(subscripts) and subscripts[-1])
        if t.text in ("(", "[", "{"):
            depth += 1
            subscripts.append(t.text == "[" and t.call)
        elif t.text in (")", "]", "}"):
            depth -= 1
            if subscripts:
                subscripts.pop()
            if state == "args" and depth == args_depth:
                state = "name"
        if depth == 0 and t.text in (";", "}") and state == "body":
            state = "item"
        prev = t


def _space(p: Tok | None, t: Tok, subscript: bool = False) -> bool:
    if subscript and t.text == ":":
        return p is not None and p.text == ","      # `t[i, :]`, `t[lo:hi]`
    if subscript and p is not None and p.text == ":":
        return False
    if p is None or t.text in (")", "]", ",", ";", ".", ":"):
        return False
    if p.text in ("(", "[", ".") or p.attr or p.unary:
        return False
    if t.text in _OPEN:
        return not p.ends_operand
    return True


# ---- structure --------------------------------------------------------------------------------
class _Reader:
    def __init__(self, tokens: list[Tok]):
        self.toks = tokens
        self.i = 0

    def peek(self) -> Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> Tok:
        t = self.peek()
        if t is None:
            raise LayoutError("unexpected end of the token stream")
        self.i += 1
        return t

    def next_code(self) -> Tok | None:
        """The next token that is not a comment."""
        j = self.i
        while j < len(self.toks) and self.toks[j].is_comment:
            j += 1
        return self.toks[j] if j < len(self.toks) else None

    def entries(self, in_block: bool) -> list:
        out: list = []
        while True:
            t = self.peek()
            if t is None:
                if in_block:
                    raise LayoutError("a block is not closed")
                return out
            if t.text == "}" and not t.is_comment:
                if not in_block:
                    raise LayoutError("`}` closes no block")
                return out
            if t.is_comment:
                out.append(self.take())
            else:
                out.append(self.stmt())

    def stmt(self) -> Stmt:
        s = Stmt([], self.peek().blank_before)
        moved: list[Tok] = []  # comments between `}` and `else`: they follow the next `{`
        while True:
            t = self.take()
            if t.is_comment:
                (moved if s.nodes and isinstance(s.nodes[-1], Block) or moved
                 else s.nodes).append(t)
            elif t.text in _OPEN:
                s.nodes.append(self.group(t))
            elif t.text == "{":
                block = self.block(t)
                block.open_comments[:0] = moved
                moved = []
                s.nodes.append(block)
                nxt = self.next_code()
                if nxt is None or nxt.text != "else":
                    break
            elif t.text in (")", "]", "}"):
                raise LayoutError(f"unbalanced `{t.text}` on line {t.line}")
            else:
                if t.text == ";" and s.nodes and isinstance(s.nodes[-1], Tok) \
                        and s.nodes[-1].text == ",":
                    s.nodes.pop()  # `from m import a, b,;` and `return a, b,;`: neutral
                s.nodes.append(t)
                if t.text == ";":
                    break
        while (c := self.peek()) is not None and c.is_comment and not c.own_line:
            s.trailing.append(self.take())
        return s

    def block(self, open_: Tok) -> Block:
        comments = []
        while (c := self.peek()) is not None and c.is_comment and not c.own_line:
            comments.append(self.take())
        entries = self.entries(True)
        return Block(open_, comments, entries, self.take())

    def group(self, open_: Tok) -> Group:
        items: list = []
        while True:
            t = self.take()
            if t.is_comment:
                items.append(t)
            elif t.text in _OPEN:
                items.append(self.group(t))
            elif t.text == _OPEN[open_.text]:
                return Group(open_, items, t)
            elif t.text in (")", "]", "{", "}", ";"):
                raise LayoutError(f"unexpected `{t.text}` inside brackets on line {t.line}")
            else:
                items.append(t)


def structure(tokens: list[Tok]) -> list:
    mark_spacing(tokens)
    return _Reader(tokens).entries(False)


# ---- elements of a bracket group --------------------------------------------------------------
def _elements(g: Group) -> tuple[list[Tok], list[_Elem], list[Tok]]:
    """(comments on the line of the opening bracket, the elements, comments before the
    closing bracket on lines of their own)."""
    head: list[Tok] = []
    elems: list[_Elem] = []
    cur = _Elem()
    for it in g.items:
        if isinstance(it, Tok) and not it.is_comment and it.text == ",":
            _trailing_out(cur)
            cur.comma = it
            elems.append(cur)
            cur = _Elem()
        elif isinstance(it, Tok) and it.is_comment and not cur.nodes:
            if not it.own_line and not cur.leading and elems:
                elems[-1].trailing.append(it)
            elif not it.own_line and not cur.leading and not elems:
                head.append(it)
            else:
                cur.leading.append(it)
        else:
            cur.nodes.append(it)
    _trailing_out(cur)
    if cur.nodes:
        elems.append(cur)
        return head, elems, []
    return head, elems, cur.leading


def _trailing_out(e: _Elem) -> None:
    """Comments at the end of an element follow its comma."""
    k = len(e.nodes)
    while k and isinstance(e.nodes[k - 1], Tok) and e.nodes[k - 1].is_comment:
        k -= 1
    e.trailing[:0] = e.nodes[k:]
    del e.nodes[k:]


def _comma_neutral(g: Group, count: int) -> bool:
    """Whether a trailing comma leaves the program unchanged: in calls, parameter lists,
    indexes and generic types, and in tuples of two or more (`(x,)` is a tuple, `(x)` is not)."""
    return g.open.text == "[" or g.open.call or count >= 2


# ---- flat text --------------------------------------------------------------------------------
def _forced(nodes) -> bool:
    """Whether a comment among `nodes` must end a line."""
    for n in nodes:
        if isinstance(n, Group):
            if _forced(n.items):
                return True
        elif isinstance(n, Tok) and n.is_comment and n.breaks:
            return True
    return False


def _pieces(nodes, out: list) -> None:
    """(space before, text) of each token of `nodes` laid out on one line."""
    after_comment = False
    for n in nodes:
        if isinstance(n, Group):
            out.append((n.open.space or after_comment, n.open.text))
            inner = list(n.items)
            codes = [i for i, x in enumerate(inner) if not (isinstance(x, Tok) and x.is_comment)]
            if codes and isinstance(inner[codes[-1]], Tok) and inner[codes[-1]].text == ",":
                count = sum(1 for x in inner if isinstance(x, Tok) and x.text == ",")
                if _comma_neutral(n, count):
                    del inner[codes[-1]]
            _pieces(inner, out)
            out.append((False, n.close.text))
            after_comment = False
        else:
            out.append((n.space or after_comment, n.text))
            after_comment = n.is_comment


def flat(nodes) -> str:
    pieces: list = []
    _pieces(nodes, pieces)
    return "".join((" " if sp and i else "") + text for i, (sp, text) in enumerate(pieces))


# ---- writing ----------------------------------------------------------------------------------
class Writer:
    def __init__(self, width: int = WIDTH):
        self.width = width
        self.lines: list[str] = []
        self.cur: str | None = None  # the line being written, with its indentation
        self.code_end: int | None = None  # where a comment after the current line's code starts
        self.comment_at: dict[int, int] = {}  # line index -> end of its code (before a comment)
        self.after_comment = False

    def start(self, level: int) -> None:
        if self.cur is None:
            self.cur = INDENT * level

    def end_line(self) -> None:
        if self.cur is not None and self.cur.strip():
            if self.code_end is not None:
                self.comment_at[len(self.lines)] = self.code_end
            self.lines.append(self.cur.rstrip())
        self.cur = None
        self.code_end = None
        self.after_comment = False

    def blank(self) -> None:
        self.end_line()
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    @property
    def at_start(self) -> bool:
        return self.cur is None or not self.cur.strip()

    def put(self, text: str, space: bool, level: int) -> None:
        self.start(level)
        if not self.at_start and (space or self.after_comment):
            self.cur += " "
        self.cur += text
        self.after_comment = False

    def trailing(self, comments: list[Tok], level: int | None = None) -> None:
        """`comments` after the code of the current line, which they end. After a comment that
        must end a line, the others go on lines of their own at `level` (where a comment on a
        line of its own there would go), else at the current line's indentation."""
        ended = False
        for c in comments:
            if ended:
                indent = self.cur[:len(self.cur) - len(self.cur.lstrip())]
                self.end_line()
                self.cur = indent if level is None else INDENT * level
            ended = c.breaks or c.text.startswith("//")
            code = bool(self.cur and self.cur.strip())
            if code and self.code_end is None and "\n" not in c.text:
                self.code_end = len(self.cur)  # where the code of the line ends
            self.cur = (self.cur or "") + ("  " if code else "") + c.text
        if comments:
            self.end_line()

    def align_comments(self) -> None:
        """Comments after the code of consecutive lines start in one column, two spaces after
        the longest code among them (as gofmt does)."""
        run: list[int] = []
        for i in sorted(self.comment_at) + [None]:
            if run and (i is None or i != run[-1] + 1):
                if len(run) > 1:
                    col = max(self.comment_at[k] for k in run) + 2
                    for k in run:
                        line, end = self.lines[k], self.comment_at[k]
                        self.lines[k] = line[:end].ljust(col) + line[end:].lstrip()
                run = []
            if i is not None:
                run.append(i)

    # -- statements
    def entries(self, entries: list, level: int) -> None:
        for i, e in enumerate(entries):
            first = isinstance(e, Tok) and e.blank_before or isinstance(e, Stmt) and e.blank_before
            if i and first:
                self.blank()
            if isinstance(e, Tok):
                self.end_line()
                self.start(level)
                self.cur += e.text
                self.end_line()
            else:
                self.stmt(e, level)

    def stmt(self, s: Stmt, level: int) -> None:
        nodes = s.nodes
        if level == 0:  # each attribute of an item on a line of its own
            while nodes and isinstance(nodes[0], Tok) and nodes[0].text == "@" and nodes[0].attr:
                k = 1  # `@`, its name, its arguments: comments among them stay with them
                while k < len(nodes) and isinstance(nodes[k], Tok) and nodes[k].is_comment:
                    k += 1
                k += 1
                j = k
                while j < len(nodes) and isinstance(nodes[j], Tok) and nodes[j].is_comment:
                    j += 1
                if j < len(nodes) and isinstance(nodes[j], Group):
                    k = j + 1
                self.end_line()
                self.start(level)
                self.run(nodes[:k], level, 0)
                while k < len(nodes) and isinstance(nodes[k], Tok) and nodes[k].is_comment:
                    if nodes[k].own_line:
                        self.end_line()
                        self.start(level)
                    self.trailing([nodes[k]])
                    k += 1
                self.end_line()
                nodes = nodes[k:]
        self.end_line()
        self.start(level)
        run: list = []
        for n in nodes:
            if isinstance(n, Block):
                self.run(run, level, 2)
                run = []
                self.block(n, level)
            else:
                run.append(n)
        if run:
            self.run(run, level, 0)
        self.trailing(s.trailing)
        self.end_line()

    def block(self, b: Block, level: int) -> None:
        self.put("{", True, level)
        if not b.entries and not b.open_comments:
            self.cur += "}"
            return
        self.trailing(b.open_comments, level + 1)
        self.end_line()
        self.entries(b.entries, level + 1)
        self.end_line()
        self.start(level)
        self.cur += "}"

    # -- one statement's tokens
    def run(self, nodes: list, level: int, suffix: int) -> None:
        """Write `nodes` from the current position; `suffix` columns follow them on the line."""
        if not nodes:
            return
        text = flat(nodes)
        self.start(level)
        sep = 0 if self.at_start or not _first_space(nodes) else 1
        if not _forced(nodes) and len(self.cur) + sep + len(text) + suffix <= self.width:
            self.put(text, _first_space(nodes), level)
            return
        # The longest group is wrapped; so is every group holding a comment that ends a line
        # (wrapping can turn an inline comment into one: choosing by length alone keeps the
        # choice the same when the result is formatted again).
        groups = [i for i, n in enumerate(nodes) if isinstance(n, Group) and n.items]
        wrap = max(groups, key=lambda i: len(flat([nodes[i]])), default=None)
        for i, n in enumerate(nodes):
            if i == wrap:
                self.explode(n, level)
                self.run(nodes[i + 1:], level, suffix)
                return
            if isinstance(n, Group):
                if _forced(n.items):
                    self.explode(n, level)
                else:
                    self.put(flat([n]), n.open.space, level)
            elif n.is_comment:
                self.comment(n, level + 1)
            else:
                self.put(n.text, n.space, level)

    def comment(self, c: Tok, level: int) -> None:
        """A comment inside a statement; the statement goes on at `level` after it."""
        if not c.breaks:
            self.put(c.text, True, level)
            self.after_comment = True
            return
        if c.own_line:
            self.end_line()
        self.start(level)
        self.trailing([c])
        self.start(level)

    def explode(self, g: Group, level: int) -> None:
        head, elems, tail = _elements(g)
        self.put(g.open.text, g.open.space, level)
        self.trailing(head, level + 1)
        self.end_line()
        neutral = _comma_neutral(g, len(elems))
        for k, e in enumerate(elems):
            for c in e.leading:
                self.start(level + 1)
                self.trailing([c])
            self.start(level + 1)
            self.run(e.nodes, level + 1, 1)
            if e.comma is not None or neutral:
                self.cur += ","
            self.trailing(e.trailing, level + 1)
            self.end_line()
        for c in tail:
            self.start(level + 1)
            self.trailing([c])
        self.start(level)
        self.cur += g.close.text


def _first_space(nodes) -> bool:
    n = nodes[0]
    return n.open.space if isinstance(n, Group) else n.space


def layout(tokens: list[Tok], width: int = WIDTH) -> str:
    w = Writer(width)
    w.entries(structure(tokens), 0)
    w.end_line()
    w.align_comments()
    return "\n".join(w.lines) + "\n" if w.lines else ""
