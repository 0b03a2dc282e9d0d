"""Latest-state snapshots (compactlog/spark/snapshot.py, ``compactlog snapshot``) against plain Python.

A 3-partition topic written as a Kafka producer would (keys placed by Kafka's default partitioner),
with updates, tombstones, keyless records, an aborted and a committed transaction. The expected
state is computed here record by record: per key the last value in offset order, aborted
transactional records skipped, tombstoned keys and keyless records left out. It must equal what
``latest_state`` computes on Spark, what ``latest_state_local`` computes in this process, and what
``compactlog snapshot`` writes as Parquet, JSON lines and a Delta table with either engine (read
back with pyarrow, json and deltalake), row for row: key, value, partition, offset, timestamp; the
two engines' files also have the same schema. The default engine runs a snapshot this size in
the command's own process, no JVM started.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import subprocess
import sys
from datetime import datetime

import pyarrow as pa
import pytest

from compactlog.cli.main import main as cli_main
from compactlog.spark.snapshot import latest_state, latest_state_local
from compactlog.storage.datadir import DataDir
from compactlog.storage.partitioner import partition_for_key

TOPIC = "prices"
PARTITIONS = 3
T0 = 1_700_000_000_000
EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")


def build(root: str) -> list[tuple]:
    """Write the topic; every record as (partition, offset, key, value, timestamp, aborted)."""
    written = []
    ts = iter(range(T0, T0 + 10**9, 17))
    with DataDir(root, clock=lambda: T0 + 10**9, create=True, writable=True) as dd:
        dd.create_topic(TOPIC, PARTITIONS, {"segment.bytes": "4096"})
        logs = [dd.open_log(TOPIC, p) for p in range(PARTITIONS)]

        def send(records, partition=None, aborted=False, **kw):
            """records: [(key, value)], all to the key's partition (or ``partition`` if keyless)."""
            p = partition if partition is not None else partition_for_key(records[0][0], PARTITIONS)
            assert all(k is None or partition_for_key(k, PARTITIONS) == p for k, _ in records)
            stamps = [next(ts) for _ in records]
            info = logs[p].append_records([k for k, _ in records], [v for _, v in records],
                                          timestamps=stamps, **kw)
            for i, (k, v) in enumerate(records):
                written.append((p, info.first_offset + i, k, v, stamps[i], aborted))
            return p

        keys = [f"sku-{i:03d}".encode() for i in range(60)]
        for rnd in range(4):                          # updates: every key 4 times, one record a batch
            for i, k in enumerate(keys):
                if (i + rnd) % 3:
                    send([(k, f"{k.decode()}@{rnd}".encode())])
        for i, k in enumerate(keys[:15]):             # tombstones; some keys come back afterwards
            send([(k, None)])
            if i % 5 == 0:
                send([(k, b"revived")])
        for p in range(PARTITIONS):                   # keyless records: no state
            send([(None, b"no key"), (None, None)], partition=p)
        # transactions in partition 0: pid 11 aborts (new keys, updates and a tombstone), pid 12 commits
        in_p0 = [k for k in keys if partition_for_key(k, PARTITIONS) == 0]
        fresh = [k for k in (f"new-{i}".encode() for i in range(40)) if partition_for_key(k, PARTITIONS) == 0]
        assert len(in_p0) >= 8 and len(fresh) >= 4
        send([(in_p0[0], b"aborted update"), (fresh[0], b"aborted new key"), (in_p0[1], None)],
             aborted=True, producer_id=11, producer_epoch=0, base_sequence=0, transactional=True)
        send([(in_p0[2], b"committed update"), (fresh[1], b"committed new key"), (in_p0[3], None)],
             producer_id=12, producer_epoch=0, base_sequence=0, transactional=True)
        send([(fresh[2], b"aborted, second batch")], aborted=True, producer_id=11, producer_epoch=0,
             base_sequence=3, transactional=True)
        logs[0].append_control(commit=False, producer_id=11, producer_epoch=0)
        logs[0].append_control(commit=True, producer_id=12, producer_epoch=0)
        send([(in_p0[4], b"after the transactions")])
    return written


def expected_state(written) -> set[tuple]:
    latest = {}
    for p, off, key, value, ts, aborted in sorted(written, key=lambda w: (w[0], w[1])):
        if key is None or aborted:
            continue
        latest[key] = (key, value, p, off, ts)
    return {row for row in latest.values() if row[1] is not None}


@pytest.fixture(scope="module")
def topic_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("snapshot") / "data")
    written = build(root)
    state = expected_state(written)
    # the workload covers what it claims to
    assert {w[0] for w in written} == set(range(PARTITIONS))
    assert {p for _, _, p, _, _ in state} == set(range(PARTITIONS))
    assert any(w[5] for w in written) and any(w[3] is None for w in written if w[2] is not None)
    assert 40 <= len(state) < 70
    return root, written, state


def _ms(ts) -> int:
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts)
    return round(ts.timestamp() * 1000)


def arrow_rows(table: pa.Table) -> set[tuple]:
    table = table.select(["key", "value", "partition", "offset", "timestamp"])
    ts_type = table.schema.field("timestamp").type
    assert pa.types.is_timestamp(ts_type), ts_type
    ts = table.column("timestamp").cast(pa.timestamp(ts_type.unit)).cast(pa.int64()).to_pylist()
    per_ms = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[ts_type.unit]
    return {(r["key"], r["value"], r["partition"], r["offset"], int(t // per_ms))
            for r, t in zip(table.drop_columns(["timestamp"]).to_pylist(), ts)}


def json_rows(out: str) -> set[tuple]:
    rows = set()
    for path in glob.glob(os.path.join(out, "*.json")):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                rows.add((base64.b64decode(d["key"]), base64.b64decode(d["value"]), d["partition"],
                          d["offset"], _ms(d["timestamp"])))
    return rows


def test_latest_state_matches_python(spark, topic_dir):
    root, written, state = topic_dir
    df = latest_state(spark, root, TOPIC)
    assert df.columns == ["key", "value", "partition", "offset", "timestamp"]
    got = arrow_rows(df.toArrow())
    assert got == state
    assert df.count() == len(state)
    # the aborted writes left no trace; the committed ones are there
    values = {v for _, v, _, _, _ in got}
    assert b"committed update" in values and b"committed new key" in values
    assert not {v for v in values if v.startswith(b"aborted")}
    # one partition only
    one = arrow_rows(latest_state(spark, root, TOPIC, partitions="1").toArrow())
    assert one == {r for r in state if r[2] == 1} and one


def test_latest_state_local_matches_python(topic_dir):
    root, written, state = topic_dir
    table = latest_state_local(root, TOPIC)
    assert table.column_names == ["key", "value", "partition", "offset", "timestamp"]
    assert arrow_rows(table) == state and table.num_rows == len(state)
    assert arrow_rows(latest_state_local(root, TOPIC, "1")) == {r for r in state if r[2] == 1}


def read_output(out: str, fmt: str) -> tuple[set, object]:
    """(rows, schema) of a snapshot directory."""
    if fmt == "parquet":
        import pyarrow.parquet as pq
        table = pq.read_table(out)
        return arrow_rows(table), table.schema.remove_metadata()
    if fmt == "json":
        return json_rows(out), None
    from deltalake import DeltaTable
    table = DeltaTable(out)
    assert table.version() == 0
    assert len(table.file_uris()) >= 1 and os.path.isdir(os.path.join(out, "_delta_log"))
    data = table.to_pyarrow_table()
    return arrow_rows(data), data.schema.remove_metadata()


@pytest.mark.parametrize("fmt", ["parquet", "json", "delta"])
def test_snapshot_command_writes_the_state(topic_dir, tmp_path, monkeypatch, capsys, spark, fmt):
    root, written, state = topic_dir
    # Spark in this process, on the test session (the command's session(), same master)
    monkeypatch.setenv("COMPACTLOG_SPARK_MASTER", "local[2]")
    outputs = {}
    for engine in ("spark", "local"):
        out = str(tmp_path / f"state-{fmt}-{engine}")
        code = cli_main(["--data-dir", root, "snapshot", "--topic", TOPIC, "--out", out, "--format", fmt,
                         "--engine", engine])
        assert code == 0
        text = capsys.readouterr().out
        assert f"wrote {len(state)} keys of {TOPIC} to {out} ({fmt})" in text
        assert ("(spark: --engine spark)" if engine == "spark" else "(in-process: --engine local)") in text
        outputs[engine] = read_output(out, fmt)
        assert outputs[engine][0] == state
        if fmt == "json":        # Spark's layout: base64 binary, UTC millisecond timestamps
            line = open(glob.glob(os.path.join(out, "*.json"))[0]).readline()
            assert line.startswith('{"key":"') and line.rstrip().endswith('Z"}')
        # an existing output is refused without --overwrite, replaced with it
        assert cli_main(["--data-dir", root, "snapshot", "--topic", TOPIC, "--out", out, "--format", fmt,
                         "--engine", engine]) == 1
        assert "already exists" in capsys.readouterr().err
        assert cli_main(["--data-dir", root, "snapshot", "--topic", TOPIC, "--out", out, "--format", fmt,
                         "--overwrite", "--engine", engine]) == 0
        capsys.readouterr()
    assert outputs["spark"] == outputs["local"]          # the same rows and the same column types


def test_snapshot_command_in_its_own_process(topic_dir, tmp_path):
    """The whole command as a user runs it: the default engine keeps a snapshot this small in its
    own process (no JVM), and says so."""
    root, written, state = topic_dir
    out = str(tmp_path / "state")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("COMPACTLOG_SPARK_MASTER", None)
    p = subprocess.run([EXE, "--data-dir", root, "snapshot", "--topic", TOPIC, "--out", out, "--format",
                        "parquet", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout)
    assert report["keys"] == len(state) and report["engine"] == "in-process"
    # in-process, as its reason says (no JVM was started); no wall-time bound: a loaded machine
    # took 6.3 s for what takes ~1 s alone
    assert "in this process vs" in report["engineReason"]
    import pyarrow.parquet as pq
    assert arrow_rows(pq.read_table(out)) == state
