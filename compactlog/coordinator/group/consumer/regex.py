"""Subscribed-topic regular expressions of the consumer group protocol (spec §5).

Follows Kafka's ``Utils.throwIfRegularExpressionIsInvalid`` and
``GroupMetadataManager.refreshRegularExpressions``, which use RE2/J (``com.google.re2j.Pattern``)
and match the **whole** topic name (``matcher(name).matches()``). We use RE2 itself (the
``google-re2`` package, the C++ library RE2/J ports): the same syntax and linear-time matching.

What differs from Python's ``re`` (and so why ``re`` must not be used here):
* the whole name must match: ``^topic`` does not match ``topic-1`` (``re.match`` would; write
  ``^topic.*`` — librdkafka's INTRODUCTION.md warns its users of the same);
* no backreferences (``\\1``), lookaround (``(?=``, ``(?!``, ``(?<=``), possessive or atomic
  groups, conditionals, ``\\Z``: RE2 refuses them, so the member gets INVALID_REGULAR_EXPRESSION
  where ``re`` would compile;
* repetition counts above 1000 (``a{1001}``) are refused;
* RE2 has Unicode classes (``\\p{Greek}``) and ``\\z``, which ``re`` lacks;
* matching is linear in the name's length: a "catastrophic" pattern such as ``(a+)+$`` is as fast
  as any other, where ``re`` backtracks exponentially.
RE2/J and C++ RE2 differ only at the margins: ``\\C`` (any byte) is C++ only and refused here as
RE2/J refuses it; the error texts are RE2's (Kafka quotes RE2/J's ``getDescription()``, worded a
little differently); a pattern whose program exceeds ``MAX_MEM`` is refused (RE2/J has no limit),
which bounds what one member can make the coordinator compile.

Sans-IO and pure: compiled patterns are cached (a group shares a few regexes).
"""

from __future__ import annotations

import functools
from typing import Iterable, Mapping

import re2

INVALID_REGULAR_EXPRESSION = 128
# RE2's budget for a compiled program (its default is 8 MiB): enough for any topic pattern
# (``^[a-zA-Z0-9._-]{1,249}$`` needs a few KiB), and it refuses in ~0.1 s a pattern built to
# make the coordinator compile for seconds (RE2/J has no such limit)
MAX_MEM = 1 << 20


class InvalidRegularExpressionError(ValueError):
    """Kafka's ``InvalidRegularExpression``: the heartbeat answers INVALID_REGULAR_EXPRESSION (128)."""
    code = INVALID_REGULAR_EXPRESSION


def _options():
    o = re2.Options()
    o.log_errors = False           # a client's bad pattern is its error, not the broker's log noise
    o.max_mem = MAX_MEM
    return o


@functools.lru_cache(maxsize=1024)
def _compile(regex: str):
    return re2.compile(regex, _options())


def compile_regex(regex: str):
    """The compiled pattern, or ``InvalidRegularExpressionError`` with Kafka's message."""
    if "\\C" in regex.replace("\\\\", ""):
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
            f"invalid escape sequence: \\C.")
    try:
        return _compile(regex)
    except re2.error as e:
        detail = e.args[0] if e.args else e
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {detail}.") from None


def validate(regex: str) -> None:
    """``Utils.throwIfRegularExpressionIsInvalid``."""
    compile_regex(regex)


def matches(regex: str, topic: str) -> bool:
    """Whether ``topic`` matches ``regex`` as a whole (RE2/J ``matcher(topic).matches()``)."""
    return compile_regex(regex).fullmatch(topic) is not None


def resolve(regexes: Iterable[str], topics: Iterable[str]) -> dict[str, frozenset]:
    """``refreshRegularExpressions`` without its ACL filter: each regex to the topics it matches.
    A regex that does not compile resolves to nothing (Kafka logs and ignores it: it was
    validated when a member sent it)."""
    compiled = {}
    out: dict[str, set] = {}
    for r in regexes:
        out[r] = set()
        try:
            compiled[r] = compile_regex(r)
        except InvalidRegularExpressionError:
            pass
    for name in topics:
        for r, c in compiled.items():
            if c.fullmatch(name) is not None:
                out[r].add(name)
    return {r: frozenset(ts) for r, ts in out.items()}


def resolved_changed(old: Mapping[str, frozenset], new: Mapping[str, frozenset]) -> bool:
    """Whether any regex's topic set changed (then the group epoch is bumped, spec §5)."""
    return any(old.get(r) != ts for r, ts in new.items())
