"""The options of ``consumer-groups`` and their values, as Kafka's tool reads them: the option
rules of ``ConsumerGroupCommandOptions.checkArgs`` (a ``UsageError``, exit code 2, naming the
conflict), ``--topic T[:P,...]`` (``GroupOffsetsResetter.parseTopicsWithPartitions``), the
``--state`` filter of ``--list``, ``--to-datetime`` (``Utils.getDateTime``), ``--by-duration``
(``java.time.Duration.parse``), ``--from-file`` (``parseResetPlan``) and which reset scenario
was asked for.
"""

from __future__ import annotations

import csv
import datetime
import re
import time

from ...errors import CompactlogError

# Kafka's GroupState names a consumer group may have, in Kafka's order (the --state filter's list)
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
# the reset scenarios, in the order of ConsumerGroupCommandOptions.checkArgs
SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current", "shift-by",
             "from-file")


class UsageError(Exception):
    """A command line Kafka's tool refuses with printUsageAndExit (exit code 2 here)."""


# -- option values ---------------------------------------------------------------------------------

def _java_split(text: str, sep: str) -> list[str]:
    """String.split as Java's tools use it: trailing empty strings are dropped."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


_INT = re.compile(r"[+-]?[0-9]+")


def _int(text: str, bits: int) -> int | None:
    """Integer.parseInt / Long.parseLong: the value, None when the text is not one."""
    if not _INT.fullmatch(text):
        return None
    v = int(text)
    return v if -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None


def parse_topic_arg(spec: str) -> tuple[str, list[int] | None]:
    """``TOPIC`` (every partition) or ``TOPIC:0,1,2`` (GroupOffsetsResetter.parseTopicsWithPartitions)."""
    if ":" not in spec:
        return spec, None
    parts = _java_split(spec, ":")
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{spec}', expected topic name and partitions")
    out_ = []
    for p in _java_split(parts[1], ","):
        n = _int(p, 32)
        if n is None:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{spec}'")
        out_.append(n)
    return parts[0], out_


def parse_states(text: str | None) -> set[str] | None:
    """The --state filter of --list (ConsumerGroupCommand.groupStatesFromString): names in any case."""
    if not text:
        return None
    by_upper = {s.upper(): s for s in STATES}
    parsed = {by_upper.get(s.strip().upper()) for s in _java_split(text, ",")}
    if None in parsed:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return parsed


def parse_datetime(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+hh:mm``); without one, the local time zone."""
    try:
        dt = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CompactlogError(f"--to-datetime {text!r}: not a date and time of the form "
                              f"YYYY-MM-DDTHH:mm:SS.sss (optionally with Z or +hh:mm)") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.timestamp() * 1000)


# java.time.Duration.parse's grammar: days, then T with hours, minutes and seconds (a fraction of
# up to 9 digits); a sign before P and before each number; letters in either case
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


def parse_duration_ns(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMnS`` as ``java.time.Duration.parse`` reads it, in nanoseconds."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(3) or "").upper() == "T" or all(m.group(i) is None for i in (2, 4, 5, 6)):
        raise CompactlogError(f"--by-duration {text!r}: Text cannot be parsed to a Duration (the format is "
                              f"PnDTnHnMnS, e.g. PT30M, PT1H30M or P2DT12H)")
    sign, days, hours, minutes, seconds, fraction = m.group(1, 2, 4, 5, 6, 7)
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)) \
        * 1_000_000_000
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        total += -nanos if (seconds or "").startswith("-") else nanos
    return -total if sign == "-" else total


def read_reset_plan(path: str, groups_given: list[str]) -> dict:
    """--from-file: {group: {(topic, partition): offset}} from Kafka's CSV, without a header:
    ``topic,partition,offset`` lines for the one --group given, else ``group,topic,partition,offset``
    (GroupOffsetsResetter.parseResetPlan)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CompactlogError(f"--from-file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise CompactlogError(f"--from-file {path}: not UTF-8 text (byte {e.start})") from None
    rows = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if line.strip():
            rows.append((n, line, next(csv.reader([line]))))

    def record(fields: list[str], with_group: bool):
        if len(fields) != (4 if with_group else 3):
            return None
        t, p, o = fields[-3:]
        partition, offset = _int(p.strip(), 32), _int(o.strip(), 64)
        if partition is None or offset is None:
            return None
        return (fields[0] if with_group else None), t, partition, offset

    single = len(groups_given) == 1
    # Kafka's rule: the first line decides; three columns mean the plan of the one --group given
    without_group = single and bool(rows) and record(rows[0][2], False) is not None
    plan: dict = {}
    for n, line, fields in rows:
        r = record(fields, not without_group)
        if r is None:
            if not without_group and len(fields) == 3 and record(fields, False) is not None:
                raise CompactlogError(f"--from-file {path}: line {n}: {line!r} has no group column: a file of "
                                      f"topic,partition,offset lines is the plan of exactly one --group")
            expected = "topic,partition,offset" if without_group else "group,topic,partition,offset"
            raise CompactlogError(f"--from-file {path}: line {n}: {line!r}: expected {expected} "
                                  f"(the partition and the offset numbers)")
        group = groups_given[0] if without_group else r[0]
        plan.setdefault(group, {})[(r[1], r[2])] = r[3]
    return plan


# -- the option rules ------------------------------------------------------------------------------

def check_args(has: dict, state_value: str | None, n_groups: int) -> None:
    """ConsumerGroupCommandOptions.checkArgs (and the checks Kafka's tool makes once running that
    need no broker): a UsageError naming the conflict."""
    def opt(name):
        return f"[{name}]"

    for name, allowed in (("members", ("describe",)), ("verbose", ("describe",)), ("offsets", ("describe",)),
                          ("state", ("describe", "list"))):
        if has[name] and not any(has[a] for a in allowed):
            raise UsageError(f"Option(s) {opt(name)} are unavailable given other options on the command line")
    group_scope = f"{opt('all-groups')}, {opt('group')}"
    if has["describe"]:
        if not has["group"] and not has["all-groups"]:
            raise UsageError(f"Option {opt('describe')} takes one of these options: {group_scope}")
        if sum(has[o] for o in ("members", "offsets", "state")) > 1:
            raise UsageError(f"Option {opt('describe')} takes at most one of these options: "
                             f"{opt('members')}, {opt('offsets')}, {opt('state')}")
        if has["state"] and state_value is not None:
            raise UsageError(f"Option {opt('describe')} does not take a value for {opt('state')}")
    if has["delete"]:
        if not has["group"] and not has["all-groups"]:
            raise UsageError(f"Option {opt('delete')} takes one of these options: {group_scope}")
        if has["topic"]:
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if has["delete-offsets"] and (not has["group"] or not has["topic"]):
        raise UsageError(f"Option {opt('delete-offsets')} takes the following options: {opt('group')}, "
                         f"{opt('topic')}")
    if has["reset-offsets"]:
        if has["dry-run"] and has["execute"]:
            raise UsageError(f"Option {opt('reset-offsets')} only accepts one of {opt('execute')} and "
                             f"{opt('dry-run')}")
        if not has["group"] and not has["all-groups"]:
            raise UsageError(f"Option {opt('reset-offsets')} takes one of these options: {group_scope}")
        for used in SCENARIOS:
            for other in SCENARIOS:
                if other != used and has[used] and has[other]:
                    raise UsageError(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')
    for used, others in (("group", ("all-groups",)), ("group", ("list",)), ("topic", ("list", "describe"))):
        for other in others:
            if has[used] and has[other]:
                raise UsageError(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')
    actions = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
    if sum(has[a] for a in actions) != 1:
        raise UsageError(f"Command must include exactly one action: {', '.join('--' + a for a in actions)}")
    if has["reset-offsets"]:
        if not any(has[s] for s in SCENARIOS):
            raise UsageError(f"Option '{opt('reset-offsets')}' requires one of the following scenarios: "
                             f"{', '.join(opt(s) for s in SCENARIOS)}")
        if not has["from-file"] and not has["topic"] and not has["all-topics"]:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if has["delete-offsets"] and n_groups > 1:
        raise UsageError("Found multiple arguments for option group, but you asked for only one")


def reset_scenario(*, to_earliest: bool, to_latest: bool, to_current: bool, to_offset: int | None,
                   shift_by: int | None, to_datetime: str | None, by_duration: str | None) -> tuple:
    """The scenario of ``--reset-offsets`` (one of them, ``check_args`` made sure): ``(kind, value)``
    for ``reset_planner.plan_reset``; ``("timestamp", ms)``, or for ``--by-duration`` a function
    giving now minus the duration, taken when each group's plan is made."""
    if to_datetime is not None:
        return "timestamp", parse_datetime(to_datetime)
    if by_duration is not None:
        nanos = parse_duration_ns(by_duration)
        return "timestamp", lambda: (time.time_ns() - nanos) // 1_000_000
    return next((k, v) for k, v in (("to-earliest", to_earliest or None), ("to-latest", to_latest or None),
                                    ("to-current", to_current or None), ("to-offset", to_offset),
                                    ("shift-by", shift_by)) if v is not None)
