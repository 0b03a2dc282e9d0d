"""``compactlog dump-log --offsets-decoder``: ``__consumer_offsets`` records printed as
kafka-dump-log's OffsetsMessageParser prints them, on the Kafka-written fixtures and on files
compactlog wrote."""

from __future__ import annotations

import json
import os

from compactlog.record import consumer_offsets as R
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "data", "kafka-vectors")
LDI_LOG = os.path.join(VECTORS, "Niloufar1171+LDI-POC", "__consumer_offsets-6", "00000000000000000000.log")
BHEEM_LOG = os.path.join(VECTORS, "Bheem6005+kafka", "kafka-logs", "__consumer_offsets-0",
                         "00000000000000000000.log")


def record_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("| offset:")]


def test_kafka_fixture_text(cli):
    r = cli("dump-log", "--offsets-decoder", "--files", LDI_LOG)
    assert r.code == 0, r.err
    lines = record_lines(r.out)
    assert len(lines) == 13
    # the decoder implies --print-data-log and --deep-iteration, as in Kafka
    assert lines[1] == (
        '| offset: 1 CreateTime: 1769791663129 keySize: 66 valueSize: 24 sequence: 0 headerKeys: [] '
        'key: {"type":"1","data":{"group":"DEVSmileCDR","topic":'
        '"batch2.work.notification.SHR_PROD.persistence","partition":0}} '
        'payload: {"version":"3","data":{"offset":0,"leaderEpoch":-1,"metadata":"",'
        '"commitTimestamp":1769791663122}}')
    assert lines[4] == (
        '| offset: 4 CreateTime: 1769791855190 keySize: 15 valueSize: 32 sequence: -1 headerKeys: [] '
        'key: {"type":"2","data":{"group":"DEVSmileCDR"}} '
        'payload: {"version":"3","data":{"protocolType":"consumer","generation":3,"protocol":null,'
        '"leader":null,"currentStateTimestamp":1769791855188,"members":[]}}')
    assert '"subscription":{"topics":["batch2.work.notification.SHR_PROD.persistence"]' in lines[7]
    assert r.out.splitlines()[0] == f"Dumping {LDI_LOG}"
    assert "Log starting offset: 0" in r.out


def test_kafka_fixture_json(cli):
    r = cli("dump-log", "--offsets-decoder", "--json", "--files", BHEEM_LOG)
    assert r.code == 0, r.err
    recs = [o for o in map(json.loads, r.out.splitlines()) if o["type"] == "record"]
    assert [o["decodedKey"] for o in recs] == [{"type": "2", "data": {"group": "console-consumer-14897"}}] * 2
    first = recs[0]["decodedValue"]["data"]["members"][0]
    assert first["assignment"] == {"assignedPartitions": [{"topic": "cities", "partitions": [0]}],
                                   "userData": None}
    assert recs[1]["decodedValue"] == {"version": "3", "data": {
        "protocolType": "consumer", "generation": 2, "protocol": None, "leader": None,
        "currentStateTimestamp": 1645954316920, "members": []}}


def test_files_compactlog_wrote(cli, tmp_path):
    """Records written by compactlog (the coordinator's encoders, appended as it appends them):
    tombstones print <DELETE>, keys this decoder does not know are skipped as Kafka skips them."""
    dd = DataDir(str(tmp_path / "d"), broker=BrokerConfig({}), writable=True, create=True, command="test")
    dd.create_topic(R.OFFSETS_TOPIC, 1, {"cleanup.policy": "compact"})
    log = dd.open_log(R.OFFSETS_TOPIC, 0)
    recs = [R.offset_commit_record("g", "t", 2, R.OffsetCommitValue(17, 0, "m", 1700000000000)),
            R.offset_commit_record("g", "t", 3, None),
            R.group_metadata_record("g", R.GroupMetadataValue("", 0, None, None, 1700000000001, []))]
    log.append_records([r.key_bytes() for r in recs], [r.value_bytes() for r in recs],
                       timestamps=[1700000000000] * 3)
    log.append_records([b"\x00\x09\x00\x01x"], [b""], timestamps=[1700000000000])
    path = os.path.join(log.dir, "00000000000000000000.log")
    # a compacted topic refuses keyless records: one from a plain topic shows the missing-key line
    dd.create_topic("plain", 1)
    plain = dd.open_log("plain", 0)
    plain.append_records([None], [b"v"], timestamps=[1700000000000])
    plain_path = os.path.join(plain.dir, "00000000000000000000.log")
    dd.close()
    r = cli("dump-log", "--offsets-decoder", "--files", path)
    assert r.code == 0, r.err
    lines = record_lines(r.out)
    assert lines[0].endswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":2}} '
                             'payload: {"version":"3","data":{"offset":17,"leaderEpoch":0,'
                             '"metadata":"m","commitTimestamp":1700000000000}}')
    assert lines[1].endswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} '
                             'payload: <DELETE>')
    assert lines[2].endswith('payload: {"version":"3","data":{"protocolType":"","generation":0,'
                             '"protocol":null,"leader":null,"currentStateTimestamp":1700000000001,'
                             '"members":[]}}')
    assert lines[3].endswith("key: Unknown record type 9 at offset 3, skipping.")
    r = cli("dump-log", "--offsets-decoder", "--files", plain_path)
    assert r.code == 0, r.err
    assert record_lines(r.out)[0].endswith(
        "key: Error at offset 0, skipping. Failed to decode message at offset 0 using offset topic "
        "decoder (message had a missing key)")
