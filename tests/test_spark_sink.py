"""``df.write.format("kafka-log")``: Spark's Kafka-sink columns appended to a data directory.

Without Spark (``compactlog/spark/sink.py`` as the tasks and the commit run it; the header
encoder against the codec's is in ``compactlog/producer_test.py``): Kafka's partitioner (murmur2 of the key, the sticky partition for
keyless records, an explicit partition column), order within a partition, timestamps, headers,
topic auto-creation, every check made before the first append (so that a refused write leaves the
directory as it was) and a refused lock. On Spark: a topic copied from one data dir to another
(key, value, headers, partition) reads back the same, the ``topic`` option overrides the column,
compression, and the errors users see (missing column, overwrite, a held lock) as one line.
"""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

from storage_support import tree_state
from compactlog.errors import DataDirLockedError
from compactlog.spark import sink
from compactlog.spark.options import KafkaLogError
from compactlog.storage.datadir import DataDir
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.reader import PartitionReader

T0 = 1_700_000_000_000


def records(root: str, topic: str) -> dict[int, list]:
    """partition -> [(offset, key, value, timestamp, headers)] as stored."""
    out = {}
    for name in sorted(os.listdir(root)):
        if name.startswith(topic + "-") and name[len(topic) + 1:].isdigit():
            rows = [(r.offset, r.key, r.value, r.timestamp, [(h.key, h.value) for h in r.headers])
                    for r in PartitionReader(os.path.join(root, name)).records()]
            out[int(name[len(topic) + 1:])] = [(o, None if k is None else bytes(k), None if v is None else bytes(v), t,
                                                [(hk, None if hv is None else bytes(hv)) for hk, hv in h])
                                               for o, k, v, t, h in rows]
    return out


def data_state(root: str) -> dict:
    """tree_state of the partition directories and the topics file: what a write would change (a
    writer's open and close rewrite the checkpoints and the clean-shutdown marker at the root)."""
    return {k: v for k, v in tree_state(root).items() if os.sep in k or k == "compactlog.topics.json"}


def batch(rows: list[dict]) -> pa.RecordBatch:
    """Rows as a Spark task would hand them over (only the columns the rows name)."""
    names = [n for n in ("topic", "key", "value", "partition", "headers", "timestamp") if any(n in r for r in rows)]
    types = {"topic": pa.string(), "key": pa.string(), "value": pa.binary(), "partition": pa.int32(),
             "headers": sink.HEADERS_TYPE, "timestamp": pa.timestamp("us", tz="UTC")}
    cols = [pa.array([r.get(n) for r in rows], types[n]) for n in names]
    return pa.RecordBatch.from_arrays(cols, names=names)


def run_sink(root: str, batches: list[list[pa.RecordBatch]], topic: str | None = None, **kw) -> dict:
    """Each inner list is one task's batches; inline and staged hand-over both used."""
    staging = str(os.path.join(os.path.dirname(root), "staging"))
    os.makedirs(staging, exist_ok=True)
    tasks = []
    for i, task in enumerate(batches):
        rows, path, data = sink.encode_task(task, topic, staging if i % 2 else None)
        assert (path is None) == (i % 2 == 0) and rows == sum(b.num_rows for b in task)
        tasks.append((path, data))
    return sink.append(root, tasks, **kw)


@pytest.fixture
def data_dir(tmp_path):
    root = str(tmp_path / "data")
    with DataDir(root, clock=lambda: T0, create=True, writable=True) as dd:
        dd.create_topic("orders", 3)
        dd.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    return root


def test_rows_go_where_kafkas_producer_sends_them(data_dir):
    keyed = [{"topic": "orders", "key": f"key-{i}", "value": f"v{i}".encode()} for i in range(60)]
    explicit = [{"topic": "orders", "key": "pinned", "value": b"p", "partition": 2}]
    with_headers = [{"topic": "orders", "key": "h", "value": b"x", "headers": [{"key": "trace", "value": b"\x00\x01"},
                                                                              {"key": "empty", "value": None}],
                     "timestamp": None}]
    stamped = [{"topic": "orders", "key": "t", "value": b"t", "timestamp": pa.scalar(T0 + 5, pa.timestamp("ms")).as_py()}]
    written = run_sink(data_dir, [[batch(keyed[:30])], [batch(keyed[30:]), batch(explicit)],
                                  [batch(with_headers)], [batch(stamped)]])
    got = records(data_dir, "orders")
    assert sum(written.values()) == 63 and sum(len(v) for v in got.values()) == 63
    for p, rows in got.items():
        assert [r[0] for r in rows] == list(range(len(rows)))
        for _, key, value, ts, headers in rows:
            if key == b"pinned":
                assert p == 2
            else:
                assert p == partition_for_key(key, 3), key
    # within a partition, the tasks' order, then the rows' order
    for p in range(3):
        keys = [r[1].decode() for r in got[p] if r[1].startswith(b"key-")]
        assert keys == sorted(keys, key=lambda k: int(k[4:]))
    h = next(r for rows in got.values() for r in rows if r[1] == b"h")
    assert h[4] == [("trace", b"\x00\x01"), ("empty", None)]
    t = next(r for rows in got.values() for r in rows if r[1] == b"t")
    assert t[3] == T0 + 5


def test_keyless_rows_stick_to_one_partition_per_batch_size(data_dir):
    rows = [{"topic": "orders", "value": b"x" * 100} for _ in range(400)]     # ~48 KB: several 16 KiB spans
    run_sink(data_dir, [[batch(rows)]], rng=random.Random(7))
    got = records(data_dir, "orders")
    assert sum(len(v) for v in got.values()) == 400
    # the sticky partitioner switches only after ~16 KiB (about 130 of these records)
    per = sorted(len(v) for v in got.values() if v)
    assert all(n >= 100 for n in per), per


def test_topic_option_overrides_the_column_and_topics_are_created(data_dir):
    run_sink(data_dir, [[batch([{"topic": "ignored", "key": "a", "value": b"1"}])]], topic="fresh")
    with DataDir(data_dir) as dd:
        assert dd.has_topic("fresh") and not dd.has_topic("ignored")
        assert dd.partitions("fresh") == list(range(dd.broker.get("num.partitions")))
    assert [r[1:3] for rows in records(data_dir, "fresh").values() for r in rows] == [(b"a", b"1")]


def test_everything_is_checked_before_the_first_append(data_dir, tmp_path):
    good = batch([{"topic": "orders", "key": "a", "value": b"1"}])
    cases = {
        "partition column: orders-3 does not exist (orders has 3 partition(s))":
            [good, batch([{"topic": "orders", "key": "b", "value": b"2", "partition": 3}])],
        "a row has a null topic": [good, batch([{"topic": None, "key": "b", "value": b"2"}])],
        "topic compacted is compacted (cleanup.policy=compact) and refuses records without a key":
            [good, batch([{"topic": "compacted", "value": b"2"}])],
        "larger than its max.message.bytes": [good, batch([{"topic": "orders", "key": "big", "value": b"x" * (2 << 20)}])],
        "a header has a null key": [good, batch([{"topic": "orders", "key": "b", "value": b"2",
                                                  "headers": [{"key": None, "value": b"v"}]}])],
        "topic column: ": [good, batch([{"topic": "bad/name", "key": "b", "value": b"2"}])],
    }
    before = data_state(data_dir)
    for message, task in cases.items():
        with pytest.raises(KafkaLogError) as e:
            run_sink(data_dir, [task])
        assert message in str(e.value), (message, str(e.value))
        assert data_state(data_dir) == before, message
    with pytest.raises(KafkaLogError, match="expected none, gzip, snappy, lz4 or zstd"):
        run_sink(data_dir, [[good]], compression="brotli")
    with open(os.path.join(data_dir, "server.properties"), "w") as f:
        f.write("auto.create.topics.enable=false\n")
    with pytest.raises(KafkaLogError, match=r"topic 'new' does not exist in .* \(auto.create.topics.enable=false\)"):
        run_sink(data_dir, [[batch([{"topic": "new", "key": "a", "value": b"1"}])]])


def test_a_held_lock_refuses_the_write(data_dir):
    with DataDir(data_dir, writable=True, command="compactlog serve"):
        with pytest.raises(DataDirLockedError, match="compactlog serve"):
            run_sink(data_dir, [[batch([{"topic": "orders", "key": "a", "value": b"1"}])]])
    assert records(data_dir, "orders") == {0: [], 1: [], 2: []}


# -- on Spark -------------------------------------------------------------------------------------

def test_spark_copies_a_topic_between_data_dirs(spark, data_dir, tmp_path):
    src = data_dir
    rows = [{"topic": "orders", "key": f"k{i % 17}", "value": f"value {i}".encode(),
             "headers": [{"key": "n", "value": str(i).encode()}] if i % 3 == 0 else None} for i in range(200)]
    rows += [{"topic": "orders", "value": b"keyless"}]
    run_sink(src, [[batch(rows)]])
    dst = str(tmp_path / "copy")
    with DataDir(dst, clock=lambda: T0, create=True, writable=True) as dd:
        dd.create_topic("orders", 3)
    df = spark.read.format("kafka-log").option("subscribe", "orders").option("includeHeaders", "true").load(src)
    # Spark's Kafka-sink columns; the rest (offset, timestamp...) is ignored, as by Spark's sink
    df.coalesce(1).sortWithinPartitions("partition", "offset").write.format("kafka-log").mode("append").save(dst)
    assert {p: [r[1:3] + (r[4],) for r in v] for p, v in records(dst, "orders").items()} == \
        {p: [r[1:3] + (r[4],) for r in v] for p, v in records(src, "orders").items()}
    # the topic option overrides the column; compression from kafka.compression.type
    (spark.createDataFrame([("a", "1"), ("b", "2")], "key string, value string").write.format("kafka-log")
     .mode("append").option("topic", "zipped").option("kafka.compression.type", "zstd").save(dst))
    with DataDir(dst) as dd:
        assert dd.has_topic("zipped")
    batches = [b for name in os.listdir(dst) if name.startswith("zipped-")
               for b in PartitionReader(os.path.join(dst, name)).batches()]
    assert batches and all(b.compression == 4 for b in batches)
    assert sorted(r[1] for v in records(dst, "zipped").values() for r in v) == [b"a", b"b"]


def test_spark_write_errors_are_one_line(spark, data_dir):
    df = spark.createDataFrame([("a", "1")], "key string, value string")
    cases = [
        (lambda: df.write.format("kafka-log").mode("append").save(data_dir), "no 'topic' column"),
        (lambda: df.select("key").write.format("kafka-log").mode("append").option("topic", "orders").save(data_dir),
         "required column 'value' not found"),
        (lambda: df.write.format("kafka-log").mode("overwrite").option("topic", "orders").save(data_dir),
         "mode overwrite is not supported"),
        (lambda: df.write.format("kafka-log").mode("append").option("topic", "orders").option("topik", "x")
         .save(data_dir), "unknown write option 'topik' (did you mean topic?)"),
    ]
    for action, message in cases:
        with pytest.raises(Exception) as e:
            action()
        first = str(e.value).splitlines()[0]
        assert message in first and "Traceback" not in str(e.value), str(e.value)
    before = data_state(data_dir)
    with DataDir(data_dir, writable=True, command="compactlog serve"):
        with pytest.raises(Exception) as e:
            df.write.format("kafka-log").mode("append").option("topic", "orders").save(data_dir)
    assert "DataDirLockedError" in str(e.value) and "compactlog serve" in str(e.value)
    assert "Traceback" not in str(e.value)
    assert data_state(data_dir) == before
