"""get-offsets, delete-records, log-dirs and topics --if-not-exists / alter --partitions / list --json,
on a data dir and through a broker (--bootstrap-server), with Kafka's option names and output."""

from __future__ import annotations

import json

import pytest

from broker_support import Broker, run_cli



def out(r) -> str:
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def setup_topic(data, *where):
    out(run_cli(data, "topics", "create", "--topic", "t", "--partitions", "2", *where))
    lines = "".join(f'{{"key": "k{i}", "value": "v{i}", "partition": {i % 2}, "timestamp": {1000 + i}}}\n'
                    for i in range(10))
    return lines


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("tools") / "broker-data"
    b = Broker(data).start()
    yield b
    b.stop()


def test_tools_on_a_data_dir(tmp_path):
    data = tmp_path / "d"
    lines = setup_topic(data)
    out(run_cli(data, "produce", "--topic", "t", "--input-format", "jsonl", stdin=lines.encode()))
    assert out(run_cli(data, "get-offsets")).split() == ["t:0:5", "t:1:5"]
    assert out(run_cli(data, "get-offsets", "--time", "-2")).split() == ["t:0:0", "t:1:0"]
    assert out(run_cli(data, "get-offsets", "--time", "1004")).split() == ["t:0:2", "t:1:2"]
    assert out(run_cli(data, "get-offsets", "--time", "-3", "--partitions", "1")).split() == ["t:1:4"]
    spec = tmp_path / "del.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 3},
                                               {"topic": "t", "partition": 1, "offset": -1}], "version": 1}))
    text = out(run_cli(data, "delete-records", "--offset-json-file", spec))
    assert "partition: t-0\tlow_watermark: 3" in text and "partition: t-1\tlow_watermark: 5" in text
    assert out(run_cli(data, "get-offsets", "--time", "earliest")).split() == ["t:0:3", "t:1:5"]
    text = out(run_cli(data, "log-dirs", "--describe", "--topic-list", "t"))
    doc = json.loads(text.splitlines()[-1])
    parts = {p["partition"] for p in doc["brokers"][0]["logDirs"][0]["partitions"]}
    assert parts == {"t-0", "t-1"} and doc["version"] == 1
    assert out(run_cli(data, "topics", "create", "--topic", "t", "--if-not-exists")) == ""
    assert "already exists" in run_cli(data, "topics", "create", "--topic", "t").stderr.decode()
    out(run_cli(data, "topics", "alter", "--topic", "t", "--partitions", "4"))
    assert json.loads(out(run_cli(data, "topics", "list", "--json"))) == \
        [{"name": "t", "partitions": 4, "configured": True}]
    r = run_cli(data, "topics", "alter", "--topic", "t", "--partitions", "3")
    assert r.returncode != 0 and "increase" in r.stderr.decode()


def test_tools_through_the_broker(broker, tmp_path):
    b = ["--bootstrap-server", broker.bootstrap]
    data = broker.data_dir
    out(run_cli(data, "topics", "create", "--topic", "t", "--partitions", "2", *b))
    assert out(run_cli(data, "topics", "create", "--topic", "t", "--if-not-exists", *b)) == ""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("t", key=f"k{i}", value=f"v{i}", partition=i % 2, timestamp=1000 + i)
    assert p.flush(30) == 0
    assert out(run_cli(data, "get-offsets", *b)).split() == ["t:0:5", "t:1:5"]
    assert out(run_cli(data, "get-offsets", "--time", "1004", *b)).split() == ["t:0:2", "t:1:2"]
    spec = tmp_path / "del.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}))
    assert "partition: t-0\tlow_watermark: 3" in out(run_cli(data, "delete-records", "--offset-json-file", spec, *b))
    assert out(run_cli(data, "get-offsets", "--time", "-2", *b)).split() == ["t:0:3", "t:1:0"]
    doc = json.loads(out(run_cli(data, "log-dirs", "--describe", "--topic-list", "t", *b)).splitlines()[-1])
    sizes = {x["partition"]: x["size"] for x in doc["brokers"][0]["logDirs"][0]["partitions"]}
    assert set(sizes) == {"t-0", "t-1"} and all(v > 0 for v in sizes.values())
    out(run_cli(data, "topics", "alter", "--topic", "t", "--partitions", "3", *b))
    assert json.loads(out(run_cli(data, "topics", "list", "--json", *b))) == [{"name": "t", "partitions": 3}]
    out(run_cli(data, "topics", "delete", "--topic", "t", *b))
    assert json.loads(out(run_cli(data, "topics", "list", "--json", *b))) == []


def test_get_offsets_topic_partitions_as_kafka_parses_them(tmp_path):
    """--topic-partitions: kafka-get-offsets.sh's topic-partition patterns (a topic regex, then a
    partition, a range with its upper bound excluded, an open range, or nothing), on a data dir and
    through a broker alike."""
    cases = [("t:0,u:1-3", ["t:0:0", "u:1:0", "u:2:0"]), ("t:2-", ["t:2:0", "t:3:0"]), ("t:-2", ["t:0:0", "t:1:0"]),
             (":0", ["t:0:0", "u:0:0"]), ("u", ["u:0:0", "u:1:0", "u:2:0"]), ("[tu]:3", ["t:3:0"]),
             ("t:1,", ["t:1:0"]), ("u:", ["u:0:0", "u:1:0", "u:2:0"])]

    def check(data, *where):
        for topic, n in (("t", 4), ("u", 3)):
            out(run_cli(data, "topics", "create", "--topic", topic, "--partitions", n, *where))
        for spec, rows in cases:
            assert out(run_cli(data, "get-offsets", "--topic-partitions", spec, *where)).split() == rows, (spec, where)
        r = run_cli(data, "get-offsets", "--topic-partitions", "t:5-,v", *where)
        assert r.returncode == 1 and r.stderr.decode() == \
            "error: Could not match any topic-partitions with the specified filters\n"

    check(tmp_path / "d")
    with Broker(tmp_path / "broker-data") as b:
        check(b.data_dir, "--bootstrap-server", b.bootstrap)


@pytest.mark.parametrize("args, message", [
    (["--topic-partitions", "t:a"], "Invalid rule specification: t:a"),
    (["--topic-partitions", "t:0,t:1:2"], "Invalid rule specification: t:1:2"),
    (["--topic-partitions", "t:1-2-3"], "Invalid rule specification: t:1-2-3"),
    (["--topic-partitions", "t:99999999999"], "Invalid rule specification: t:99999999999 (a partition is at most "
                                              "2147483647)"),
    (["--topic-partitions", "(t:0"], "(t is an invalid regex."),
    (["--topic-partitions", "t:0", "--topic", "t"], "--topic-partitions cannot be used with --topic or --partitions"),
    (["--topic-partitions", "t:0", "--partitions", "0"],
     "--topic-partitions cannot be used with --topic or --partitions"),
])
def test_get_offsets_bad_topic_partitions_are_one_line(tmp_path, args, message):
    data = tmp_path / "d"
    out(run_cli(data, "topics", "create", "--topic", "t", "--partitions", "2"))
    r = run_cli(data, "get-offsets", *args)
    assert r.returncode == 2 and r.stderr.decode() == f"error: {message}\n" and r.stdout == b""
