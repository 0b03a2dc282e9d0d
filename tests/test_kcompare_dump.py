"""Directories written here decode identically with the corpus' independent decoder (kcompare dump)."""

from __future__ import annotations

import base64
import os

from corpus_support import kcompare

from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.record import compression
from compactlog.storage.datadir import DataDir
from compactlog.storage.reader import PartitionReader

T0 = 1_700_000_000_000


def _text(b):
    if b is None:
        return ("value", None)
    try:
        return ("", b.decode("utf-8"))
    except UnicodeDecodeError:
        return ("_b64", base64.b64encode(b).decode())


def build(path):
    clock = [T0]
    with DataDir(str(path), clock=lambda: clock[0], create=True, writable=True) as dd:
        dd.create_topic("topic", 1, {"cleanup.policy": "compact", "segment.bytes": "2000",
                                     "index.interval.bytes": "200"})
        log = dd.open_log("topic", 0)
        for i in range(40):
            clock[0] += 7
            codec = ["none", "gzip", "snappy", "lz4", "zstd"][i % 5]
            log.append_records([f"k{i % 9}".encode(), bytes([0xff, i])], [f"v{i}".encode(), None],
                               headers=[[("h", b"x"), ("n", None)], []], compression=codec,
                               timestamps=[clock[0], clock[0] + 1])
            if i % 10 == 3:
                log.append_records([b"t"], [b"txn"], producer_id=5, producer_epoch=0, base_sequence=i // 10,
                                   transactional=True)
                log.append_control(commit=i % 20 == 3, producer_id=5, producer_epoch=0)
        log.roll()


def test_kcompare_decodes_our_directory_like_we_do(tmp_path, corpus_dir):
    build(tmp_path / "d")
    kc = kcompare(corpus_dir)
    lines, problems = kc.decode_dir(str(tmp_path / "d"))
    assert problems == []
    batches = [l for l in lines if l["type"] == "batch"]
    records = [l for l in lines if l["type"] == "record"]
    reader = PartitionReader(str(tmp_path / "d" / "topic-0"))
    ours = list(reader.batches())
    assert len(batches) == len(ours) > 40
    for kb, b in zip(batches, ours):
        h = b.header
        assert (kb["baseOffset"], kb["lastOffset"], kb["count"], kb["crc"], kb["sizeInBytes"]) == \
            (h.base_offset, h.last_offset, h.records_count, h.crc, h.size)
        assert kb["compression"] == compression.CODEC_NAMES[h.compression]
        assert (kb["producerId"], kb["producerEpoch"], kb["baseSequence"], kb["transactional"], kb["control"]) == \
            (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional, h.is_control)
        assert (kb["baseTimestamp"], kb["maxTimestamp"]) == (h.base_timestamp, h.max_timestamp)
    ours_records = list(reader.records(include_control=True))
    assert len(records) == len(ours_records)
    for kr, r in zip(records, ours_records):
        assert kr["offset"] == r.offset and kr["timestamp"] == r.timestamp
        for name, value in (("key", r.key), ("value", r.value)):
            suffix, text = _text(value)
            if value is None:
                assert kr[name] is None
            else:
                assert kr[name + suffix] == text
        if r.headers:
            assert [(h["key"], h.get("value")) for h in kr["headers"]] == \
                [(h.key, None if h.value is None else h.value.decode()) for h in r.headers]


def test_our_empty_and_horizon_batches_decode_in_kcompare(tmp_path, corpus_dir):
    from compactlog.record.batch import BatchHeader, empty_batch
    pdir = tmp_path / "d" / "topic-0"
    os.makedirs(pdir)
    spec = BatchSpec(base_offset=0, partition_leader_epoch=0, delete_horizon_ms=T0 + 86_400_000)
    data = encode_batch(spec, [(0, T0, b"p3", None)])
    data += empty_batch(BatchHeader(1, 49, 0, 2, 0, 0, 2, -1, T0 + 5, 42, 3, 10, 0))
    (pdir / "00000000000000000000.log").write_bytes(data)
    lines, problems = kcompare(corpus_dir).decode_dir(str(tmp_path / "d"))
    assert problems == []
    b0, b1 = [l for l in lines if l["type"] == "batch"]
    assert b0["deleteHorizonMs"] == T0 + 86_400_000 and b0["baseTimestamp"] == T0 + 86_400_000
    assert (b1["count"], b1["baseTimestamp"], b1["lastOffset"], b1["producerId"]) == (0, -1, 3, 42)
