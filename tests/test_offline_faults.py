"""The offline commands under a failing disk or a kill -9 (``tests/faults/offline.py`` runs every
point; these are the ones that broke): a command whose write fails says so (one ``error:`` line,
exit 1) and leaves a dir that ``verify`` passes, that later commands read as before (or as the
command's result) and on which the command run again finishes the job.

The faults come from the LD_PRELOAD injector (``tests/faults/inject.c``), in a real ``compactlog``
process; the dir is read afterwards in this one. ~25 command processes: ``slow`` (``make test``, not
``make test-fast``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults"))

import campaign  # noqa: E402
from cli_support import run_in_process  # noqa: E402

pytestmark = pytest.mark.slow

EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMMAND = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "compactlog.cli.main"]


@pytest.fixture(scope="module")
def injector():
    path = campaign.build_injector()
    if path is None:
        pytest.skip("no C compiler to build the fault injector")
    return path


def faulty(injector, data, args, *, syscall, glob, at=1, kind="eio", stdin=None):
    """``compactlog --data-dir DATA ARGS`` with the ``at``-th ``syscall`` on a file matching
    ``glob`` failed as ``kind`` says (or the process killed there: ``kill``)."""
    fired = str(data) + ".fired"
    env = dict(os.environ, LD_PRELOAD=injector, FAULT_DIR=str(data), FAULT_SYSCALL=syscall, FAULT_GLOB=glob,
               FAULT_AT=str(at), FAULT_KIND=kind, FAULT_FIRED=fired)
    r = subprocess.run([*COMMAND, "--data-dir", str(data), *args], input=stdin, capture_output=True, text=True,
                       env=env, timeout=120)
    assert os.path.exists(fired), f"the fault never happened: {r.stderr}"
    os.remove(fired)
    return r


def cli(data, *args, stdin=None):
    return run_in_process(["--data-dir", data, *args], stdin=stdin, text=True)


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def said_an_error(r):
    assert r.returncode != 0 and r.returncode != -9, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert any(line.startswith("error: ") for line in r.stderr.splitlines()), r.stderr


def records(data, topic):
    r = ok(cli(data, "consume", "--topic", topic, "--from-beginning", "--output-format", "jsonl"))
    return [(x["partition"], x["offset"], x["key"], x["value"]) for x in map(json.loads, r.stdout.splitlines())]


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    ok(cli(d, "topics", "create", "--topic", "p"))
    ok(cli(d, "produce", "--topic", "p", "--input-format", "jsonl",
           stdin="".join(json.dumps({"key": f"k{i}", "value": f"v{i}"}) + "\n" for i in range(20))))
    return d


@pytest.mark.parametrize("kind", ["eio", "kill"])
def test_topics_create_stopped_after_its_record_leaves_a_topic_that_works(injector, data, kind):
    # the data dir's first fsync is the one after the topics file is renamed into place: the
    # creation stops there, its record written, none of its directories made
    r = faulty(injector, data, ["topics", "create", "--topic", "n", "--partitions", "2"],
               syscall="fsync", glob=str(data), kind=kind)
    if kind != "kill":
        said_an_error(r)
    ok(cli(data, "verify"))
    # the topic is there with its two partitions, or not at all: then creating it again works
    if "n" not in cli(data, "topics", "list").stdout.split():
        ok(cli(data, "topics", "create", "--topic", "n", "--partitions", "2"))
    ok(cli(data, "produce", "--topic", "n", "--input-format", "jsonl",
           stdin='{"key": "a", "value": "b", "partition": 1}\n'))
    assert records(data, "n") == [(1, 0, "a", "b")]
    assert len(records(data, "p")) == 20
    ok(cli(data, "verify"))


def snapshot_faulty(injector, data, out, args=(), **fault):
    """``snapshot`` of topic p to ``out`` with a fault under ``out``'s directory."""
    fired = str(out) + ".fired"
    env = dict(os.environ, LD_PRELOAD=injector, FAULT_DIR=os.path.dirname(str(out)), FAULT_FIRED=fired,
               **{f"FAULT_{k.upper()}": str(v) for k, v in fault.items()})
    r = subprocess.run([*COMMAND, "--data-dir", str(data), "snapshot", "--topic", "p", "--engine", "local",
                        "--out", str(out), *args], capture_output=True, text=True, env=env, timeout=120)
    assert os.path.exists(fired), f"the fault never happened: {r.stderr}"
    os.remove(fired)
    return r


def snapshot_rows(out):
    import pyarrow.parquet as pq
    return sorted(zip(*pq.read_table(str(out)).select(["key", "value"]).to_pydict().values()))


@pytest.mark.parametrize("syscall,at,kind", [("write", 1, "short"), ("create", 2, "enospc"), ("write", 1, "kill"),
                                             ("fsync", 1, "eio")])
def test_a_snapshot_whose_write_fails_leaves_no_output_and_runs_again(injector, data, tmp_path, syscall, at, kind):
    out = tmp_path / "out" / "p.parquet"
    out.parent.mkdir()
    r = snapshot_faulty(injector, data, out, syscall=syscall, glob=f"{out.parent}/*", at=at, kind=kind)
    if kind != "kill":
        said_an_error(r)
    # nothing half-written where the snapshot goes: a reader finds no table, and the same command
    # (without --overwrite) writes it whole
    assert not out.exists(), sorted(os.listdir(out))
    ok(cli(data, "snapshot", "--topic", "p", "--engine", "local", "--out", out))
    assert snapshot_rows(out) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(20))
    assert sorted(os.listdir(out.parent)) == ["p.parquet"]


@pytest.mark.parametrize("kind", ["enospc", "kill"])
def test_a_snapshot_overwrite_that_fails_keeps_the_old_snapshot(injector, data, tmp_path, kind):
    out = tmp_path / "out" / "p.parquet"
    out.parent.mkdir()
    ok(cli(data, "snapshot", "--topic", "p", "--engine", "local", "--out", out))
    old = snapshot_rows(out)
    ok(cli(data, "produce", "--topic", "p", "--input-format", "jsonl", stdin='{"key": "k0", "value": "new"}\n'))
    r = snapshot_faulty(injector, data, out, ["--overwrite"], syscall="write", glob=f"{out.parent}/*", at=1,
                        kind=kind)
    if kind != "kill":
        said_an_error(r)
    assert snapshot_rows(out) == old
    ok(cli(data, "snapshot", "--topic", "p", "--engine", "local", "--out", out, "--overwrite"))
    assert (b"k0", b"new") in snapshot_rows(out)
    assert sorted(os.listdir(out.parent)) == ["p.parquet"]


def partition_count(data, topic):
    line = next(x for x in ok(cli(data, "topics", "describe", "--topic", topic)).stdout.splitlines()
                if x.startswith("Topic:"))
    return int(line.split("PartitionCount:")[1].split()[0])


@pytest.mark.parametrize("syscall,glob,at,kind", [
    ("create", "*/compactlog.topics.json.tmp", 1, "enospc"),   # the record of the new count not written
    ("mkdir", "*/p-*", 2, "enospc"),                            # the second new partition not made
    ("mkdir", "*/p-*", 2, "kill"),
    ("fsync", "*/p-*", 1, "kill"),
])
def test_topics_alter_partitions_stopped_part_way_is_the_old_count_or_the_new(injector, data, syscall, glob, at, kind):
    r = faulty(injector, data, ["topics", "alter", "--topic", "p", "--partitions", "3"],
               syscall=syscall, glob=str(data) + glob[1:], at=at, kind=kind)
    count = partition_count(data, "p")
    if kind != "kill":
        said_an_error(r)
        assert count == 1           # the command failed: nothing changed
    assert count in (1, 3)          # never a topic of 2 partitions, which nobody asked for
    ok(cli(data, "verify"))
    if count == 1:
        ok(cli(data, "topics", "alter", "--topic", "p", "--partitions", "3"))
    assert partition_count(data, "p") == 3
    ok(cli(data, "produce", "--topic", "p", "--input-format", "jsonl",
           stdin="".join(json.dumps({"key": "z", "value": str(n), "partition": n}) + "\n" for n in range(3))))
    got = records(data, "p")
    assert len(got) == 23 and {(p, v) for p, _, k, v in got if k == "z"} == {(0, "0"), (1, "1"), (2, "2")}
    ok(cli(data, "verify"))


@pytest.mark.parametrize("syscall,glob,at,kind", [
    ("create", "*/compactlog.topics.json.tmp", 1, "enospc"),   # the topic's record not removed
    ("fsync", "*/compactlog.topics.json.tmp", 1, "eio"),
    ("create", "*/compactlog.topics.json.tmp", 1, "kill"),
])
def test_topics_delete_that_fails_keeps_the_topic_whole(injector, data, syscall, glob, at, kind):
    r = faulty(injector, data, ["topics", "delete", "--topic", "p"], syscall=syscall, glob=str(data) + glob[1:],
               at=at, kind=kind)
    if kind != "kill":
        said_an_error(r)
        # the command failed: the topic is there with its records, as before it
        ok(cli(data, "verify"))
        assert len(records(data, "p")) == 20
    ok(cli(data, "topics", "delete", "--topic", "p"))
    assert "p" not in ok(cli(data, "topics", "list")).stdout.split()
    assert not [n for n in os.listdir(data) if n.startswith("p-")]
    ok(cli(data, "verify"))


def test_topics_delete_killed_between_its_renames_and_its_record_is_deleted_or_whole(injector, data):
    faulty(injector, data, ["topics", "delete", "--topic", "p"], syscall="rename",
           glob=f"{data}/compactlog.topics.json", kind="kill")
    ok(cli(data, "verify"))
    if "p" in ok(cli(data, "topics", "list")).stdout.split():
        assert len(records(data, "p")) == 20


def damaged(data):
    """A byte of p-0's first batch flipped: a corrupt batch below the recovery point."""
    seg = os.path.join(data, "p-0", "00000000000000000000.log")
    with open(seg, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))


@pytest.mark.parametrize("syscall,glob,kind", [("create", "*.log.cleaned", "enospc"), ("fsync", "*.log.cleaned", "eio"),
                                               ("create", "*.index.cleaned", "enospc")])
def test_a_repair_that_fails_sets_nothing_aside_and_says_nothing_was(injector, data, syscall, glob, kind):
    damaged(data)
    before = cli(data, "verify")
    assert before.returncode == 1
    r = faulty(injector, data, ["verify", "--repair"], syscall=syscall, glob=f"{data}/p-0/{glob}", kind=kind)
    said_an_error(r)
    # nothing was set aside, and nothing says it was
    assert "by recovery" not in r.stdout + r.stderr, r.stderr
    assert not [n for n in os.listdir(data / "p-0") if n.endswith((".quarantined", ".discarded", ".cleaned"))]
    assert cli(data, "verify").stdout == before.stdout
    # the re-run sets the batch aside, once
    assert cli(data, "verify", "--repair").returncode == 3
    assert len([n for n in os.listdir(data / "p-0") if n.endswith((".quarantined", ".discarded"))]) == 1
    assert cli(data, "verify").returncode == 3


@pytest.mark.parametrize("glob", ["__consumer_offsets-*/*.log", "__consumer_offsets-*/*.index"])
def test_a_reset_offsets_whose_write_fails_names_the_failure(injector, data, glob):
    # the first reset creates __consumer_offsets: its first segment cannot be created
    r = faulty(injector, data, ["consumer-groups", "--reset-offsets", "--group", "g", "--topic", "p",
                                "--to-offset", "5", "--execute"], syscall="create", glob=f"{data}/{glob}",
               kind="enospc")
    said_an_error(r)
    assert "No space left on device" in r.stderr and "error 16" not in r.stderr, r.stderr
    assert "g" not in ok(cli(data, "consumer-groups", "--list")).stdout.split()
    ok(cli(data, "consumer-groups", "--reset-offsets", "--group", "g", "--topic", "p", "--to-offset", "5",
           "--execute"))
    assert " 5 " in ok(cli(data, "consumer-groups", "--describe", "--group", "g")).stdout
    ok(cli(data, "verify"))


def test_groups_are_read_after_a_kill_during_the_creation_of_the_offsets_topic(injector, data):
    # the first reset creates __consumer_offsets: killed after its record, one directory of 50 made
    faulty(injector, data, ["consumer-groups", "--reset-offsets", "--group", "g", "--topic", "p", "--to-offset", "5",
                            "--execute"], syscall="create", glob=f"{data}/__consumer_offsets-*/partition.metadata.tmp",
           kind="kill")
    # a reader reads the groups there are (none), without making the missing partitions
    r = cli(data, "consumer-groups", "--list")
    assert r.returncode == 0 and r.stdout.split() == [], r.stderr
    ok(cli(data, "verify"))
    ok(cli(data, "consumer-groups", "--reset-offsets", "--group", "g", "--topic", "p", "--to-offset", "5",
           "--execute"))
    assert " 5 " in ok(cli(data, "consumer-groups", "--describe", "--group", "g")).stdout


@pytest.mark.spark
def test_a_spark_clean_whose_python_worker_is_killed_is_one_error_line(injector, tmp_path):
    data = tmp_path / "data"
    ok(cli(data, "topics", "create", "--topic", "c", "--config", "cleanup.policy=compact",
           "--config", "min.cleanable.dirty.ratio=0.01"))
    ok(cli(data, "produce", "--topic", "c", "--input-format", "jsonl",
           stdin="".join(json.dumps({"key": f"k{i % 5}", "value": f"v{i}"}) + "\n" for i in range(40))))
    before = records(data, "c")
    # the worker writes the cleaned segment's index: killed there, as the OOM killer would
    env_cds = os.environ.get("COMPACTLOG_SPARK_CDS")
    os.environ["COMPACTLOG_SPARK_CDS"] = "0"
    try:
        r = faulty(injector, data, ["clean", "--roll", "--topic", "c", "--engine", "spark"], syscall="create",
                   glob=f"{data}/c-0/*.index.cleaned", kind="kill")
    finally:
        if env_cds is None:
            os.environ.pop("COMPACTLOG_SPARK_CDS")
        else:
            os.environ["COMPACTLOG_SPARK_CDS"] = env_cds
    assert r.returncode == 1, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the clean's Spark job failed: Python worker exited"), \
        r.stderr[-2000:]
    ok(cli(data, "verify"))
    assert records(data, "c") == before
    ok(cli(data, "clean", "--roll", "--topic", "c", "--engine", "local"))
    assert sorted(k for _, _, k, _ in records(data, "c")) == [f"k{i}" for i in range(5)]


@pytest.mark.parametrize("glob", ["*.log.cleaned", "*.index.cleaned"])
def test_a_repair_killed_after_keeping_the_bytes_keeps_them_once(injector, data, glob):
    damaged(data)
    # killed after the corrupt batch's copy was written and synced, before the segment was replaced
    faulty(injector, data, ["verify", "--repair"], syscall="create", glob=f"{data}/p-0/{glob}", kind="kill")
    assert cli(data, "verify", "--repair").returncode == 3
    kept = [n for n in os.listdir(data / "p-0") if n.endswith((".quarantined", ".discarded"))]
    assert len(kept) == 1, kept
    assert cli(data, "verify").returncode == 3


def test_a_repair_killed_while_keeping_the_bytes_leaves_no_partial_copy(injector, data):
    damaged(data)
    faulty(injector, data, ["verify", "--repair"], syscall="write", glob=f"{data}/p-0/*.discarded*", kind="short")
    faulty(injector, data, ["verify", "--repair"], syscall="write", glob=f"{data}/p-0/*.discarded*", kind="kill")
    assert cli(data, "verify", "--repair").returncode == 3
    kept = [n for n in os.listdir(data / "p-0") if n.endswith((".quarantined", ".discarded"))]
    assert len(kept) == 1, kept
    size = os.path.getsize(data / "p-0" / kept[0])
    r = cli(data, "verify")
    assert r.returncode == 3 and f"{size} bytes" in r.stdout, r.stdout


# each step of a deletion of the 2-partition topic q, in order (the kill comes before the call):
# the topics file's record of the deletion (its "deleting" mark) renamed into place, its directory
# synced, the two renames to -delete, the data dir synced, the checkpoints rewritten, the mark
# dropped, the data dir synced (then the -delete directories are removed)
DELETE_STEPS = [
    ("rename", "compactlog.topics.json", 1, "whole"),
    ("fsync", "", 1, "deleted"),
    ("rename", "q-0.*-delete", 1, "deleted"),
    ("rename", "q-1.*-delete", 1, "deleted"),
    ("fsync", "", 2, "deleted"),
    ("rename", "recovery-point-offset-checkpoint", 1, "deleted"),
    ("rename", "compactlog.topics.json", 2, "deleted"),
    ("fsync", "", 4, "deleted"),
]


def listing(data):
    return sorted(os.path.relpath(os.path.join(b, n), data) for b, ds, ns in os.walk(data) for n in ds + ns)


@pytest.mark.parametrize("syscall,glob,at,outcome", DELETE_STEPS)
def test_topics_delete_killed_at_each_step_is_whole_or_deleted(injector, data, syscall, glob, at, outcome):
    ok(cli(data, "topics", "create", "--topic", "q", "--partitions", "2"))
    ok(cli(data, "produce", "--topic", "q", "--input-format", "jsonl",
           stdin="".join(json.dumps({"key": f"k{i}", "value": f"q{i}", "partition": i % 2}) + "\n"
                         for i in range(10))))
    q = records(data, "q")
    r = faulty(injector, data, ["topics", "delete", "--topic", "q"], syscall=syscall,
               glob=f"{data}/{glob}" if glob else str(data), at=at, kind="kill")
    assert r.returncode == -9, r.stderr
    # the readers see the topic whole or not at all, and change nothing
    before = listing(data)
    ok(cli(data, "verify"))
    listed = "q" in ok(cli(data, "topics", "list")).stdout.split()
    assert listed == (outcome == "whole")
    if listed:
        assert records(data, "q") == q
        assert partition_count(data, "q") == 2
    else:
        assert cli(data, "consume", "--topic", "q", "--from-beginning").returncode != 0
        assert cli(data, "topics", "describe", "--topic", "q").returncode != 0
    assert listing(data) == before
    # the next writer (a produce to another topic) finishes a deletion: nothing of q is left, and
    # q is not made again
    ok(cli(data, "produce", "--topic", "p", "--input-format", "jsonl", stdin='{"key": "z", "value": "z"}\n'))
    ok(cli(data, "verify"))
    assert len(records(data, "p")) == 21
    assert ("q" in ok(cli(data, "topics", "list")).stdout.split()) == listed
    if listed:
        assert records(data, "q") == q
        ok(cli(data, "topics", "delete", "--topic", "q"))
    assert not [n for n in os.listdir(data) if n.startswith("q-")], os.listdir(data)
    assert "deleting" not in json.loads((data / "compactlog.topics.json").read_text())
    assert "q" not in ok(cli(data, "topics", "list")).stdout.split()
    # the name can be used again: a new, empty topic
    ok(cli(data, "topics", "create", "--topic", "q", "--partitions", "2"))
    assert records(data, "q") == []
    ok(cli(data, "verify"))
