"""``compactlog dump-log``: Kafka's text layout and ``--json`` on logs made here and on real Kafka files
(tests/data/kafka-vectors, see its README for what each file holds)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil

import pytest

from compactlog.storage.datadir import DataDir

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "data", "kafka-vectors")
LDI = os.path.join(VECTORS, "Niloufar1171+LDI-POC", "__consumer_offsets-6")
BHEEM = os.path.join(VECTORS, "Bheem6005+kafka", "kafka-logs")
CONNECT = os.path.join(VECTORS, "mscaldas2012+kafka-connect-spooldir", "kafka-data")
SARAMA = os.path.join(VECTORS, "IBM+sarama")
DPKP = os.path.join(VECTORS, "dpkp+kafka-python")
SEG0 = "00000000000000000000"


def dump_json(cli, *paths, deep: bool = True) -> list[dict]:
    args = ["dump-log", "--json"] + (["--print-data-log"] if deep else [])
    for p in paths:
        args += ["--files", str(p)]
    r = cli(*args)
    assert r.code == 0, r.err
    return [json.loads(line) for line in r.out.splitlines()]


def of_type(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["type"] == kind]


def key_bytes(o: dict) -> bytes | None:
    if "key_b64" in o:
        return base64.b64decode(o["key_b64"])
    return None if o["key"] is None else o["key"].encode("utf-8")


def latest_per_key(records: list[dict]) -> dict:
    latest = {}
    for r in records:
        latest[key_bytes(r)] = r
    return latest


@pytest.fixture
def produced(cli, tmp_path):
    """A partition written by produce: 2 batches (keys p3, p5 / p6 and a tombstone with headers)."""
    data = tmp_path / "data"
    assert cli("--data-dir", data, "topics", "create", "--topic", "t").code == 0
    lines = [{"key": "p3", "value": "10$", "timestamp": 1700000000000},
             {"key": "p5", "value": "7$", "timestamp": 1700000000005}]
    assert cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
               stdin="".join(json.dumps(o) + "\n" for o in lines)).code == 0
    more = [{"key": "p6", "value": "25$", "timestamp": 1700000000010,
             "headers": [{"key": "h1", "value": "x"}, {"key": "h2", "value": None}]},
            {"key": "p3", "value": None, "timestamp": 1700000000011}]
    assert cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
               stdin="".join(json.dumps(o) + "\n" for o in more)).code == 0
    return data / "t-0"


# -- logs made here -------------------------------------------------------------------------------

BATCH_LINE = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: -1 lastSequence: -1 producerId: -1 "
    r"producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    r"deleteHorizonMs: OptionalLong.empty position: (\d+) CreateTime: (\d+) size: (\d+) magic: 2 "
    r"compresscodec: none crc: (\d+) isvalid: true$")


def test_text_dump_of_a_produced_log(cli, produced):
    path = produced / f"{SEG0}.log"
    r = cli("dump-log", "--files", path)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    batches = [BATCH_LINE.match(line) for line in lines[2:]]
    assert all(batches) and len(batches) == 2, lines
    (b0, l0, c0, p0, t0, s0, _), (b1, l1, c1, p1, t1, s1, _) = [m.groups() for m in batches]
    assert (b0, l0, c0, p0, t0) == ("0", "1", "2", "0", "1700000000005")
    assert (b1, l1, c1, p1, t1) == ("2", "3", "2", s0, "1700000000011")
    assert int(s0) + int(s1) == os.path.getsize(path)

    lines = cli("dump-log", "--files", path, "--print-data-log").out.splitlines()
    records = [line for line in lines if line.startswith("| ")]
    assert records == [
        "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 3 sequence: -1 headerKeys: [] key: p3 payload: 10$",
        "| offset: 1 CreateTime: 1700000000005 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: p5 payload: 7$",
        "| offset: 2 CreateTime: 1700000000010 keySize: 2 valueSize: 3 sequence: -1 headerKeys: [h1,h2] key: p6 payload: 25$",
        "| offset: 3 CreateTime: 1700000000011 keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: p3",
    ]
    deep = cli("dump-log", "--files", path, "--deep-iteration").out.splitlines()
    assert [line for line in deep if line.startswith("| ")] == [line.split(" key:")[0] for line in records]


def test_json_dump_of_a_produced_log(cli, produced):
    objs = dump_json(cli, produced / f"{SEG0}.log")
    assert objs[0] == {"type": "file", "file": str(produced / f"{SEG0}.log"), "kind": "log", "baseOffset": 0}
    b0, b1 = of_type(objs, "batch")
    assert {k: b0[k] for k in ("baseOffset", "lastOffset", "count", "position", "magic", "isValid",
                                "compression", "timestampType", "baseTimestamp", "maxTimestamp",
                                "deleteHorizonMs", "producerId", "producerEpoch", "baseSequence",
                                "transactional", "control", "partitionLeaderEpoch")} == {
        "baseOffset": 0, "lastOffset": 1, "count": 2, "position": 0, "magic": 2, "isValid": True,
        "compression": "none", "timestampType": "CreateTime", "baseTimestamp": 1700000000000,
        "maxTimestamp": 1700000000005, "deleteHorizonMs": None, "producerId": -1, "producerEpoch": -1,
        "baseSequence": -1, "transactional": False, "control": False, "partitionLeaderEpoch": 0}
    assert b1["position"] == b0["sizeInBytes"] and 0 <= b1["crc"] < 2**32
    records = of_type(objs, "record")
    assert [(r["offset"], r["key"], r["value"]) for r in records] == \
        [(0, "p3", "10$"), (1, "p5", "7$"), (2, "p6", "25$"), (3, "p3", None)]
    assert records[2]["headers"] == [{"key": "h1", "value": "x"}, {"key": "h2", "value": None}]
    # without --print-data-log / --deep-iteration only batches
    assert of_type(dump_json(cli, produced / f"{SEG0}.log", deep=False), "record") == []


def test_bad_crc_and_truncated_tail_are_reported(cli, produced, tmp_path):
    raw = bytearray((produced / f"{SEG0}.log").read_bytes())
    raw[raw.index(b"25$")] ^= 0x01
    bad = tmp_path / f"{SEG0}.log"
    bad.write_bytes(bytes(raw[:-5]))        # second batch: flipped byte; and its last 5 bytes cut
    objs = dump_json(cli, bad)
    (b0,) = of_type(objs, "batch")
    (tail,) = of_type(objs, "invalidBytes")
    invalid = len(raw) - 5 - b0["sizeInBytes"]
    assert b0["isValid"] and tail == {"type": "invalidBytes", "position": b0["sizeInBytes"],
                                      "bytes": invalid, "reason": None}
    r = cli("dump-log", "--files", bad)
    assert r.code == 0, r.err
    assert r.out.splitlines()[-1] == f"Found {invalid} invalid bytes at the end of {SEG0}.log"
    # the whole file with only the CRC broken: the batch is dumped with isvalid false
    bad.write_bytes(bytes(raw))
    r = cli("dump-log", "--files", bad, "--print-data-log")
    assert r.out.count("isvalid: true") == 1 and r.out.count("isvalid: false") == 1
    assert "key: p6 payload: 35$" in r.out     # "25$" with the flipped bit, still decoded
    assert [b["isValid"] for b in of_type(dump_json(cli, bad), "batch")] == [True, False]


def test_a_corrupt_length_is_reported_as_invalid_bytes(cli, tmp_path, produced):
    raw = bytearray((produced / f"{SEG0}.log").read_bytes())
    first = int.from_bytes(raw[8:12], "big") + 12
    raw[first + 8:first + 12] = (3).to_bytes(4, "big")   # below the 14-byte minimum
    bad = tmp_path / "corrupt.log"
    bad.write_bytes(bytes(raw))
    objs = dump_json(cli, bad)
    assert len(of_type(objs, "batch")) == 1
    (tail,) = of_type(objs, "invalidBytes")
    assert tail["position"] == first and tail["bytes"] == len(raw) - first and "size" in tail["reason"]


def test_index_files_and_snapshot_of_a_produced_log(cli, tmp_path):
    data = tmp_path / "data"
    assert cli("--data-dir", data, "topics", "create", "--topic", "t", "--config", "index.interval.bytes=100"
               ).code == 0
    lines = "".join(json.dumps({"key": f"key{i}", "value": "v" * 60, "timestamp": 1700000000000 + i}) + "\n"
                    for i in range(8))
    assert cli("--data-dir", data, "produce", "--topic", "t", "--batch-size", "1", "--input-format", "jsonl",
               stdin=lines).code == 0
    pdir = data / "t-0"
    idx = cli("dump-log", "--files", pdir / f"{SEG0}.index").out.splitlines()
    assert idx[0] == f"Dumping {pdir / f'{SEG0}.index'}"
    assert len(idx) > 2 and all(re.fullmatch(r"offset: \d+ position: \d+", line) for line in idx[1:])
    assert "Mismatches" not in "\n".join(idx)
    entries = of_type(dump_json(cli, pdir / f"{SEG0}.index"), "indexEntry")
    batches = {b["position"]: b for b in of_type(dump_json(cli, pdir / f"{SEG0}.log"), "batch")}
    assert all(batches[e["position"]]["lastOffset"] == e["offset"] for e in entries)
    tix = of_type(dump_json(cli, pdir / f"{SEG0}.timeindex"), "timeIndexEntry")
    assert len(tix) > 1 and tix[-1] == {"type": "timeIndexEntry", "timestamp": 1700000000007, "offset": 7}
    assert of_type(dump_json(cli, pdir / f"{SEG0}.timeindex"), "timeIndexMismatch") == []
    snaps = sorted(n for n in os.listdir(pdir) if n.endswith(".snapshot"))
    objs = dump_json(cli, pdir / snaps[-1])
    assert of_type(objs, "snapshot") == [{"type": "snapshot", "version": 1, "producers": 0}]


def test_txn_index_and_producer_snapshot(cli, tmp_path):
    data = tmp_path / "data"
    assert cli("--data-dir", data, "topics", "create", "--topic", "t").code == 0
    with DataDir(str(data), writable=True) as dd:
        log = dd.open_log("t", 0)
        log.append_records([b"a", b"b"], [b"1", b"2"], producer_id=42, producer_epoch=3, base_sequence=0,
                           transactional=True)
        log.append_control(commit=False, producer_id=42, producer_epoch=3, coordinator_epoch=5)
        log.append_records([b"c"], [b"3"], producer_id=43, producer_epoch=0, base_sequence=0,
                           transactional=True)
    pdir = data / "t-0"
    r = cli("dump-log", "--files", pdir / f"{SEG0}.txnindex")
    assert r.out.splitlines()[1:] == [
        "AbortedTxn(version=0, producerId=42, firstOffset=0, lastOffset=2, lastStableOffset=3)"]
    assert of_type(dump_json(cli, pdir / f"{SEG0}.txnindex"), "abortedTxn") == [
        {"type": "abortedTxn", "version": 0, "producerId": 42, "firstOffset": 0, "lastOffset": 2,
         "lastStableOffset": 3}]

    log_text = cli("dump-log", "--files", pdir / f"{SEG0}.log", "--deep-iteration").out
    assert "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 42 " \
           "producerEpoch: 3 partitionLeaderEpoch: 0 isTransactional: true isControl: false" in log_text
    assert "| offset: 1 CreateTime:" in log_text and " sequence: 1 headerKeys: []" in log_text
    assert re.search(r"\| offset: 2 CreateTime: \d+ keySize: 4 valueSize: 6 sequence: -1 headerKeys: \[\] "
                     r"endTxnMarker: ABORT coordinatorEpoch: 5$", log_text, re.M)
    marker = of_type(dump_json(cli, pdir / f"{SEG0}.log"), "record")[2]
    assert (marker["controlType"], marker["coordinatorEpoch"]) == ("ABORT", 5)

    (snap,) = [n for n in os.listdir(pdir) if n.endswith(".snapshot")]
    text = cli("dump-log", "--files", pdir / snap).out.splitlines()[1:]
    assert text[0].startswith("producerId: 42 producerEpoch: 3 coordinatorEpoch: 5 "
                              "currentTxnFirstOffset: OptionalLong.empty ")
    assert "firstSequence: 0 lastSequence: 1 lastOffset: 1 offsetDelta: 1" in text[0]
    assert "producerId: 43 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[3]" in text[1]
    producers = of_type(dump_json(cli, pdir / snap), "producer")
    assert [(p["producerId"], p["lastSequence"], p["currentTxnFirstOffset"]) for p in producers] == \
        [(42, 1, None), (43, 0, 3)]


def test_files_as_a_comma_separated_list_and_missing_files(cli, produced):
    log, idx = produced / f"{SEG0}.log", produced / f"{SEG0}.timeindex"
    r = cli("dump-log", "--files", f"{log},{idx}")
    assert [line for line in r.out.splitlines() if line.startswith("Dumping")] == \
        [f"Dumping {log}", f"Dumping {idx}"]
    r = cli("dump-log", "--files", log, "--files", produced / "nope.log")
    assert r.code != 0 and r.err.strip() == f"error: {produced / 'nope.log'}: no such file" and r.out == ""


# -- real Kafka files -----------------------------------------------------------------------------

def test_ldi_poc_log(cli):
    """13 one-record batches written by Kafka 3.7.0, offsets 0-12, group metadata and offset commits."""
    objs = dump_json(cli, os.path.join(LDI, f"{SEG0}.log"))
    batches, records = of_type(objs, "batch"), of_type(objs, "record")
    assert len(batches) == 13 and of_type(objs, "invalidBytes") == []
    assert [(b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [(i, i, 1) for i in range(13)]
    assert all(b["isValid"] and b["partitionLeaderEpoch"] == 0 and b["timestampType"] == "CreateTime"
               and b["compression"] == "none" and b["producerId"] == -1 and b["magic"] == 2 for b in batches)
    keys = [key_bytes(r) for r in records]
    # __consumer_offsets keys: version 2 = group metadata, version 1 = offset commit
    assert [i for i, k in enumerate(keys) if k[:2] == b"\x00\x02"] == [0, 2, 4, 5, 6, 7]
    assert [i for i, k in enumerate(keys) if k[:2] == b"\x00\x01"] == [1, 3, 8, 9, 10, 11, 12]
    assert all(b"DEVSmileCDR" in k for k in keys)
    assert all("value_b64" in r or r["value"] is not None for r in records)   # no tombstone
    latest = latest_per_key(records)
    assert sorted(r["offset"] for r in latest.values()) == [1, 3, 7, 9, 12]


def test_ldi_poc_indexes_snapshot_and_checkpoints(cli):
    objs = dump_json(cli, os.path.join(LDI, f"{SEG0}.index"), os.path.join(LDI, f"{SEG0}.timeindex"))
    assert [(e["offset"], e["position"]) for e in of_type(objs, "indexEntry")] == [(3, 4730), (7, 9571)]
    assert [(e["timestamp"], e["offset"]) for e in of_type(objs, "timeIndexEntry")] == \
        [(1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
    assert of_type(objs, "indexMismatch") == [] and of_type(objs, "timeIndexMismatch") == []
    r = cli("dump-log", "--files", os.path.join(LDI, f"{SEG0}.index"), "--files", os.path.join(LDI, f"{SEG0}.timeindex"))
    assert r.out.splitlines()[1:3] == ["offset: 3 position: 4730", "offset: 7 position: 9571"]
    assert r.out.splitlines()[4:] == ["timestamp: 1769791783399 offset: 3", "timestamp: 1769792518093 offset: 7",
                                      "timestamp: 1769793578176 offset: 12"]

    objs = dump_json(cli, os.path.join(LDI, "00000000000000000013.snapshot"))
    assert objs[0]["kind"] == "snapshot" and objs[0]["baseOffset"] == 13
    assert objs[1:] == [{"type": "snapshot", "version": 1, "producers": 0}]
    assert cli("dump-log", "--files", os.path.join(LDI, "00000000000000000013.snapshot")).out.count("\n") == 1

    objs = dump_json(cli, os.path.join(LDI, "leader-epoch-checkpoint"), os.path.join(LDI, "partition.metadata"))
    assert of_type(objs, "leaderEpochEntry") == [{"type": "leaderEpochEntry", "epoch": 0, "startOffset": 0}]
    assert of_type(objs, "partitionMetadata")[0]["topicId"] == "gSnfpEbtQfSDpxM2lhEn9A"
    r = cli("dump-log", "--files", os.path.join(LDI, "leader-epoch-checkpoint"))
    assert r.out.splitlines()[1:] == ["version: 0 entries: 1", "epoch: 0 startOffset: 0"]

    objs = dump_json(cli, os.path.join(VECTORS, "Niloufar1171+LDI-POC", "recovery-point-offset-checkpoint"))
    assert of_type(objs, "checkpoint") == [{"type": "checkpoint", "version": 0, "entries": 54}]
    assert len(of_type(objs, "checkpointEntry")) == 54
    objs = dump_json(cli, os.path.join(CONNECT, "cleaner-offset-checkpoint"))
    assert of_type(objs, "checkpoint")[0]["entries"] == 0 and of_type(objs, "checkpointEntry") == []


def test_bheem_logs(cli):
    objs = dump_json(cli, os.path.join(BHEEM, "__consumer_offsets-0", f"{SEG0}.log"))
    assert len(of_type(objs, "batch")) == 2
    records = of_type(objs, "record")
    assert len({key_bytes(r) for r in records}) == 1 and b"console-consumer-14897" in key_bytes(records[0])
    assert [r["offset"] for r in latest_per_key(records).values()] == [1]

    objs = dump_json(cli, os.path.join(BHEEM, "cities-0", f"{SEG0}.log"))
    assert len(of_type(objs, "batch")) == 11
    records = of_type(objs, "record")
    assert all(r["key"] is None for r in records)
    values = [r["value"] for r in records]
    assert len(values) == 11 and values[:2] == ["New York", "Berlin"] and values[-1] == "Toronto"
    text = cli("dump-log", "--files", os.path.join(BHEEM, "cities-0", f"{SEG0}.log"), "--print-data-log").out
    assert "keySize: -1 valueSize: 8 sequence: -1 headerKeys: [] payload: New York" in text
    assert " key: " not in text


@pytest.mark.parametrize("name, batches, records, keys, tombstones, latest, latest_tombstones", [
    ("docker-connect-configs-0", 45, 54, 39, 18, 39, 18),
    ("docker-connect-status-0", 127, 135, 20, 18, 20, 18),
])
def test_connect_logs(cli, name, batches, records, keys, tombstones, latest, latest_tombstones):
    objs = dump_json(cli, os.path.join(CONNECT, name, f"{SEG0}.log"))
    recs = of_type(objs, "record")
    assert len(of_type(objs, "batch")) == batches and len(recs) == records
    assert len({key_bytes(r) for r in recs}) == keys
    assert sum(r["value"] is None for r in recs) == tombstones
    last = latest_per_key(recs).values()
    assert len(last) == latest
    if name == "docker-connect-configs-0":
        assert sum(r["value"] is None for r in last) == latest_tombstones
        # tombstones come in 2-record batches
        assert all(b["count"] == 2 for b in of_type(objs, "batch") if b["count"] > 1)
    else:
        assert sum(r["value"] is not None for r in last) == 2      # what survives the delete horizon


@pytest.mark.parametrize("name, codec, size", [
    ("uncompressed_record.bin", "none", 82), ("gzipped_record.bin", "gzip", None),
    ("snappy_compressed_record.bin", "snappy", None), ("lz4_compressed_record.bin", "lz4", None),
])
def test_sarama_records(cli, name, codec, size):
    objs = dump_json(cli, os.path.join(SARAMA, name))
    assert objs[0]["kind"] == "log" and objs[0]["baseOffset"] is None
    (b,) = of_type(objs, "batch")
    assert b["compression"] == codec and b["isValid"] and b["count"] == 1
    if size is not None:
        assert b["sizeInBytes"] == size
    (r,) = of_type(objs, "record")
    assert key_bytes(r) == b"\x01\x02\x03\x04"
    assert r["value"].encode() == b"\x05\x06\x07"
    assert r["timestamp"] == 1479847795005
    assert r["headers"] == [{"key": "\x08\t\n", "value": "\x0b\x0c"}]


def test_sarama_empty_control_batch(cli):
    objs = dump_json(cli, os.path.join(SARAMA, "control_batch.bin"))
    (b,) = of_type(objs, "batch")
    assert b["control"] and b["count"] == 0 and b["isValid"] and b["sizeInBytes"] == 61
    assert of_type(objs, "record") == []


def test_dpkp_v2_batches(cli):
    objs = dump_json(cli, os.path.join(DPKP, "record_batch_data_v2.bin"))
    batches, records = of_type(objs, "batch"), of_type(objs, "record")
    assert [b["baseOffset"] for b in batches] == [0, 1, 3, 0]     # the 4th starts again at 0
    assert all(b["isValid"] for b in batches)
    assert [r["value"] for r in records[:4]] == ["123", "", "", "123"]
    assert records[4]["headers"] == [{"key": "hkey", "value": "hval"}]


def test_dpkp_v1_messages(cli):
    objs = dump_json(cli, os.path.join(DPKP, "record_batch_data_v1.bin"))
    batches = of_type(objs, "batch")
    assert [(b["magic"], b["lastOffset"], b["isValid"], b["compression"]) for b in batches] == \
        [(1, i, True, "none") for i in range(4)]
    assert [r["value"] for r in of_type(objs, "record")] == ["123", "", "", "123"]
    text = cli("dump-log", "--files", os.path.join(DPKP, "record_batch_data_v1.bin"), "--print-data-log").out
    lines = text.splitlines()
    assert re.fullmatch(r"offset: 0 position: 0 CreateTime: \d+ size: 37 magic: 1 compresscodec: none "
                        r"crc: \d+ isvalid: true", lines[1])
    assert re.fullmatch(r"\| offset: 0 CreateTime: \d+ keySize: -1 valueSize: 3 crc: \d+ isvalid: true "
                        r"payload: 123", lines[2])


def test_dpkp_control_batch_with_a_bad_crc(cli):
    objs = dump_json(cli, os.path.join(DPKP, "control_batch_data_v2.bin"))
    (b,) = of_type(objs, "batch")
    assert b["control"] and b["isValid"] is False
    (r,) = of_type(objs, "record")
    assert r["controlType"] == "ABORT" and r["key"] == "\x00\x00\x00\x00"
    text = cli("dump-log", "--files", os.path.join(DPKP, "control_batch_data_v2.bin"), "--deep-iteration").out
    assert "isControl: true" in text and "isvalid: false" in text and "endTxnMarker: ABORT" in text


def test_segment_files_with_marker_suffixes(cli, tmp_path):
    for plain, marked in ((".log", ".log.deleted"), (".index", ".index.swap"), (".timeindex", ".timeindex.cleaned")):
        shutil.copy(os.path.join(LDI, SEG0 + plain), tmp_path / (SEG0 + marked))
    objs = dump_json(cli, tmp_path / f"{SEG0}.log.deleted", tmp_path / f"{SEG0}.index.swap",
                     tmp_path / f"{SEG0}.timeindex.cleaned")
    assert [o["kind"] for o in of_type(objs, "file")] == ["log", "offsetIndex", "timeIndex"]
    assert len(of_type(objs, "batch")) == 13 and len(of_type(objs, "indexEntry")) == 2
    assert len(of_type(objs, "timeIndexEntry")) == 3
