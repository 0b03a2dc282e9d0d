"""The ``kafka-log`` Spark data source (compactlog/spark/datasource.py) against ``compactlog consume``.

Every corpus case's ``input/`` partition (all 90, read by one Spark query), the Kafka-written
directories of tests/data/kafka-vectors and a directory built here must read as exactly the records
``compactlog consume --from-beginning --output-format jsonl`` prints (offsets, keys, values,
timestamps, headers), partition by partition, at both isolation levels. Then the options, on the built directory whose
contents are known record by record: Spark's Kafka source schema and option rules (strategies,
starting/ending offsets and timestamps, failOnDataLoss, kafka.isolation.level, unknown options and
bad values as one-line errors), compactlog's own (topic/partitions, includeControl,
includeMetadata, maxBytesPerSplit); and no read changes a byte, a file name or an mtime in the
directory. Most option rules are checked by calling the reader Spark calls (``KafkaLogReader``:
``partitions()`` then ``read()``) without Spark; a few go through Spark to show what users see.
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
from compactlog.spark.options import KafkaLogError
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
RC = {"kafka.isolation.level": "read_committed"}
RU = ("--isolation-level", "read_uncommitted")
RCC = ("--isolation-level", "read_committed")


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


def direct(path: str, **options) -> dict:
    """(topic, partition) -> offsets read by the reader Spark runs (planning, then every split),
    called here without Spark."""
    reader = KafkaLogReader(dict(options, path=path))
    out: dict = {}
    for split in reader.partitions():
        for b in reader.read(split):
            for t, p, o in zip(b.column("topic").to_pylist(), b.column("partition").to_pylist(),
                               b.column("offset").to_pylist()):
                out.setdefault((t, p), []).append(o)
    return {k: sorted(v) for k, v in out.items()}


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
    got = spark_rows(read(spark, root, includeHeaders="true", **RC))
    got_uncommitted = spark_rows(read(spark, root, includeHeaders="true"))      # Spark's default level
    assert tree_state(root) == before
    expected = consume_all(root, *RCC)
    assert_same_rows(got, expected)
    expected_uncommitted = consume_all(root, *RU)
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
    assert_same_rows(got, consume_all(root, *RU))


def test_built_dir_reads_as_consume_prints(spark, built):
    root, written, lso = built
    got = spark_rows(read(spark, root, includeHeaders="true"))
    assert_same_rows(got, consume_all(root, *RU))
    assert_same_rows(got, expected_rows(written, committed=False))
    committed = spark_rows(read(spark, root, includeHeaders="true", **RC))
    assert_same_rows(committed, consume_all(root, *RCC))
    assert_same_rows(committed, expected_rows(written, lso=lso))
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


def test_starting_and_ending_offsets(built):
    root, written, lso = built
    full = offsets(expected_rows(written, committed=False))
    events = {k: v for k, v in full.items() if k[0] == "events"}
    assert direct(root, subscribe="events") == events
    assert direct(root, subscribe="events", startingOffsets="earliest", endingOffsets="latest") == events
    # JSON per partition, -2 earliest, -1 latest; every partition read must be named (Spark's rule)
    sel = direct(root, subscribe="events", startingOffsets=json.dumps({"events": {"0": 7, "1": -2}}),
                 endingOffsets=json.dumps({"events": {"0": 20, "1": -1}}))
    assert sel == {("events", 0): [o for o in full[("events", 0)] if 7 <= o < 20], ("events", 1): full[("events", 1)]}
    sel = direct(root, startingOffsets=json.dumps({"events": {"0": 40, "1": 12}, "other": {"0": -2}}),
                 endingOffsets=json.dumps({"events": {"0": -1, "1": 15}, "other": {"0": -1}}))
    assert sel == {("events", 0): [o for o in full[("events", 0)] if o >= 40], ("events", 1): [12, 13, 14],
                   ("other", 0): [0, 1, 2, 3, 4]}
    # a start past the end reads nothing (Spark drops the empty range); the end is the log end, or
    # the last stable offset under read_committed
    log_end = max(w.offset for w in written if (w.topic, w.partition) == ("events", 0)) + 1
    assert direct(root, subscribe="events", partitions="0",
                  startingOffsets=json.dumps({"events": {"0": 10_000}})) == {}
    sel = direct(root, subscribe="events", partitions="0", startingOffsets=json.dumps({"events": {"0": lso - 3}}),
                 endingOffsets=json.dumps({"events": {"0": lso}}), **RC)
    assert sel == {("events", 0): [o for o in offsets(expected_rows(written, lso=lso))[("events", 0)] if o >= lso - 3]}
    problems = {
        "startingOffsets=latest is not valid in a batch query": dict(startingOffsets="latest"),
        "endingOffsets=earliest is not valid": dict(endingOffsets="earliest"),
        "startingOffsets for events-1 is -1 (latest)": dict(subscribe="events",
                                                            startingOffsets='{"events":{"0":-2,"1":-1}}'),
        "endingOffsets for events-0 is -2 (earliest)": dict(subscribe="events",
                                                            endingOffsets='{"events":{"0":-2,"1":-1}}'),
        "option startingOffsets misses events-1, other-0: give every partition": dict(
            startingOffsets='{"events":{"0":3}}'),
        "names nope-0, which the query does not read": dict(
            subscribe="other", startingOffsets='{"other":{"0":0},"nope":{"0":1}}'),
        "startingOffsets for events-0 (20) is after endingOffsets (10)": dict(
            subscribe="events", startingOffsets='{"events":{"0":20,"1":0}}', endingOffsets='{"events":{"0":10,"1":3}}'),
        f"asks for events-0 up to offset 10000, past its end at {log_end}": dict(
            subscribe="events", partitions="0", endingOffsets='{"events":{"0":10000}}'),
        f"past its last stable offset (read_committed) at {lso}": dict(
            subscribe="events", partitions="0", endingOffsets=json.dumps({"events": {"0": lso + 1}}), **RC),
        "option startingOffsets='yesterday': expected earliest, latest or JSON": dict(startingOffsets="yesterday"),
        "events-0: offset -7 is invalid": dict(startingOffsets='{"events":{"0":-7}}'),
    }
    for message, options in problems.items():
        with pytest.raises(KafkaLogError) as e:
            direct(root, **options)
        assert message in str(e.value) and "\n" not in str(e.value), (message, str(e.value))


def test_starting_and_ending_timestamps(spark, built):
    root, written, lso = built
    rows = [w for w in written if w.topic == "events" and w.kind != "marker"]
    ts_of = {(w.partition, w.offset): w.timestamp for w in rows}
    start_ts = ts_of[(0, 10)] + 1           # between offsets 10 and 11 of partition 0
    end_ts = ts_of[(0, 30)]                 # offset 30 first reaches it: excluded
    got = offsets(spark_rows(read(spark, root, topic="events", startingTimestamp=str(start_ts),
                                  endingTimestamp=str(end_ts), **RC)))
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
    # per partition (JSON), as Spark's startingOffsetsByTimestamp / endingOffsetsByTimestamp
    by_ts = direct(root, subscribe="events",
                   startingOffsetsByTimestamp=json.dumps({"events": {"0": start_ts, "1": -2}}),
                   endingOffsetsByTimestamp=json.dumps({"events": {"0": end_ts, "1": ts_of[(1, 12)]}}), **RC)
    assert by_ts == {("events", 0): expected[("events", 0)], ("events", 1): list(range(12))}
    # no record at or after the starting timestamp: an error by default (Spark's strategy "error"),
    # the end of the partition with startingOffsetsByTimestampStrategy=latest; an ending timestamp
    # nothing reaches means latest
    late = str(T0 + 10**9)
    with pytest.raises(KafkaLogError, match="no record of events-0 at or after timestamp"):
        direct(root, subscribe="events", startingTimestamp=late)
    assert direct(root, subscribe="events", startingTimestamp=late, startingOffsetsByTimestampStrategy="latest") == {}
    assert direct(root, subscribe="other", endingTimestamp=late) == {("other", 0): [0, 1, 2, 3, 4]}
    # read_committed: a timestamp first reached at or after the last stable offset matches nothing
    open_ts = next(w.timestamp for w in written if w.kind == "open")
    assert direct(root, subscribe="events", partitions="0", startingOffsetsByTimestamp=json.dumps(
        {"events": {"0": open_ts}})) == {("events", 0): [lso, lso + 1]}
    with pytest.raises(KafkaLogError, match="no record of events-0"):
        direct(root, subscribe="events", partitions="0",
               startingOffsetsByTimestamp=json.dumps({"events": {"0": open_ts}}), **RC)
    with pytest.raises(KafkaLogError, match="expected a timestamp in ms"):
        direct(root, startingTimestamp="noon")


def test_strategies_select_topics_and_partitions(built):
    root, written, lso = built
    full = offsets(expected_rows(written, committed=False))
    assert direct(root) == full
    assert direct(root, subscribe="events, other") == full
    assert direct(root, subscribe="other") == {("other", 0): full[("other", 0)]}
    # subscribePattern: the whole topic name must match (Java's Pattern.matches)
    assert direct(root, subscribePattern="ev.*") == {k: v for k, v in full.items() if k[0] == "events"}
    assert direct(root, subscribePattern="ev", startingOffsets="earliest") == {}
    assert direct(root, subscribePattern="events|other") == full
    assert direct(root, assign=json.dumps({"events": [1], "other": [0]})) == {
        k: v for k, v in full.items() if k in {("events", 1), ("other", 0)}}
    # compactlog's topic/partitions still work, and the path can name a topic or a partition
    assert direct(root, topic="events", partitions="1") == {("events", 1): full[("events", 1)]}
    assert direct(root, partitions="0") == {k: v for k, v in full.items() if k[1] == 0}
    assert direct(os.path.join(root, "events")) == {k: v for k, v in full.items() if k[0] == "events"}
    assert direct(os.path.join(root, "events-1")) == {("events", 1): full[("events", 1)]}
    problems = {
        "only one of assign, subscribe, subscribePattern (or topic) can be given, not assign and subscribe":
            dict(subscribe="events", assign='{"events":[0]}'),
        "option assign names events-7, not found under": dict(assign='{"events":[0,7]}'),
        "option assign='events': expected JSON such as": dict(assign="events"),
        "topic 'nope' not found under": dict(subscribe="events,nope"),
        "option subscribe=' , ': no topic to subscribe to": dict(subscribe=" , "),
        "option subscribePattern='(': not a valid pattern": dict(subscribePattern="("),
        "partitions cannot be combined with assign": dict(assign='{"events":[0]}', partitions="0"),
    }
    for message, options in problems.items():
        with pytest.raises(KafkaLogError) as e:
            direct(root, **options)
        assert message in str(e.value), (message, str(e.value))


def test_pattern_subscriptions_leave_internal_topics_out(tmp_path):
    root = str(tmp_path / "data")
    with DataDir(root, clock=lambda: APPEND_TIME, create=True, writable=True) as dd:
        for t in ("__consumer_offsets", "orders"):
            dd.create_topic(t, 1)
            dd.open_log(t, 0).append_records([b"k"], [b"v"])
    assert sorted(direct(root, subscribePattern=".*")) == [("orders", 0)]
    assert sorted(direct(root, subscribePattern=".*", **{"kafka.exclude.internal.topics": "false"})) == [
        ("__consumer_offsets", 0), ("orders", 0)]
    assert sorted(direct(root, subscribe="__consumer_offsets")) == [("__consumer_offsets", 0)]


def test_fail_on_data_loss(tmp_path):
    """Offsets below the log start are gone: an error by default (Spark's failOnDataLoss=true),
    skipped with failOnDataLoss=false; also when they go between planning and reading."""
    root = str(tmp_path / "data")
    with DataDir(root, clock=lambda: APPEND_TIME, create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"segment.bytes": "1000"})
        log = dd.open_log("t", 0)
        for i in range(40):
            log.append_records([b"k%d" % i], [b"v" * 50])
        dd.delete_records("t", 0, 10)
    start = json.dumps({"t": {"0": 4}})
    with pytest.raises(KafkaLogError) as e:
        direct(root, startingOffsets=start)
    assert str(e.value).startswith("kafka-log: data loss: startingOffsets asks for t-0 from offset 4, but the log "
                                   "starts at 10: offsets [4, 10) are gone;")
    assert "failOnDataLoss to false" in str(e.value)
    assert direct(root, startingOffsets=start, failOnDataLoss="false") == {("t", 0): list(range(10, 40))}
    with pytest.raises(KafkaLogError, match="up to offset 6, but the log starts at 10"):
        direct(root, startingOffsets=json.dumps({"t": {"0": -2}}), endingOffsets=json.dumps({"t": {"0": 6}}))
    # planned, then retention/DeleteRecords moves the log start before the task reads
    reader = KafkaLogReader({"path": root})
    splits = reader.partitions()
    with DataDir(root, clock=lambda: APPEND_TIME, writable=True) as dd:
        dd.delete_records("t", 0, 25)
    with pytest.raises(KafkaLogError, match=r"t-0: offsets \[10, 25\) were deleted before they could be read"):
        [b for s in splits for b in reader.read(s)]
    lenient = KafkaLogReader({"path": root, "failOnDataLoss": "false"})
    got = [o for s in splits for b in lenient.read(s) for o in b.column("offset").to_pylist()]
    assert got == list(range(25, 40))


def test_options_are_checked(built):
    root = built[0]
    problems = {
        "unknown read option 'startingOffset' (did you mean startingOffsets": dict(startingOffset="earliest"),
        "unknown read option 'colour'; the read options are assign,": dict(colour="red"),
        "unknown Kafka client config kafka.isolation.levle (did you mean kafka.isolation.level?)":
            {"kafka.isolation.levle": "read_committed"},
        "option kafka.auto.offset.reset is not supported: set the source option startingOffsets":
            {"kafka.auto.offset.reset": "earliest"},
        "option kafka.isolation.level='serializable': expected read_committed or read_uncommitted":
            {"kafka.isolation.level": "serializable"},
        "kafka.isolation.level='read_committed' and isolationLevel='read_uncommitted' disagree":
            {"kafka.isolation.level": "read_committed", "isolationLevel": "read_uncommitted"},
        "option failOnDataLoss='yes': expected true or false": dict(failOnDataLoss="yes"),
        "option includeHeaders='1': expected true or false": dict(includeHeaders="1"),
        "option minPartitions='0': must be 1 or more": dict(minPartitions="0"),
        "option maxBytesPerSplit='lots': expected an integer": dict(maxBytesPerSplit="lots"),
        "option maxTriggerDelay='soon': expected a duration": dict(maxTriggerDelay="soon"),
        "minOffsetsPerTrigger (10) is higher than maxOffsetsPerTrigger (5)":
            dict(minOffsetsPerTrigger="10", maxOffsetsPerTrigger="5"),
        "option startingOffsetsByTimestampStrategy='first': expected error or latest":
            dict(startingOffsetsByTimestampStrategy="first"),
    }
    for message, options in problems.items():
        with pytest.raises(KafkaLogError) as e:
            direct(root, **options)
        assert message in str(e.value) and "\n" not in str(e.value), (message, str(e.value))
    # Spark's Kafka-client options and stream-only options are accepted in a batch query, as by
    # Spark's source (they have no effect on a data directory / a batch)
    assert direct(root, subscribe="other", **{"kafka.bootstrap.servers": "localhost:9092", "kafka.ssl.keystore.location":
                                              "/x", "maxOffsetsPerTrigger": "3", "groupIdPrefix": "g"})


def test_bad_options_reach_spark_users_as_one_line(spark, built):
    """PySpark wraps a data source's exception with its worker traceback; ours come without it, the
    message on the first line."""
    root = built[0]
    cases = [
        (lambda: read(spark, root, startingOffset="earliest"), "unknown read option 'startingoffset' (did you mean "
                                                              "startingOffsets"),
        (lambda: read(spark, root, subscribe="nope").count(), "topic 'nope' not found under"),
        (lambda: read(spark, root, startingOffsets="latest").count(), "startingOffsets=latest is not valid"),
    ]
    for action, message in cases:
        with pytest.raises(Exception) as e:
            action()
        text = str(e.value)
        assert "Traceback" not in text, text
        first = text.splitlines()[0]
        assert "KafkaLogError: kafka-log: " in first and message in first, first


def test_include_control_shows_markers_as_rows(spark, built):
    root, written, lso = built
    markers = [w for w in written if w.kind == "marker"]
    assert len(markers) == 2
    df = read(spark, root, topic="events", includeControl="true", includeMetadata="true", **RC)
    rows = {(r["partition"], r["offset"]): r for r in df.collect()}
    for m in markers:
        r = rows[(0, m.offset)]
        assert r["isControl"] and r["isTransactional"] and r["producerId"] == m.producer_id
        assert bytes(r["key"]) == m.key and len(r["value"]) == 6     # version + coordinator epoch
    assert offsets(spark_rows(df)) == {k: v for k, v in offsets(expected_rows(written, lso=lso, control=True)).items()
                                       if k[0] == "events"}
    plain = read(spark, root, topic="events", includeMetadata="true", **RC)
    assert plain.where("isControl").count() == 0
    assert set(offsets(spark_rows(plain))[("events", 0)]) == {o for (p, o), r in rows.items()
                                                              if p == 0 and not r["isControl"]}


def test_isolation_levels(spark, built):
    root, written, lso = built
    uncommitted = spark_rows(read(spark, root, topic="events", partitions="0", includeHeaders="true"))
    explicit = spark_rows(read(spark, root, topic="events", partitions="0", includeHeaders="true",
                               **{"kafka.isolation.level": "read_uncommitted"}))
    committed = spark_rows(read(spark, root, topic="events", partitions="0", includeHeaders="true", **RC))
    assert uncommitted == explicit                    # Spark's default: read_uncommitted
    # compactlog's old option name is an alias
    assert direct(root, subscribe="events", partitions="0", isolationLevel="read_committed") == offsets(committed)
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
    assert_same_rows(uncommitted, {k: v for k, v in consume_jsonl(root, "events", *RU).items() if k[1] == 0})
    assert_same_rows(committed, {k: v for k, v in consume_jsonl(root, "events", *RCC).items() if k[1] == 0})


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
    default = read(spark, root, includeHeaders="true", **RC)
    small = read(spark, root, includeHeaders="true", maxBytesPerSplit="300", **RC)
    assert default.rdd.getNumPartitions() <= 2
    assert small.rdd.getNumPartitions() >= 8
    assert_same_rows(spark_rows(small), spark_rows(default))
    assert_same_rows(spark_rows(small), expected_rows(written, lso=lso))
    # the planned splits: contiguous offset ranges covering each partition's [log start, LSO)
    splits = KafkaLogReader({"path": root, "maxBytesPerSplit": "300", **RC}, None).partitions()
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


def test_max_records_per_partition_caps_each_task(built):
    root, written, lso = built
    reader = KafkaLogReader({"path": root, "subscribe": "events", "maxRecordsPerPartition": "7"})
    splits = reader.partitions()
    assert all(r.end - r.start <= 7 for s in splits for r in s.ranges)
    assert len(splits) >= 62 // 7 + 30 // 7
    got = direct(root, subscribe="events", maxRecordsPerPartition="7")
    assert got == direct(root, subscribe="events")
