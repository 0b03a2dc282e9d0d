"""The reset planner on its own: each scenario of ``--reset-offsets`` as a function over offsets,
with Kafka's warnings and failures."""

from __future__ import annotations

from compactlog.cli.consumer_groups.reset_planner import (AT_TIMESTAMP, EARLIEST, LATEST, LogOffsets, ResetPlan,
                                                          clamp_to_log, log_offsets_needed, plan_reset,
                                                          search_timestamp)

T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)
LOG = LogOffsets(earliest={T0: 2, T1: 0, U0: 5}, latest={T0: 10, T1: 4, U0: 5})


def test_offsets_read_per_scenario():
    assert log_offsets_needed("to-earliest") == (EARLIEST,)
    assert log_offsets_needed("to-latest") == log_offsets_needed("to-current") == (LATEST,)
    assert log_offsets_needed("timestamp") == (AT_TIMESTAMP, LATEST)
    for kind in ("to-offset", "shift-by", "from-file"):
        assert log_offsets_needed(kind) == (EARLIEST, LATEST)


def test_to_offset_is_clamped_to_the_log_with_kafkas_warnings():
    plan = plan_reset(("to-offset", 7), [T0, T1, U0], {}, LOG)
    assert plan.offsets == {T0: 7, T1: 4, U0: 5}
    assert plan.warnings == [
        "New offset (7) is higher than latest offset for topic partition t-1. Value will be set to 4",
        "New offset (7) is higher than latest offset for topic partition u-0. Value will be set to 5"]
    low = plan_reset(("to-offset", 1), [T0], {}, LOG)
    assert low == ResetPlan({T0: 2}, ["New offset (1) is lower than earliest offset for topic partition t-0. "
                                      "Value will be set to 2"])
    # a partition the logs did not answer for keeps the offset asked for
    assert plan_reset(("to-offset", 99), [("gone", 0)], {}, LOG) == ResetPlan({("gone", 0): 99})


def test_to_earliest_and_to_latest():
    assert plan_reset(("to-earliest", None), [T0, U0], {}, LOG) == ResetPlan({T0: 2, U0: 5})
    assert plan_reset(("to-latest", None), [T1], {}, LOG) == ResetPlan({T1: 4})
    missing = plan_reset(("to-earliest", None), [T0, ("gone", 3)], {}, LOG)
    assert missing.error == "Error getting starting offset of topic partition: gone-3" and missing.offsets == {}
    assert plan_reset(("to-latest", None), [("gone", 3)], {}, LOG).error == \
        "Error getting ending offset of topic partition: gone-3"


def test_shift_by_needs_a_committed_offset_and_is_clamped():
    plan = plan_reset(("shift-by", -3), [T0, T1], {T0: 6, T1: 2}, LOG)
    assert plan.offsets == {T0: 3, T1: 0}
    assert plan.warnings == ["New offset (-1) is lower than earliest offset for topic partition t-1. "
                             "Value will be set to 0"]
    failed = plan_reset(("shift-by", 1), [T0, T1], {T0: 6}, LOG)
    assert failed.error == "Cannot shift offset for partition t-1 since there is no current committed offset"


def test_to_current_falls_back_to_the_log_end():
    assert plan_reset(("to-current", None), [T0, T1], {T0: 3}, LOG) == ResetPlan({T0: 3, T1: 4})
    assert plan_reset(("to-current", None), [("gone", 0)], {}, LOG).error == \
        "Error getting ending offset of topic partition: gone-0"


def test_by_timestamp_falls_back_to_the_log_end_for_empty_partitions():
    log = LogOffsets(latest={T0: 10, T1: 4, U0: 5}, at_timestamp={T0: 6, T1: -1, U0: -1})
    plan = plan_reset(("timestamp", 123), [T0, T1, U0], {}, log)
    assert plan.offsets == {T0: 6, T1: 4, U0: 5}
    assert plan.warnings == ["Warn: Partition 1 from topic t is empty. Falling back to latest known offset.",
                             "Warn: Partition 0 from topic u is empty. Falling back to latest known offset."]
    # the warnings written before the failure are kept
    failed = plan_reset(("timestamp", 123), [T1, ("gone", 0)], {}, log)
    assert failed.warnings == plan.warnings[:1]
    assert failed.error == "Error getting offset by timestamp of topic partition: gone-0"


def test_search_timestamp_and_clamp():
    assert search_timestamp(-5) == 0 and search_timestamp(1234) == 1234
    assert clamp_to_log({T0: 5, U0: 0}, LOG).offsets == {T0: 5, U0: 5}
