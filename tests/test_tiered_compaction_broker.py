"""A compacted tiered topic end to end (tiered-storage.md §5, §8): ``compactlog serve`` with its
cleaner and its remote log manager on moto's S3, confluent-kafka clients. The bucket shrinks once
the cleaner has compacted the remote tier and the grace period has passed; a consumer from offset
0 gets the latest value of every key (deleted keys: none) across both tiers; a broker killed with
-9 at a step of a round (after its STARTED batch, after its manifest CAS, while deleting the
replaced objects) comes back with the round rolled back or finished, nothing acknowledged lost,
and the bucket holding exactly the manifest's segments once the grace has passed.
"""

from __future__ import annotations

import re
import time

import pytest

from broker_support import Broker, wait_until
from compactlog.storage.remote.manager import KILL_FILE_ENV
from s3_support import MotoS3

pytestmark = pytest.mark.slow

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BUCKET = "compacted-bucket"
PREFIX = "tiered/"
TOPIC = "ct"
KEYS = 150


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    moto = MotoS3().start()
    moto.create_bucket(BUCKET)
    data = tmp_path_factory.mktemp("tiered-compaction") / "data"
    kill_file = str(data) + ".kill"
    overrides = {
        "remote.log.storage.system.enable": "true",
        **moto.properties(BUCKET, **{"rsm.config.key.prefix": PREFIX, "rsm.config.chunk.size": "8192"}),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "300",
        "log.cleaner.backoff.ms": "200",
        "compactlog.remote.compaction.delete.delay.ms": "1500",
        "compactlog.remote.orphan.min.age.ms": "0",
        "compactlog.remote.fetch.cache.bytes": "0",
    }
    broker = Broker(data, overrides, env={KILL_FILE_ENV: kill_file}).start()
    box = {"broker": broker, "moto": moto, "s3": moto.client(), "kill_file": kill_file, "data": data,
           "overrides": overrides, "latest": {}}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "remote.storage.enable": "true", "segment.bytes": "16384",
        "local.retention.bytes": "0", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"})])[
        TOPIC].result(30)
    yield box
    box["broker"].stop()
    moto.stop()


def produce(env, rnd: int, *, deletes=(), acked: dict | None = None) -> None:
    """One value for every key (round ``rnd``), tombstones for ``deletes``; the expected latest
    values updated with what was acknowledged."""
    p = ck.Producer({"bootstrap.servers": env["broker"].bootstrap, "acks": "all", "linger.ms": 5,
                     "enable.idempotence": True, "batch.size": 4000, "message.timeout.ms": 10000})
    done: dict = {}

    def report(err, msg):
        if err is None:
            done[msg.offset()] = (msg.key(), msg.value())
    for i in range(KEYS):
        k = b"key-%04d" % i
        v = None if i in deletes else (b"round-%02d-%04d-" % (rnd, i)) * 8
        p.produce(TOPIC, key=k, value=v, on_delivery=report)
        if i % 50 == 0:
            p.poll(0)
    left = p.flush(30)
    if acked is None:
        assert left == 0 and len(done) == KEYS
    else:
        acked.update(done)
    for _, (k, v) in sorted(done.items()):
        env["latest"][k] = v


def bucket_log_bytes(env) -> dict[str, int]:
    """segment id -> size of its .log object in the bucket."""
    out = {}
    pat = re.compile(rf"^{PREFIX}{TOPIC}-[A-Za-z0-9_-]{{22}}/0/\d{{20}}-([A-Za-z0-9_-]{{22}})\.log$")
    for page in env["s3"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{PREFIX}{TOPIC}-"):
        for o in page.get("Contents", []):
            m = pat.match(o["Key"])
            if m:
                out[m.group(1)] = o["Size"]
    return out


def manifest(env) -> dict:
    import json
    page = env["s3"].list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}{TOPIC}-")
    key = next(o["Key"] for o in page.get("Contents", []) if o["Key"].endswith("/compactlog-partition.json"))
    return json.loads(env["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())


def consume_all(env, timeout: float = 60) -> list:
    """Every record from offset 0 up to the high watermark."""
    c = ck.Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "max.partition.fetch.bytes": 16384})
    lo, hi = c.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append((m.offset(), m.key(), m.value()))
            if m.offset() >= hi - 1:
                break
    finally:
        c.close()
    assert got and got[-1][0] == hi - 1, f"consumed up to {got[-1][0] if got else None}, end {hi}"
    return got


def check_latest(env, got) -> None:
    offsets = [o for o, _, _ in got]
    seen = {}
    for _, k, v in got:
        seen[k] = v
    want = {k: v for k, v in env["latest"].items() if v is not None}
    try:
        assert offsets == sorted(set(offsets))                # nothing served twice
        assert {k: v for k, v in seen.items() if v is not None} == want
    except AssertionError as e:
        # what a failure needs to be understood once the run's directories are gone
        m = manifest(env)
        segs = [(s["startOffset"], s["endOffset"], s["sizeInBytes"]) for s in m["segments"]]
        notable = [ln for ln in env["broker"].log_text().splitlines() if " WARN " in ln or " ERROR " in ln
                   or "Compacted" in ln or "Copied" in ln or "deleted" in ln]
        raise AssertionError(f"{e}\nconsumed offsets {offsets[:3]}...{offsets[-3:]} ({len(offsets)}); remote "
                             f"segments {segs}; pending {m['pendingDeletion']}\nbroker log:\n" +
                             "\n".join(notable[-80:])) from None


def compacted(env, below_bytes: int) -> bool:
    m = manifest(env)
    live = {s["id"] for s in m["segments"]}
    objs = bucket_log_bytes(env)
    return (not m["pendingDeletion"] and set(objs) == live and m["segments"]
            and sum(objs.values()) < below_bytes)


def test_the_bucket_shrinks_and_a_consumer_from_0_sees_the_latest_values(env):
    for rnd in range(6):
        produce(env, rnd, deletes=range(0, KEYS, 10) if rnd == 5 else ())
    one_pass = sum(len(k) + len(v) for k, v in env["latest"].items() if v is not None)
    # uploaded, cleaned across both tiers, old objects gone after the grace: the bucket holds about
    # one value per key (the whole history was 6 passes)
    produced = 6 * KEYS
    wait_until(lambda: (lambda m: m["segments"] and m["segments"][-1]["endOffset"] >= produced - 250)(manifest(env)),
               timeout=90, interval=0.3, what="the rolled segments uploaded")
    wait_until(lambda: compacted(env, 3 * one_pass), timeout=120, interval=0.5,
               what="the remote tier compacted and the replaced objects deleted")
    got = consume_all(env)
    check_latest(env, got)
    assert len(got) < 3 * KEYS


@pytest.mark.parametrize("step", ["compaction-started", "compaction-manifest", "compaction-deleted"])
def test_kill_during_a_round(env, step):
    """kill -9 after the round's COPY_SEGMENT_STARTED batch (rolled back at restart), after its
    manifest CAS (rolled forward), while the replaced objects are deleted (finished)."""
    broker = env["broker"]
    with open(env["kill_file"], "w") as f:
        f.write(step)
    acked: dict = {}
    for rnd in range(10, 13):
        if not broker.alive():
            break
        produce(env, rnd, acked=acked)
    wait_until(lambda: not broker.alive(), timeout=90, what=f"the broker killed at {step}")
    assert broker.proc.returncode == -9
    env["broker"] = Broker(env["data"], env["overrides"], env={KILL_FILE_ENV: env["kill_file"]}).start()
    produce(env, 20 + len(step))
    one_pass = sum(len(k) + len(v) for k, v in env["latest"].items() if v is not None)
    wait_until(lambda: compacted(env, 3 * one_pass), timeout=120, interval=0.5,
               what="the round finished and the bucket back to the manifest's segments")
    check_latest(env, consume_all(env))
