"""Tiered storage end to end: ``compactlog serve`` with ``remote.log.storage.system.enable=true`` on
moto's S3 (through a fault proxy the test can take away), real clients (confluent-kafka, and raw
ListOffsets v9 for -4/-5), one broker and one moto server for the module.

What a Kafka user sees (tiered-storage.md §8 scenarios 1-5, 17): a tiered topic's rolled segments
appear in the bucket in Aiven's keys, local retention trims the directory, a consumer from the
beginning reads everything byte for byte across both tiers, ListOffsets answers -2/-4/-5 and a
timestamp in the remote range, ``__remote_log_metadata`` holds Kafka's records; with the store
gone a fetch of the remote range gets an error while the local tail is served; a broker killed
with -9 in the middle of an upload loses nothing acknowledged and leaves no orphan; a bucket with
other users' objects is left untouched.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from broker_support import Broker, wait_until
from compactlog.record import remote_log_metadata as rlm
from compactlog.storage.remote import keys
from compactlog.storage.remote.manager import KILL_FILE_ENV
from s3_support import FaultProxy, MotoS3
from txn_support import Raw

pytestmark = pytest.mark.slow

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BUCKET = "tiered-bucket"
PREFIX = "tiered/"
T0 = int(time.time() * 1000) - 600_000        # timestamps within retention.ms
FOREIGN = {"someone-else/data.bin": b"not ours" * 100, "tiered/notes.txt": b"a neighbour's file",
           "tiered/other-AAAAAAAAAAAAAAAAAAAAAQ/0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAg.log": b"x" * 10}
N = 1500


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    moto = MotoS3().start()
    moto.create_bucket(BUCKET)
    s3 = moto.client()
    for k, v in FOREIGN.items():
        s3.put_object(Bucket=BUCKET, Key=k, Body=v)
    proxy = FaultProxy(moto.endpoint)
    data = tmp_path_factory.mktemp("tiered") / "data"
    kill_file = str(data) + ".kill"
    overrides = {
        "remote.log.storage.system.enable": "true",
        **moto.properties(BUCKET, endpoint=proxy.endpoint, **{"rsm.config.key.prefix": PREFIX,
                                                               "rsm.config.chunk.size": "8192"}),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "300",
        "remote.fetch.max.wait.ms": "5000",
        "compactlog.remote.orphan.min.age.ms": "0",
        "compactlog.remote.fetch.cache.bytes": "0",      # every remote read goes to the store
        "log.cleaner.enable": "false",
    }
    broker = Broker(data, overrides, env={KILL_FILE_ENV: kill_file}).start()
    box = {"broker": broker, "moto": moto, "s3": s3, "proxy": proxy, "kill_file": kill_file, "data": data,
           "overrides": overrides}
    yield box
    box["broker"].stop()
    proxy.refuse()
    moto.stop()


def admin(env):
    return AdminClient({"bootstrap.servers": env["broker"].bootstrap})


def list_offset(env, topic: str, timestamp: int, partition: int = 0):
    with Raw(env["broker"].port) as raw:
        r = raw.call(2, 9, replica_id=-1, isolation_level=0,
                     topics=[{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                             "timestamp": timestamp}]}])
    p = r.topics[0].partitions[0]
    return int(p.error_code), p.offset, p.leader_epoch


def produce(env, topic: str, start: int, n: int, acked: dict | None = None) -> list[tuple[bytes, bytes]]:
    """``n`` records; every one must be acknowledged, unless ``acked`` is given: it then gets
    offset -> (key, value) of those that were, and failures are allowed (a broker killed meanwhile)."""
    p = ck.Producer({"bootstrap.servers": env["broker"].bootstrap, "acks": "all", "linger.ms": 5,
                     "enable.idempotence": True, "batch.size": 8000,     # batches below segment.bytes
                     # a record that must be acknowledged gets librdkafka's time (a loaded machine's
                     # uploads slow the broker); where failures are allowed (a kill), a short one
                     "message.timeout.ms": 10000 if acked is not None else 120000})
    out, failed = [], []

    def report(err, msg):
        if err is not None:
            failed.append(err)
        elif acked is not None:
            acked[msg.offset()] = (msg.key(), msg.value())
    for i in range(start, start + n):
        k, v = b"key-%06d" % i, (b"value-%06d-" % i) * 12
        p.produce(topic, key=k, value=v, timestamp=T0 + i, on_delivery=report)
        out.append((k, v))
        if i % 200 == 0:
            p.poll(0)
    left = p.flush(30 if acked is not None else 150)
    if acked is None:
        assert left == 0 and not failed, failed[:3]
    return out


def consume(env, topic: str, n: int, *, offset: int = 0, timeout: float = 60, extra=None):
    c = ck.Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "max.partition.fetch.bytes": 16384,
                     **(extra or {})})
    c.assign([ck.TopicPartition(topic, 0, offset)])
    got, errors = [], []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
                continue
            got.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return got, errors


def segment_keys(env, topic: str) -> dict[str, list[str]]:
    """segment id -> its object suffixes, for ``topic``'s partition 0."""
    out: dict[str, list[str]] = {}
    pat = re.compile(rf"^{PREFIX}{topic}-[A-Za-z0-9_-]{{22}}/0/(\d{{20}})-([A-Za-z0-9_-]{{22}})\.([a-z-]+)$")
    for page in env["s3"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{PREFIX}{topic}-"):
        for o in page.get("Contents", []):
            m = pat.match(o["Key"])
            if m:
                out.setdefault(m.group(2), []).append(m.group(3))
    return out


def manifest(env, topic: str) -> dict:
    page = env["s3"].list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}{topic}-")
    pat = re.compile(rf"^{PREFIX}{topic}-[A-Za-z0-9_-]{{22}}/0/{re.escape(keys.PARTITION_MANIFEST)}$")
    key = next(o["Key"] for o in page["Contents"] if pat.match(o["Key"]))
    return json.loads(env["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())


def journal(env) -> list:
    c = ck.Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": f"j-{time.monotonic_ns()}",
                     "enable.auto.commit": False})
    ends = {}
    tps = []
    for p in range(3):
        lo, hi = c.get_watermark_offsets(ck.TopicPartition(rlm.TOPIC, p), timeout=10)
        ends[p] = hi
        tps.append(ck.TopicPartition(rlm.TOPIC, p, 0))
    c.assign(tps)
    out, need = [], sum(ends.values())
    deadline = time.monotonic() + 30
    while len(out) < need and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(rlm.decode(m.value()))
    c.close()
    return out


def wait_tiered(env, topic: str, min_local_start: int = 1):
    """Until the copy and local retention have moved the local log start to ``min_local_start``."""
    return wait_until(lambda: (lambda r: r[0] == 0 and r[1] >= min_local_start and r[1])(
        list_offset(env, topic, -4)), timeout=90, interval=0.2, what=f"local log start of {topic} >= {min_local_start}")


def test_config_rules(env):
    a = admin(env)
    # beyond Kafka (which refuses it since KAFKA-19273): a compacted topic may be tiered
    f = a.create_topics([NewTopic("tiered-compact", 1, 1, config={"remote.storage.enable": "true",
                                                                  "cleanup.policy": "compact"})])
    f["tiered-compact"].result(30)
    f = a.create_topics([NewTopic("bad-local", 1, 1, config={"remote.storage.enable": "true",
                                                             "retention.ms": "1000", "local.retention.ms": "2000"})])
    with pytest.raises(ck.KafkaException) as e:
        f["bad-local"].result(30)
    assert e.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    # turning remote storage off without remote.log.delete.on.disable: INVALID_CONFIG (40)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    res = ConfigResource("TOPIC", "tiered-compact", incremental_configs=[
        ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(ck.KafkaException) as e:
        a.incremental_alter_configs([res])[res].result(30)
    assert e.value.args[0].code() == ck.KafkaError.INVALID_CONFIG


def test_upload_trim_consume_list_offsets(env):
    a = admin(env)
    a.create_topics([NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true", "segment.bytes": "16384",
                                                      "local.retention.bytes": "0"})])["tiered"].result(30)
    a.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    produced = produce(env, "tiered", 0, N)
    produce(env, "plain", 0, 50)
    # every rolled segment copied and trimmed (the active one, under 16 KiB, stays local)
    wait_tiered(env, "tiered", N - 200)
    local_start = list_offset(env, "tiered", -4)[1]
    segs = segment_keys(env, "tiered")
    assert len(segs) >= 5
    assert all(sorted(s) == ["indexes", "log", "rsm-manifest"] for s in segs.values())
    m = manifest(env, "tiered")
    assert [s["id"] for s in m["segments"]] and set(s["id"] for s in m["segments"]) == set(segs)
    hro = m["segments"][-1]["endOffset"]
    assert m["segments"][0]["startOffset"] == 0
    # ListOffsets: -2 the log start (remote included), -4 the local one, -5 the highest tiered offset
    assert list_offset(env, "tiered", -2)[:2] == (0, 0)
    assert list_offset(env, "tiered", -4)[:2] == (0, local_start)
    code, offset, _ = list_offset(env, "tiered", -5)
    assert code == 0 and offset >= hro and offset >= local_start - 1
    assert list_offset(env, "tiered", -1)[:2] == (0, N)
    assert list_offset(env, "tiered", T0 + 7)[:2] == (0, 7)            # found in the remote tier
    assert list_offset(env, "plain", -5)[:2] == (0, -1)                 # not tiered
    # a consumer from the beginning reads everything, in order, byte for byte
    got, errors = consume(env, "tiered", N)
    assert not errors
    assert [o for o, _, _ in got] == list(range(N))
    assert [(k, v) for _, k, v in got] == produced
    # the journal: Kafka's records, each copied segment STARTED then FINISHED
    events = [e for e in journal(env) if e.segment_id.topic_id_partition.topic == "tiered"]
    finished = {e.segment_id.id for e in events if e.state == rlm.SegmentState.COPY_SEGMENT_FINISHED}
    assert set(segs) <= finished


def test_store_down_mid_fetch(env):
    local_start = list_offset(env, "tiered", -4)[1]
    env["proxy"].refuse()
    try:
        # the remote range: the client is told (UNKNOWN_SERVER_ERROR), the same request's local
        # partition is still served
        c = ck.Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": "down",
                         "enable.auto.commit": False})
        c.assign([ck.TopicPartition("tiered", 0, 0), ck.TopicPartition("plain", 0, 0)])
        plain, errors = 0, []
        deadline = time.monotonic() + 30
        while (plain < 50 or not errors) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
            elif m.topic() == "plain":
                plain += 1
            else:
                raise AssertionError(f"a remote record came through with the store down: {m.offset()}")
        c.close()
        assert plain == 50
        assert errors and errors[0].code() == ck.KafkaError.UNKNOWN
        # the local tail is served
        got, errs = consume(env, "tiered", N - local_start, offset=local_start, timeout=30)
        assert [o for o, _, _ in got] == list(range(local_start, N)) and not errs
    finally:
        env["proxy"].accept()
    got, _ = consume(env, "tiered", N)
    assert [o for o, _, _ in got] == list(range(N))


@pytest.mark.parametrize("step", ["objects", "manifest"])
def test_kill_during_upload(env, step):
    broker = env["broker"]
    before = manifest(env, "tiered")
    with open(env["kill_file"], "w") as f:
        f.write(step)
    start = list_offset(env, "tiered", -1)[1]
    acked: dict = {}
    produce(env, "tiered", start, 400, acked)      # the broker dies meanwhile: what it acknowledged must survive
    wait_until(lambda: not broker.alive(), timeout=60, what=f"the broker killed at step {step}")
    assert broker.proc.returncode == -9
    assert acked, "the broker acknowledged records before it was killed"
    env["broker"] = broker = Broker(env["data"], env["overrides"], env={KILL_FILE_ENV: env["kill_file"]}).start()
    produce(env, "tiered", 10_000, 200)            # rolls the segment written before the kill
    end = list_offset(env, "tiered", -1)[1]
    wait_until(lambda: manifest(env, "tiered")["segments"][-1]["endOffset"] >= end - 200 and
               len(manifest(env, "tiered")["segments"]) > len(before["segments"]) + 1,
               timeout=60, what="copies after the restart")
    m = manifest(env, "tiered")
    segs = m["segments"]
    assert all(b["startOffset"] == a["endOffset"] + 1 for a, b in zip(segs, segs[1:]))
    # no orphan: every segment object in the bucket is one the manifest lists
    wait_until(lambda: set(segment_keys(env, "tiered")) == {s["id"] for s in segs}, timeout=30,
               what="the bucket to hold exactly the manifest's segments")
    # the journal agrees: the dead copy rolled back (objects) or finished (manifest)
    events = [e for e in journal(env) if e.segment_id.topic_id_partition.topic == "tiered"]
    states: dict[str, list] = {}
    for e in events:
        states.setdefault(e.segment_id.id, []).append(int(e.state))
    for s in segs:
        assert states[s["id"]][:2] == [0, 1]
    dead = [i for i, st in states.items() if i not in {s["id"] for s in segs} and st[0] == 0 and 1 not in st]
    assert all(st[-1] == 3 for i, st in states.items() if i in dead)
    if step == "objects":
        assert dead, "the copy killed before its commit is rolled back in the journal"
    # nothing acknowledged is lost, nothing served twice
    got, errors = consume(env, "tiered", end)
    assert [o for o, _, _ in got] == list(range(end))
    served = {o: (k, v) for o, k, v in got}
    assert all(served[o] == kv for o, kv in acked.items())


def test_other_users_objects_untouched(env):
    s3 = env["s3"]
    for k, v in FOREIGN.items():
        assert s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() == v
