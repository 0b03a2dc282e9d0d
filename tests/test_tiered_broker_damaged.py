"""A broker's remote tier damaged under it, read by a real client: a remote segment object
shorter than its manifest says (cut by a bad copy or a tool, or a store answering a ranged GET with
fewer bytes), garbage where its batches are. Kafka's rule is that a fetch either returns the
records at the offset asked or an error: confluent-kafka reading from offset 0 must never get
offsets past a gap as though the missing ones did not exist (a silent skip of acknowledged
records), and the records it gets must be the ones produced. One moto server, one broker."""

from __future__ import annotations

import time

import pytest

from broker_support import Broker, wait_until
from s3_support import MotoS3
from test_tiered_broker import PREFIX, produce, wait_tiered

pytestmark = pytest.mark.slow

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

N = 600
# not test_tiered_broker's bucket: moto's state is one per process, and pytest-xdist may run both
# modules in one worker
BUCKET = "tiered-damaged-bucket"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    moto = MotoS3().start()
    moto.create_bucket(BUCKET)
    data = tmp_path_factory.mktemp("tiered-damaged") / "data"
    overrides = {
        "remote.log.storage.system.enable": "true",
        **moto.properties(BUCKET, **{"rsm.config.key.prefix": PREFIX, "rsm.config.chunk.size": "8192"}),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "300",
        "compactlog.remote.fetch.cache.bytes": "0",      # every remote read goes to the store
        "log.cleaner.enable": "false",
    }
    broker = Broker(data, overrides).start()
    box = {"broker": broker, "moto": moto, "s3": moto.client()}
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true", "segment.bytes": "16384",
                                                      "local.retention.bytes": "0"})])["tiered"].result(30)
    box["produced"] = produce(box, "tiered", 0, N)
    wait_tiered(box, "tiered", N - 200)
    yield box
    broker.stop()
    moto.stop()


def read_from_zero(env, timeout: float = 25):
    """(offsets and records got, errors) of a consumer from offset 0 until it has everything, or
    ``timeout`` passed."""
    c = ck.Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "max.partition.fetch.bytes": 16384})
    c.assign([ck.TopicPartition("tiered", 0, 0)])
    got, errors = [], []
    deadline = time.monotonic() + timeout
    try:
        while (not got or got[-1][0] < N - 1) and time.monotonic() < deadline:
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


def manifest(env, topic: str) -> dict:
    import json
    page = env["s3"].list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}{topic}-")
    [key] = [o["Key"] for o in page["Contents"] if o["Key"].endswith("/compactlog-partition.json")]
    return json.loads(env["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())


def segment_log_key(env, index: int) -> tuple[str, dict]:
    m = manifest(env, "tiered")
    seg = m["segments"][index]
    prefix = f"{PREFIX}tiered-{m['topicId']}/0/{seg['startOffset']:020d}-{seg['id']}.log"
    return prefix, seg


def damaged(original: bytes, damage: str) -> bytes:
    half = len(original) // 2
    if damage == "cut":
        return original[:half]
    if damage == "empty":
        return b""
    # the second half overwritten, same size: batches whose bytes are not what was produced
    return original[:half] + bytes((i * 131 + 7) % 251 for i in range(len(original) - half))


@pytest.mark.parametrize("damage", ["cut", "empty", "garbage"])
def test_a_short_remote_segment_is_not_skipped(env, damage):
    key, seg = segment_log_key(env, 1)
    s3 = env["s3"]
    original = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert len(original) == seg["sizeInBytes"]
    s3.put_object(Bucket=BUCKET, Key=key, Body=damaged(original, damage))
    try:
        got, errors = read_from_zero(env, timeout=10)
        offsets = [o for o, _, _ in got]
        # no gap: whatever came is offsets 0.. in order, each the record produced there
        assert offsets == list(range(len(offsets))), (offsets[:5], offsets[-5:], errors[:3])
        assert all(env["produced"][o] == (k, v) for o, k, v in got)
        # and it did not come through whole: the damaged segment's records were not there to serve
        assert len(offsets) <= seg["startOffset"] + (seg["endOffset"] - seg["startOffset"] + 1) // 2 + 1
        assert errors, "the consumer was told nothing"
    finally:
        s3.put_object(Bucket=BUCKET, Key=key, Body=original)
    got, errors = read_from_zero(env, timeout=60)
    assert [o for o, _, _ in got] == list(range(N)), errors[:3]
