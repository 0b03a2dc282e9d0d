"""``compactlog topics create|list|describe|alter|delete`` through the command's entry point."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from storage_support import tree_state


HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "data", "kafka-vectors")


def describe_json(cli, data, topic) -> dict:
    r = cli("--data-dir", data, "topics", "describe", "--topic", topic, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def configs_of(described: dict) -> dict:
    return {c["name"]: (c["value"], c["source"]) for c in described["configs"]}


def one_error_line(r) -> str:
    assert r.code != 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    return lines[0]


# -- create / list / describe / alter / delete --------------------------------------------------

def test_create_list_describe_alter_delete(cli, tmp_path):
    data = tmp_path / "data"
    r = cli("--data-dir", data, "topics", "create", "--topic", "prices", "--partitions", "3",
            "--config", "cleanup.policy=compact", "--config", "min.cleanable.dirty.ratio=0.01")
    assert r.code == 0, r.err
    assert r.out.strip() == "Created topic prices."
    assert sorted(os.listdir(data)) == [".lock", "compactlog.topics.json", "prices-0", "prices-1", "prices-2"]
    assert cli("--data-dir", data, "topics", "create", "--topic", "other").code == 0

    r = cli("--data-dir", data, "topics", "list")
    assert r.out.splitlines() == ["other", "prices"]

    d = describe_json(cli, data, "prices")
    assert d["partitionCount"] == 3 and d["topicId"]
    cfg = configs_of(d)
    assert cfg["cleanup.policy"] == ("compact", "override")
    assert cfg["min.cleanable.dirty.ratio"] == ("0.01", "override")
    assert cfg["segment.ms"] == ("604800000", "default")
    assert cfg["delete.retention.ms"] == ("86400000", "default")
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert all(p["size_bytes"] == 0 and p["log_end_offset"] == 0 for p in d["partitions"])

    text = cli("--data-dir", data, "topics", "describe", "--topic", "prices").out
    assert text.startswith("Topic: prices\t")
    assert "Configs: cleanup.policy=compact,min.cleanable.dirty.ratio=0.01" in text.splitlines()[0]
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith("    ")}
    assert rows["cleanup.policy"] == ["compact", "override"]
    assert rows["retention.ms"] == ["604800000", "default"]
    assert rows["PARTITION"] == ["SIZE-BYTES", "LOG-START-OFFSET", "LOG-END-OFFSET", "SEGMENTS"]

    r = cli("--data-dir", data, "topics", "alter", "--topic", "prices", "--config", "segment.ms=100",
            "--delete-config", "min.cleanable.dirty.ratio")
    assert r.code == 0, r.err
    cfg = configs_of(describe_json(cli, data, "prices"))
    assert cfg["segment.ms"] == ("100", "override")
    assert cfg["min.cleanable.dirty.ratio"] == ("0.5", "default")
    assert cfg["cleanup.policy"] == ("compact", "override")

    r = cli("--data-dir", data, "topics", "delete", "--topic", "prices")
    assert r.code == 0, r.err
    assert cli("--data-dir", data, "topics", "list").out.splitlines() == ["other"]
    assert sorted(os.listdir(data)) == [".lock", "compactlog.topics.json", "other-0"]
    assert "does not exist" in one_error_line(cli("--data-dir", data, "topics", "describe", "--topic", "prices"))


def test_describe_reports_sizes_offsets_and_segments(cli, tmp_path):
    data = tmp_path / "data"
    cli("--data-dir", data, "topics", "create", "--topic", "t", "--partitions", "2",
        "--config", "segment.bytes=200")
    lines = "".join(f'{{"key": "k{i}", "value": "{"v" * 40}", "partition": 0}}\n' for i in range(10))
    assert cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl", "--batch-size", "1",
               stdin=lines).code == 0
    before = tree_state(data)
    d = describe_json(cli, data, "t")
    p0, p1 = d["partitions"]
    logs = sorted(n for n in os.listdir(data / "t-0") if n.endswith(".log"))
    assert p0["segments"] == len(logs) > 1      # 10 batches of ~60 bytes roll 200-byte segments
    assert p0["size_bytes"] == sum(os.path.getsize(data / "t-0" / n) for n in logs)
    assert (p0["log_start_offset"], p0["log_end_offset"]) == (0, 10)
    assert (p1["size_bytes"], p1["log_end_offset"], p1["segments"]) == (0, 0, 0)   # never written
    assert tree_state(data) == before, "describe must not change the data dir"


def test_partitions_default_to_broker_num_partitions(cli, tmp_path):
    data = tmp_path / "data"
    assert cli("--data-dir", data, "--override", "num.partitions=4", "topics", "create", "--topic", "a").code == 0
    assert describe_json(cli, data, "a")["partitionCount"] == 4
    (data / "server.properties").write_text("num.partitions=2\n")
    assert cli("--data-dir", data, "topics", "create", "--topic", "b").code == 0
    assert describe_json(cli, data, "b")["partitionCount"] == 2
    # a broker-level default shows as such
    (data / "server.properties").write_text("num.partitions=2\nlog.cleaner.delete.retention.ms=5000\n")
    cfg = configs_of(describe_json(cli, data, "b"))
    assert cfg["delete.retention.ms"] == ("5000", "broker")


# -- refused commands write nothing ---------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["--config", "no.such.config=1"], "unknown topic configuration no.such.config"),
    (["--config", "segment.ms=abc"], "segment.ms"),
    (["--config", "segment.ms=0"], "value must be at least 1"),
    (["--config", "min.cleanable.dirty.ratio=1.5"], "between 0.0 and 1.0"),
    (["--config", "segment.bytes=13"], "at least 14"),
    (["--config", "segment.bytes=3000000000"], "segment.bytes"),
    (["--config", "cleanup.policy=compact,forever"], "unknown cleanup policy forever"),
    (["--config", "message.timestamp.type=Sometime"], "message.timestamp.type"),
    (["--config", "preallocate=maybe"], "preallocate"),
    (["--config", "segment.ms"], "not of the form name=value"),
    (["--partitions", "0"], "at least 1"),
])
def test_create_refuses_invalid_configs_and_writes_nothing(cli, tmp_path, args, expected):
    data = tmp_path / "data"
    data.mkdir()
    cli("--data-dir", data, "topics", "create", "--topic", "existing", "--config", "retention.ms=1000")
    before = tree_state(data)
    r = cli("--data-dir", data, "topics", "create", "--topic", "new", *args)
    assert expected in one_error_line(r)
    assert tree_state(data) == before


def test_create_refuses_bad_names_and_existing_topics(cli, tmp_path):
    data = tmp_path / "data"
    r = cli("--data-dir", data, "topics", "create", "--topic", "bad name")
    assert "may only contain" in one_error_line(r)
    assert not data.exists(), "a refused create must not even create the data dir"
    cli("--data-dir", data, "topics", "create", "--topic", "t")
    before = tree_state(data)
    assert "already exists" in one_error_line(cli("--data-dir", data, "topics", "create", "--topic", "t"))
    assert tree_state(data) == before


@pytest.mark.parametrize("args, expected", [
    (["--config", "segment.ms=-5"], "segment.ms"),
    (["--config", "bogus=1"], "unknown topic configuration bogus"),
    (["--config", "segment.ms=100", "--delete-config", "bogus"], "unknown topic configuration bogus"),
    (["--delete-config", "segment.ms"], "has no override for segment.ms"),
    ([], "nothing to alter"),
])
def test_alter_refuses_invalid_changes_and_writes_nothing(cli, tmp_path, args, expected):
    data = tmp_path / "data"
    cli("--data-dir", data, "topics", "create", "--topic", "t", "--config", "retention.ms=1000")
    before = tree_state(data)
    assert expected in one_error_line(cli("--data-dir", data, "topics", "alter", "--topic", "t", *args))
    assert tree_state(data) == before


def test_commands_on_missing_topics_and_data_dirs(cli, tmp_path):
    data = tmp_path / "data"
    assert "does not exist" in one_error_line(cli("--data-dir", data, "topics", "list"))
    cli("--data-dir", data, "topics", "create", "--topic", "t")
    for args in (["alter", "--topic", "x", "--config", "segment.ms=5"], ["delete", "--topic", "x"],
                 ["describe", "--topic", "x"]):
        assert "does not exist" in one_error_line(cli("--data-dir", data, "topics", *args))


# -- a data dir Kafka wrote (no compactlog.topics.json) -------------------------------------------

def test_kafka_written_data_dir(cli, tmp_path):
    data = tmp_path / "kafka-logs"
    shutil.copytree(os.path.join(VECTORS, "Bheem6005+kafka", "kafka-logs"), data)
    assert not (data / "compactlog.topics.json").exists()
    assert cli("--data-dir", data, "topics", "list").out.splitlines() == ["__consumer_offsets", "cities"]

    d = describe_json(cli, data, "cities")
    assert d["partitionCount"] == 1
    assert all(c["source"] == "default" for c in d["configs"])
    assert configs_of(d)["cleanup.policy"] == ("delete", "default")
    assert d["partitions"] == [{"partition": 0, "size_bytes": 820, "log_start_offset": 0,
                                "log_end_offset": 11, "segments": 1}]
    d = describe_json(cli, data, "__consumer_offsets")
    assert d["partitions"][0]["log_end_offset"] == 2

    r = cli("--data-dir", data, "topics", "alter", "--topic", "__consumer_offsets",
            "--config", "cleanup.policy=compact")
    assert r.code == 0, r.err
    cfg = configs_of(describe_json(cli, data, "__consumer_offsets"))
    assert cfg["cleanup.policy"] == ("compact", "override")
    assert cli("--data-dir", data, "topics", "list").out.splitlines() == ["__consumer_offsets", "cities"]
    # the segment files themselves are untouched by configuring
    with open(os.path.join(VECTORS, "Bheem6005+kafka", "kafka-logs", "cities-0",
                           "00000000000000000000.log"), "rb") as f:
        assert (data / "cities-0" / "00000000000000000000.log").read_bytes() == f.read()

    assert cli("--data-dir", data, "topics", "delete", "--topic", "cities").code == 0
    assert not (data / "cities-0").exists()
    assert cli("--data-dir", data, "topics", "list").out.splitlines() == ["__consumer_offsets"]
