"""A bucket no broker runs on, read as a data dir (``storage.remote.bucket``) against moto's S3
server: (a) a Kafka data dir copied to the bucket as ``aws s3 sync`` leaves it, (b) a compactlog
broker's remote tier. Every command over the bucket must print what it prints over the same files
on a local disk (byte for byte, the paths aside), with GET/HEAD/LIST only; bad URLs, a missing
bucket and refused credentials are one ``error:`` line. The same bucket read, cleaned and written
on Spark: test_bucket_spark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

from s3_support import ACCESS_KEY, REGION, SECRET_KEY, moto  # noqa: F401 - fixture

T0 = 1_700_000_000_000
COMMAND = [sys.executable, "-m", "compactlog"]
# moto and a corpus (the commands run in this process but for the kill tests)
pytestmark = pytest.mark.slow


def make_data_dir(root: str) -> None:
    """Two topics, several segments each, keys overwritten and a tombstone (a compacted topic)."""
    dd = DataDir(root, broker=BrokerConfig({}), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("orders", 2, {"segment.bytes": "700", "cleanup.policy": "compact",
                                  "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
                                  "segment.ms": "604800000"})
    dd.create_topic("plain", 1, {"segment.bytes": "100000"})
    for p in range(2):
        log = dd.open_log("orders", p)
        for i in range(90):
            key = b"k%d" % (i % 11)
            value = None if i == 60 + p else b"value-%d-%d" % (p, i) + b"." * (i % 17)
            log.append_records([key], [value], timestamps=[T0 + i])
    log = dd.open_log("plain", 0)
    for i in range(20):
        log.append_records([None], [b"line %d" % i], timestamps=[T0 + i])
    dd.checkpoint_logs()
    dd.close()


def sync_up(client, root: str, bucket: str, prefix: str) -> None:
    """What ``aws s3 sync ROOT s3://BUCKET/PREFIX`` leaves: one object per file, same relative name."""
    for d, _, names in os.walk(root):
        for n in names:
            full = os.path.join(d, n)
            client.upload_file(full, bucket, f"{prefix}/{os.path.relpath(full, root)}".lstrip("/"))


@pytest.fixture(scope="module")
def copied(moto, tmp_path_factory):
    """A data dir on disk and its copy in a bucket (prefix ``kafka/data``), beside other users'
    objects in the same bucket."""
    root = str(tmp_path_factory.mktemp("bucket-dd") / "data")
    make_data_dir(root)
    moto.create_bucket("copied-dd")
    client = moto.client()
    sync_up(client, root, "copied-dd", "kafka/data")
    for k in ("other/readme.txt", "kafka/data-old/x-0/00000000000000000000.log", "kafka/notes.txt"):
        client.put_object(Bucket="copied-dd", Key=k, Body=b"someone else's")
    return root, "s3://copied-dd/kafka/data"


def env_for(moto, **extra) -> dict:
    env = dict(os.environ)
    env.update(AWS_ENDPOINT_URL=moto.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_REGION=REGION, AWS_EC2_METADATA_DISABLED="true")
    env.update(extra)
    return env


def run(moto, data_dir: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command in this process (``cli_support.run_in_process``): what these tests check is the
    command's output and what it leaves in the bucket, not its process (``run_process``)."""
    from cli_support import run_in_process
    return run_in_process(["--data-dir", data_dir, *args], env=env or env_for(moto))


def run_process(moto, data_dir: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command as its own process: for a kill -9 at a step (``faults.maybe_die``)."""
    return subprocess.run(COMMAND + ["--data-dir", data_dir, *args], capture_output=True, timeout=120,
                          env=env or env_for(moto))


def same(local: subprocess.CompletedProcess, remote: subprocess.CompletedProcess, root: str, url: str) -> None:
    assert local.returncode == 0, local.stderr.decode()
    assert remote.returncode == 0, remote.stderr.decode()
    assert remote.stdout.replace(url.encode(), root.encode()) == local.stdout


@pytest.mark.parametrize("args", [
    ("consume", "--topic", "orders", "--from-beginning", "--property", "print.key=true", "--property",
     "print.offset=true", "--property", "print.timestamp=true"),
    ("consume", "--topic", "orders", "--partition", "1", "--offset", "33", "--output-format", "jsonl"),
    ("consume", "--topic", "plain", "--from-beginning", "--isolation-level", "read_committed"),
])
def test_consume_equals_local(moto, copied, args):
    root, url = copied
    same(run(moto, root, *args), run(moto, url, *args), root, url)


def test_dump_log_equals_local(moto, copied):
    root, url = copied
    for part in ("orders-0", "orders-1", "plain-0"):
        args = ("dump-log", "--deep-iteration", "--print-data-log")
        local = run(moto, root, *args, "--files", os.path.join(root, part))
        remote = run(moto, url, *args, "--files", f"{url}/{part}")
        same(local, remote, root, url)
        assert local.stdout.count(b"baseOffset") > 1
    one = f"{url}/orders-0/00000000000000000000.log"
    local = run(moto, root, "dump-log", "--files", os.path.join(root, "orders-0", "00000000000000000000.log"))
    same(local, run(moto, url, "dump-log", "--files", one), root, url)


def test_snapshot_equals_local(moto, copied, tmp_path):
    root, url = copied
    for fmt in ("json",):
        a, b = tmp_path / "local", tmp_path / "bucket"
        local = run(moto, root, "snapshot", "--topic", "orders", "--out", str(a), "--format", fmt, "--engine", "local")
        remote = run(moto, url, "snapshot", "--topic", "orders", "--out", str(b), "--format", fmt, "--engine", "local")
        assert local.returncode == 0 and remote.returncode == 0, remote.stderr.decode()
        assert snapshot_bytes(a) == snapshot_bytes(b)
        assert len(snapshot_bytes(a).splitlines()) >= 20


def snapshot_bytes(out) -> bytes:
    """The data files of a snapshot, in name order of their part number (names carry a random id)."""
    parts = sorted(n for n in os.listdir(out) if n.startswith("part-"))
    return b"".join((out / n).read_bytes() for n in parts)


@pytest.mark.parametrize("url, expected", [
    ("s3://", "no bucket name"),
    ("s3://Bad_Bucket!/x", "is not a valid bucket name"),
    ("gs://bucket/x", None),                 # not a bucket scheme: a (missing) local directory
    ("s3://no-such-bucket-here/x", "bucket does not exist"),
    ("s3://copied-dd/nothing-here", "no partitions found (no objects)"),
    ("s3://copied-dd/other", "no partitions found (1 object(s), none a segment"),
    ("file:///no/such/dir", "no such directory"),
])
def test_bad_url_is_one_line(moto, copied, url, expected):
    r = run(moto, url, "consume", "--topic", "orders", "--from-beginning")
    err = r.stderr.decode()
    assert r.returncode == 1, err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    if expected:
        assert expected in lines[0], err


def test_wrong_credentials_is_one_line(moto, copied):
    r = run(moto, copied[1], "consume", "--topic", "orders", "--from-beginning",
            env=env_for(moto, AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="", AWS_ENDPOINT_URL="http://127.0.0.1:1",
                        AWS_MAX_ATTEMPTS="1"))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert len([x for x in err.splitlines() if x.startswith("error:")]) == 1, err


def test_commands_that_need_a_directory_refuse_a_bucket(moto, copied):
    r = run(moto, copied[1], "topics", "list")
    assert r.returncode == 1 and b"needs a local data dir" in r.stderr and b"Traceback" not in r.stderr


def test_verify_equals_local(moto, copied):
    root, url = copied
    for args in (("verify",), ("verify", "--json", "--topic", "orders")):
        same(run(moto, root, *args), run(moto, url, *args), root, url)


def test_explain_equals_local(moto, copied):
    """explain over the bucket (its segments read from their objects, no local copy) says what it
    says over the local files, and names where each segment is read from, as the local explain
    names a tiered partition's tiers."""
    root, url = copied
    args = ("explain", "--topic", "orders", "--now-ms", str(T0 + 10**9), "--roll", "--json")
    local, remote = run(moto, root, *args), run(moto, url, *args)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr.decode()
    docs = [json.loads(line) for line in remote.stdout.splitlines()]
    for d in docs:
        tiers = d.pop("tiers")
        part = f"{url}/orders-{d['partition']}"
        assert tiers["objectStore"] == part and tiers["segmentCount"] == len(tiers["segments"]) > 1
        assert all(s["location"] == f"{part}/{s['baseOffset']:020d}.log" for s in tiers["segments"])
        d["tiers"] = None
    assert [json.loads(line) for line in local.stdout.splitlines()] == docs
    assert any(d["wouldClean"] for d in docs)
    text = run(moto, url, *args[:-1])
    assert text.returncode == 0 and f"tiers: bucket ".encode() in text.stdout and b"read from s3://copied-dd/" in text.stdout


# -- clean over a bucket --------------------------------------------------------------------------

CORPUS_CASES = ["kt-c10-tombstone-two-phase-staged", "kt-c14b-commit-marker-removal-staged", "kt-c30-segment-grouping",
                "rnd-019-tombstones"]


def fetch_current(moto, bucket: str, prefix: str, dest: str) -> str:
    """The data dir a reader of s3://BUCKET/PREFIX reads now (the switch's generation), copied
    to ``dest`` for Kafka's comparer (as a user would aws s3 sync it back)."""
    client = moto.client()
    try:
        doc = json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}.compactlog-clean.json")["Body"].read())
        current = doc["current"]
    except client.exceptions.NoSuchKey:
        current = prefix + "/"
    shutil.rmtree(dest, ignore_errors=True)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=current):
        for o in page.get("Contents", []):
            path = os.path.join(dest, o["Key"][len(current):])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            client.download_file(bucket, o["Key"], path)
    return dest


def clean_corpus_case(moto, corpus_dir, tmp_path, name: str, bucket: str) -> str:
    """Every round of a Kafka cleaner corpus case run by `clean` over the case copied to
    s3://BUCKET/dd, each round's generation compared with what Kafka's cleaner kept (the corpus'
    own comparer); the case's local input dir."""
    from corpus_support import broker_overrides, compare_round, prepare
    root = str(tmp_path / "input")
    case = prepare(corpus_dir, name, root)
    r = run(moto, root, "topics", "alter", "--topic", case["topic"],
            *[a for k, v in case["topic_configs"].items() for a in ("--config", f"{k}={v}")])
    assert r.returncode == 0, r.stderr.decode()
    moto.create_bucket(bucket)
    sync_up(moto.client(), root, bucket, "dd")
    url = f"s3://{bucket}/dd"
    for k, now in enumerate(case["rounds"], start=1):
        overrides = [a for key, v in broker_overrides(case).items() for a in ("--override", f"{key}={v}")]
        r = run(moto, url, *overrides, "clean", "--now-ms", str(now), "--engine", "local")
        assert r.returncode == 0, r.stderr.decode()
        got = fetch_current(moto, bucket, "dd", str(tmp_path / f"round-{k}"))
        assert compare_round(corpus_dir, name, case, got, k) == [], (name, k)
    return root


@pytest.mark.parametrize("name", CORPUS_CASES)
def test_clean_equals_kafka_cleaner(moto, corpus_dir, tmp_path, name):
    """Every round of a Kafka cleaner corpus case run by `clean` over the bucket: the generation
    switched to holds what Kafka's cleaner kept (the corpus' own comparer), as the local clean does."""
    bucket = f"corpus-{abs(hash(name)) % 10**8}"
    root = clean_corpus_case(moto, corpus_dir, tmp_path, name, bucket)
    # the objects read are as they were: the input prefix untouched
    before = {os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(root) for n in ns}
    keys = {o["Key"][3:] for o in moto.client().list_objects_v2(Bucket=bucket, Prefix="dd/")["Contents"]}
    assert keys == before


def test_clean_beside_other_objects_and_twice(moto, tmp_path):
    """A bucket shared with other users: the clean writes only its generation and the switch;
    a second clean writes generation 2 from generation 1; consume reads the latest."""
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("shared-clean")
    client = moto.client()
    sync_up(client, root, "shared-clean", "team/dd")
    others = {"team/dd.txt": b"x", "team/other/a.log": b"y", "readme": b"z", "team/dd-2/orders-0/x": b"w"}
    for k, v in others.items():
        client.put_object(Bucket="shared-clean", Key=k, Body=v)
    before = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket="shared-clean")["Contents"]}
    url = "s3://shared-clean/team/dd"
    args = ("clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
    r = run(moto, url, *args)
    assert r.returncode == 0, r.stderr.decode()
    assert b"aws s3 sync --delete s3://shared-clean/team/dd.compactlog-000001-" in r.stderr
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket="shared-clean")["Contents"]}
    new = set(after) - set(before)
    assert all(before[k] == after[k] for k in before)
    assert new and all(k.startswith("team/dd.compactlog-000001-") or k == "team/dd.compactlog-clean.json" for k in new)
    local = run(moto, root, *args)
    consume = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true")
    same(run(moto, root, *consume), run(moto, url, *consume), root, url)
    # nothing left to clean: nothing written, no new generation
    r = run(moto, url, "clean", "--now-ms", str(T0 + 10**9), "--engine", "local")
    assert r.returncode == 0, r.stderr.decode()
    assert {o["Key"] for o in client.list_objects_v2(Bucket="shared-clean")["Contents"]} == set(after)
    assert local.returncode == 0


@pytest.mark.parametrize("step", ["bucket-clean-objects", "bucket-clean-switch"])
def test_clean_killed_at_each_step_leaves_every_record(moto, tmp_path, step):
    """kill -9 after the generation's objects (before the switch) and after the switch: the
    bucket reads whole either way (the old state or the new), the input untouched."""
    root = str(tmp_path / "data")
    make_data_dir(root)
    name = f"kill-{step.split('-')[-1]}"
    moto.create_bucket(name)
    sync_up(moto.client(), root, name, "dd")
    url = f"s3://{name}/dd"
    consume = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true")
    full = run(moto, url, *consume)
    kill_file = tmp_path / "kill"
    kill_file.write_text(step)
    r = run_process(moto, url, "clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local",
                    env=env_for(moto, COMPACTLOG_TEST_REMOTE_KILL_FILE=str(kill_file)))
    assert r.returncode == -9 and not kill_file.exists(), r.stderr.decode()
    got = run(moto, url, *consume)
    assert got.returncode == 0, got.stderr.decode()
    if step == "bucket-clean-objects":
        assert got.stdout == full.stdout            # not switched: the old state, every record
    else:
        run(moto, root, "clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
        same(run(moto, root, *consume), got, root, url)   # switched: the cleaned state
    assert run(moto, url, "verify").returncode == 0


def test_clean_sweeps_older_and_killed_generations(moto, tmp_path):
    """No generation stays forever: a clean killed before its switch leaves objects no switch
    names; the next clean that switches deletes them, and every generation but the one it wrote
    and the one it read; other users' objects (and the copy first read) stay."""
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("sweep")
    client = moto.client()
    sync_up(client, root, "sweep", "dd")
    client.put_object(Bucket="sweep", Key="dd.compactlog-notes.txt", Body=b"someone else's")
    url = "s3://sweep/dd"

    def generations() -> set:
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="sweep", Prefix="dd.compactlog-0")["Contents"]]
        return {k.split("/")[0] for k in keys}

    kill_file = tmp_path / "kill"
    kill_file.write_text("bucket-clean-objects")
    clean = ("clean", "--roll", "--engine", "local", "--force", "--now-ms")
    r = run_process(moto, url, *clean, str(T0 + 10**9),
                    env=env_for(moto, COMPACTLOG_TEST_REMOTE_KILL_FILE=str(kill_file)))
    assert r.returncode == -9
    [killed] = generations()
    for k in range(3):          # each run has something to clean: new records are not possible, so --force
        r = run(moto, url, *clean, str(T0 + 10**9 + k + 1))
        assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(client.get_object(Bucket="sweep", Key="dd.compactlog-clean.json")["Body"].read())
    assert killed not in generations() and len(generations()) <= 2
    assert doc["current"].rstrip("/") in generations()
    assert client.get_object(Bucket="sweep", Key="dd.compactlog-notes.txt")["Body"].read() == b"someone else's"
    assert len(client.list_objects_v2(Bucket="sweep", Prefix="dd/")["Contents"]) > 10


# -- shape (b): a broker's remote tier ------------------------------------------------------------

@pytest.fixture(scope="module")
def remote_tier(moto, tmp_path_factory):
    """A compactlog data dir whose rolled segments its RemoteLogManager copied to the bucket (key
    prefix ``tiered/``), a full copy of the data dir kept before local retention trimmed it."""
    return make_remote_tier(moto, tmp_path_factory, "tier-bucket")


def make_remote_tier(moto, tmp_path_factory, bucket: str) -> tuple[str, str]:
    """``remote_tier`` in ``bucket`` (moto's state is one per process: a module of its own uses a
    bucket of its own when pytest-xdist runs it in the same worker as this one)."""
    from compactlog.storage.remote.manager import RemoteLogManager
    from compactlog.storage.remote.store import open_store
    tmp = tmp_path_factory.mktemp("remote-tier")
    moto.create_bucket(bucket)
    props = moto.properties(bucket, **{"remote.log.storage.system.enable": "true",
                                              "rsm.config.key.prefix": "tiered/", "rsm.config.chunk.size": "512",
                                              "rlmm.config.remote.log.metadata.topic.num.partitions": "1"})
    root = str(tmp / "data")
    dd = DataDir(root, broker=BrokerConfig(props), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "400", "local.retention.bytes": "0",
                             "retention.ms": "-1"})
    rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=lambda: T0,
                          open_log=lambda t, p: dd.open_log(t, p), create_topic=lambda t, n, c: dd.create_topic(t, n, c),
                          store=open_store(props))
    rm.start()
    log = dd.open_log("t", 0)
    for i in range(60):
        log.append_records([b"k%d" % (i % 9)], [b"value-%05d" % i + b"." * 40], timestamps=[T0 + i])
    assert rm.copy_partition(log) > 3
    dd.checkpoint_logs()
    full = str(tmp / "full")
    shutil.copytree(root, full, ignore=shutil.ignore_patterns(".lock"))
    dd.delete_old_segments(log)
    rm.close()
    dd.close()
    return full, f"s3://{bucket}/tiered"


def test_remote_tier_read_offline(moto, remote_tier, tmp_path):
    """consume, dump-log, verify and snapshot of a remote tier with no broker and no data dir: the
    records are the ones the broker's log held (up to the highest remote offset)."""
    full, url = remote_tier
    args = ("consume", "--topic", "t", "--from-beginning", "--output-format", "jsonl")
    local, remote = run(moto, full, *args), run(moto, url, *args)
    assert remote.returncode == 0, remote.stderr.decode()
    lines = remote.stdout.splitlines()
    assert len(lines) > 10 and lines == local.stdout.splitlines()[:len(lines)]
    v = run(moto, url, "verify", "--json")
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()
    summary = json.loads(v.stdout.splitlines()[-1])
    assert summary["records"] == len(lines) and summary["problems"] == 0
    manifest = [o["Key"] for o in moto.client().list_objects_v2(Bucket="tier-bucket")["Contents"]
                if o["Key"].endswith("/compactlog-partition.json")]
    part_url = "s3://tier-bucket/" + manifest[0].rsplit("/", 1)[0]          # …/t-<topic id>/0
    d = run(moto, url, "dump-log", "--deep-iteration", "--files", part_url)
    assert d.returncode == 0, d.stderr.decode()
    assert d.stdout.count(b"| offset: ") == len(lines)
    s = run(moto, url, "snapshot", "--topic", "t", "--out", str(tmp_path / "snap"), "--format", "json",
            "--engine", "local")
    assert s.returncode == 0 and b"wrote 9 keys" in s.stdout, s.stderr.decode()


def test_remote_tier_clean_refused(moto, remote_tier):
    """A remote tier is its broker's to compact: refused with one line, nothing written."""
    _, url = remote_tier
    before = {o["Key"] for o in moto.client().list_objects_v2(Bucket="tier-bucket")["Contents"]}
    r = run(moto, url, "clean", "--now-ms", str(T0 + 10**9), "--engine", "local")
    assert r.returncode == 1 and r.stderr.decode().count("error:") == 1 and b"Traceback" not in r.stderr
    assert b"compacted by its broker" in r.stderr
    assert {o["Key"] for o in moto.client().list_objects_v2(Bucket="tier-bucket")["Contents"]} == before


def test_two_cleans_racing_one_loses_cleanly(moto, tmp_path, monkeypatch):
    """Two cleans of one bucket: the switch is a conditional PUT on the ETag read before the run,
    so the second to switch gets 412, deletes its objects and says so; the first one's stays."""
    from compactlog.cli.bucket_dir import staged
    from compactlog.cli.common import CliContext
    from compactlog.errors import CompactlogError
    for k, v in env_for(moto).items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("race")
    client = moto.client()
    sync_up(client, root, "race", "dd")
    url = "s3://race/dd"
    first, second = CliContext(url), CliContext(url)
    with pytest.raises(CompactlogError, match="another clean switched the bucket"):
        with staged(second, clean=True) as scratch_b:
            with staged(first, clean=True) as scratch_a:        # starts after, switches first
                open(os.path.join(scratch_a, "orders-0", "marker-a"), "wb").close()
            open(os.path.join(scratch_b, "orders-0", "marker-b"), "wb").close()
    doc = json.loads(client.get_object(Bucket="race", Key="dd.compactlog-clean.json")["Body"].read())
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="race", Prefix="dd.compactlog-0")["Contents"]]
    assert {k.split("/")[0] + "/" for k in keys} == {doc["current"]}
    assert f"{doc['current']}orders-0/marker-a" in keys and not any(k.endswith("marker-b") for k in keys)


# -- clean straight over the objects: local disk stays bounded --------------------------------------

def make_big_partition(root: str, segment_bytes: int, records: int) -> None:
    """One compacted partition of many segments, most of its records superseded."""
    dd = DataDir(root, broker=BrokerConfig({}), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("big", 1, {"segment.bytes": str(segment_bytes), "cleanup.policy": "compact",
                               "min.cleanable.dirty.ratio": "0.01", "segment.ms": "604800000"})
    log = dd.open_log("big", 0)
    step = 200
    for i in range(0, records, step):
        log.append_records([b"key-%d" % (j % 300) for j in range(i, i + step)],
                           [b"v%08d" % j + b"." * 180 for j in range(i, i + step)], timestamps=[T0 + i] * step)
    dd.checkpoint_logs()
    dd.close()


def test_clean_keeps_local_disk_bounded(moto, tmp_path, monkeypatch):
    """`clean` over a bucket reads the segments from their objects and writes each cleaned one
    from one temp file: the scratch dir holds the small files only (every ``.log`` a sparse file
    with no block on disk) and no temp file outgrows one segment; the result equals the local
    clean's. (The scratch copy of last stop held the whole data dir: this failed on it.)"""
    import tempfile
    from cli_support import run_in_process
    from compactlog.cli import bucket_dir
    from compactlog.storage.remote import bucket_clean
    seg_bytes = 64 << 10
    root = str(tmp_path / "data")
    make_big_partition(root, seg_bytes, 8000)          # ~1.7 MB in ~26 segments
    data_bytes = sum(os.path.getsize(os.path.join(root, "big-0", n)) for n in os.listdir(os.path.join(root, "big-0"))
                     if n.endswith(".log"))
    assert data_bytes > 20 * seg_bytes
    moto.create_bucket("bounded")
    sync_up(moto.client(), root, "bounded", "dd")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen = {"allocated": 0, "small": 0, "logs": 0, "temp": 0}

    def data_bytes_of(path: str) -> int:
        """Bytes of ``path`` that are on disk (a sparse file's holes are not; an extended
        attribute's block is not data either, so st_blocks would not tell)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            held, pos, size = 0, 0, os.fstat(fd).st_size
            while pos < size:
                try:
                    start = os.lseek(fd, pos, os.SEEK_DATA)
                except OSError:         # ENXIO: no data past pos
                    break
                end = os.lseek(fd, start, os.SEEK_HOLE)
                held, pos = held + end - start, end
            return held
        finally:
            os.close(fd)

    def measure_scratch() -> None:
        held = small = 0
        for d, _, names in os.walk(scratch):
            for n in names:
                if d == str(scratch) or d.endswith(".logs"):    # a temp file (below); the run log
                    continue
                full = os.path.join(d, n)
                if n.endswith(".log"):
                    held += data_bytes_of(full)
                    seen["logs"] += 1
                else:
                    small += data_bytes_of(full)
        seen["allocated"] = max(seen["allocated"], held)
        seen["small"] = max(seen["small"], small)

    publish, finish = bucket_dir.publish, bucket_clean.ObjectReplacement.finish

    def measured_publish(*args, **kwargs):
        measure_scratch()
        return publish(*args, **kwargs)

    def measured_finish(self, *args, **kwargs):
        seen["temp"] = max(seen["temp"], os.path.getsize(self.path))
        measure_scratch()
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(bucket_dir, "publish", measured_publish)
    monkeypatch.setattr(bucket_clean.ObjectReplacement, "finish", measured_finish)
    args = ("clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
    r = run_in_process(["--data-dir", "s3://bounded/dd", *args], env=env_for(moto))
    assert r.returncode == 0, r.stderr.decode()
    assert seen["logs"] > 20 and seen["temp"] > 0
    assert seen["allocated"] == 0                       # no segment's bytes on local disk
    assert seen["temp"] <= seg_bytes                    # one cleaned segment at a time
    assert seen["small"] < data_bytes / 10              # indexes, snapshots, checkpoints
    assert os.listdir(scratch) == []                    # and all of it gone after
    assert run_in_process(["--data-dir", root, *args]).returncode == 0
    got = fetch_current(moto, "bounded", "dd", str(tmp_path / "got"))
    logs = sorted(n for n in os.listdir(os.path.join(root, "big-0")) if n.endswith(".log"))
    assert logs == sorted(n for n in os.listdir(os.path.join(got, "big-0")) if n.endswith(".log"))
    for n in logs:
        with open(os.path.join(root, "big-0", n), "rb") as a, open(os.path.join(got, "big-0", n), "rb") as b:
            assert a.read() == b.read(), n
