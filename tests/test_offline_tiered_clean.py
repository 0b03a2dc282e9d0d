"""``compactlog clean`` on a stopped broker's data dir whose compacted topic has a remote tier
(tiered-storage.md §5, §6): the offline run opens the data dir's remote log manager from its
broker config and runs the broker's round over both tiers (storage/remote/offline.py).

Each test builds a data dir as a broker leaves it (records appended, rolled segments copied to the
store by the broker's ``RemoteLogManager`` and trimmed by local retention, some copied segments
still local, the rest local only) and, for comparison, its twin with the same records all local.
Checked:

* the logical log a consumer reads (the remote tier below the local log start, then the local
  segments) equals, batch for batch, the all-local clean of the twin, over two rounds (the second
  removes a tombstone past its horizon), and the JSON report names each tier's share;
* ``--dry-run`` and ``explain`` say what the remote tier would lose and write nothing;
* a kill -9 of the offline clean at each step of the commit leaves a state the next run (offline,
  or a broker) finishes: nothing lost, nothing twice, no object the manifest does not list;
* ``snapshot`` reads both tiers; ``clean --spark-master local[2]`` gives the same result;
* on moto's S3: a store that does not answer is one error line, exit 1, nothing changed; a broker
  started after the offline clean serves the cleaned remote range to confluent-kafka.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.record.batch import iter_batches
from compactlog.storage import files
from compactlog.storage.datadir import DataDir, load_broker_config

from s3_support import bucket, moto  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

COMMAND = [sys.executable, "-m", "compactlog"]
T0 = int(time.time() * 1000) - 3_600_000
NOW = T0 + 600_000                # the first round's clock
LATER = NOW + 60_000              # past the tombstones' delete horizon (delete.retention.ms 1000)
PREFIX = "tiered/"
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01",
                 "delete.retention.ms": "1000"}


def local_store_props(root: str) -> dict[str, str]:
    return {"rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
            "rsm.config.storage.root": os.path.join(root, "bucket")}


def broker_props(store: dict[str, str], **extra: str) -> dict[str, str]:
    return {"remote.log.storage.system.enable": "true", **store, "rsm.config.key.prefix": PREFIX,
            "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
            # the replaced segments go in the same run, orphans at once: what a test can wait for
            "compactlog.remote.compaction.delete.delay.ms": "0", "compactlog.remote.orphan.min.age.ms": "0",
            **extra}


def phase_records(phase: int) -> list[tuple[bytes, bytes | None]]:
    """Phase 0: 20 keys x 10, a tombstone for k05 last (never written again) and k19 written only
    here (so only the remote tier holds it); phase 1: k00-k14 but k05 again; phase 2: k00-k03."""
    if phase == 0:
        out = [(b"k%02d" % (i % 20), b"a%03d-" % i * 6) for i in range(200)]
        out.append((b"k05", None))
        return out
    if phase == 1:
        return [(b"k%02d" % (i % 15), b"b%03d-" % i * 6) for i in range(100) if i % 15 != 5]
    return [(b"k%02d" % (i % 4), b"c%03d-" % i * 6) for i in range(20)]


def append(log, phase: int) -> None:
    recs = phase_records(phase)
    base = log.log_end_offset
    for i, (k, v) in enumerate(recs):
        log.append_records([k], [v], timestamps=[T0 + base + i])
    log.roll()


def build(root: str, store: dict[str, str], *, tiered: bool = True, extra: dict | None = None) -> str:
    """A data dir (``root``/data) as a broker leaves it (module docstring); its path."""
    from compactlog.storage.remote.manager import RemoteLogManager
    data = os.path.join(root, "data")
    os.makedirs(data)
    props = broker_props(store, **(extra or {})) if tiered else {}
    with open(os.path.join(data, "server.properties"), "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())
    dd = DataDir(data, broker=load_broker_config(data), clock=lambda: T0, create=True, writable=True)
    configs = dict(TOPIC_CONFIGS)
    if tiered:
        configs.update({"remote.storage.enable": "true", "local.retention.bytes": "0"})
    dd.create_topic("c", 1, configs)
    log = dd.open_log("c", 0)
    append(log, 0)
    if not tiered:
        append(log, 1)
        dd.checkpoint_logs()
        dd.close()
        return data
    rm = RemoteLogManager(dd, broker_id=1, cluster_id="cluster", open_log=lambda t, p: dd.open_log(t, p),
                          create_topic=lambda t, n, c: dd.create_topic(t, n, c))
    try:
        rm.start()
        rm.copy_partition(log)                 # every rolled segment of phase 0 uploaded ...
        dd.delete_old_segments(log)            # ... and trimmed from the disk
        append(log, 1)
        rp = rm.partition(log)
        for _ in range(3):                     # three of phase 1 uploaded, still local (both tiers)
            c = rm._next_candidate(log, rp)
            try:
                rm._copy_segment(log, rp, c)
            finally:
                os.close(c["fd"])
        assert log.local_log_start_offset > log.log_start_offset
    finally:
        rm.close()
    dd.checkpoint_logs()
    dd.close()
    return data


def append_phase(data: str, phase: int) -> None:
    with DataDir(data, broker=load_broker_config(data), clock=lambda: T0, writable=True) as dd:
        append(dd.open_log("c", 0), phase)


def cli(data: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    from cli_support import run_in_process
    return run_in_process(["--data-dir", data, *args], env=env)


def clean(data: str, now: int, *args: str) -> list[dict]:
    got = cli(data, "clean", "--force", "--now-ms", str(now), "--json", *args)
    assert got.returncode == 0, got.stderr.decode()
    rows = [json.loads(line) for line in got.stdout.decode().splitlines() if line.startswith("{")]
    return [r for r in rows if r.get("topic") == "c" and "cleaned" in r] or rows


# -- what the tiers hold ------------------------------------------------------------------------------

def manifest(data: str) -> tuple[dict, str] | None:
    """The partition manifest of c-0 in a local-directory bucket and its partition folder."""
    root = os.path.join(os.path.dirname(data), "bucket", PREFIX)
    for d in os.listdir(root):
        if d.startswith("c-"):
            part = os.path.join(root, d, "0")
            with open(os.path.join(part, "compactlog-partition.json")) as f:
                return json.load(f), part
    return None


def local_segments(data: str) -> list[str]:
    pdir = os.path.join(data, "c-0")
    return sorted(os.path.join(pdir, n) for n in os.listdir(pdir) if n.endswith(files.LOG_SUFFIX))


def logical_batches(data: str, tiered: bool = True) -> list[bytes]:
    """The batches of the one logical log the cleaner compacts: the remote tier up to its highest
    offset, then the local segments above it (what a consumer from the log start reads once local
    retention has trimmed the copied segments: a copied segment's local copy is a cache the round
    leaves as it is, tiered-storage.md §5.2)."""
    boundary = -1
    out = []
    if tiered:
        m, part = manifest(data)
        for s in m["segments"]:
            path = os.path.join(part, f"{s['startOffset']:020d}-{s['id']}.log")
            with open(path, "rb") as f:
                out += [bytes(b.raw()) for b in iter_batches(f.read())]
            boundary = s["endOffset"]
    for p in local_segments(data):
        if files.offset_from_filename(os.path.basename(p)) > boundary:
            with open(p, "rb") as f:
                out += [bytes(b.raw()) for b in iter_batches(f.read())]
    return out


def records(batches: list[bytes]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for raw in batches for b in iter_batches(raw) for r in b.records()]


def latest(recs) -> dict:
    out = {}
    for off, k, v in recs:
        out[k] = (off, v)
    return {k: v for k, v in out.items() if v[1] is not None}


def bucket_ids(data: str) -> set[str]:
    """The segment ids of every object in the partition's folder."""
    _, part = manifest(data)
    return {n.split("-", 1)[1].rsplit(".", 1)[0] for n in os.listdir(part) if n[:1].isdigit()}


def tree_state(*roots: str) -> dict[str, str]:
    """Every file under ``roots`` and a digest of its bytes (what a read-only command must not change)."""
    out = {}
    for root in roots:
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                with open(p, "rb") as f:
                    out[p] = hashlib.sha256(f.read()).hexdigest()
    return out


def journal_live(data: str) -> dict[str, int]:
    """Segment id -> its last state in ``__remote_log_metadata`` (DELETE_SEGMENT_FINISHED ones left out)."""
    from compactlog.record import remote_log_metadata as rlm
    states: dict[str, int] = {}
    with DataDir(data, broker=load_broker_config(data)) as dd:
        for p in dd.partitions(rlm.TOPIC):
            for r in dd.open_log(rlm.TOPIC, p).records():
                e = rlm.decode(bytes(r.value))
                states[e.segment_id.id] = int(e.state)
    return {i: s for i, s in states.items() if s != int(rlm.SegmentState.DELETE_SEGMENT_FINISHED)}


def assert_consistent(data: str) -> None:
    """The bucket holds exactly the manifest's segments, each FINISHED in the journal, and the
    journal names no other live segment."""
    from compactlog.record.remote_log_metadata import SegmentState
    m, _ = manifest(data)
    ids = {s["id"] for s in m["segments"]}
    assert not m["pendingDeletion"], m["pendingDeletion"]
    assert bucket_ids(data) == ids
    live = journal_live(data)
    assert set(live) == ids
    assert set(live.values()) == {int(SegmentState.COPY_SEGMENT_FINISHED)}


# -- the tests --------------------------------------------------------------------------------------

@pytest.fixture
def pair(tmp_path):
    """(tiered data dir, its all-local twin), same records, same segments."""
    tiered = build(str(tmp_path / "tiered"), local_store_props(str(tmp_path / "tiered")))
    plain = build(str(tmp_path / "plain"), {}, tiered=False)
    return tiered, plain


def test_offline_clean_compacts_the_remote_tier_as_an_all_local_clean(pair):
    tiered, plain = pair
    before = records(logical_batches(tiered))
    assert records(logical_batches(plain, tiered=False)) == before
    remote_before = len(manifest(tiered)[0]["segments"])
    # round 1: every key's latest value kept, k05's tombstone stamped and kept
    (out,) = clean(tiered, NOW)
    (want,) = clean(plain, NOW)
    assert out["cleaned"] and out["error"] is None
    got = logical_batches(tiered)
    assert got == logical_batches(plain, tiered=False)
    assert latest(records(got)) == latest(before)
    assert b"k19" in latest(records(got))                # only the remote tier held it
    assert sum(1 for _, k, v in records(got) if k == b"k05" and v is None) == 1
    # the report names each tier's share; the totals are the all-local clean's
    tiers = out["byTier"]
    assert tiers["remote"]["segments"] == remote_before and tiers["local"]["segments"] > 0
    assert tiers["remote"]["recordsRead"] + tiers["local"]["recordsRead"] == want["messagesRead"]
    assert tiers["remote"]["recordsRead"] - tiers["remote"]["recordsKept"] > 100
    assert out["messagesWritten"] == want["messagesWritten"]
    assert_consistent(tiered)
    # round 2, past the horizon: the tombstone goes from both tiers as from the local log
    append_phase(tiered, 2)
    append_phase(plain, 2)
    (out2,) = clean(tiered, LATER)
    clean(plain, LATER)
    got = logical_batches(tiered)
    assert got == logical_batches(plain, tiered=False)
    assert not any(k == b"k05" for _, k, _ in records(got))
    assert out2["byTier"]["remote"]["removed"].get("tombstone-expired", 0) + \
        out2["byTier"]["local"]["removed"].get("tombstone-expired", 0) == 1
    assert_consistent(tiered)
    # the owner written by the run's conditional write is this data dir's broker
    assert manifest(tiered)[0]["owner"]["brokerId"] == 0


def test_dry_run_and_explain_say_what_the_remote_tier_would_lose(pair):
    tiered, _ = pair
    bucket = os.path.join(os.path.dirname(tiered), "bucket")
    state = tree_state(tiered, bucket)
    dry = cli(tiered, "clean", "--force", "--now-ms", str(NOW), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr.decode()
    (d,) = [r for r in map(json.loads, dry.stdout.decode().splitlines()) if r["topic"] == "c"]
    text = cli(tiered, "clean", "--force", "--now-ms", str(NOW), "--dry-run").stdout.decode()
    ex = cli(tiered, "explain", "--topic", "c", "--now-ms", str(NOW)).stdout.decode()
    ex_json = json.loads(cli(tiered, "explain", "--topic", "c", "--now-ms", str(NOW), "--json").stdout)
    assert tree_state(tiered, bucket) == state           # nothing written, local or remote
    remote = d["byTier"]["remote"]
    lost = remote["recordsRead"] - remote["recordsKept"]
    assert lost > 100 and ex_json["byTier"] == d["byTier"]
    line = f"remote tier: {remote['segments']} segment(s), would remove {lost} of {remote['recordsRead']} records"
    assert line in text and line in ex
    # the clean then removes what the dry run said
    (out,) = clean(tiered, NOW)
    assert out["byTier"]["remote"]["recordsKept"] == remote["recordsKept"]
    assert out["messagesWritten"] == d["recordsKept"]


def kill_clean_at(tiered: str, step: str) -> None:
    """``clean --force`` of ``tiered`` as its own process, killed -9 at ``step`` (storage/remote/faults)."""
    from compactlog.storage.remote.faults import KILL_FILE_ENV
    kill_file = tiered + ".kill"
    with open(kill_file, "w") as f:
        f.write(step)
    env = dict(os.environ, **{KILL_FILE_ENV: kill_file})
    got = subprocess.run(COMMAND + ["--data-dir", tiered, "clean", "--force", "--now-ms", str(NOW)],
                         capture_output=True, timeout=300, env=env)
    assert got.returncode == -9, got.stderr.decode()
    assert not os.path.exists(kill_file)


@pytest.mark.parametrize("step", ["compaction-objects", "compaction-started", "compaction-manifest",
                                  "compaction-deleted"])
def test_kill_at_each_step_is_finished_by_the_next_run(pair, step):
    tiered, plain = pair
    kill_clean_at(tiered, step)
    # what a consumer reads now: every key's latest value, each offset once
    now_read = records(logical_batches(tiered))
    offsets = [o for o, _, _ in now_read]
    assert offsets == sorted(set(offsets))
    assert latest(now_read) == latest(records(logical_batches(plain, tiered=False)))
    # the next run finishes or discards what the killed one left; the result is the all-local clean
    clean(tiered, NOW)
    clean(plain, NOW)
    assert logical_batches(tiered) == logical_batches(plain, tiered=False)
    assert_consistent(tiered)


def test_snapshot_reads_both_tiers(pair, tmp_path):
    tiered, plain = pair
    outs = {}
    for name, data in (("tiered", tiered), ("plain", plain)):
        out = tmp_path / f"snap-{name}"
        got = cli(data, "snapshot", "--topic", "c", "--out", str(out), "--format", "json", "--engine", "local")
        assert got.returncode == 0, got.stderr.decode()
        rows = []
        for n in sorted(os.listdir(out)):
            if n.endswith(".json"):
                rows += [json.loads(x) for x in (out / n).read_text().splitlines()]
        outs[name] = sorted((r["key"], r["value"], r["offset"]) for r in rows)
    assert outs["tiered"] == outs["plain"]
    assert len(outs["tiered"]) == 19                      # k05 deleted; k19 only in the remote tier


def test_clean_on_spark_equals_the_local_run(pair, tmp_path):
    pytest.importorskip("pyspark")
    tiered, plain = pair
    (out,) = clean(tiered, NOW, "--spark-master", "local[2]")
    assert out["cleaned"] and out["engine"] == "spark", out
    clean(plain, NOW)
    assert logical_batches(tiered) == logical_batches(plain, tiered=False)
    assert out["byTier"]["remote"]["recordsRead"] > out["byTier"]["remote"]["recordsKept"]
    assert_consistent(tiered)


# -- on moto's S3 ------------------------------------------------------------------------------------

def s3_state(moto, bucket: str) -> dict[str, tuple]:
    return {o["Key"]: (o["ETag"], o["Size"]) for o in moto.client().list_objects_v2(Bucket=bucket).get("Contents", [])}


def s3_manifest(moto, bucket: str) -> tuple[dict, set[str]]:
    """The partition manifest of c-0 and the segment ids of every object in its folder."""
    client = moto.client()
    objs = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=PREFIX + "c-").get("Contents", [])]
    key = next(k for k in objs if k.endswith("/compactlog-partition.json"))
    m = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    ids = {k.rsplit("/", 1)[1].split("-", 1)[1].rsplit(".", 1)[0] for k in objs if k.rsplit("/", 1)[1][:1].isdigit()}
    return m, ids


def test_store_down_is_one_error_line_and_changes_nothing(moto, bucket, tmp_path):
    from s3_support import FaultProxy
    proxy = FaultProxy(moto.endpoint)
    try:
        tiered = build(str(tmp_path / "tiered"), moto.properties(bucket, endpoint=proxy.endpoint))
        before_bucket, before_dir = s3_state(moto, bucket), tree_state(tiered)
        proxy.refuse()
        for args in (("clean", "--force", "--now-ms", str(NOW)), ("clean", "--now-ms", str(NOW), "--dry-run"),
                     ("explain", "--topic", "c", "--now-ms", str(NOW))):
            got = cli(tiered, *args)
            err = got.stderr.decode()
            assert got.returncode == 1, (args, err)
            assert err.count("\n") == 1 and err.startswith("error: the remote tier (s3://") and \
                "nothing was cleaned or changed" in err and "Traceback" not in err, (args, err)
        assert s3_state(moto, bucket) == before_bucket
        assert tree_state(tiered) == before_dir
    finally:
        proxy.refuse()


def consume_all(bootstrap: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of c-0 from offset 0, by confluent-kafka, up to ``end``."""
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.time_ns()}", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition("c", 0, 0)])
        out, deadline = [], time.time() + 60
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                lo, hi = c.get_watermark_offsets(ck.TopicPartition("c", 0), timeout=10, cached=False)
                pos = c.position([ck.TopicPartition("c", 0)])[0].offset
                if pos >= hi > 0 and hi >= end:
                    break
                continue
            out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


@pytest.mark.parametrize("killed", [None, "compaction-manifest"])
def test_a_broker_started_after_the_offline_clean_serves_it(moto, bucket, tmp_path, killed):
    """The offline clean on S3 (or one killed after its manifest switch, finished by the broker);
    then a broker on the data dir serves the cleaned remote range to confluent-kafka."""
    from broker_support import Broker, wait_until
    tiered = build(str(tmp_path / "tiered"), moto.properties(bucket))
    plain = build(str(tmp_path / "plain"), {}, tiered=False)
    end = records(logical_batches(plain, tiered=False))[-1][0] + 1      # the log end offset
    clean(plain, NOW)
    want = records(logical_batches(plain, tiered=False))
    if killed is None:
        (out,) = clean(tiered, NOW)
        assert out["byTier"]["remote"]["recordsKept"] < out["byTier"]["remote"]["recordsRead"]
    else:
        kill_clean_at(tiered, killed)
    m, _ = s3_manifest(moto, bucket)
    # offsets below the first local segment exist only in the bucket
    assert files.offset_from_filename(os.path.basename(local_segments(tiered)[0])) > 150
    # the broker's own cleaner off: what it serves is what the offline run left
    broker = Broker(tiered, {"log.cleaner.enable": "false", "remote.log.manager.task.interval.ms": "200",
                             "log.retention.check.interval.ms": "300"}).start()
    try:
        if killed is None:
            # local retention trims the copied segments' local copies: the whole remote range is read
            # from the bucket, and it is the all-local clean's
            wait_until(lambda: consume_all(broker.bootstrap, end) == want, timeout=90, interval=1,
                       what="the consumer reads the all-local clean")
        else:
            # the remote tier was switched, the local segments not yet: every key's latest value,
            # every offset once; and the broker deletes what the killed run replaced
            got = consume_all(broker.bootstrap, end)
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))
            assert latest(got) == latest(want)

            def finished():
                man, ids = s3_manifest(moto, bucket)
                return not man["pendingDeletion"] and ids == {s["id"] for s in man["segments"]}
            wait_until(finished, timeout=90, interval=0.5, what="the replaced segments deleted by the broker")
        assert s3_manifest(moto, bucket)[0]["generation"] > m["generation"]   # the broker took it back
    finally:
        broker.stop()


def test_cleaner_run_cleans_both_tiers(pair):
    """``cleaner run`` (the long-running offline cleaner) runs the same round: the remote tier is
    compacted, every key's latest value kept (its clock is the wall clock: records compared)."""
    tiered, plain = pair
    for data in (tiered, plain):
        got = cli(data, "cleaner", "run", "--engine", "local", "--iterations", "1")
        assert got.returncode == 0, got.stderr.decode()
    assert records(logical_batches(tiered)) == records(logical_batches(plain, tiered=False))
    assert len(records(logical_batches(tiered))) < 40
    assert_consistent(tiered)


def test_cleaner_status_counts_the_remote_tier(pair):
    """``cleaner status`` decides as ``clean`` does: the cleanable range starts at the log start,
    in the remote tier, not at the local log start."""
    tiered, _ = pair
    got = cli(tiered, "cleaner", "status", "--json")
    assert got.returncode == 0, got.stderr.decode()
    row = next(r for r in map(json.loads, got.stdout.decode().splitlines()) if r.get("topic") == "c")
    assert row["first_dirty"] == 0 and row["tiers"]["remoteSegmentCount"] > 0


def test_replaced_segments_wait_for_their_grace_period(tmp_path):
    """With a grace period the replaced objects stay (listed in ``pendingDeletion``, said in the
    report); a later run with nothing to clean deletes them once it is over."""
    root = str(tmp_path / "tiered")
    tiered = build(root, local_store_props(root), extra={"compactlog.remote.compaction.delete.delay.ms": "3000"})
    (out,) = clean(tiered, NOW)
    m, _ = manifest(tiered)
    pending = {d["id"] for d in m["pendingDeletion"]}
    assert len(pending) == out["byTier"]["remote"]["pendingDeletion"] > 0
    assert pending <= bucket_ids(tiered)
    deadline = max(d["deleteAfterMs"] for d in m["pendingDeletion"]) / 1000
    text = cli(tiered, "clean", "--now-ms", str(NOW)).stdout.decode()
    if time.time() < deadline:          # (a loaded machine may have taken longer than the period)
        assert "deleted after their grace period" not in text        # not over yet: nothing to do
    while time.time() < deadline:
        time.sleep(0.1)
    text = cli(tiered, "clean", "--now-ms", str(NOW)).stdout.decode()
    assert f"c-0: {len(pending)} replaced remote segment(s) deleted after their grace period" in text
    assert not pending & bucket_ids(tiered)
    assert_consistent(tiered)


def test_a_copy_in_a_bucket_never_touches_the_original_remote_tier(moto, bucket, tmp_path):
    """``--data-dir s3://…`` over a copy of a tiered data dir (``aws s3 sync``): its
    ``server.properties`` names the original broker's store, which the clean of the copy must not
    write (nor read as its own)."""
    from s3_support import ACCESS_KEY, REGION, SECRET_KEY
    root = str(tmp_path / "tiered")
    tiered = build(root, local_store_props(root))
    client = moto.client()
    for d, _, names in os.walk(tiered):
        for n in names:
            full = os.path.join(d, n)
            client.upload_file(full, bucket, f"copy/{os.path.relpath(full, tiered)}")
    store = os.path.join(root, "bucket")
    before = tree_state(store)
    env = dict(os.environ, AWS_ENDPOINT_URL=moto.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION, AWS_EC2_METADATA_DISABLED="true")
    for args in (("explain", "--topic", "c", "--now-ms", str(NOW)), ("clean", "--force", "--now-ms", str(NOW))):
        got = cli(f"s3://{bucket}/copy", *args, env=env)
        assert b"Traceback" not in got.stderr, got.stderr.decode()
        assert b"remote tier:" not in got.stdout, got.stdout.decode()
    assert tree_state(store) == before
