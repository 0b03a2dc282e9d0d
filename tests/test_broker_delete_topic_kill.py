"""A broker killed (-9) at each step of a DeleteTopics comes back with the topic whole or deleted,
never half: the deletion's record (the topics file's ``deleting`` mark) is written before the
renames to ``-delete``, and the broker's start finishes a deletion it finds (``DataDir``).

The group's committed offsets of the topic are tombstoned by the broker once the topic is deleted
(Kafka's onPartitionsDeleted, on the metadata change). A kill before those tombstones leaves the
offsets, as in Kafka, whose coordinator is told of deletions by metadata deltas, not at load: they
go with offset expiry or the group. The test asserts they are whole (as before) or gone, never some
of the topic's partitions without the others, and that another topic's offsets are untouched.

The kill comes from the LD_PRELOAD injector (``tests/faults/inject.c``, ``FAULT_KIND=kill``)
before the named system call in the broker process. ~2 broker starts a point: ``slow``, ``broker``.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults"))

import campaign  # noqa: E402
from broker_support import Broker, run_cli  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.broker]
TIMEOUT = 30

# each step of the deletion of q (2 partitions), in order; the broker makes none of these calls
# before it (a first start writes no topics file, recovery checkpoint or offsets segment)
STEPS = [
    ("rename", "compactlog.topics.json", 1, "whole"),           # the deletion's record not in place
    ("rename", "q-0.*-delete", 1, "deleted"),                   # recorded, no directory renamed
    ("rename", "q-1.*-delete", 1, "deleted"),                   # one renamed, one not
    ("rename", "recovery-point-offset-checkpoint", 1, "deleted"),   # renamed, checkpoints not rewritten
    ("rename", "compactlog.topics.json", 2, "deleted"),         # the record not yet dropped
    ("pwrite", "__consumer_offsets-*/*.log", 1, "deleted"),     # deleted, the offsets' tombstones not written
]


@pytest.fixture(scope="module")
def injector():
    path = campaign.build_injector()
    if path is None:
        pytest.skip("no C compiler to build the fault injector")
    return path


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def group_offsets(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])["g"].result(TIMEOUT)
    return {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions}


@pytest.mark.parametrize("syscall,glob,at,outcome", STEPS)
def test_a_broker_killed_during_delete_topics_comes_back_with_the_topic_whole_or_deleted(
        injector, tmp_path, syscall, glob, at, outcome):
    data = tmp_path / "data"
    ok(run_cli(data, "topics", "create", "--topic", "q", "--partitions", "2"))
    ok(run_cli(data, "topics", "create", "--topic", "p"))
    for topic, parts in (("q", 2), ("p", 1)):
        ok(run_cli(data, "produce", "--topic", topic, "--input-format", "jsonl",
                   stdin="".join(f'{{"key": "k{i}", "value": "v{i}", "partition": {i % parts}}}\n'
                                 for i in range(10)).encode()))
        ok(run_cli(data, "consumer-groups", "--reset-offsets", "--group", "g", "--topic", topic,
                   "--to-offset", "3", "--execute"))
    fired = str(tmp_path / "fired")
    env = {"LD_PRELOAD": injector, "FAULT_DIR": str(data), "FAULT_SYSCALL": syscall,
           "FAULT_GLOB": f"{data}/{glob}", "FAULT_AT": str(at), "FAULT_KIND": "kill", "FAULT_FIRED": fired}
    broker = Broker(data, env=env).start()
    try:
        before = group_offsets(broker.bootstrap)
        assert before == {("q", 0): 3, ("q", 1): 3, ("p", 0): 3}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        future = admin.delete_topics(["q"])["q"]        # the client kept until the broker dies
        deadline = time.monotonic() + TIMEOUT
        while broker.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(fired) and not broker.alive(), "the kill never came"
        assert broker.proc.returncode == -9
        assert future.exception(TIMEOUT) is not None       # the request was never answered
    finally:
        broker.kill()

    with Broker(data) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = admin.list_topics(timeout=TIMEOUT).topics
        assert ("q" in topics) == (outcome == "whole")
        if "q" in topics:
            assert sorted(topics["q"].partitions) == [0, 1]
        offsets = group_offsets(broker.bootstrap)
        assert offsets[("p", 0)] == 3
        q_offsets = {k: v for k, v in offsets.items() if k[0] == "q"}
        assert q_offsets in ({("q", 0): 3, ("q", 1): 3}, {}), offsets
        if outcome == "whole":
            assert q_offsets
    # the broker's start finished the deletion: nothing of q is left in the data dir
    names = os.listdir(data)
    assert [n for n in names if n.startswith("q-")] == ([] if outcome == "deleted" else ["q-0", "q-1"]), names
    ok(run_cli(data, "verify"))
    if outcome == "whole":
        assert len(ok(run_cli(data, "consume", "--topic", "q", "--from-beginning")).stdout.splitlines()) == 10


@pytest.mark.parametrize("syscall,glob,at,kind,outcome", [
    ("create", "compactlog.topics.json.tmp", 1, "enospc", "whole"),      # the record not written
    ("rename", "q-1.*-delete", 1, "eio", "whole"),                       # undone: q-0 renamed back
    ("rename", "compactlog.topics.json", 2, "eio", "deleted"),           # recorded; its removal failed
])
def test_a_delete_topics_whose_write_fails_answers_as_the_topic_is(injector, tmp_path, syscall, glob, at, kind,
                                                                   outcome):
    data = tmp_path / "data"
    ok(run_cli(data, "topics", "create", "--topic", "q", "--partitions", "2"))
    ok(run_cli(data, "produce", "--topic", "q", "--input-format", "jsonl",
               stdin="".join(f'{{"key": "k{i}", "value": "v{i}", "partition": {i % 2}}}\n'
                             for i in range(10)).encode()))
    fired = str(tmp_path / "fired")
    env = {"LD_PRELOAD": injector, "FAULT_DIR": str(data), "FAULT_SYSCALL": syscall,
           "FAULT_GLOB": f"{data}/{glob}", "FAULT_AT": str(at), "FAULT_KIND": kind, "FAULT_FIRED": fired}
    with Broker(data, env=env) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        error = admin.delete_topics(["q"])["q"].exception(TIMEOUT)
        assert os.path.exists(fired)
        # the answer says what the topic is: an error when it is still there, whole
        assert (error is None) == (outcome == "deleted"), error
        assert ("q" in admin.list_topics(timeout=TIMEOUT).topics) == (outcome == "whole")
    with Broker(data) as broker:
        assert ("q" in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=TIMEOUT).topics) \
            == (outcome == "whole")
    names = sorted(n for n in os.listdir(data) if n.startswith("q-"))
    assert names == ([] if outcome == "deleted" else ["q-0", "q-1"]), names
    ok(run_cli(data, "verify"))
    if outcome == "whole":
        assert len(ok(run_cli(data, "consume", "--topic", "q", "--from-beginning")).stdout.splitlines()) == 10
