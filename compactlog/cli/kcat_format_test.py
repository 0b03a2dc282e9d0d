"""kcat's -f format: tokens and escapes as kcat 1.7 prints them (checked against kcat itself:
``\\x41BC`` is the byte 0xBC, ``\\101`` decimal 101, ``\\0x41`` hex 0x41)."""

from __future__ import annotations

import pytest

from .kcat_format import FormatError, parse, unescape


def render(fmt: str, **kw) -> bytes:
    rec = {"topic": "t", "partition": 2, "offset": 7, "timestamp": 1700000000000, "key": b"k1",
           "value": b"hello", "headers": [("a", b"1"), ("b", None), ("c", b"")]}
    rec.update(kw)
    return parse(fmt).render(**rec)


def test_every_token():
    assert render("%t %p %o %k %K %s %S %T %h %%\\n") == \
        b"t 2 7 k1 2 hello 5 1700000000000 a=1,b=NULL,c= %\n"
    assert render("%R") == b"\x00\x00\x00\x05"


def test_null_and_empty_keys_and_values():
    assert render("[%k|%K|%s|%S|%R]", key=None, value=None) == b"[|-1||-1|\xff\xff\xff\xff]"
    assert render("[%k|%K|%s|%S]", key=b"", value=b"") == b"[|0||0]"
    assert render("%h", headers=[]) == b"" and render("%h", headers=None) == b""
    assert render("%T", timestamp=-1) == b"-1"


@pytest.mark.parametrize("text, expected", [
    ("a\\tb\\rc\\n", b"a\tb\rc\n"),
    ("\\x41BC", b"\xbc"),            # strtoul takes every hex digit; the low byte is kept
    ("\\x41", b"A"),
    ("\\101", b"e"),                 # decimal: no leading 0
    ("\\0101", b"A"),                # octal
    ("\\0x41", b"A"),                # hex after 0x
    ("\\0", b"\x00"),
    ("\\q\\\\", b"q\\"),             # any other character stands for itself
    ("end\\", b"end\\"),             # a backslash at the end is kept
    ("\\xg", b"xg"),
    ("é", "é".encode("utf-8")),
])
def test_escapes(text, expected):
    assert unescape(text) == expected


@pytest.mark.parametrize("fmt, words", [
    ("%e", "unsupported formatter %e"),
    ("%s %", "a % at the end"),
])
def test_refused_formats(fmt, words):
    with pytest.raises(FormatError) as e:
        parse(fmt)
    assert words in str(e.value)


def test_literals_are_merged():
    assert parse("a%%b\\n%s").parts == (("lit", b"a%b\n"), ("s", b""))
