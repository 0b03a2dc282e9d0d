"""The producer alone: header sections from Arrow, one-record batch sizes, the first refused record
and rule, partitioning against Kafka's one-record partitioner, batching, topic look-up and
creation on first append, a refused batch naming its rows."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from compactlog.errors import InvalidRecordError, UnknownTopicError
from compactlog.producer import (HEADERS_TYPE, BatchRefused, Producer, RecordRefused, TopicTarget,
                                 encode_arrow_headers, outgoing_records, single_record_batch_sizes)
from compactlog.record.batch import BatchSpec, columnar_records, encode_columnar_batch
from compactlog.record.batch import encode_headers as codec_headers
from compactlog.storage.config import LogConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.partitioner import StickyPartitioner, partition_for_key

T0 = 1_700_000_000_000


@pytest.fixture
def dd(tmp_path):
    with DataDir(str(tmp_path / "data"), clock=lambda: T0, create=True, writable=True) as d:
        yield d


def test_header_encoding_is_the_codecs():
    rng = random.Random(3)
    lists = []
    for i in range(300):
        if i % 7 == 0:
            lists.append(None)
            continue
        lists.append([{"key": "".join(rng.choice("abcé") for _ in range(rng.randrange(0, 150))),
                       "value": None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))}
                      for _ in range(rng.randrange(0, 4))])
    arr = pa.array(lists, HEADERS_TYPE)
    buf, off = encode_arrow_headers(arr.slice(5))
    for i, hs in enumerate(lists[5:]):
        want = codec_headers([(h["key"], h["value"]) for h in hs]) if hs else b""
        assert bytes(buf[off[i]:off[i + 1]]) == want, i


def test_single_record_batch_size_is_the_encoded_batch():
    rng = random.Random(5)
    keys, values, headers = [], [], []
    for i in range(200):
        keys.append(None if i % 9 == 0 else bytes(rng.randrange(256) for _ in range(rng.choice((0, 5, 70, 300)))))
        values.append(None if i % 11 == 0 else b"v" * rng.choice((0, 1, 63, 64, 200, 9000, 20000)))
        headers.append(None if i % 3 else [("h", b"x" * rng.randrange(0, 200)), ("n", None)][:rng.randrange(0, 3)])
    sizes = single_record_batch_sizes(outgoing_records(keys, values, T0, headers=headers).columns)
    for i in range(200):
        one = encode_columnar_batch(BatchSpec(), columnar_records([keys[i]], [values[i]], [headers[i]]),
                                    np.array([T0]))
        assert sizes[i] == len(one), i


def test_check_names_the_first_refused_record_and_its_first_rule(dd):
    dd.create_topic("c", 2, {"cleanup.policy": "compact", "max.message.bytes": "200",
                             "message.timestamp.after.max.ms": "1000"})
    producer = Producer(dd)
    target = producer.target("c")
    keys = [b"a", None, b"b", None, b"c"]
    values = [b"1", b"2", b"x" * 300, b"4", b"5"]
    stamps = np.array([T0, T0, T0, T0 + 10**9, T0])
    records = outgoing_records(keys, values, stamps, partitions=[None, None, None, 5, 7])
    with pytest.raises(RecordRefused) as e:
        producer.check(target, records, T0)
    assert (e.value.row, e.value.rule) == (1, "key")
    assert isinstance(e.value.error, InvalidRecordError) and "without a key" in str(e.value)
    later = outgoing_records(keys[2:], values[2:], stamps[2:], partitions=[None, 5, 7])
    with pytest.raises(RecordRefused) as e:
        producer.check(target, later, T0)
    assert (e.value.row, e.value.rule) == (0, "size") and e.value.value > 200
    # one record breaking three rules: the timestamp is named first, then the partition
    bad = outgoing_records([None], [b"v"], [T0 + 10**9], partitions=[5])
    with pytest.raises(RecordRefused) as e:
        producer.check(target, bad, T0)
    assert e.value.rule == "timestamp"
    with pytest.raises(RecordRefused) as e:
        producer.check(target, outgoing_records([None], [b"v"], [T0], partitions=[5]), T0)
    assert (e.value.rule, e.value.value) == ("partition", 5)
    assert isinstance(e.value.error, UnknownTopicError)


def test_partitions_match_kafkas_one_record_partitioner(dd):
    dd.create_topic("t", 5)
    producer = Producer(dd, partitioner=StickyPartitioner(rng=random.Random(1)))
    one_by_one = StickyPartitioner(rng=random.Random(1))
    rng = random.Random(2)
    keys = [None if rng.random() < 0.5 else b"k%d" % rng.randrange(1000) for _ in range(3000)]
    values = [b"v" * rng.randrange(0, 400) for _ in keys]
    chosen = [3 if i % 17 == 0 else None for i in range(len(keys))]
    records = outgoing_records(keys, values, T0, partitions=chosen)
    got = producer.partitions_of(producer.target("t"), records)
    want = [c if c is not None else partition_for_key(k, 5) if k is not None
            else one_by_one.partition("t", None, 5, 21 + len(v))
            for k, v, c in zip(keys, values, chosen)]
    assert got.tolist() == want


def test_batches_keep_to_records_and_bytes_and_partition_order(dd):
    dd.create_topic("t", 3, {"max.message.bytes": "1000"})
    producer = Producer(dd, batch_records=4)
    target = producer.target("t")
    keys = [b"k%d" % i for i in range(40)]
    records = outgoing_records(keys, [b"x" * 100] * 40, T0)
    producer.check(target, records, T0)
    sent = producer.send(target, records)
    assert [a.partition for a in sent] == sorted(a.partition for a in sent)
    assert all(a.records <= 4 for a in sent)
    for a in sent:
        assert a.rows.tolist() == sorted(a.rows.tolist())
        assert a.last_offset - a.first_offset + 1 == a.records
        assert all(partition_for_key(keys[r], 3) == a.partition for r in a.rows)
    for p in range(3):
        log = dd.open_log("t", p)
        assert all(b.size <= 1000 for b in log.batches())
    big = Producer(dd)          # no record limit: the bytes cut batches (max.message.bytes 1000)
    sent = big.send(big.target("t"), outgoing_records([b"a"] * 30, [b"x" * 100] * 30, T0))
    assert len(sent) > 1 and sum(a.records for a in sent) == 30


def test_topics_are_created_with_the_first_append(dd):
    producer = Producer(dd)
    target = producer.target("fresh")
    assert not target.exists and target.partitions == dd.broker.get("num.partitions")
    assert not dd.has_topic("fresh")
    producer.send(target, outgoing_records([b"k"], [b"v"], T0))
    assert dd.has_topic("fresh") and target.exists and producer.target("fresh").exists
    with pytest.raises(UnknownTopicError, match="auto.create.topics.enable=false"):
        Producer(dd, create_topics=False).target("other")


def test_a_refused_batch_names_its_rows(dd):
    dd.create_topic("t", 1, {"cleanup.policy": "compact"})
    producer = Producer(dd)
    stale = TopicTarget("t", 1, LogConfig(), True)      # skips the key check the log still makes
    with pytest.raises(BatchRefused) as e:
        producer.send(stale, outgoing_records([b"a", None], [b"1", b"2"], T0))
    assert e.value.rows.tolist() == [0, 1] and e.value.partition == 0
    assert isinstance(e.value.error, InvalidRecordError) and "without a key" in str(e.value)
    assert dd.open_log("t", 0).log_end_offset == 0
