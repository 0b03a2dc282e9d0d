"""Clean errors everywhere (issue 9, item 6), through the command as a user runs it.

Every failure is one line on stderr (``error: ...``) and a non-zero exit, never a traceback: a full
disk, a read-only mount, a byte that is not UTF-8 in a checkpoint, a timestamp past 2^63, a
``--data-dir`` that is a file. Every value Kafka refuses is refused (enumerated values are
case-sensitive), every name that is not a setting is warned about, settings that would hang the
cleaner are refused, and a partition whose cleaner checkpoint lies in its active segment has
nothing to clean, with the reason.

The disk-full and read-only tests mount a small tmpfs (root only), and are skipped otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_support import run_in_process
from storage_support import tree_state

EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMMAND = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "compactlog.cli.main"]
LONG_MAX = 2**63 - 1


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


def one_error_line(r) -> str:
    assert r.code != 0, (r.out, r.err)
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    return lines[0]


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def create(cli, data, topic="t", *args):
    r = cli("--data-dir", data, "topics", "create", "--topic", topic, *args)
    assert r.code == 0, r.err


def produce(cli, data, records, topic="t"):
    r = cli("--data-dir", data, "produce", "--topic", topic, "--input-format", "jsonl", stdin=jsonl(records))
    assert r.code == 0, r.err


def consume(cli, data, topic="t", *args) -> list[dict]:
    r = cli("--data-dir", data, "consume", "--topic", topic, "--output-format", "jsonl", *args)
    assert r.code == 0, r.err
    return [json.loads(x) for x in r.out.splitlines()]


def latest(records: list[dict]) -> dict:
    state = {}
    for r in records:
        state[r["key"]] = r["value"]
    return {k: v for k, v in state.items() if v is not None}


def files_named(root, suffixes) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith(suffixes))


# -- a small filesystem of our own --------------------------------------------------------------

@pytest.fixture
def small_fs(tmp_path):
    """mount(size) -> a fresh tmpfs of that size (unmounted at the end); skips where mounting is
    not allowed. remount_ro(path) makes it read-only."""
    mounted = []

    def mount(size: str) -> str:
        path = str(tmp_path / f"fs{len(mounted)}")
        os.makedirs(path)
        try:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                               capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.skip(f"cannot mount a small filesystem here: {e}")
        if r.returncode != 0:
            pytest.skip(f"cannot mount a small filesystem here (needs root): {r.stderr.strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=30)


def remount_ro(path: str) -> None:
    r = subprocess.run(["mount", "-o", "remount,ro", path], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")


def fill(fs: str, leave: int = 0) -> None:
    """Fill the filesystem up to ``leave`` free bytes with a file outside the data dir."""
    st = os.statvfs(fs)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(fs, "filler"), "ab") as f:
        try:
            f.write(b"\0" * max(free - leave, 0))
            f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC


def records(n: int, keys: int = 50, size: int = 40) -> list[dict]:
    return [{"key": f"k{i % keys}", "value": f"{i}-" + "v" * size} for i in range(n)]


# -- disk full and read-only --------------------------------------------------------------------

def test_disk_full_during_produce_is_one_line_and_leaves_no_tmp(cli, small_fs):
    fs = small_fs("512k")
    data = os.path.join(fs, "data")
    create(cli, data, "t", "--config", "cleanup.policy=compact", "--config", "segment.bytes=20000")
    r = cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl", stdin=jsonl(records(20000)))
    err = one_error_line(r)
    assert err.endswith(": No space left on device") and fs in err
    assert files_named(fs, ".tmp") == []
    got = consume(cli, data, "t", "--from-beginning")     # what was acknowledged before is readable
    assert got and [x["offset"] for x in got] == list(range(len(got)))


def test_disk_full_during_topics_create_is_one_line_and_leaves_no_tmp(cli, small_fs):
    fs = small_fs("256k")
    data = os.path.join(fs, "data")
    create(cli, data, "t")
    fill(fs)
    r = cli("--data-dir", data, "topics", "create", "--topic", "u", "--partitions", "3")
    err = one_error_line(r)
    assert err.endswith(": No space left on device")
    assert files_named(fs, ".tmp") == []


def test_disk_full_during_clean_is_one_line_and_loses_nothing(cli, small_fs):
    fs = small_fs("1m")
    data = os.path.join(fs, "data")
    create(cli, data, "t", "--config", "cleanup.policy=compact", "--config", "segment.bytes=4000",
           "--config", "min.cleanable.dirty.ratio=0.01")
    produce(cli, data, records(1500, keys=1000))      # most records are kept: the cleaned copy is large
    before = latest(consume(cli, data, "t", "--from-beginning"))
    fill(fs, leave=64 * 1024)
    r = cli("--data-dir", data, "clean", "--engine", "local")
    assert r.code != 0 and "Traceback" not in r.err
    assert r.err.strip() and all(line.startswith("error: ") for line in r.err.strip().splitlines()), r.err
    assert "No space left on device" in r.err
    assert files_named(fs, (".tmp", ".cleaned", ".swap")) == []
    os.remove(os.path.join(fs, "filler"))
    assert latest(consume(cli, data, "t", "--from-beginning")) == before
    r = cli("--data-dir", data, "clean", "--engine", "local")
    assert r.code == 0, r.err
    assert latest(consume(cli, data, "t", "--from-beginning")) == before


def test_read_only_mount(cli, small_fs):
    fs = small_fs("1m")
    data = os.path.join(fs, "data")
    create(cli, data, "t", "--config", "cleanup.policy=compact")
    produce(cli, data, records(50))
    remount_ro(fs)
    # a clean with nothing to clean needs no write: it says so, as on a writable disk
    r = cli("--data-dir", data, "clean")
    assert r.code == 0 and r.out.startswith("nothing to clean:\n  t-0: active segment"), (r.out, r.err)
    for args, stdin in [(["produce", "--topic", "t", "--input-format", "jsonl"], jsonl(records(3))),
                        (["clean", "--force", "--topic", "t", "--roll"], None),
                        (["topics", "create", "--topic", "u"], None),
                        (["topics", "alter", "--topic", "t", "--config", "segment.ms=1000"], None),
                        (["topics", "delete", "--topic", "t"], None)]:
        r = cli("--data-dir", data, *args, stdin=stdin)
        assert "Read-only file system" in one_error_line(r), args
    r = cli("--data-dir", os.path.join(fs, "new"), "topics", "create", "--topic", "t")
    assert "Read-only file system" in one_error_line(r)
    assert len(consume(cli, data, "t", "--from-beginning")) == 50


# -- files that are not UTF-8 -------------------------------------------------------------------

def two_partitions(cli, data):
    create(cli, data, "t", "--partitions", "2", "--config", "cleanup.policy=compact",
           "--config", "segment.bytes=300", "--config", "min.cleanable.dirty.ratio=0.01")
    produce(cli, data, [{"key": f"k{i % 5}", "value": f"v{i}", "partition": i % 2} for i in range(60)])


def insert_bad_byte(path, line: int) -> None:
    """A 0xff at the start of ``line`` (1-based)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    lines[line - 1] = b"\xff" + lines[line - 1]
    with open(path, "wb") as f:
        f.write(b"\n".join(lines))


@pytest.mark.parametrize("name", ["t-0/leader-epoch-checkpoint", "recovery-point-offset-checkpoint",
                                  "log-start-offset-checkpoint"])
def test_a_bad_partition_or_recovery_file_does_not_stop_the_clean(cli, data, name):
    two_partitions(cli, data)
    before = latest(consume(cli, data, "t", "--from-beginning"))
    path = os.path.join(data, name)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("0\n1\nt 0 0\n")
    insert_bad_byte(path, 3)
    r = cli("--data-dir", data, "clean", "--json")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    outcomes = {o["partition"]: o for o in map(json.loads, r.out.splitlines())}
    assert outcomes[0]["cleaned"] and outcomes[1]["cleaned"]
    assert latest(consume(cli, data, "t", "--from-beginning")) == before


def test_a_bad_cleaner_checkpoint_is_one_line_naming_file_and_line(cli, data):
    two_partitions(cli, data)
    cli("--data-dir", data, "clean")
    path = os.path.join(data, "cleaner-offset-checkpoint")
    insert_bad_byte(path, 4)
    before = tree_state(data)
    err = one_error_line(cli("--data-dir", data, "clean"))
    assert err == f"error: {path}: line 4: byte 0xff at column 1 is not UTF-8 text"
    assert tree_state(data) == before


def test_a_bad_topics_file_is_one_line_naming_it(cli, data):
    two_partitions(cli, data)
    path = os.path.join(data, "compactlog.topics.json")
    insert_bad_byte(path, 2)
    for args in (["clean"], ["topics", "list"], ["topics", "describe"], ["consume", "--topic", "t"]):
        err = one_error_line(cli("--data-dir", data, *args))
        assert err.startswith(f"error: {path}: ") and "UTF-8" in err, err


def test_a_bad_partition_metadata_file_does_not_break_describe(cli, data):
    two_partitions(cli, data)
    insert_bad_byte(os.path.join(data, "t-1", "partition.metadata"), 2)
    r = cli("--data-dir", data, "topics", "describe", "--topic", "t", "--json")
    assert r.code == 0 and "Traceback" not in r.err, r.err


def test_a_latin1_server_properties_is_read_as_kafka_reads_it(cli, data):
    # Java's Properties.load(InputStream), which Kafka uses, reads ISO-8859-1: any byte is accepted
    data.mkdir()
    (data / "server.properties").write_bytes(b"# r\xe9glages du broker\nnum.partitions=2\n")
    r = cli("--data-dir", data, "topics", "create", "--topic", "t")
    assert (r.code, r.err) == (0, "")
    assert json.loads(cli("--data-dir", data, "topics", "describe", "--json").out)["partitionCount"] == 2


# -- produce input ------------------------------------------------------------------------------

@pytest.mark.parametrize("stamp", [2**63, 2**64 + 5, -1])
def test_a_timestamp_outside_a_long_is_refused(cli, data, stamp):
    create(cli, data)
    before = tree_state(data)
    r = cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
            stdin=jsonl([{"key": "a", "value": "b"}, {"key": "a", "value": "b", "timestamp": stamp}]))
    err = one_error_line(r)
    assert f"line 2: timestamp {stamp} is not a time in ms from 0 to {LONG_MAX}" in err
    assert tree_state(data) == before


def test_the_largest_timestamp_is_accepted(cli, data):
    create(cli, data, "t", "--config", "message.timestamp.type=CreateTime")
    produce(cli, data, [{"key": "a", "value": "b", "timestamp": LONG_MAX}])
    assert consume(cli, data, "t", "--from-beginning")[0]["timestamp"] == LONG_MAX


def test_a_bom_at_the_start_of_jsonl_is_skipped(cli, data):
    # RFC 8259: a parser may ignore a byte order mark at the start; Windows editors write one
    create(cli, data)
    text = "\ufeff" + jsonl([{"key": "a", "value": "1"}, {"key": "b", "value": "2"}])
    r = cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl", stdin=text.encode("utf-8"))
    assert r.code == 0, r.err
    assert [(x["key"], x["value"]) for x in consume(cli, data, "t", "--from-beginning")] == [("a", "1"), ("b", "2")]


def test_a_bom_in_the_middle_of_jsonl_is_refused(cli, data):
    create(cli, data)
    before = tree_state(data)
    text = jsonl([{"key": "a", "value": "1"}]) + "\ufeff" + jsonl([{"key": "b", "value": "2"}])
    err = one_error_line(cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
                             stdin=text.encode("utf-8")))
    assert "line 2: a UTF-8 byte order mark (BOM) in the middle of the input" in err
    assert tree_state(data) == before


@pytest.mark.parametrize("line, expected", [
    (b'{"key": "a", "value": "\xff"}', "line 1: byte 0xff at column 24 is not UTF-8"),
    (b"[" * 100000 + b"]" * 100000, "line 1: not a JSON object (nested too deeply)"),
    (b'{"key": "a", "value": "b", "timestamp": 1' + b"0" * 5000 + b"}", "line 1: not a JSON object"),
])
def test_jsonl_lines_that_json_cannot_take(cli, data, line, expected):
    create(cli, data)
    err = one_error_line(cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
                             stdin=line + b"\n"))
    assert expected in err


# -- topics, --data-dir -------------------------------------------------------------------------

def test_delete_a_topic_with_the_longest_name(cli, data):
    # Kafka renames a deleted partition to <topic prefix>-<p>.<uuid>-delete, cut to fit 255 characters
    topic = "t" * 249
    create(cli, data, topic, "--partitions", "2")
    produce(cli, data, [{"key": "a", "value": "b"}], topic)
    r = cli("--data-dir", data, "topics", "delete", "--topic", topic)
    assert r.code == 0, r.err
    assert cli("--data-dir", data, "topics", "list").out == ""
    assert [n for n in os.listdir(data) if n.startswith("t")] == []


@pytest.mark.parametrize("args", [["topics", "list"], ["topics", "create", "--topic", "t"],
                                  ["produce", "--topic", "t"], ["consume", "--topic", "t"], ["clean"],
                                  ["cleaner", "status"], ["verify"], ["explain", "--topic", "t", "--partition", "0"],
                                  ["snapshot", "--topic", "t", "--out", "OUT"]])
def test_a_data_dir_that_is_a_file(cli, tmp_path, args):
    f = tmp_path / "file"
    f.write_text("not a directory")
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    err = one_error_line(cli("--data-dir", f, *args, stdin="x\n"))
    assert err == f"error: {f}: not a directory (--data-dir must name a directory)"


# -- the last-resort guard ------------------------------------------------------------------------

def test_a_bug_is_one_line_naming_it_and_the_traceback_is_there_on_demand(cli, data, monkeypatch):
    create(cli, data)
    from compactlog.storage import datadir

    def broken(self):
        return {}["no such key"]

    monkeypatch.setattr(datadir.DataDir, "topics", broken)
    r = cli("--data-dir", data, "topics", "list")
    assert r.code == 70
    err = one_error_line(r)
    # where: the innermost frame of compactlog's own code
    assert err.startswith("error: internal error: KeyError: 'no such key' (at compactlog/cli/topics.py:")
    assert "in list_cmd); please report it" in err and "COMPACTLOG_DEBUG=1" in err
    monkeypatch.setenv("COMPACTLOG_DEBUG", "1")
    r = cli("--data-dir", data, "topics", "list")
    assert r.code == 70 and "Traceback (most recent call last)" in r.err and "KeyError" in r.err
    assert r.err.strip().splitlines()[-1].startswith("error: internal error: KeyError")


def test_an_os_error_without_a_file_name_is_named_from_where_it_happened(cli, data, monkeypatch):
    # a write on a descriptor (os.pwrite) that fails names no file: the segment writing it does
    create(cli, data)

    def disk_full(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", disk_full)
    r = cli("--data-dir", data, "produce", "--topic", "t", "--input-format", "jsonl",
            stdin=jsonl([{"key": "a", "value": "b"}]))
    monkeypatch.undo()
    assert one_error_line(r) == f"error: {data}/t-0/00000000000000000000.log: No space left on device"


# -- configs: Kafka's rules, unknown names ------------------------------------------------------

@pytest.mark.parametrize("setting", ["cleanup.policy=COMPACT", "cleanup.policy=Compact,delete",
                                     "compression.type=GZIP", "message.timestamp.type=createtime",
                                     "cleanup.policy=compact,", "min.compaction.lag.ms=10",
                                     "segment.bytes=1_000"])
def test_topic_configs_kafka_refuses_are_refused(cli, data, setting):
    extra = ["--config", "max.compaction.lag.ms=5"] if setting.startswith("min.compaction") else []
    err = one_error_line(cli("--data-dir", data, "topics", "create", "--topic", "t", "--config", setting, *extra))
    assert setting.split("=")[0] in err
    assert not os.path.exists(data)
    create(cli, data)
    before = tree_state(data)
    one_error_line(cli("--data-dir", data, "topics", "alter", "--topic", "t", "--config", setting, *extra))
    one_error_line(cli("--data-dir", data, "clean", "--topic", "t", "--config", setting, *extra))
    assert tree_state(data) == before


def test_case_is_named_in_the_error(cli, data):
    err = one_error_line(cli("--data-dir", data, "topics", "create", "--topic", "t",
                             "--config", "cleanup.policy=COMPACT"))
    assert "did you mean compact? (values are case-sensitive, as in Kafka)" in err


@pytest.mark.parametrize("where", ["override", "server.properties"])
def test_broker_enumerated_values_are_case_sensitive(cli, data, where):
    create(cli, data)
    args = ["--override", "log.cleanup.policy=COMPACT"] if where == "override" else []
    if where == "server.properties":
        (data / "server.properties").write_text("log.cleanup.policy=COMPACT\n")
    err = one_error_line(cli("--data-dir", data, *args, "topics", "list"))
    assert "log.cleanup.policy" in err and "did you mean compact?" in err


def test_unknown_override_names_are_warned_about(cli, data):
    create(cli, data)
    r = cli("--data-dir", data, "--override", "log.cleaner.io.bufer.size=4096", "--override",
            "compactlog.spark.master=local[1]", "--override", "compactlog.cleaner.mapp=task",
            "--override", "broker.id=3", "topics", "list")
    assert r.code == 0 and r.out == "t\n"
    assert r.err.splitlines() == [
        "warning: --override: unknown settings ignored: compactlog.cleaner.mapp (did you mean "
        "compactlog.cleaner.map?), log.cleaner.io.bufer.size (did you mean log.cleaner.io.buffer.size?)",
        "warning: --override: Kafka broker setting that compactlog does not use, ignored: broker.id"]


def test_unknown_server_properties_keys_are_warned_about(cli, data):
    create(cli, data)
    # a Kafka broker's own file: every Kafka name is expected there, only the typo is reported
    (data / "server.properties").write_text(
        "broker.id=0\nlisteners=PLAINTEXT://:9092\nnum.network.threads=3\nlog.dirs=/var/kafka\n"
        "num.partitions=1\nlog.retention.hour=168\nlog.segment.bytes=1073741824\n"
        "zookeeper.connect=localhost:2181\ncompactlog.spark.master=local[2]\n")
    r = cli("--data-dir", data, "topics", "list")
    assert r.code == 0 and r.out == "t\n"
    assert r.err.splitlines() == [f"warning: {data / 'server.properties'}: unknown setting ignored: "
                                  f"log.retention.hour (did you mean log.retention.hours?)"]


def test_a_topic_config_given_as_a_broker_setting_is_named(cli, data):
    create(cli, data)
    r = cli("--data-dir", data, "--override", "cleanup.policy=compact", "topics", "list")
    assert r.code == 0
    assert r.err.strip() == ("warning: --override: cleanup.policy is a topic config, not a broker setting: "
                             "ignored (the broker default is log.cleanup.policy; a topic's own value is set "
                             "with --config cleanup.policy=...)")


@pytest.mark.parametrize("override", ["log.cleaner.io.buffer.size=0", "log.cleaner.io.buffer.size=1",
                                      "log.cleaner.threads=1000000", "log.cleaner.dedupe.buffer.size=1"])
def test_cleaner_settings_that_would_hang_are_refused_at_once(tmp_path, override):
    # a subprocess with a timeout: before the check, io.buffer.size=0 made the cleaner loop forever
    data = tmp_path / "data"
    env = dict(os.environ, COMPACTLOG_DATA_DIR=str(data))
    run = lambda *a, **k: subprocess.run([*COMMAND, *a], capture_output=True, text=True, timeout=120, env=env, **k)
    # the setup in this process (its process is not the test); the clean in its own, bounded
    setup = lambda *a, **k: run_in_process(a, text=True, env=env, **k)
    assert setup("topics", "create", "--topic", "t", "--config", "cleanup.policy=compact",
                 "--config", "min.cleanable.dirty.ratio=0.01").returncode == 0
    assert setup("produce", "--topic", "t", "--input-format", "jsonl", stdin=jsonl(records(200))).returncode == 0
    r = run("--override", override, "clean", "--engine", "local", "--force", "--roll")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("error: invalid value") and override.split("=")[0] in r.stderr


def test_one_byte_cleaner_buffers_grow_as_in_kafka(cli, tmp_path):
    # the smallest buffers that are not empty (io.buffer.size = 2 x threads) clean like the default
    results = []
    for overrides in ([], ["--override", "log.cleaner.io.buffer.size=2"]):
        data = tmp_path / f"data{len(results)}"
        create(cli, data, "t", "--config", "cleanup.policy=compact", "--config", "segment.bytes=3000",
               "--config", "min.cleanable.dirty.ratio=0.01")
        produce(cli, data, records(300, keys=20))
        r = cli("--data-dir", data, *overrides, "clean", "--engine", "local", "--roll")
        assert r.code == 0 and "cleaned log t-0" in r.out, r.err
        results.append([(x["offset"], x["key"], x["value"]) for x in consume(cli, data, "t", "--from-beginning")])
    assert results[0] == results[1] and len(results[0]) == 20


# -- command arguments --------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["clean"], ["clean", "--topic", "t"], ["cleaner", "status"],
                                  ["explain", "--topic", "t", "--partition", "0"]])
def test_a_negative_now_is_refused(cli, data, args):
    create(cli, data, "t", "--config", "cleanup.policy=compact")
    before = tree_state(data)
    r = cli("--data-dir", data, *args, "--now-ms", "-1")
    assert r.code == 2
    assert one_error_line(r) == "error: --now-ms -1: expected a time in ms since the epoch (0 or more)"
    assert tree_state(data) == before


def test_consume_timestamps_follow_kafkas_list_offsets(cli, data):
    create(cli, data)
    produce(cli, data, [{"key": f"k{i}", "value": f"v{i}", "timestamp": ts}
                        for i, ts in enumerate([1000, 5000, 3000, 5000, 2000])])
    offsets = lambda *a: [x["offset"] for x in consume(cli, data, "t", *a)]
    assert offsets("--timestamp", "3000") == [1, 2, 3, 4]
    assert offsets("--timestamp", "-1") == []                    # latest
    assert offsets("--timestamp", "-2") == [0, 1, 2, 3, 4]       # earliest
    assert offsets("--timestamp", "-3") == [1, 2, 3, 4]          # the (first) record with the largest timestamp
    for bad in ("-4", "-5", "-6", "-1000"):
        r = cli("--data-dir", data, "consume", "--topic", "t", "--timestamp", bad)
        assert r.code == 2 and f"--timestamp {bad}: expected a time in ms since the epoch" in one_error_line(r)


def test_snapshot_arguments_are_checked_before_spark_starts(cli, data, tmp_path):
    create(cli, data)
    t0 = time.monotonic()
    for args, expected in [(["--format", "csv"], "--format 'csv': expected one of parquet, delta, json"),
                           (["--partitions", "0,x"], "--partitions '0,x': expected a comma list"),
                           (["--partitions", "-1"], "--partitions '-1'")]:
        r = cli("--data-dir", data, "snapshot", "--topic", "t", "--out", tmp_path / "out", *args)
        assert expected in one_error_line(r)
    (tmp_path / "exists").mkdir()
    r = cli("--data-dir", data, "snapshot", "--topic", "t", "--out", tmp_path / "exists")
    assert "already exists (use --overwrite to replace it)" in one_error_line(r)
    assert time.monotonic() - t0 < 5          # no JVM was started


def test_cleaner_run_iterations_must_not_be_negative(cli, data):
    create(cli, data)
    r = cli("--data-dir", data, "cleaner", "run", "--engine", "local", "--iterations", "-1")
    assert r.code == 2 and "--iterations" in one_error_line(r)


# -- a cleaner checkpoint inside the active segment ---------------------------------------------

def test_a_checkpoint_inside_the_active_segment_is_nothing_to_clean(cli, data):
    # Kafka's testDirtyOffsetLargerThanActiveSegmentBaseOffset: no log is selected
    create(cli, data, "t", "--config", "cleanup.policy=compact", "--config", "min.cleanable.dirty.ratio=0.01")
    produce(cli, data, [{"key": f"k{i}", "value": "v"} for i in range(6)])
    with open(os.path.join(data, "cleaner-offset-checkpoint"), "w") as f:
        f.write("0\n1\nt 0 3\n")
    reason = ("active segment: nothing to clean: the first dirty offset 3 (the cleaner checkpoint) lies inside "
              "the active segment, which starts at 0")
    r = cli("--data-dir", data, "clean")
    assert (r.code, r.err) == (0, "") and r.out.startswith("nothing to clean:\n  t-0: " + reason)
    assert "clean --roll" in r.out
    r = cli("--data-dir", data, "clean", "--topic", "t", "--force")
    assert (r.code, r.out, r.err) == (0, f"t-0: not cleaned: {reason}\n", "")
    r = cli("--data-dir", data, "cleaner", "status", "--json")
    st = json.loads(r.out.splitlines()[0])
    assert r.code == 0 and st["reason"] == reason and not st["eligible"]
    assert (st["first_dirty"], st["first_uncleanable"]) == (3, 3)
    assert f"not eligible: {reason}" in cli("--data-dir", data, "explain", "--topic", "t", "--partition", "0").out


# -- killing a Spark clean ----------------------------------------------------------------------

def _processes() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) of every live process."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[1].split()
        if fields[0] != b"Z":
            out[int(name)] = (int(fields[1]), cmd)
    return out


def _descendants(root: int, procs) -> set[int]:
    found, todo = set(), [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, _) in procs.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the JVM and its workers in /proc (Linux)")
def test_kill_9_of_a_spark_clean_takes_its_jvm_and_workers_along(tmp_path):
    data = tmp_path / "data"
    env = dict(os.environ, COMPACTLOG_DATA_DIR=str(data), COMPACTLOG_SPARK_QUICK_START="1")
    # the setup in this process (its process is not the test); the clean in its own, killed
    setup = lambda *a, **k: run_in_process(a, text=True, env=env, **k)
    assert setup("topics", "create", "--topic", "t", "--partitions", "2", "--config", "cleanup.policy=compact",
                 "--config", "min.cleanable.dirty.ratio=0.01", "--config", "segment.bytes=4000").returncode == 0
    assert setup("produce", "--topic", "t", "--input-format", "jsonl", stdin=jsonl(records(4000))).returncode == 0
    proc = subprocess.Popen([*COMMAND, "clean", "--engine", "spark"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    jvm = workers = None
    try:
        # kill -9 once the JVM has started Python workers for the clean's tasks; the bound is
        # for a clean that never gets there (a JVM's start at load 20-36 took over 60 s)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            procs = _processes()
            seen |= _descendants(proc.pid, procs)
            jvm = next((p for p in seen if p in procs and b"java" in procs[p][1].split(b"\0")[0]), jvm)
            if jvm is not None:
                workers = [p for p in _descendants(jvm, procs) if b"python" in procs[p][1].split(b"\0")[0]]
                if workers:
                    break
            time.sleep(0.05)
        assert jvm is not None, "the JVM never started"
        assert proc.poll() is None, "the clean ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            procs = _processes()
            for pid in list(seen):
                seen |= _descendants(pid, procs)         # started after the last look, reparented since
            survivors = {p: procs[p][1][:80] for p in seen if p in procs}
            if not survivors:
                break
            time.sleep(0.2)
        assert not survivors, f"still running 10 s after kill -9 of compactlog: {survivors}"
        assert workers, "no Python worker was seen: the test did not cover them"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
