"""How a config value is parsed and checked, as Kafka's ``ConfigDef`` does: the types (short, int,
long, double, boolean, string, list, class), the validators (``Rule``: at least, between, one of,
list of), the errors a refusal raises, and Kafka's printed forms of values (``java_double``,
``kafka_string``). The definitions themselves live with their owners (``config.py``: topic configs
and the log settings; ``cleaner/config.py``, ``server/security/config.py``, ...), gathered by
``config_registry.py``.

Numbers are ASCII digits with an optional sign, booleans ignore case, enumerated values are
case-sensitive (Kafka's ValidString/ValidList). A double may also be written as Python reads one
(``nan``, ``inf``), which Java does not. A refusal (``ConfigValueError``) carries compactlog's
message and, in ``kafka_message``, the text of Kafka's ``ConfigException`` for the same value.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Iterable

from ..errors import ConfigError

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647
MIB = 1024 * 1024

_INTEGER = re.compile(r"[+-]?[0-9]+")
# what Java's Double.parseDouble reads of a trimmed text (hexadecimal floats aside): a sign, NaN,
# Infinity or decimal digits with an exponent, and a type suffix
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_INT_BITS = {"short": 16, "int": 32, "long": 64}


class _Unparsable(ValueError):
    """A text that is no value of the config's type: compactlog's reason, and Kafka's (``kafka``)."""

    def __init__(self, reason: str, kafka: str):
        super().__init__(reason)
        self.kafka = kafka


def _int(raw, kind: str) -> int:
    # Java's Integer.parseInt / Long.parseLong: ASCII digits and a sign only (Python's int() would
    # also take "1_000" and non-ASCII digits)
    s = str(raw).strip()
    kafka = f"Not a number of type {kind.upper()}"
    if not _INTEGER.fullmatch(s):
        raise _Unparsable("not a whole number", kafka)
    v = int(s)
    bits = _INT_BITS[kind]
    if not -2 ** (bits - 1) <= v < 2 ** (bits - 1):
        raise _Unparsable(f"out of {kind} range", kafka)
    return v


def _double(raw) -> tuple[float, bool]:
    """(the value, whether Java reads the text too)."""
    s = str(raw).strip()
    if _JAVA_DOUBLE.fullmatch(s):
        text = s[:-1] if s[-1] in "fFdD" else s         # Java's type suffix
        return float(text.replace("Infinity", "inf")), True
    kafka = "Not a number of type DOUBLE"
    if "_" in s:
        raise _Unparsable("not a number", kafka)
    try:
        return float(s), False
    except ValueError as e:
        raise _Unparsable(str(e), kafka) from None


def _bool(v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise _Unparsable("expected true or false", "Expected value to be either true or false")


def _list(v: str) -> list[str]:
    # Kafka's LIST type: split on commas, each element trimmed; an empty element stays (and is
    # then refused by the validator), case is kept
    s = str(v).strip()
    return [x.strip() for x in s.split(",")] if s else []


def java_double(x: float) -> str:
    """Java's Double.toString: decimal from 1e-3 to 1e7, else d.dddE±n; always a fraction digit."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if "." in s else s + ".0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def kafka_string(kind: str, value) -> str | None:
    """ConfigDef.convertToString: a value of a config of ``kind`` as Kafka writes it."""
    if value is None:
        return None
    if kind == "bool":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(value)
    if kind == "double":
        return java_double(float(value))
    return str(value)


def is_secret_setting(name: str) -> bool:
    """Settings that hold a secret, listener-prefixed or not: never logged, masked in
    DescribeConfigs (Kafka's PASSWORD-type settings)."""
    return ("password" in name or "secret" in name or name.endswith("jaas.config")
            or name.endswith("ssl.keystore.key") or name.endswith("session.token"))


def did_you_mean(name: str, known: Iterable[str], *, n: int = 1, cutoff: float = 0.75,
                 spell: Callable[[str], str] | None = None) -> str:
    """`` (did you mean X?)`` naming the known names closest to a misspelt one (difflib), or "".

    The one place a "did you mean" is worded: topic configs, broker settings, the CLI's config
    options and the Spark source's options all ask here. ``spell`` shows a match as the user
    writes it (a prefix, the canonical case)."""
    close = difflib.get_close_matches(name, list(known), n=n, cutoff=cutoff)
    if not close:
        return ""
    return f" (did you mean {' or '.join(spell(c) if spell else c for c in close)}?)"


class ConfigValueError(ConfigError):
    """A value its config refuses: ``definition`` (the ConfigDef), ``name`` (the setting written:
    the config or a broker synonym), ``raw`` (the text given) and ``kafka_message``, Kafka's
    ConfigException text for it (the broker's INVALID_CONFIG message), None where Kafka would
    accept the value."""

    def __init__(self, message: str, definition: "ConfigDef", name: str, raw: str,
                 kafka_message: str | None = None):
        super().__init__(message)
        self.definition, self.name, self.raw = definition, name, raw
        self.kafka_message = kafka_message


class CompactionLagConflict(ConfigError):
    """min.compaction.lag.ms above max.compaction.lag.ms (Kafka's LogConfig.validateValues)."""

    def __init__(self, min_lag: int, max_lag: int):
        super().__init__(f"conflicting topic configs: min.compaction.lag.ms ({min_lag}) is greater than "
                         f"max.compaction.lag.ms ({max_lag})")
        self.min_lag, self.max_lag = min_lag, max_lag


# Kafka's ConfigDef.Importance and DynamicBrokerConfig's update modes (the "Update Mode" of
# Kafka's documentation): how a broker setting may change while the broker runs
IMPORTANCE = ("high", "medium", "low")
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"
UPDATE_MODES = (READ_ONLY, PER_BROKER, CLUSTER_WIDE)


@dataclass(frozen=True)
class ConfigDef:
    """One setting as its owner defines it (Kafka's ``ConfigDef.define``): name, type, default,
    the broker settings standing for it (a topic config's synonyms, first match wins), validator,
    documentation, importance and, for a broker setting, its update mode (``dynamic``)."""
    name: str
    kind: str              # short, int, long, double, bool, list, string, password
    default: Any
    broker: tuple[str, ...] = ()   # broker properties that set the default, first match wins
    check: Rule | None = None
    doc: str = ""
    importance: str = "medium"
    dynamic: str = READ_ONLY

    def parse(self, raw, name: str | None = None) -> Any:
        """The value of ``raw``; ``name`` is the setting the user wrote, when it is a broker synonym.
        Kafka's ConfigDef.parseType, then the config's rule."""
        name = name or self.name
        java_reads = True
        try:
            if self.kind in _INT_BITS:
                v = _int(raw, self.kind)
            elif self.kind == "double":
                v, java_reads = _double(raw)
            elif self.kind == "bool":
                v = _bool(raw)
            elif self.kind == "list":
                v = _list(raw)
            else:
                v = str(raw).strip()
        except _Unparsable as e:
            raise ConfigValueError(f"invalid value {raw!r} for configuration {name}: {e}", self, name, raw,
                                   f"Invalid value {raw} for configuration {name}: {e.kafka}") from None
        if self.check is not None:
            problem = self.check(v)
            if problem:
                raise ConfigValueError(f"invalid value {raw!r} for configuration {name}: {problem}",
                                       self, name, raw, self._kafka_refusal(raw, v, java_reads, name))
        return v

    def _kafka_refusal(self, raw, value, java_reads: bool, name: str) -> str | None:
        """Kafka's message for a value this config's rule refuses (None: Kafka accepts it)."""
        if not java_reads:
            return f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE"
        verdict = self.check.kafka(value)
        if verdict is None:
            return None
        element, why = verdict
        shown = element if element is not None else kafka_string(self.kind, value)
        return f"Invalid value {shown} for configuration {name}: {why}"


def block(prefix: str, rows: Iterable[tuple], **shared) -> tuple[ConfigDef, ...]:
    """Settings declared together, as a Kafka config class defines a family under one prefix:
    each row ``(suffix, kind, default, doc)``, optionally with a dict of its own keyword
    arguments last, becomes ``ConfigDef(prefix + suffix, ...)`` with the keyword arguments
    ``shared`` (check, importance, dynamic) unless its own say otherwise."""
    out = []
    for suffix, kind, default, doc, *own in rows:
        out.append(ConfigDef(prefix + suffix, kind, default, doc=doc, **{**shared, **(own[0] if own else {})}))
    return tuple(out)


class Rule:
    """A value check as data (Kafka's ConfigDef validators): called with a parsed value, the
    problem in compactlog's words or None; ``kafka(value)``: Kafka's verdict on the same value,
    (the element to show or None for the whole value, the validator's message) or None. The
    broker builds Kafka's ConfigException text from it, so each bound is written once, here."""

    def __call__(self, v) -> str | None:
        raise NotImplementedError

    def kafka(self, v) -> tuple[str | None, str] | None:
        raise NotImplementedError


class AtLeast(Rule):
    """Kafka's Range.atLeast."""

    def __init__(self, lo):
        self.lo = lo

    def __call__(self, v):
        return None if v >= self.lo else f"value must be at least {self.lo}"

    def kafka(self, v):
        return None if v >= self.lo else (None, f"Value must be at least {self.lo}")


class Between(Rule):
    """Kafka's Range.between (bounds as Kafka declares them: whole numbers even for a double)."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __call__(self, v):
        if self.lo <= v <= self.hi:
            return None
        lo, hi = (float(self.lo), float(self.hi)) if isinstance(v, float) else (self.lo, self.hi)
        return f"value must be between {lo} and {hi}"

    def kafka(self, v):
        if v < self.lo:
            return None, f"Value must be at least {self.lo}"
        if v > self.hi:
            return None, f"Value must be no more than {self.hi}"
        return None


class OneOf(Rule):
    """Kafka's ValidString.in (case-sensitive)."""

    def __init__(self, *options):
        self.options = options

    def __call__(self, v):
        if v in self.options:
            return None
        return f"value must be one of {', '.join(self.options)}{_case_hint(v, self.options)}"

    def kafka(self, v):
        return None if v in self.options else (None, f"String must be one of: {', '.join(self.options)}")


class ListOf(Rule):
    """Kafka's ValidList.in: every element one of ``options``. compactlog also refuses an empty
    list (``empty``: why), which Kafka accepts."""

    def __init__(self, options: tuple, noun: str, empty: str):
        self.options, self.noun, self.empty = options, noun, empty

    def __call__(self, v):
        if not v:
            return self.empty
        valid = ", ".join(self.options)
        for x in v:
            if not x:
                return f"empty element in the list (valid: {valid})"
            if x not in self.options:
                return f"unknown {self.noun} {x} (valid: {valid}){_case_hint(x, self.options)}"
        return None

    def kafka(self, v):
        for x in v:
            if x not in self.options:
                return x, f"String must be one of: {', '.join(self.options)}"
        return None


class BetweenOr(Rule):
    """Kafka's compression level validators: ``lo``..``hi``, or the one value ``other``."""

    def __init__(self, lo, hi, other):
        self.lo, self.hi, self.other = lo, hi, other

    def __call__(self, v):
        if v == self.other or self.lo <= v <= self.hi:
            return None
        return f"value must be {self.other} or between {self.lo} and {self.hi}"

    def kafka(self, v):
        if v == self.other or self.lo <= v <= self.hi:
            return None
        return None, f"Value must be between {self.lo} and {self.hi} or equal to {self.other}"


at_least, between, one_of = AtLeast, Between, OneOf


def _case_hint(v: str, options) -> str:
    same = [o for o in options if o.lower() == str(v).lower()]
    return f"; did you mean {same[0]}? (values are case-sensitive, as in Kafka)" if same else ""
