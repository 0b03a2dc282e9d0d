"""The options of ``consumer-groups`` on their own: values parsed as Kafka's tool parses them and
its option rules as usage errors."""

from __future__ import annotations

import pytest

from compactlog.cli.consumer_groups.options import (SCENARIOS, UsageError, check_args, parse_datetime,
                                                    parse_duration_ns, parse_states, parse_topic_arg,
                                                    read_reset_plan, reset_scenario)
from compactlog.errors import CompactlogError

OPTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets", "group", "all-groups", "topic",
           "all-topics", "dry-run", "execute", "export", "members", "offsets", "state", "verbose") + SCENARIOS


def has(*given):
    return {o: o in given for o in OPTIONS}


def test_topic_args():
    assert parse_topic_arg("t") == ("t", None)
    assert parse_topic_arg("t:0,2") == ("t", [0, 2])
    assert parse_topic_arg("t:1,") == ("t", [1])                 # Java's split drops the trailing empty
    with pytest.raises(UsageError, match="Invalid partition 'x' specified in topic arg 't:x'"):
        parse_topic_arg("t:x")
    with pytest.raises(UsageError, match="expected topic name and partitions"):
        parse_topic_arg("a:b:c")


def test_states():
    assert parse_states(None) is None
    assert parse_states("stable, EMPTY") == {"Stable", "Empty"}
    with pytest.raises(UsageError, match="Invalid state list 'bogus'"):
        parse_states("bogus")


def test_durations_and_datetimes():
    assert parse_duration_ns("PT1H30M") == 5400 * 10**9
    assert parse_duration_ns("-P1DT0.5S") == -(86400 * 10**9 + 5 * 10**8)
    with pytest.raises(CompactlogError, match="Text cannot be parsed to a Duration"):
        parse_duration_ns("PT")
    assert parse_datetime("2020-09-13T12:26:40.000Z") == 1_600_000_000_000
    assert parse_datetime("2020-09-13T14:26:40.000+02:00") == 1_600_000_000_000


def test_reset_scenario():
    kw = dict(to_earliest=False, to_latest=False, to_current=False, to_offset=None, shift_by=None,
              to_datetime=None, by_duration=None)
    assert reset_scenario(**{**kw, "to_earliest": True}) == ("to-earliest", True)
    assert reset_scenario(**{**kw, "shift_by": -2}) == ("shift-by", -2)
    assert reset_scenario(**{**kw, "to_offset": 0}) == ("to-offset", 0)
    assert reset_scenario(**{**kw, "to_datetime": "2020-09-13T12:26:40.000Z"}) == ("timestamp", 1_600_000_000_000)
    kind, at = reset_scenario(**{**kw, "by_duration": "PT1H"})
    assert kind == "timestamp" and callable(at)


def test_reset_plan_files(tmp_path):
    one = tmp_path / "one.csv"
    one.write_text("t,0,5\nt,1,7\n")
    assert read_reset_plan(str(one), ["g"]) == {"g": {("t", 0): 5, ("t", 1): 7}}
    many = tmp_path / "many.csv"
    many.write_text("a,t,0,1\nb,t,0,2\n")
    assert read_reset_plan(str(many), ["a", "b"]) == {"a": {("t", 0): 1}, "b": {("t", 0): 2}}
    with pytest.raises(CompactlogError, match="has no group column"):
        read_reset_plan(str(one), ["a", "b"])


def test_option_rules():
    check_args(has("list"), None, 0)
    check_args(has("reset-offsets", "group", "topic", "to-earliest"), None, 1)
    for given, message in [
        ((), "Command must include exactly one action"),
        (("list", "describe", "all-groups"), "Command must include exactly one action"),
        (("members",), r"Option\(s\) \[members\] are unavailable"),
        (("describe",), r"Option \[describe\] takes one of these options"),
        (("reset-offsets", "group", "topic", "to-earliest", "to-latest"),
         r'Option "\[to-earliest\]" can\'t be used with option "\[to-latest\]"'),
        (("reset-offsets", "group", "topic"), "requires one of the following scenarios"),
        (("reset-offsets", "group", "to-earliest"), "One of the reset scopes should be defined"),
        (("delete", "group", "topic"), "does not support topic-specific offset deletion"),
    ]:
        with pytest.raises(UsageError, match=message):
            check_args(has(*given), None, 1)
    with pytest.raises(UsageError, match="Found multiple arguments for option group"):
        check_args(has("delete-offsets", "group", "topic"), None, 2)
    with pytest.raises(UsageError, match=r"does not take a value for \[state\]"):
        check_args(has("describe", "group", "state"), "Stable", 1)
