"""Subscribed-topic regexes: RE2 syntax, whole-name match, INVALID_REGULAR_EXPRESSION, and a
pathological pattern that stays linear."""

from __future__ import annotations

import re
import time

import pytest

from compactlog.coordinator.group.consumer.regex import (InvalidRegularExpressionError, compile_regex, matches,
                                                         resolve, resolved_changed, validate)


def test_whole_name_match():
    assert matches("^t.*", "t") and matches("^t.*", "tx")
    # spec §5 / scenario 14: "^t" alone is "t" only
    assert matches("^t", "t") and not matches("^t", "tx")
    assert re.match("^t", "tx")                      # where Python's re.match would say yes
    assert matches("topic-[0-9]+", "topic-12") and not matches("topic-[0-9]+", "my-topic-12")
    assert matches("(?i)TOPIC", "topic")
    assert matches(r"\p{Greek}+", "αβγ")
    assert matches(r"t\z", "t")


@pytest.mark.parametrize("bad", [
    r"(a)\1",              # backreference
    r"foo(?=bar)",         # lookahead
    r"(?<!x)y",            # lookbehind
    r"a++",                # possessive
    r"(?>a)",              # atomic group
    r"\Z",
    r"\C",                 # C++ RE2 only; RE2/J refuses it
    r"a{1001}",
    "[",
    "(a|b",
    "*",
    r"x{2,1}",
])
def test_invalid_regular_expressions(bad):
    with pytest.raises(InvalidRegularExpressionError) as e:
        validate(bad)
    assert e.value.code == 128
    assert str(e.value).startswith(f"SubscribedTopicRegex `{bad}` is not a valid regular expression: ")
    assert resolve([bad], ["t"]) == {bad: frozenset()}


def test_python_re_accepts_what_re2_refuses():
    for p in (r"(a)\1", r"foo(?=bar)", r"\Z"):
        re.compile(p)


def test_an_escaped_backslash_before_C_is_fine():
    assert matches(r"a\\C", "a\\C")


def test_catastrophic_pattern_is_linear():
    # (a+)+$ on "aaaa...b" backtracks exponentially in Python's re; RE2 does not
    name = "a" * 100_000 + "b"
    start = time.perf_counter()
    assert not matches("(a+)+$", name)
    assert not matches("(a|aa)*c", name)
    assert not matches("(x+x+)+y", "x" * 100_000)
    assert time.perf_counter() - start < 0.5


def test_huge_pattern_is_refused_not_compiled_for_long():
    start = time.perf_counter()
    with pytest.raises(InvalidRegularExpressionError, match="pattern too large"):
        validate("(" + "a{1000}" * 200 + ")")
    with pytest.raises(InvalidRegularExpressionError, match="invalid repetition size"):
        validate("(a{1000}){1000}")
    assert time.perf_counter() - start < 1.0
    validate("^[a-zA-Z0-9._-]{1,249}$")              # any topic name pattern is far below the budget


def test_resolve_and_change():
    topics = ["t", "tx", "t2", "other", "__consumer_offsets"]
    got = resolve(["^t.*", "^t", "o.*", "_.*"], topics)
    assert got == {"^t.*": frozenset({"t", "tx", "t2"}), "^t": frozenset({"t"}),
                   "o.*": frozenset({"other"}), "_.*": frozenset({"__consumer_offsets"})}
    assert not resolved_changed(got, dict(got))
    assert resolved_changed(got, {"^t": frozenset({"t", "t3"})})
    assert resolved_changed({}, {"^t": frozenset()})
    assert compile_regex("^t.*") is compile_regex("^t.*")          # cached
