"""`cleaner status` and `explain` where Kafka does not clean, and what a clean would remove."""

from __future__ import annotations

import json

import pytest

from compactlog.cli.main import main
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000
HOUR = 3_600_000


def make_topic(path, configs, clock):
    dd = DataDir(str(path), clock=lambda: clock[0], create=True, writable=True)
    dd.create_topic("t", 1, {"cleanup.policy": "compact", **configs})
    return dd, dd.open_log("t", 0)


def status_json(capsys, data_dir, now):
    assert main(["--data-dir", str(data_dir), "cleaner", "status", "--json", "--now-ms", str(now)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    return lines[0], lines[-1]


def explain_text(capsys, data_dir, now):
    assert main(["--data-dir", str(data_dir), "explain", "--topic", "t", "--partition", "0",
                 "--now-ms", str(now)]) == 0
    return capsys.readouterr().out


def test_active_segment_is_never_cleaned(tmp_path, capsys):
    clock = [T0]
    dd, log = make_topic(tmp_path, {"min.cleanable.dirty.ratio": "0.01"}, clock)
    log.append_records([b"a", b"a", b"b"], [b"1", b"2", b"3"])
    dd.close()
    st, summary = status_json(capsys, tmp_path, T0)
    assert not st["eligible"]
    assert st["reason"].startswith("active segment")
    assert summary["maxDirtyPercent"] == 0
    out = explain_text(capsys, tmp_path, T0)
    assert "not eligible: active segment" in out


def test_min_compaction_lag_blocks_until_the_segment_is_old_enough(tmp_path, capsys):
    clock = [T0]
    dd, log = make_topic(tmp_path, {"min.compaction.lag.ms": str(HOUR), "min.cleanable.dirty.ratio": "0.01"}, clock)
    log.append_records([b"a", b"a"], [b"1", b"2"], timestamps=[T0, T0])
    log.roll()
    log.append_records([b"z"], [b"z"], timestamps=[T0])
    dd.close()
    st, _ = status_json(capsys, tmp_path, T0 + 10 * 60_000)
    assert not st["eligible"]
    assert "min.compaction.lag.ms" in st["reason"]
    assert st["next_eligible_ms"] == T0 + HOUR
    out = explain_text(capsys, tmp_path, T0 + 10 * 60_000)
    assert "min.compaction.lag.ms" in out and f"eligible from: {T0 + HOUR}" in out
    st, _ = status_json(capsys, tmp_path, T0 + HOUR + 1)
    assert st["eligible"]


def test_open_transaction_holds_the_cleanable_range(tmp_path, capsys):
    clock = [T0]
    dd, log = make_topic(tmp_path, {"min.cleanable.dirty.ratio": "0.01"}, clock)
    log.append_records([b"k"], [b"v"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    log.append_records([b"a", b"a"], [b"1", b"2"])
    log.roll()
    log.append_records([b"b"], [b"1"])
    dd.close()
    st, _ = status_json(capsys, tmp_path, T0)
    assert not st["eligible"]
    assert st["reason"].startswith("open transaction: producer 7")
    assert st["first_uncleanable"] == 0
    out = explain_text(capsys, tmp_path, T0)
    assert "open transaction" in out


def test_dirty_ratio_not_above_threshold(tmp_path, capsys):
    clock = [T0]
    dd, log = make_topic(tmp_path, {"min.cleanable.dirty.ratio": "0.5"}, clock)
    log.append_records([f"k{i}".encode() for i in range(50)], [b"x" * 50] * 50)
    log.roll()
    dd.cleaner_checkpoint.update({("t", 0): log.log_end_offset})
    log.append_records([b"k1"], [b"y"])
    log.roll()
    dd.close()
    st, _ = status_json(capsys, tmp_path, T0)
    assert not st["eligible"]
    assert 0 < st["dirty_ratio"] <= 0.5
    assert st["reason"].startswith("dirty ratio")
    out = explain_text(capsys, tmp_path, T0)
    assert "not above min.cleanable.dirty.ratio" in out
    assert "what `clean --force` would do" in out
    assert "removed: 1 superseded" in out


def test_explain_counts_removals_by_reason_and_tombstone_horizons(tmp_path, capsys):
    clock = [T0]
    dd, log = make_topic(tmp_path, {"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}, clock)
    log.append_records([b"a", b"a", b"b", b"c"], [b"1", b"2", b"3", None])
    log.append_records([b"t"], [b"aborted"], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    log.append_control(commit=False, producer_id=9, producer_epoch=0)
    log.append_records([b"t2"], [b"x"])
    log.roll()
    log.append_records([b"z"], [b"z"])
    dd.close()
    assert main(["--data-dir", str(tmp_path), "explain", "--topic", "t", "--partition", "0",
                 "--now-ms", str(T0), "--json"]) == 0
    ex = json.loads(capsys.readouterr().out)
    assert ex["wouldClean"]
    assert ex["removed"]["superseded"] == 1
    tomb = [r for r in ex["retained"] if r["kind"] == "tombstone"]
    assert [(r["offset"], r["key"], r["delete_horizon_ms"]) for r in tomb] == [(3, "c", T0 + 1000)]
    markers = [r for r in ex["retained"] if r["kind"] == "ABORT"]
    assert len(markers) == 1 and markers[0]["delete_horizon_ms"] is None
    # explain changed nothing: a real clean still finds the same work
    assert main(["--data-dir", str(tmp_path), "clean", "--now-ms", str(T0), "--json", "--engine", "local"]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["cleaned"] and out["removed"] == ex["removed"]


@pytest.mark.parametrize("policy", ["delete"])
def test_non_compacted_topics_are_not_listed(tmp_path, capsys, policy):
    dd = DataDir(str(tmp_path), create=True, writable=True)
    dd.create_topic("plain", 1, {"cleanup.policy": policy})
    dd.close()
    assert main(["--data-dir", str(tmp_path), "cleaner", "status", "--json", "--now-ms", str(T0)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [{"maxDirtyPercent": 0, "nowMs": T0}]
