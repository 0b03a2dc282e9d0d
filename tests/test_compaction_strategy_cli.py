"""KIP-280's compaction strategies offline: ``clean``, ``clean --dry-run``, ``explain`` and
``snapshot`` on a data dir whose topic sets ``compaction.strategy``; a bad strategy refused by the
CLI with a clear message; what compactlog chose where the KIP is silent (the tombstone horizon)."""

from __future__ import annotations

import json
import os
import struct

import pytest

from compactlog.storage.datadir import DataDir

pytestmark = pytest.mark.slow     # whole commands (clean, snapshot, consume) a test: seconds each

NOW = 1_700_000_000_000
LONG = struct.Struct(">q")


def _make(d: str, configs: dict, batches) -> None:
    """A topic ``t`` with ``batches`` [(keys, values, timestamps, headers)], each then rolled."""
    with DataDir(d, create=True, writable=True, clock=lambda: NOW) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact", **configs})
        log = dd.open_log("t", 0)
        for keys, values, ts, headers in batches:
            log.append_records(keys, values, timestamps=ts, headers=headers)
            log.roll()


def _consumed(cli, d: str) -> dict:
    r = cli("--data-dir", d, "consume", "--topic", "t", "--from-beginning", "--output-format", "jsonl")
    assert r.code == 0, r.err
    return {x["key"]: x["value"] for x in map(json.loads, r.out.splitlines())}


def test_offline_clean_keeps_the_highest_timestamp(tmp_path, cli):
    d = str(tmp_path / "d")
    _make(d, {"compaction.strategy": "timestamp"}, [
        ([b"a", b"b", b"c"], [b"a-new", b"b-old", b"c-old"], [NOW - 10, NOW - 50, NOW - 40], None),
        ([b"a", b"b", b"c"], [b"a-late", b"b-new", b"c-new"], [NOW - 90, NOW - 20, NOW - 40], None),
    ])
    r = cli("--data-dir", d, "clean", "--dry-run", "--engine", "local", "--now-ms", str(NOW))
    assert r.code == 0, r.err
    assert "3 superseded (compaction.strategy timestamp)" in r.out, r.out
    r = cli("--data-dir", d, "explain", "--topic", "t", "--partition", "0", "--now-ms", str(NOW), "--json")
    assert json.loads(r.out)["compactionStrategy"] == "timestamp", r.out
    r = cli("--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW), "--json")
    assert r.code == 0 and json.loads(r.out.splitlines()[0])["messagesWritten"] == 3, r.out + r.err
    # the earlier record of a wins (higher timestamp), the tie of c goes to the later offset
    assert _consumed(cli, d) == {"a": "a-new", "b": "b-new", "c": "c-new"}
    out = str(tmp_path / "snap")
    assert cli("--data-dir", d, "snapshot", "--topic", "t", "--out", out, "--format", "json",
               "--engine", "local").code == 0
    rows = [json.loads(x) for name in os.listdir(out) if name.endswith(".json")
            for x in open(os.path.join(out, name))]
    assert sorted(r["offset"] for r in rows) == [0, 4, 5]


def test_header_strategy_from_clean_config(tmp_path, cli):
    """``clean --config`` sets the strategy for one run; the header's last occurrence counts, a
    value that is not 8 bytes is no version, and a record with a version beats one without."""
    d = str(tmp_path / "d")
    v = LONG.pack
    _make(d, {}, [
        ([b"a", b"b", b"c", b"d"], [b"a9", b"b1", b"c-has", b"d-bad"],
         [NOW] * 4, [[("seq", v(1)), ("seq", v(9))], [("seq", v(1))], [("seq", v(-4))], [("seq", v(3))]]),
        ([b"a", b"b", b"c", b"d"], [b"a5", b"b2", b"c-none", b"d-short"],
         [NOW] * 4, [[("seq", v(5))], [("seq", v(2))], [], [("seq", b"\x00\x07")]]),
    ])
    r = cli("--data-dir", d, "clean", "--topic", "t", "--engine", "local", "--now-ms", str(NOW), "--config",
            "compaction.strategy=header", "--config", "compaction.strategy.header=seq")
    assert r.code == 0, r.err
    assert _consumed(cli, d) == {"a": "a9", "b": "b2", "c": "c-has", "d": "d-bad"}


def test_a_bad_strategy_is_refused_with_a_clear_message(tmp_path, cli):
    d = str(tmp_path / "d")
    r = cli("--data-dir", d, "topics", "create", "--topic", "t", "--config", "compaction.strategy=header")
    assert r.code != 0 and "compaction.strategy=header needs the name of the header" in r.err, r.err
    assert "Traceback" not in r.err
    r = cli("--data-dir", d, "topics", "create", "--topic", "t", "--config", "compaction.strategy=newest")
    assert r.code != 0 and "must be one of offset, timestamp, header" in r.err, r.err
    r = cli("--data-dir", d, "--override", "log.cleaner.compaction.strategy=header", "topics", "create",
            "--topic", "t")
    assert r.code != 0 and "log.cleaner.compaction.strategy.header" in r.err, r.err
    assert cli("--data-dir", d, "topics", "create", "--topic", "t", "--config", "cleanup.policy=compact").code == 0
    r = cli("--data-dir", d, "configs", "--alter", "--topic", "t", "--add-config", "compaction.strategy=header")
    assert r.code != 0 and "compaction.strategy.header" in r.err and "Traceback" not in r.err, r.err
    r = cli("--data-dir", d, "clean", "--topic", "t", "--engine", "local", "--config", "compaction.strategy=header")
    assert r.code != 0 and "compaction.strategy.header" in r.err and "Traceback" not in r.err, r.err
    r = cli("--data-dir", d, "configs", "--alter", "--topic", "t", "--add-config",
            "compaction.strategy=header,compaction.strategy.header=seq")
    assert r.code == 0, r.err
    r = cli("--data-dir", d, "configs", "--describe", "--topic", "t")
    assert "compaction.strategy=header" in r.out and "compaction.strategy.header=seq" in r.out, r.out


def test_a_tombstone_follows_the_comparison_and_its_horizon(tmp_path, cli):
    """compactlog's choice where KIP-280 is silent: a tombstone with a lower version than a live
    record is superseded at once; a winning one stays until its delete horizon, after which a
    lower version that arrives later is live again (docs/compaction-strategies.md)."""
    d = str(tmp_path / "d")
    _make(d, {"compaction.strategy": "timestamp", "delete.retention.ms": "1000"}, [
        ([b"a", b"b"], [b"a-live", None], [NOW - 10, NOW - 10], None),
        ([b"a", b"b"], [None, b"b-old"], [NOW - 50, NOW - 50], None),
    ])
    assert cli("--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW)).code == 0
    r = cli("--data-dir", d, "consume", "--topic", "t", "--from-beginning", "--output-format", "jsonl")
    records = [json.loads(x) for x in r.out.splitlines()]
    assert [(x["key"], x["value"]) for x in records] == [("a", "a-live"), ("b", None)]
    # a lower version arriving while the tombstone stays loses to it; past the horizon both go
    _append(d, b"b", b"b-late", NOW - 500)
    assert cli("--data-dir", d, "clean", "--engine", "local", "--force", "--now-ms", str(NOW + 5000)).code == 0
    assert _consumed(cli, d) == {"a": "a-live"}
    # once the tombstone is gone, a lower version that arrives later is the state of b again
    _append(d, b"b", b"b-later", NOW - 900)
    assert cli("--data-dir", d, "clean", "--engine", "local", "--force", "--now-ms", str(NOW + 6000)).code == 0
    assert _consumed(cli, d) == {"a": "a-live", "b": "b-later"}


def _append(d: str, key: bytes, value: bytes, ts: int) -> None:
    with DataDir(d, writable=True, clock=lambda: NOW) as dd:
        log = dd.open_log("t", 0)
        log.append_records([key], [value], timestamps=[ts])
        log.roll()
