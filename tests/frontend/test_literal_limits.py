"""Integer literals of any length end in a value or a diagnostic, never in Python's
int-to-str limit (4,300 digits) or a slow conversion."""

import time

import pytest

from tilelang.diagnostics import TileSyntaxError
from tilelang.frontend.parser import parse


def value(text: str) -> int:
    return parse(f"const X = {text};", "x.tile").items[0].value.value


@pytest.mark.parametrize("digits", [1, 19, 4300, 4301, 4001, 8000, 12345])
def test_long_decimal_literals_convert_exactly(digits):
    text = "7" * digits
    assert value(text) == sum(7 * 10 ** k for k in range(digits))


def test_underscores_and_other_bases_still_work():
    assert value("1_000_000") == 1_000_000
    assert value("0x" + "f" * 5000) == 16 ** 5000 - 1
    assert value("0b" + "1" * 9000) == 2 ** 9000 - 1


def test_too_many_digits_is_a_diagnostic():
    t0 = time.perf_counter()
    with pytest.raises(TileSyntaxError) as e:
        parse("const X = " + "9" * 100_001 + ";", "x.tile")
    assert time.perf_counter() - t0 < 5
    (d,) = e.value.diagnostics
    assert (d.code, d.message, d.help) == (
        "E0108", "this integer literal has 100001 digits, too many for any integer type",
        "no integer type holds more than 64 bits")
    assert (d.span.line, d.span.col, d.span.end_col) == (1, 11, 11 + 100_001)


def test_leading_zeros_on_a_huge_literal_are_quoted_short():
    with pytest.raises(TileSyntaxError) as e:
        parse("const X = 0" + "12345" * 1000 + ";", "x.tile")
    (d,) = e.value.diagnostics
    assert d.message == ("leading zeros are not allowed in the integer "
                         "`01234512345123451234…1234512345`")
    assert d.help == "write `12345123451234512345…1234512345`; hexadecimal is `0x…`, binary `0b…`"


def test_huge_float_literal_is_quoted_short():
    with pytest.raises(TileSyntaxError) as e:
        parse("const X = " + "1" * 400 + ".5;", "x.tile")
    (d,) = e.value.diagnostics
    assert d.message == ("the float literal `11111111111111111111…11111111.5` is too large "
                         "for a double")
