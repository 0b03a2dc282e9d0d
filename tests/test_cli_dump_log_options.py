"""dump-log's remaining kafka-dump-log.sh options: --transaction-log-decoder, --verify-index-only,
--index-sanity-check, --max-bytes, and a directory standing for its segment files."""

from __future__ import annotations

import json
import os
import struct

from compactlog.record.transaction_log import decode_value, encode_key, encode_value_v0
from compactlog.storage.datadir import DataDir

T0 = 1_700_000_000_000


def build(root):
    with DataDir(str(root), create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("__transaction_state", 1, {"segment.bytes": "400", "index.interval.bytes": "1"})
        log = dd.open_log("__transaction_state", 0)
        for i in range(6):
            status = 1 if i % 2 == 0 else 4
            value = encode_value_v0(1000 + i, 0, 60000, status, [("orders", [0, 2])] if status == 1 else [],
                                    T0 + i, T0)
            log.append_records([encode_key(f"txn-{i}")], [value], timestamps=[T0 + i])
        log.append_records([encode_key("txn-0")], [None], timestamps=[T0 + 9])
    return os.path.join(str(root), "__transaction_state-0")


def test_transaction_log_decoder(cli, tmp_path):
    pdir = build(tmp_path / "d")
    r = cli("dump-log", "--transaction-log-decoder", "--files", pdir)
    assert r.code == 0, r.err
    lines = [x for x in r.out.splitlines() if x.startswith("| offset")]
    assert len(lines) == 7
    assert ' key: {"type":"0","data":{"transactionalId":"txn-0"}} payload: {"version":"0","data":{"producerId":1000,' \
        '"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":1,"transactionPartitions":' \
        '[{"topic":"orders","partitionIds":[0,2]}],"transactionLastUpdateTimestampMs":1700000000000,' \
        f'"transactionStartTimestampMs":{T0}}}}}' in lines[0]
    assert lines[-1].endswith('key: {"type":"0","data":{"transactionalId":"txn-0"}} payload: <DELETE>')
    r = cli("dump-log", "--transaction-log-decoder", "--json", "--files", pdir)
    recs = [json.loads(x) for x in r.out.splitlines() if '"record"' in x]
    assert recs[1]["decodedValue"]["data"]["transactionStatus"] == 4


def test_directory_max_bytes_and_index_checks(cli, tmp_path):
    pdir = build(tmp_path / "d")
    segs = sorted(n for n in os.listdir(pdir) if n.endswith(".log"))
    assert len(segs) > 1
    r = cli("dump-log", "--files", pdir)
    assert [x.split()[1] for x in r.out.splitlines() if x.startswith("Dumping")] == \
        [os.path.join(pdir, n) for n in segs]
    first = os.path.join(pdir, segs[0])
    sizes = [json.loads(x)["sizeInBytes"] for x in cli("dump-log", "--json", "--files", first).out.splitlines()
             if '"batch"' in x]
    assert len(sizes) > 1
    r = cli("dump-log", "--max-bytes", str(sizes[0] + 1), "--files", first)
    assert sum(x.startswith("baseOffset") for x in r.out.splitlines()) == 1
    index = os.path.join(pdir, segs[0][:-4] + ".index")
    timeindex = os.path.join(pdir, segs[0][:-4] + ".timeindex")
    r = cli("dump-log", "--index-sanity-check", "--files", f"{index},{timeindex}")
    assert f"{index} passed sanity check." in r.out and f"{timeindex} passed sanity check." in r.out
    r = cli("dump-log", "--verify-index-only", "--files", index)
    assert "offset:" not in r.out and "Mismatches" not in r.out
    with open(timeindex, "ab") as f:                       # a last timestamp below the first
        f.write(struct.pack(">qi", 5, 0))
    r = cli("dump-log", "--index-sanity-check", "--files", timeindex)
    assert "failed sanity check" in r.out and "less than the first timestamp" in r.out


def test_transaction_log_value_v1_tagged_fields():
    raw = bytearray(encode_value_v0(7, 1, 100, 2, None, 5, 6))
    # v1 (flexible): the same fields in compact form, then tagged fields 0 and 2
    v1 = struct.pack(">hqhib", 1, 7, 1, 100, 2) + b"\x00" + struct.pack(">qq", 5, 6)
    v1 += b"\x02" + b"\x00\x08" + struct.pack(">q", 3) + b"\x02\x02" + struct.pack(">h", 2)
    assert decode_value(bytes(raw))["data"]["transactionPartitions"] is None
    d = decode_value(v1)["data"]
    assert list(d)[:2] == ["producerId", "previousProducerId"] and d["previousProducerId"] == 3
    assert d["clientTransactionVersion"] == 2 and d["transactionPartitions"] is None


def test_transaction_log_decoder_notes_what_kafka_cannot_read(cli, tmp_path):
    """A v1 value with tag 3 (NextProducerEpoch) printed; a value version and a key version Kafka
    4.x cannot read noted and skipped, the records after them printed."""
    from compactlog.record.transaction_log import encode_value_v1
    root = str(tmp_path / "d")
    with DataDir(root, create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("__transaction_state", 1)
        log = dd.open_log("__transaction_state", 0)
        v1 = encode_value_v1(5, 3, 60000, 4, [], T0, T0, previous_producer_id=4, next_producer_epoch=4)
        log.append_records([encode_key("a"), encode_key("b"), b"\x00\x07" + encode_key("c")[2:], encode_key("d")],
                           [v1, b"\x00\x02" + v1[2:], v1, v1], timestamps=[T0] * 4)
    pdir = os.path.join(root, "__transaction_state-0")
    r = cli("dump-log", "--transaction-log-decoder", "--files", pdir)
    assert r.code == 0, r.err
    lines = [x for x in r.out.splitlines() if x.startswith("| offset")]
    assert lines[0].endswith(' key: {"type":"0","data":{"transactionalId":"a"}} payload: {"version":"1","data":'
                             '{"producerId":5,"previousProducerId":4,"producerEpoch":3,"nextProducerEpoch":4,'
                             '"transactionTimeoutMs":60000,"transactionStatus":4,"transactionPartitions":[],'
                             f'"transactionLastUpdateTimestampMs":{T0},"transactionStartTimestampMs":{T0}}}}}')
    assert lines[1].endswith(" key: Error at offset 1, skipping. Could not read record with version 2 from value's "
                             "buffer due to: Can't read version 2 of TransactionLogValue.")
    assert lines[2].endswith(" key: Unknown record type 7 at offset 2, skipping.")
    assert '"transactionalId":"d"' in lines[3]
    r = cli("dump-log", "--transaction-log-decoder", "--json", "--files", pdir)
    recs = [json.loads(x) for x in r.out.splitlines() if '"record"' in x]
    assert recs[0]["decodedValue"]["version"] == "1" and recs[0]["decodedValue"]["data"]["nextProducerEpoch"] == 4
    assert recs[2]["decodedKey"] == "Unknown record type 7 at offset 2, skipping." and recs[2]["decodedValue"] is None
