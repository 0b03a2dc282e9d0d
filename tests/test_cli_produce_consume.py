"""``compactlog produce`` and ``compactlog consume``: text and JSON lines, partitioning, batching,
transactions, validation, and the seed walkthrough."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import pytest

from storage_support import tree_state
from compactlog.storage.datadir import DataDir
from compactlog.storage.partitioner import partition_for_key

HERE = os.path.dirname(os.path.abspath(__file__))
EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMMAND = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "compactlog.cli.main"]
SEED = "p3:10$\np5:7$\np3:11$\np6:25$\np6:12$\np5:14$\np5:17$\n"
SEED_LINES = SEED.splitlines()
WALKTHROUGH_CREATE = ["topics", "create", "--topic", "latest-product-price", "--partitions", "1",
                      "--config", "cleanup.policy=compact", "--config", "delete.retention.ms=100",
                      "--config", "segment.ms=100", "--config", "min.cleanable.dirty.ratio=0.01"]
KEYED = ["--property", "parse.key=true", "--property", "key.separator=:"]


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


def one_error_line(r) -> str:
    assert r.code != 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    return lines[0]


def consume_json(cli, data, topic, *args) -> list[dict]:
    r = cli("--data-dir", data, "consume", "--topic", topic, "--output-format", "jsonl", *args)
    assert r.code == 0, r.err
    return [json.loads(line) for line in r.out.splitlines()]


def log_end_offsets(data, topic) -> list[int]:
    with DataDir(str(data), writable=True) as dd:
        return [dd.open_log(topic, p).log_end_offset for p in dd.partitions(topic)]


def dump_batches(cli, path) -> list[dict]:
    r = cli("dump-log", "--files", path, "--json")
    assert r.code == 0, r.err
    return [o for o in map(json.loads, r.out.splitlines()) if o["type"] == "batch"]


def create(cli, data, topic, *args):
    r = cli("--data-dir", data, "topics", "create", "--topic", topic, *args)
    assert r.code == 0, r.err


# -- the seed walkthrough -------------------------------------------------------------------------

def test_seed_walkthrough(cli, data):
    assert cli("--data-dir", data, *WALKTHROUGH_CREATE).code == 0
    r = cli("--data-dir", data, "produce", "--topic", "latest-product-price", *KEYED, stdin=SEED)
    assert (r.code, r.out, r.err) == (0, "", "")
    r = cli("--data-dir", data, "consume", "--topic", "latest-product-price", "--from-beginning",
            "--property", "print.key=true", "--property", "key.separator=:")
    assert r.code == 0, r.err
    assert r.out.splitlines() == SEED_LINES


def test_seed_walkthrough_through_the_installed_command(tmp_path):
    """The real executable with a real pipe, as the README shows it."""
    d = str(tmp_path / "data")
    env = dict(os.environ)
    run = lambda *a, **kw: subprocess.run([*COMMAND, "--data-dir", d, *a], capture_output=True, text=True,
                                          env=env, **kw)
    assert run(*WALKTHROUGH_CREATE).returncode == 0
    p = run("produce", "--topic", "latest-product-price", *KEYED, input=SEED)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    p = run("consume", "--topic", "latest-product-price", "--from-beginning",
            "--property", "print.key=true", "--property", "key.separator=:")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == SEED_LINES


def test_lines_fed_slowly_are_appended_as_they_arrive_and_roll_segments(tmp_path):
    """What the seed walkthrough relies on: a line typed (or fed) later is appended on arrival with
    the time it was read, so records > segment.ms apart roll a new segment each."""
    d = str(tmp_path / "data")
    assert subprocess.run([*COMMAND, "--data-dir", d, *WALKTHROUGH_CREATE], capture_output=True).returncode == 0
    p = subprocess.Popen([*COMMAND, "--data-dir", d, "produce", "--topic", "latest-product-price", "--batch-size",
                          "1", "--verbose", *KEYED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for i, line in enumerate(SEED_LINES):
            if i:
                time.sleep(0.15)
            p.stdin.write(line + "\n")
            p.stdin.flush()
            # wait for the append, so that the next line is read on its own
            assert p.stdout.readline() == f"latest-product-price-0: appended 1 records at offsets {i}..{i}\n"
    finally:
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    logs = sorted(n for n in os.listdir(os.path.join(d, "latest-product-price-0")) if n.endswith(".log"))
    assert logs == [f"{i:020d}.log" for i in range(7)]


def test_batch_size_one_makes_every_line_a_batch(cli, data):
    create(cli, data, "t")
    assert cli("--data-dir", data, "produce", "--topic", "t", "--batch-size", "1", stdin="a\nb\nc\n").code == 0
    assert cli("--data-dir", data, "produce", "--topic", "t", "--batch-size", "2", stdin="d\ne\nf\n").code == 0
    assert cli("--data-dir", data, "produce", "--topic", "t", stdin="g\nh\ni\nj\n").code == 0
    batches = dump_batches(cli, data / "t-0" / "00000000000000000000.log")
    assert [b["count"] for b in batches] == [1, 1, 1, 2, 1, 4]
    r = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning")
    assert r.out.split() == list("abcdefghij")


def test_batches_are_capped_by_max_message_bytes(cli, data):
    create(cli, data, "t", "--config", "max.message.bytes=400")
    lines = "".join(f"{'x' * 50}{i}\n" for i in range(20))
    assert cli("--data-dir", data, "produce", "--topic", "t", stdin=lines).code == 0
    batches = dump_batches(cli, data / "t-0" / "00000000000000000000.log")
    assert len(batches) > 1 and all(b["sizeInBytes"] <= 400 for b in batches)
    assert sum(b["count"] for b in batches) == 20


# -- the console producer's properties ------------------------------------------------------------

def test_parse_key_separator_and_null_marker(cli, data):
    create(cli, data, "t")
    lines = "k1=>v1\nNULL=>v2\nk3=>NULL\nk4=>a=>b\nk5=>\n=>v6\n"
    r = cli("--data-dir", data, "produce", "--topic", "t", "--property", "parse.key=true",
            "--property", "key.separator==>", "--property", "null.marker=NULL", stdin=lines)
    assert r.code == 0, r.err
    got = [(o["key"], o["value"]) for o in consume_json(cli, data, "t", "--from-beginning")]
    assert got == [("k1", "v1"), (None, "v2"), ("k3", None), ("k4", "a=>b"), ("k5", ""), ("", "v6")]
    r = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning", "--property", "print.key=true",
            "--property", "key.separator=|")
    assert r.out.splitlines() == ["k1|v1", "null|v2", "k3|null", "k4|a=>b", "k5|", "|v6"]


def test_without_parse_key_records_have_no_key(cli, data):
    create(cli, data, "t")
    assert cli("--data-dir", data, "produce", "--topic", "t", stdin="a:1\nNULL\n\n",
               ).code == 0
    got = [(o["key"], o["value"]) for o in consume_json(cli, data, "t", "--from-beginning")]
    assert got == [(None, "a:1"), (None, "NULL"), (None, "")]


def test_parse_headers(cli, data):
    create(cli, data, "t")
    r = cli("--data-dir", data, "produce", "--topic", "t", "--property", "parse.headers=true",
            "--property", "parse.key=true", "--property", "null.marker=N",
            stdin="h1:v1,h2:N,h3\tk\tv\n\tk2\tv2\n")
    assert r.code == 0, r.err
    got = consume_json(cli, data, "t", "--from-beginning")
    assert got[0]["headers"] == [{"key": "h1", "value": "v1"}, {"key": "h2", "value": None},
                                 {"key": "h3", "value": None}]
    assert (got[0]["key"], got[0]["value"]) == ("k", "v")
    assert got[1]["headers"] == [] and got[1]["key"] == "k2"
    r = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning", "--property", "print.headers=true",
            "--property", "print.key=true")
    assert r.out.splitlines() == ["h1:v1,h2:null,h3:null\tk\tv", "NO_HEADERS\tk2\tv2"]


def test_missing_key_separator_names_the_line_and_appends_nothing(cli, data):
    create(cli, data, "t")
    r = cli("--data-dir", data, "produce", "--topic", "t", *KEYED, stdin="a:1\nb:2\nno-separator\nc:3\n")
    assert "line 3" in one_error_line(r) and "no-separator" in r.err
    assert log_end_offsets(data, "t") == [0]


def test_unknown_property_is_refused(cli, data):
    create(cli, data, "t")
    r = cli("--data-dir", data, "produce", "--topic", "t", "--property", "parse.keys=true", stdin="a\n")
    assert "parse.keys" in one_error_line(r)
    r = cli("--data-dir", data, "consume", "--topic", "t", "--property", "print.keys=true")
    assert "print.keys" in one_error_line(r)


# -- compacted topics refuse keyless records ------------------------------------------------------

def test_keyless_record_refused_on_compacted_topic(cli, data):
    create(cli, data, "c", "--config", "cleanup.policy=compact")
    before = tree_state(data)
    r = cli("--data-dir", data, "produce", "--topic", "c", *KEYED, "--property", "null.marker=NULL",
            stdin="a:1\nb:2\nNULL:3\n")
    err = one_error_line(r)
    assert "line 3" in err and "without a key" in err and "compact" in err
    assert tree_state(data) == before, "nothing may be appended"
    r = cli("--data-dir", data, "produce", "--topic", "c", stdin="just a value\n")
    assert "line 1" in one_error_line(r)
    r = cli("--data-dir", data, "produce", "--topic", "c", "--input-format", "jsonl",
            stdin='{"key": "k", "value": "v"}\n{"value": "no key"}\n')
    assert "line 2" in one_error_line(r)
    assert tree_state(data) == before
    # keyed records (tombstones included) are fine
    assert cli("--data-dir", data, "produce", "--topic", "c", *KEYED, "--property", "null.marker=NULL",
               stdin="a:1\na:NULL\n").code == 0
    assert [(o["key"], o["value"]) for o in consume_json(cli, data, "c", "--from-beginning")] == \
        [("a", "1"), ("a", None)]


# -- JSON lines: produce -> consume -> produce round trip -------------------------------------------

def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


ROUND_TRIP_INPUT = [
    {"key": "text-key", "value": "text value ü", "timestamp": 1700000000000, "partition": 0},
    {"key_b64": _b64(b"\xff\xfe\x00bin"), "value_b64": _b64(b"\x80\x81\x82"), "timestamp": 1700000000001,
     "partition": 1},
    {"key": "tomb", "value": None, "timestamp": 1700000000002, "partition": 2},
    {"key": None, "value": "null key", "timestamp": 1700000000003, "partition": 0},
    {"key": "h", "value": "with headers", "timestamp": 1700000000004, "partition": 1,
     "headers": [{"key": "trace", "value": "abc"}, {"key": "nothing", "value": None},
                 {"key": "raw", "value_b64": _b64(b"\xc0\x00")}, {"key": "trace", "value": ""}]},
    {"key": "", "value": "", "timestamp": 1700000000005, "partition": 2},
]


def field_bytes(obj: dict, name: str) -> bytes | None:
    if f"{name}_b64" in obj:
        return base64.b64decode(obj[f"{name}_b64"])
    return None if obj.get(name) is None else obj[name].encode("utf-8")


def test_jsonl_round_trip(cli, data):
    create(cli, data, "src", "--partitions", "3")
    create(cli, data, "dst", "--partitions", "3")
    r = cli("--data-dir", data, "produce", "--topic", "src", "--input-format", "jsonl",
            stdin="".join(json.dumps(o) + "\n" for o in ROUND_TRIP_INPUT))
    assert r.code == 0, r.err
    out = consume_json(cli, data, "src", "--from-beginning")
    # partition by partition, offsets in order
    assert [(o["partition"], o["offset"]) for o in out] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    by_ts = {o["timestamp"]: o for o in out}
    for given in ROUND_TRIP_INPUT:
        got = by_ts[given["timestamp"]]
        assert got["topic"] == "src" and got["partition"] == given["partition"]
        for name in ("key", "value"):
            # the same bytes, and the same encoding: text when UTF-8, base64 otherwise
            assert field_bytes(got, name) == field_bytes(given, name)
            assert (f"{name}_b64" in got) == (f"{name}_b64" in given)
        assert got["headers"] == given.get("headers", [])
    binary = by_ts[1700000000001]
    assert base64.b64decode(binary["key_b64"]) == b"\xff\xfe\x00bin" and "key" not in binary

    # the consumer's lines are the producer's input
    r = cli("--data-dir", data, "produce", "--topic", "dst", "--input-format", "jsonl",
            stdin="".join(json.dumps(o) + "\n" for o in out))
    assert r.code == 0, r.err
    again = consume_json(cli, data, "dst", "--from-beginning")
    assert [dict(o, topic="src") for o in again] == out


@pytest.mark.parametrize("line, expected", [
    ("not json", "not a JSON object"),
    ("[1, 2]", "expected a JSON object"),
    ('{"key": "k"}', "no \"value\""),
    ('{"key": "k", "value": "v", "colour": "red"}', "unknown field 'colour'"),
    ('{"key": "k", "key_b64": "aw==", "value": "v"}', "both"),
    ('{"key_b64": "%%%", "value": "v"}', "not valid base64"),
    ('{"key": 5, "value": "v"}', "must be a string"),
    ('{"value": "v", "timestamp": -3}', "timestamp"),
    ('{"value": "v", "timestamp": "now"}', "timestamp"),
    ('{"value": "v", "partition": 7}', "partition 7 does not exist"),
    ('{"value": "v", "headers": {"a": "b"}}', "headers must be a list"),
    ('{"value": "v", "headers": [{"value": "b"}]}', "header 0"),
])
def test_invalid_json_lines_are_refused_with_their_line_number(cli, data, line, expected):
    create(cli, data, "t", "--partitions", "2")
    before = tree_state(data)
    r = cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
            stdin='{"key": "ok", "value": "fine"}\n\n' + line + "\n")
    err = one_error_line(r)
    assert "line 3" in err and expected in err
    assert tree_state(data) == before


# -- partitioning ---------------------------------------------------------------------------------

def test_keys_go_to_their_murmur2_partition(cli, data):
    create(cli, data, "t", "--partitions", "3")
    keys = ["p3", "p5", "p6", "k1", "foo", "hello", "customer-42", "bar", "p3", "k1", "foo"]
    r = cli("--data-dir", data, "produce", "--topic", "t", *KEYED, stdin="".join(f"{k}:v{i}\n" for i, k in enumerate(keys)))
    assert r.code == 0, r.err
    placed = {}
    for o in consume_json(cli, data, "t", "--from-beginning"):
        placed.setdefault(o["key"], set()).add(o["partition"])
    assert all(len(ps) == 1 for ps in placed.values()), "a key always lands in one partition"
    got = {k: ps.pop() for k, ps in placed.items()}
    assert got == {k: partition_for_key(k.encode(), 3) for k in got}
    # hand-checked against Kafka's murmur2 (kafka-python's DefaultPartitioner gives the same)
    assert (got["p3"], got["p5"], got["p6"], got["k1"], got["foo"], got["hello"], got["customer-42"]) == \
        (0, 1, 1, 2, 2, 0, 0)


def test_murmur2_matches_kafka_python():
    murmur2 = pytest.importorskip("kafka.partitioner.default").murmur2
    for key in [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", b"\xff\x00\x80", "ü".encode() * 7]:
        for n in (1, 3, 7, 100):
            assert partition_for_key(key, n) == (murmur2(key) & 0x7FFFFFFF) % n


def test_keyless_records_stick_to_a_partition_per_batch(cli, data):
    """Kafka's built-in partitioner (KIP-480/794): keyless records stay on one partition until a
    batch.size (16384 bytes) worth went there, then move on; not record-by-record round robin."""
    create(cli, data, "t", "--partitions", "3")
    assert cli("--data-dir", data, "produce", "--topic", "t", stdin="a\nb\nc\nd\ne\n").code == 0
    got = [(o["partition"], o["value"]) for o in consume_json(cli, data, "t", "--from-beginning")]
    assert len({p for p, _ in got}) == 1 and [v for _, v in got] == ["a", "b", "c", "d", "e"]
    lines = "".join(f"{'x' * 1000}{i}\n" for i in range(100))      # ~100 KB: several batches' worth
    assert cli("--data-dir", data, "produce", "--topic", "t", stdin=lines).code == 0
    where = {int(o["value"][1000:]): o["partition"] for o in consume_json(cli, data, "t", "--from-beginning")
             if len(o["value"]) > 1000}
    parts = [where[i] for i in range(100)]                          # in the order produced
    runs = _run_lengths(parts)
    assert len(runs) >= 2 and all(n >= 15 for n in runs[:-1]), runs


def _run_lengths(seq):
    out = []
    for i, x in enumerate(seq):
        if i and seq[i - 1] == x:
            out[-1] += 1
        else:
            out.append(1)
    return out


def test_produce_creates_a_missing_topic_unless_disabled(cli, data):
    create(cli, data, "other")
    r = cli("--data-dir", data, "--override", "auto.create.topics.enable=false", "produce", "--topic", "new",
            stdin="x\n")
    assert "does not exist" in one_error_line(r)
    assert not (data / "new-0").exists()
    r = cli("--data-dir", data, "--override", "num.partitions=2", "produce", "--topic", "new", stdin="x\ny\n")
    assert r.code == 0, r.err
    assert sorted(log_end_offsets(data, "new")) == [0, 2]          # sticky: one batch, one partition


def test_compression_codec(cli, data):
    create(cli, data, "t")
    r = cli("--data-dir", data, "produce", "--topic", "t", "--compression-codec", "gzip", stdin="a\nb\n")
    assert r.code == 0, r.err
    assert [b["compression"] for b in dump_batches(cli, data / "t-0" / "00000000000000000000.log")] == ["gzip"]
    assert cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning").out == "a\nb\n"
    assert "compression" in one_error_line(cli("--data-dir", data, "produce", "--topic", "t",
                                               "--compression-codec", "brotli", stdin="a\n"))


def test_timestamps_are_the_reading_time_or_given(cli, data):
    create(cli, data, "t")
    t0 = int(time.time() * 1000)
    assert cli("--data-dir", data, "produce", "--topic", "t", stdin="a\n").code == 0
    t1 = int(time.time() * 1000)
    assert cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
               stdin='{"value": "b", "timestamp": 1234}\n').code == 0
    a, b = consume_json(cli, data, "t", "--from-beginning")
    assert t0 <= a["timestamp"] <= t1 and b["timestamp"] == 1234


# -- consume: where to start, how much, how to print ----------------------------------------------

@pytest.fixture
def ten(cli, data):
    """Topic t, 2 partitions, 5 records each with timestamps 1000..1004 (p0) and 2000..2004 (p1)."""
    create(cli, data, "t", "--partitions", "2")
    lines = [json.dumps({"key": f"k{p}{i}", "value": f"v{p}{i}", "timestamp": 1000 * (p + 1) + i,
                         "partition": p}) for p in (0, 1) for i in range(5)]
    assert cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl", "--batch-size", "2",
               stdin="\n".join(lines) + "\n").code == 0
    return data


def test_consume_from_beginning_partition_by_partition(cli, ten):
    r = cli("--data-dir", ten, "consume", "--topic", "t", "--from-beginning")
    assert r.out.split() == [f"v{p}{i}" for p in (0, 1) for i in range(5)]


def test_consume_default_starts_at_the_end(cli, ten):
    r = cli("--data-dir", ten, "consume", "--topic", "t")
    assert (r.code, r.out) == (0, "")


def test_consume_partition_and_offset(cli, ten):
    got = consume_json(cli, ten, "t", "--partition", "1", "--offset", "3")
    assert [(o["partition"], o["offset"], o["value"]) for o in got] == [(1, 3, "v13"), (1, 4, "v14")]
    assert [o["value"] for o in consume_json(cli, ten, "t", "--partition", "0", "--offset", "earliest")] == \
        [f"v0{i}" for i in range(5)]
    assert consume_json(cli, ten, "t", "--partition", "0", "--offset", "latest") == []
    assert consume_json(cli, ten, "t", "--partition", "0", "--offset", "5") == []
    assert [o["value"] for o in consume_json(cli, ten, "t", "--partition", "1", "--from-beginning")] == \
        [f"v1{i}" for i in range(5)]
    assert "outside the log [0, 5]" in one_error_line(
        cli("--data-dir", ten, "consume", "--topic", "t", "--partition", "0", "--offset", "6"))
    assert "--offset needs --partition" in one_error_line(
        cli("--data-dir", ten, "consume", "--topic", "t", "--offset", "1"))
    assert "cannot be given together" in one_error_line(
        cli("--data-dir", ten, "consume", "--topic", "t", "--partition", "0", "--offset", "1", "--from-beginning"))
    assert "does not exist" in one_error_line(
        cli("--data-dir", ten, "consume", "--topic", "t", "--partition", "2", "--from-beginning"))


def test_consume_from_timestamp(cli, ten):
    got = consume_json(cli, ten, "t", "--timestamp", "1003")
    assert [(o["partition"], o["offset"]) for o in got] == [(0, 3), (0, 4)] + [(1, i) for i in range(5)]
    got = consume_json(cli, ten, "t", "--timestamp", "2004")
    assert [(o["partition"], o["offset"]) for o in got] == [(1, 4)]
    assert consume_json(cli, ten, "t", "--timestamp", "9999") == []
    got = consume_json(cli, ten, "t", "--timestamp", "1002", "--partition", "0")
    assert [o["offset"] for o in got] == [2, 3, 4]


def test_consume_max_messages(cli, ten):
    assert cli("--data-dir", ten, "consume", "--topic", "t", "--from-beginning", "--max-messages", "7"
               ).out.split() == ["v00", "v01", "v02", "v03", "v04", "v10", "v11"]
    assert cli("--data-dir", ten, "consume", "--topic", "t", "--from-beginning", "--max-messages", "0").out == ""


def test_consume_text_columns(cli, ten):
    r = cli("--data-dir", ten, "consume", "--topic", "t", "--partition", "1", "--offset", "4",
            "--property", "print.timestamp=true", "--property", "print.partition=true",
            "--property", "print.offset=true", "--property", "print.key=true")
    assert r.out == "CreateTime:2004\tPartition:1\tOffset:4\tk14\tv14\n"
    r = cli("--data-dir", ten, "consume", "--topic", "t", "--partition", "1", "--offset", "4",
            "--property", "print.key=true", "--property", "print.value=false")
    assert r.out == "k14\n"


def test_consume_is_read_only(cli, ten):
    before = tree_state(ten)
    for args in (["--from-beginning"], ["--timestamp", "0"], ["--partition", "1", "--offset", "2"],
                 ["--from-beginning", "--isolation-level", "read_uncommitted"]):
        assert cli("--data-dir", ten, "consume", "--topic", "t", *args).code == 0
    assert tree_state(ten) == before


def test_consume_stops_at_a_corrupt_batch(cli, data):
    create(cli, data, "t")
    for v in ("first", "second", "third"):
        assert cli("--data-dir", data, "produce", "--topic", "t", stdin=v + "\n").code == 0
    path = data / "t-0" / "00000000000000000000.log"
    raw = bytearray(path.read_bytes())
    i = raw.index(b"second")
    raw[i] ^= 0x20       # "Second": the CRC no longer matches
    path.write_bytes(bytes(raw))
    r = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning")
    err = one_error_line(r)
    assert str(path) in err and "crc" in err and "offset 1" in err
    assert r.out == "first\n"


# -- transactions ---------------------------------------------------------------------------------

def test_read_committed_hides_aborted_transactions_and_markers(cli, data):
    create(cli, data, "t")
    with DataDir(str(data), writable=True) as dd:
        log = dd.open_log("t", 0)
        log.append_records([b"k"], [b"plain-1"])
        log.append_records([b"a", b"b"], [b"aborted-1", b"aborted-2"], producer_id=7, producer_epoch=0,
                           base_sequence=0, transactional=True)
        log.append_records([b"c"], [b"committed-1"], producer_id=8, producer_epoch=0, base_sequence=0,
                           transactional=True)
        log.append_control(commit=False, producer_id=7, producer_epoch=0)
        log.append_control(commit=True, producer_id=8, producer_epoch=0)
        log.append_records([b"k"], [b"plain-2"])
        log.append_records([b"o"], [b"open-1"], producer_id=9, producer_epoch=0, base_sequence=0,
                           transactional=True)
        log.append_records([b"k"], [b"after-open"])
    rc = ["--isolation-level", "read_committed"]
    committed = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning", *rc).out.split()
    assert committed == ["plain-1", "committed-1", "plain-2"]   # stops at the open transaction (LSO)
    default = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning").out.split()
    assert "aborted-1" in default                                # Kafka's default: read_uncommitted
    uncommitted = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning",
                      "--isolation-level", "read_uncommitted").out.split()
    assert uncommitted == ["plain-1", "aborted-1", "aborted-2", "committed-1", "plain-2", "open-1",
                           "after-open"]
    with DataDir(str(data), writable=True) as dd:
        dd.open_log("t", 0).append_control(commit=True, producer_id=9, producer_epoch=0)
    committed = cli("--data-dir", data, "consume", "--topic", "t", "--from-beginning", *rc).out.split()
    assert committed == ["plain-1", "committed-1", "plain-2", "open-1", "after-open"]
    got = consume_json(cli, data, "t", "--partition", "0", "--offset", "2", *rc)
    assert [o["value"] for o in got] == ["committed-1", "plain-2", "open-1", "after-open"]


# -- a data dir Kafka wrote -----------------------------------------------------------------------

def test_consume_and_produce_on_a_kafka_written_data_dir(cli, tmp_path):
    import shutil
    data = tmp_path / "kafka-logs"
    shutil.copytree(os.path.join(HERE, "data", "kafka-vectors", "Bheem6005+kafka", "kafka-logs"), data)
    before = tree_state(data)
    r = cli("--data-dir", data, "consume", "--topic", "cities", "--from-beginning",
            "--property", "print.key=true", "--property", "print.offset=true")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert len(lines) == 11 and lines[0] == "Offset:0\tnull\tNew York" and lines[-1] == "Offset:10\tnull\tToronto"
    got = consume_json(cli, data, "__consumer_offsets", "--from-beginning")
    assert [o["offset"] for o in got] == [0, 1] and got[0]["key"] == got[1]["key"]
    assert tree_state(data) == before, "consume must not recover, snapshot or mark the Kafka dir"
    # appending continues Kafka's offsets
    assert cli("--data-dir", data, "produce", "--topic", "cities", stdin="Lisbon\n").code == 0
    got = consume_json(cli, data, "cities", "--partition", "0", "--offset", "10")
    assert [(o["offset"], o["value"]) for o in got] == [(10, "Toronto"), (11, "Lisbon")]
