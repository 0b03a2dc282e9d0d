"""Committed offsets and groups that outlive the broker: a graceful stop, kill -9, many cleanings
of ``__consumer_offsets`` by the broker's own cleaner, and offsets expiring into tombstones."""

from __future__ import annotations

import os

from broker_support import Broker, wait_until
from groups_support import (GROUP_BROKER, Confluent, committed, create_topic, names, poll_until, produce,
                            read_and_commit, read_resumed)


def test_resume_after_kill_9_and_a_live_member_rides_through_the_restart(tmp_path):
    data = tmp_path / "data"
    b = Broker(data, GROUP_BROKER).start()
    port = b.port
    topic, group = names("k9")
    try:
        create_topic(b.bootstrap, topic, 3)
        produce(b.bootstrap, topic, 30)
        m = Confluent(b.bootstrap, group, topic)
        read_and_commit(m, 30)
        m.close()
        # Kafka's default session (45 s): a member rides through a restart that takes less; at load
        # ~18 a restart took longer than the 10 s this test once gave it (the member rejoined)
        live = Confluent(b.bootstrap, "live-" + group, topic, session_ms=45000)
        read_and_commit(live, 30, "the live member's 30 records")
        member_id = live.c.memberid()
    finally:
        b.kill()
    # the broker restarts on the same port from the data dir a kill -9 left behind
    b = Broker(data, GROUP_BROKER, port=port).start()
    try:
        # every partition's committed offset is its record count: 30 in all
        assert sum(committed(b.bootstrap, group, topic, range(3)).values()) == 30
        produce(b.bootstrap, topic, 10, start=30)
        # the live member never left: it heartbeats into the loaded group and goes on reading
        more: list[bytes] = []
        poll_until([live], lambda: len(more) >= 10, got=more, timeout=30, what="the live member after the restart")
        assert sorted(more) == sorted(b"v%d" % i for i in range(30, 40))
        assert live.c.memberid() == member_id           # the same member, not a rejoin
        live.commit()
        live.close()
        # a new member of the first group resumes after its committed offsets
        later = read_resumed(Confluent(b.bootstrap, group, topic), 10, "the resumed group")
        assert sorted(later) == sorted(b"v%d" % i for i in range(30, 40))
    finally:
        b.stop()


def test_offsets_survive_many_cleanings_of_the_offsets_topic(tmp_path):
    """Small segments, a low dirty ratio and a short backoff: the broker's cleaner compacts
    __consumer_offsets again and again while offsets are committed; what the broker answers, and
    what it loads after a restart and after kill -9, is always the last commit."""
    data = tmp_path / "data"
    overrides = {**GROUP_BROKER, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4096",
                 "log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.backoff.ms": "100",
                 "log.cleaner.delete.retention.ms": "0"}
    b = Broker(data, overrides, extra_args=["--engine", "local"]).start()
    topic, group = names("clean")
    from confluent_kafka import TopicPartition
    try:
        create_topic(b.bootstrap, topic, 4)
        produce(b.bootstrap, topic, 8)
        m = Confluent(b.bootstrap, group, topic)
        got: list[bytes] = []
        poll_until([m], lambda: len(got) >= 8 and len(m.assignment()) == 4, got=got, what="the assignment")
        last = {}
        for i in range(1, 1501):
            p = i % 4
            m.c.commit(offsets=[TopicPartition(topic, p, i)], asynchronous=False)
            last[p] = i
            if i % 300 == 0:
                # offsets read back while the cleaner works
                assert m.committed(topic, range(4)) == last

        def cleanings():
            return b.log_text().count("Cleaned log __consumer_offsets-0")
        wait_until(lambda: cleanings() >= 3, timeout=60, what="three cleanings of __consumer_offsets-0")
        assert m.committed(topic, range(4)) == last
        m.close()
        size = sum(os.path.getsize(os.path.join(data, "__consumer_offsets-0", f))
                   for f in os.listdir(os.path.join(data, "__consumer_offsets-0")) if f.endswith(".log"))
        assert size < 1500 * 80, size          # 1500 commit records are far larger than what is kept
    finally:
        b.stop()
    b = Broker(data, overrides, extra_args=["--engine", "local"]).start()
    try:
        assert committed(b.bootstrap, group, topic, range(4)) == last
    finally:
        b.kill()
    b = Broker(data, overrides, extra_args=["--engine", "local"]).start()
    try:
        assert committed(b.bootstrap, group, topic, range(4)) == last
    finally:
        b.stop()


EXPIRING_RETENTION_MS = 4000


def test_expired_offsets_become_tombstones_and_the_group_goes(tmp_path):
    """An offset committed with a retention time (OffsetCommit v2-4) expires at the next check;
    the simple group left without offsets is deleted; both are tombstones in the log."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.consumer import OffsetCommitRequest
    data = tmp_path / "data"
    overrides = {**GROUP_BROKER, "offsets.retention.check.interval.ms": "200",
                 "offsets.topic.num.partitions": "1"}
    b = Broker(data, overrides).start()
    topic, group = names("exp")
    try:
        create_topic(b.bootstrap, topic, 1)
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        t_cls = OffsetCommitRequest.OffsetCommitRequestTopic
        p_cls = t_cls.OffsetCommitRequestPartition

        def commit(g, retention_ms):
            req = OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, retention_time_ms=retention_ms,
                                      topics=[t_cls(name=topic, partitions=[p_cls(
                                          partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                          committed_metadata="")])], max_version=4)

            async def go():
                node = await admin._find_coordinator_id(g)
                return await admin._manager.send(req, node_id=node)
            resp = admin._manager.run(go)
            assert resp.topics[0].partitions[0].error_code == 0

        commit("kept-" + group, -1)         # the broker's retention (7 days): stays
        # long enough to be listed first: with 1 s the group had gone before the list at load 15
        commit(group, EXPIRING_RETENTION_MS)
        assert {g["group_id"] for g in admin.list_groups()} >= {group, "kept-" + group}
        wait_until(lambda: group not in {g["group_id"] for g in admin.list_groups()}, timeout=20,
                   what="the expired group to go")
        assert committed(b.bootstrap, group, topic, [0]) == {0: -1001}
        assert committed(b.bootstrap, "kept-" + group, topic, [0]) == {0: 5}
        admin.close()
    finally:
        b.stop()
    from compactlog.record import consumer_offsets as R
    from compactlog.record.batch import iter_batches
    with open(os.path.join(data, "__consumer_offsets-0", "00000000000000000000.log"), "rb") as f:
        recs = [R.decode_record(r.key, r.value) for bt in iter_batches(f.read()) for r in bt.records()]
    tombstones = [r.key for r in recs if r.value is None]
    assert R.OffsetCommitKey(group, topic, 0) in tombstones and R.GroupMetadataKey(group) in tombstones
    expiring = next(r for r in recs if r.key == R.OffsetCommitKey(group, topic, 0) and r.value is not None)
    assert expiring.value_version == 1 and \
        expiring.value.expire_timestamp - expiring.value.commit_timestamp == EXPIRING_RETENTION_MS
