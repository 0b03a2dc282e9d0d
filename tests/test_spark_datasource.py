"""The ``kafka-log`` Spark data source (compactlog/spark/datasource.py) against ``compactlog consume``.

Every corpus case's ``input/`` partition (all 90, read by one Spark query), the Kafka-written
directories of tests/data/kafka-vectors and a directory built here must read as exactly the records
``compactlog consume --from-beginning --output-format jsonl`` prints (offsets, keys, values,
timestamps, headers), partition by partition. Then the options, on the built directory whose
contents are known record by record: Spark's Kafka source schema, starting/ending offsets and
timestamps, topic/partitions, includeControl, isolationLevel, includeMetadata, maxBytesPerSplit;
and no read changes a byte, a file name or an mtime in the directory.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
from dataclasses import dataclass

import pytest

from storage_support import tree_state
from compactlog.cli.main import main as cli_main
from compactlog.spark.datasource import KafkaLogReader
from compactlog.storage.datadir import DataDir

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "data", "kafka-vectors")
VECTOR_DIRS = {   # name: (source dir, records per (topic, partition) as the README gives them)
    "ldi-poc": ("Niloufar1171+LDI-POC", {("__consumer_offsets", 6): 13}),
    "bheem-kafka-logs": ("Bheem6005+kafka/kafka-logs", {("__consumer_offsets", 0): 2, ("cities", 0): 11}),
    "connect-kafka-data": ("mscaldas2012+kafka-connect-spooldir/kafka-data",
                           {("docker-connect-configs", 0): 54, ("docker-connect-status", 0): 135}),
}
T0 = 1_700_000_000_000
APPEND_TIME = T0 + 50_000_000


# -- helpers --------------------------------------------------------------------------------------


def _bytes(d: dict, name: str) -> bytes | None:
    if name + "_b64" in d:
        return base64.b64decode(d[name + "_b64"])
    return None if d[name] is None else d[name].encode("utf-8")


def consume_jsonl(data_dir: str, topic: str, *extra: str) -> dict:
    """(topic, partition) -> [(offset, key, value, timestamp, headers)] as `compactlog consume` prints."""
    out = io.BytesIO()
    text = io.TextIOWrapper(out, encoding="utf-8")
    with contextlib.redirect_stdout(text):
        code = cli_main(["--data-dir", data_dir, "consume", "--topic", topic, "--from-beginning",
                         "--output-format", "jsonl", *extra])
    text.flush()
    assert code == 0
    rows: dict = {}
    for line in out.getvalue().decode("utf-8").splitlines():
        d = json.loads(line)
        headers = tuple((h["key"], _bytes(h, "value")) for h in d["headers"])
        rows.setdefault((d["topic"], d["partition"]), []).append(
            (d["offset"], _bytes(d, "key"), _bytes(d, "value"), d["timestamp"], headers))
    return {k: sorted(v) for k, v in rows.items()}


def topics_of(data_dir: str) -> list[str]:
    return sorted({n.rsplit("-", 1)[0] for n in os.listdir(data_dir)
                   if os.path.isdir(os.path.join(data_dir, n)) and n.rsplit("-", 1)[-1].isdigit()})


def consume_all(data_dir: str, *extra: str) -> dict:
    rows = {}
    for t in topics_of(data_dir):
        rows.update(consume_jsonl(data_dir, t, *extra))
    return rows


def spark_rows(df) -> dict:
    """(topic, partition) -> [(offset, key, value, timestamp ms, headers)] of a kafka-log DataFrame."""
    import pyarrow as pa
    table = df.toArrow()
    ts = table.column("timestamp").cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
    has_headers = "headers" in table.column_names
    headers = table.column("headers").to_pylist() if has_headers else [None] * table.num_rows
    rows: dict = {}
    for r, t, h in zip(table.select(["topic", "partition", "offset", "key", "value"]).to_pylist(), ts, headers):
        hs = tuple((x["key"], x["value"]) for x in h) if has_headers else ()
        rows.setdefault((r["topic"], r["partition"]), []).append(
            (r["offset"], r["key"], r["value"], t // 1000, hs))
    return {k: sorted(v) for k, v in rows.items()}


def offsets(rows: dict) -> dict:
    return {k: [r[0] for r in v] for k, v in rows.items()}


def assert_same_rows(got: dict, expected: dict) -> None:
    assert sorted(got) == sorted(expected)
    for k in expected:
        assert len(got[k]) == len(expected[k]), k
        for g, e in zip(got[k], expected[k]):
            assert g == e, (k, g, e)


def read(spark, path: str, **options):
    reader = spark.read.format("kafka-log")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(path)


# -- the directory built here ---------------------------------------------------------------------

@dataclass(frozen=True)
class Written:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple
    kind: str          # plain, aborted, committed, open, marker
    producer_id: int = -1


def build_dir(root: str) -> list[Written]:
    """Topic events (2 partitions, small segments, index entries every 200 bytes; partition 0 with
    an aborted, a committed and a still open transaction), topic other (LogAppendTime)."""
    written: list[Written] = []
    clock = [APPEND_TIME]
    ts = iter(range(T0, T0 + 10_000_000, 1000))

    def put(log, recs, kind="plain", **kw):
        stamps = [next(ts) for _ in recs]
        info = log.append_records([r[0] for r in recs], [r[1] for r in recs], timestamps=stamps,
                                  headers=[r[2] if len(r) > 2 else [] for r in recs], **kw)
        append_time = log.config.get("message.timestamp.type") == "LogAppendTime"
        for i, r in enumerate(recs):
            hs = tuple((k, None if v is None else bytes(v)) for k, v in (r[2] if len(r) > 2 else []))
            written.append(Written(log.topic, log.partition, info.first_offset + i, r[0], r[1],
                                   clock[0] if append_time else stamps[i], hs, kind,
                                   kw.get("producer_id", -1)))

    def marker(log, commit, pid):
        info = log.append_control(commit=commit, producer_id=pid, producer_epoch=0, timestamp=next(ts))
        written.append(Written(log.topic, log.partition, info.first_offset,
                               b"\x00\x00\x00" + (b"\x01" if commit else b"\x00"), None, 0, (), "marker", pid))

    with DataDir(root, clock=lambda: clock[0], create=True, writable=True) as dd:
        dd.create_topic("events", 2, {"segment.bytes": "1400", "index.interval.bytes": "200"})
        dd.create_topic("other", 1, {"message.timestamp.type": "LogAppendTime"})
        p0, p1 = dd.open_log("events", 0), dd.open_log("events", 1)
        put(p0, [(b"k0", b"v0"), (b"k1", b"v1", [("h1", b"x"), ("h2", None)]), (b"k2", b"v2"),
                 (b"k3", b"v3"), (b"k4", b"v4", [("trace", b"\xff\xfe")])])
        for i in range(12):
            put(p0, [(f"k{(i * 4 + j) % 9}".encode(), f"value-{i}-{j}".encode() * 3) for j in range(4)])
        put(p0, [(b"a1", b"aborted-1"), (b"a2", b"aborted-2")], "aborted", producer_id=7,
            producer_epoch=0, base_sequence=0, transactional=True)
        put(p0, [(b"c1", b"committed-1")], "committed", producer_id=8, producer_epoch=0,
            base_sequence=0, transactional=True)
        marker(p0, False, 7)
        marker(p0, True, 8)
        put(p0, [(b"k5", b"after-txns"), (b"k6", None)])
        put(p0, [(b"o1", b"open-1")], "open", producer_id=9, producer_epoch=0, base_sequence=0,
            transactional=True)
        put(p0, [(b"k7", b"after-open")], "after-open")
        for i in range(10):
            put(p1, [(None if (i, j) == (3, 1) else f"p1-{i}-{j}".encode(),
                      None if (i, j) == (5, 0) else f"x{i}{j}".encode() * 40) for j in range(3)],
                compression="gzip" if i % 3 == 0 else "none")
        other = dd.open_log("other", 0)
        put(other, [(f"o{i}".encode(), b"o" * i) for i in range(5)])
    return written


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("built") / "data")
    written = build_dir(root)
    lso = min(w.offset for w in written if w.kind == "open")
    return root, written, lso


def expected_rows(written, *, committed=True, lso=None, control=False) -> dict:
    rows: dict = {}
    for w in written:
        if w.kind == "marker" and not control:
            continue
        if committed and (w.kind == "aborted" or (w.topic, w.partition) == ("events", 0) and w.offset >= lso):
            continue
        rows.setdefault((w.topic, w.partition), []).append((w.offset, w.key, w.value, w.timestamp, w.headers))
    return {k: sorted(v) for k, v in rows.items()}


# -- the data source yields what consume prints ---------------------------------------------------

@pytest.fixture(scope="module")
def corpus_inputs(corpus_dir, tmp_path_factory):
    """One data dir holding every case's input partition, the case name as the topic."""
    root = tmp_path_factory.mktemp("corpus-inputs") / "data"
    root.mkdir()
    cases = sorted(os.listdir(os.path.join(corpus_dir, "cases")))
    for case in cases:
        src = os.path.join(corpus_dir, "cases", case, "input")
        (part,) = [n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n))]
        shutil.copytree(os.path.join(src, part), root / f"{case}-{part.rsplit('-', 1)[1]}")
    return str(root), cases


def test_every_corpus_input_reads_as_consume_prints(spark, corpus_inputs):
    root, cases = corpus_inputs
    assert len(cases) >= 90
    before = tree_state(root)
    got = spark_rows(read(spark, root, includeHeaders="true"))
    got_uncommitted = spark_rows(read(spark, root, includeHeaders="true", isolationLevel="read_uncommitted"))
    assert tree_state(root) == before
    expected = consume_all(root)
    assert_same_rows(got, expected)
    expected_uncommitted = consume_all(root, "--isolation-level", "read_uncommitted")
    assert sorted(t for t, _ in expected_uncommitted) == cases   # every case has records to compare
    assert len(expected) >= len(cases) - 5                      # a few are one open transaction
    assert_same_rows(got_uncommitted, expected_uncommitted)
    # the transaction cases do differ between the two isolation levels (aborted data, open txns)
    differ = {t for (t, _), v in expected_uncommitted.items() if v != expected.get((t, 0))}
    assert len(differ) >= 10 and "rnd-041-transactions" in differ, differ
    assert sum(len(v) for v in got.values()) > 10_000


@pytest.mark.parametrize("name", sorted(VECTOR_DIRS))
def test_kafka_written_dirs_read_as_consume_prints(spark, tmp_path, name):
    src, counts = VECTOR_DIRS[name]
    root = str(tmp_path / "data")
    shutil.copytree(os.path.join(VECTORS, src), root)
    before = tree_state(root)
    got = spark_rows(read(spark, root, includeHeaders="true"))
    assert tree_state(root) == before
    assert {k: len(v) for k, v in got.items()} == counts
    for k, v in got.items():
        assert [r[0] for r in v] == list(range(counts[k]))
    assert_same_rows(got, consume_all(root))


def test_built_dir_reads_as_consume_prints(spark, built):
    root, written, lso = built
    got = spark_rows(read(spark, root, includeHeaders="true"))
    assert_same_rows(got, consume_all(root))
    assert_same_rows(got, expected_rows(written, lso=lso))
    # LogAppendTime topic: the broker's append time, timestampType 1; CreateTime elsewhere
    types = {(r["topic"], r["timestampType"]) for r in read(spark, root).select("topic", "timestampType").collect()}
    assert types == {("events", 0), ("other", 1)}


# -- schema and options ---------------------------------------------------------------------------

def test_schema_is_the_spark_kafka_source_schema(spark, built):
    from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, StringType,
                                   StructField, StructType, TimestampType)
    root = built[0]
    base = [StructField("key", BinaryType()), StructField("value", BinaryType()),
            StructField("topic", StringType()), StructField("partition", IntegerType()),
            StructField("offset", LongType()), StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType())]
    headers = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                           StructField("value", BinaryType())])))
    assert read(spark, root).schema == StructType(base)
    assert read(spark, root, includeHeaders="true").schema == StructType(base + [headers])
    assert read(spark, root, includeHeaders="false").schema == StructType(base)
    meta = [StructField("segment", LongType()), StructField("producerId", LongType()),
            StructField("producerEpoch", IntegerType()), StructField("isTransactional", BooleanType()),
            StructField("isControl", BooleanType()), StructField("partitionLeaderEpoch", IntegerType())]
    assert read(spark, root, includeMetadata="true").schema == StructType(base + meta)
    assert read(spark, root, includeHeaders="true", includeMetadata="true").schema == StructType(base + [headers] + meta)
    assert read(spark, root).schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>")


def test_starting_and_ending_offsets(spark, built):
    root, written, lso = built
    full = offsets(expected_rows(written, lso=lso))
    both = read(spark, root, topic="events")
    assert offsets(spark_rows(both)) == {k: v for k, v in full.items() if k[0] == "events"}
    same = read(spark, root, topic="events", startingOffsets="earliest", endingOffsets="latest")
    assert offsets(spark_rows(same)) == offsets(spark_rows(both))
    assert read(spark, root, startingOffsets="latest").count() == 0
    # JSON: per partition, missing partitions take the default, -2 earliest, -1 latest
    sel = read(spark, root, topic="events", startingOffsets=json.dumps({"events": {"0": 7}}),
               endingOffsets=json.dumps({"events": {"0": 20, "1": -1}}))
    assert offsets(spark_rows(sel)) == {("events", 0): [o for o in full[("events", 0)] if 7 <= o < 20],
                                        ("events", 1): full[("events", 1)]}
    sel = read(spark, root, startingOffsets=json.dumps({"events": {"0": -1, "1": 12}, "other": {"0": -2}}),
               endingOffsets=json.dumps({"events": {"1": 15}}))
    assert offsets(spark_rows(sel)) == {("events", 1): [12, 13, 14], ("other", 0): [0, 1, 2, 3, 4]}
    # offsets past the end are clamped; an ending offset past the LSO stops there (read_committed)
    sel = read(spark, root, topic="events", partitions="0",
               startingOffsets=json.dumps({"events": {"0": lso - 3}}),
               endingOffsets=json.dumps({"events": {"0": 10_000}}))
    assert offsets(spark_rows(sel)) == {("events", 0): [o for o in full[("events", 0)] if o >= lso - 3]}
    with pytest.raises(Exception, match="invalid offsets option"):
        read(spark, root, startingOffsets="yesterday").count()


def test_starting_and_ending_timestamps(spark, built):
    root, written, lso = built
    rows = [w for w in written if w.topic == "events" and w.kind != "marker"]
    ts_of = {(w.partition, w.offset): w.timestamp for w in rows}
    start_ts = ts_of[(0, 10)] + 1           # between offsets 10 and 11 of partition 0
    end_ts = ts_of[(0, 30)]                 # offset 30 first reaches it: excluded
    got = offsets(spark_rows(read(spark, root, topic="events", startingTimestamp=str(start_ts),
                                  endingTimestamp=str(end_ts))))
    full = offsets(expected_rows(written, lso=lso))

    def first_at(p, ts):
        return min((o for (q, o), t in ts_of.items() if q == p and t >= ts), default=None)

    expected = {}
    for p in (0, 1):
        lo, hi = first_at(p, start_ts), first_at(p, end_ts)
        sel = [o for o in full[("events", p)] if lo is not None and o >= lo and (hi is None or o < hi)]
        if sel:
            expected[("events", p)] = sel
    assert expected[("events", 0)][0] == 11 and expected[("events", 0)][-1] == 29
    assert got == expected
    # a start after every record: nothing
    assert read(spark, root, startingTimestamp=str(T0 + 10**9)).count() == 0


def test_topic_partitions_and_path_forms(spark, built):
    root, written, lso = built
    full = offsets(expected_rows(written, lso=lso))
    assert offsets(spark_rows(read(spark, root))) == full
    assert offsets(spark_rows(read(spark, root, topic="events", partitions="1"))) == {("events", 1): full[("events", 1)]}
    assert offsets(spark_rows(read(spark, root, partitions="0"))) == {k: v for k, v in full.items() if k[1] == 0}
    assert offsets(spark_rows(read(spark, os.path.join(root, "events")))) == {
        k: v for k, v in full.items() if k[0] == "events"}
    assert offsets(spark_rows(read(spark, os.path.join(root, "events-1")))) == {("events", 1): full[("events", 1)]}
    assert offsets(spark_rows(read(spark, os.path.join(root, "other")))) == {("other", 0): full[("other", 0)]}
    with pytest.raises(Exception, match="not found"):
        read(spark, root, topic="nope").count()
    with pytest.raises(Exception, match="no Kafka partition directory"):
        read(spark, os.path.join(root, "nope")).count()


def test_include_control_shows_markers_as_rows(spark, built):
    root, written, lso = built
    markers = [w for w in written if w.kind == "marker"]
    assert len(markers) == 2
    df = read(spark, root, topic="events", includeControl="true", includeMetadata="true")
    rows = {(r["partition"], r["offset"]): r for r in df.collect()}
    for m in markers:
        r = rows[(0, m.offset)]
        assert r["isControl"] and r["isTransactional"] and r["producerId"] == m.producer_id
        assert bytes(r["key"]) == m.key and len(r["value"]) == 6     # version + coordinator epoch
    assert offsets(spark_rows(df)) == {k: v for k, v in offsets(expected_rows(written, lso=lso, control=True)).items()
                                       if k[0] == "events"}
    plain = read(spark, root, topic="events", includeMetadata="true")
    assert plain.where("isControl").count() == 0
    assert set(offsets(spark_rows(plain))[("events", 0)]) == {o for (p, o), r in rows.items()
                                                              if p == 0 and not r["isControl"]}


def test_isolation_levels(spark, built):
    root, written, lso = built
    committed = spark_rows(read(spark, root, topic="events", partitions="0", includeHeaders="true"))
    explicit = spark_rows(read(spark, root, topic="events", partitions="0", includeHeaders="true",
                               isolationLevel="read_committed"))
    uncommitted = spark_rows(read(spark, root, topic="events", partitions="0", includeHeaders="true",
                                  isolationLevel="read_uncommitted"))
    assert committed == explicit
    by_kind = {}
    for w in written:
        if (w.topic, w.partition) == ("events", 0):
            by_kind.setdefault(w.kind, []).append(w.offset)
    c, u = set(offsets(committed)[("events", 0)]), set(offsets(uncommitted)[("events", 0)])
    assert set(by_kind["aborted"]) <= u and not set(by_kind["aborted"]) & c
    assert set(by_kind["committed"]) <= c
    # read_committed stops at the open transaction (the LSO); read_uncommitted reads to the end
    assert max(c) < lso == by_kind["open"][0]
    assert set(by_kind["open"] + by_kind["after-open"]) <= u
    assert not set(by_kind["marker"]) & u
    assert_same_rows(uncommitted, {k: v for k, v in expected_rows(written, committed=False).items()
                                   if k == ("events", 0)})
    assert_same_rows(uncommitted, {k: v for k, v in consume_jsonl(root, "events", "--isolation-level",
                                                                  "read_uncommitted").items() if k[1] == 0})
    with pytest.raises(Exception, match="isolationLevel"):
        read(spark, root, isolationLevel="serializable").count()


def test_include_metadata_columns(spark, built):
    root, written, lso = built
    df = read(spark, root, includeMetadata="true", isolationLevel="read_uncommitted", includeControl="true")
    rows = {(r["topic"], r["partition"], r["offset"]): r for r in df.collect()}
    assert len(rows) == len(written)
    seg_bases = {}
    for name in os.listdir(root):
        if os.path.isdir(os.path.join(root, name)):
            seg_bases[name] = sorted(int(f[:-4]) for f in os.listdir(os.path.join(root, name)) if f.endswith(".log"))
    assert len(seg_bases["events-0"]) >= 3 and len(seg_bases["events-1"]) >= 2
    for w in written:
        r = rows[(w.topic, w.partition, w.offset)]
        bases = seg_bases[f"{w.topic}-{w.partition}"]
        assert r["segment"] == max(b for b in bases if b <= w.offset)
        assert r["producerId"] == w.producer_id
        assert r["producerEpoch"] == (0 if w.producer_id >= 0 else -1)
        assert r["isTransactional"] == (w.kind in ("aborted", "committed", "open", "marker"))
        assert r["isControl"] == (w.kind == "marker")
        assert r["partitionLeaderEpoch"] == 0


def test_small_max_bytes_per_split_gives_more_tasks_same_rows(spark, built):
    root, written, lso = built
    default = read(spark, root, includeHeaders="true")
    small = read(spark, root, includeHeaders="true", maxBytesPerSplit="300")
    assert default.rdd.getNumPartitions() <= 2
    assert small.rdd.getNumPartitions() >= 8
    assert_same_rows(spark_rows(small), spark_rows(default))
    assert_same_rows(spark_rows(small), expected_rows(written, lso=lso))
    # the planned splits: contiguous offset ranges covering each partition's [log start, LSO)
    splits = KafkaLogReader({"path": root, "maxBytesPerSplit": "300"}, None).partitions()
    assert len(splits) == small.rdd.getNumPartitions()
    covered = {}
    for s in splits:
        for r in s.ranges:
            covered.setdefault((r.topic, r.partition), []).append((r.start, r.end))
    ends = {("events", 0): lso, ("events", 1): 30, ("other", 0): 5}
    for k, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == ends[k]
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert len(covered[("events", 0)]) > len([n for n in os.listdir(os.path.join(root, "events-0"))
                                                if n.endswith(".log")])


def test_reading_changes_nothing(spark, built, tmp_path):
    root = str(tmp_path / "data")
    shutil.copytree(built[0], root)
    before = tree_state(root)
    for options in ({}, {"includeHeaders": "true", "includeMetadata": "true", "includeControl": "true"},
                    {"isolationLevel": "read_uncommitted", "maxBytesPerSplit": "500"},
                    {"startingTimestamp": str(T0 + 20_000), "topic": "events"}):
        assert read(spark, root, **options).count() > 0
    from compactlog.spark.snapshot import latest_state
    assert latest_state(spark, root, "events").count() > 0
    assert tree_state(root) == before


def test_splits_are_balanced_and_cover_big_segments(tmp_path):
    """Planning only (no Spark): one big segment is cut at index entries into equal splits."""
    root = str(tmp_path / "data")
    with DataDir(root, clock=lambda: APPEND_TIME, create=True, writable=True) as dd:
        dd.create_topic("big", 2, {"segment.bytes": str(8 << 20)})
        for p in (0, 1):
            log = dd.open_log("big", p)
            for i in range(400 if p == 0 else 40):
                log.append_records([b"k%d" % j for j in range(50)], [b"v" * 100] * 50)
    # 2.4 MB: cut to <= 256 KiB (an even count); to <= 1 MiB, a multiple of 4 tasks; under 4 MiB a
    # task without an explicit maxBytesPerSplit, one task
    for max_bytes, parts, expected in ((256 << 10, 2, None), (1 << 20, 4, 4), (None, 4, 1)):
        options = {"path": root, "minPartitions": str(parts)}
        if max_bytes:
            options["maxBytesPerSplit"] = str(max_bytes)
        splits = KafkaLogReader(options, None).partitions()
        sizes = [s.size for s in splits]
        if expected:
            assert len(splits) == expected
        else:
            assert len(splits) % parts == 0 and len(splits) >= 10
            assert max(sizes) <= max_bytes + 8192
        assert max(sizes) - min(sizes) <= 2 * 8192 + 4096        # within a couple of index intervals
        covered = {}
        for s in splits:
            for r in s.ranges:
                covered.setdefault(r.partition, []).append((r.start, r.end))
        assert {p: (min(a for a, _ in v), max(b for _, b in v), sum(b - a for a, b in v))
                for p, v in covered.items()} == {0: (0, 20_000, 20_000), 1: (0, 2_000, 2_000)}
