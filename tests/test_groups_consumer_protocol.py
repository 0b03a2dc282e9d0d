"""KIP-848 consumer groups on ``compactlog serve`` with unmodified clients: confluent-kafka 2.16
(librdkafka) with ``group.protocol=consumer``, the broker computing the assignment.

Joining, the split when a second member joins and when it leaves, with revocation before
assignment seen in the clients' own callbacks; a member killed with SIGKILL fenced at its session
timeout; commit and resume; a regex subscription picking up a topic created later; a static member
leaving and a new process with its ``group.instance.id`` taking its partitions back without a
rebalance; the admin client's describe and list; the consumer-groups CLI and the metrics; topics
growing and deleted; a classic consumer inside a consumer group, and the online upgrade and
downgrade of a group; kcat's balanced consumer when its librdkafka speaks KIP-848. The broker's
restart (kill -9) is ``test_groups_consumer_restart.py``.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from broker_support import KCAT, kcat, wait_until
from groups_support import (close_all, CONSUMER_PROTOCOL_BROKER, ConsumerProtocol, child_consumer_protocol, committed,
                            create_topic, module_broker, names, owned_once, poll_until, produce, read_resumed)
from txn_support import Raw


broker = module_broker("kip848", CONSUMER_PROTOCOL_BROKER)


def describe(broker, group):
    """ConsumerGroupDescribe (69) v1, raw."""
    with Raw(broker.port) as raw:
        return raw.call(69, 1, group_ids=[group], include_authorized_operations=False).groups[0]


def test_join_split_leave_with_revocation_before_assignment(broker):
    topic, group = names("cp-split")
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 60, partitions=6)
    events: list = []
    a = ConsumerProtocol(broker.bootstrap, group, topic, "a", events)
    members = [a]
    try:
        got: list = []
        poll_until(members, lambda: len(got) >= 60, got=got, what="the 60 records")
        assert sorted(got) == sorted(b"v%d" % i for i in range(60))
        d = describe(broker, group)
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == \
            (0, "Stable", 1, 1, "uniform")
        assert [(m.member_epoch, m.member_type, m.client_host) for m in d.members] == [(1, 1, "/127.0.0.1")]
        b = ConsumerProtocol(broker.bootstrap, group, topic, "b", events)
        members.append(b)
        poll_until(members, lambda: len(a.assignment()) == 3 and len(b.assignment()) == 3,
                   what="a 3/3 split")
        assert a.assignment() | b.assignment() == set(range(6))
        d = describe(broker, group)
        assert d.group_epoch == 2 and {m.member_epoch for m in d.members} == {2}
        # a revoked its half before b got it: in the order the callbacks ran
        owned_once(events)
        assert [e[:2] for e in events if e[0] == "a" and e[2]][:2] == [("a", "assign"), ("a", "revoke")]
        members.remove(b)
        b.close()           # leaves with epoch -1
        poll_until(members, lambda: a.assignment() == set(range(6)), what="a owning all 6 again")
        owned_once(events)
        assert describe(broker, group).group_epoch == 3
        assert not a.errors
    finally:
        close_all(members)


def test_killed_member_is_fenced_at_its_session_timeout(broker):
    topic, group = names("cp-kill")
    create_topic(broker.bootstrap, topic, 4)
    child = child_consumer_protocol(broker.bootstrap, group, topic)
    members = []
    try:
        assert child.stdout.readline().startswith(b"assigned")
        a = ConsumerProtocol(broker.bootstrap, group, topic, "a")
        members.append(a)
        poll_until(members, lambda: len(a.assignment()) == 2, what="a 2/2 split with the child")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        poll_until(members, lambda: a.assignment() == set(range(4)), timeout=30, what="a owning all 4")
        waited = time.monotonic() - killed
        # fenced by the session timeout (6 s), not before
        assert 4.0 < waited < 20, waited
        assert len(describe(broker, group).members) == 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        close_all(members)


def test_commit_close_and_resume(broker):
    topic, group = names("cp-resume")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 30)
    m = ConsumerProtocol(broker.bootstrap, group, topic)
    try:
        got: list = []
        poll_until([m], lambda: len(got) >= 30, got=got, what="30 records")
        m.commit()          # OffsetCommit v9 with the member epoch
    finally:
        m.close()
    assert sum(committed(broker.bootstrap, group, topic, 3).values()) == 30
    produce(broker.bootstrap, topic, 10, start=30)
    more = read_resumed(ConsumerProtocol(broker.bootstrap, group, topic), 10, "the 10 new records")
    assert sorted(more) == sorted(b"v%d" % i for i in range(30, 40))


def test_regex_subscription_picks_up_a_new_topic(broker):
    prefix = names("cprx")[0]
    create_topic(broker.bootstrap, f"{prefix}-a", 2)
    create_topic(broker.bootstrap, f"{prefix}-b", 1)
    create_topic(broker.bootstrap, f"x{prefix}", 1)           # does not match
    m = ConsumerProtocol(broker.bootstrap, names("cprx")[1], f"^{prefix}-.*")
    try:
        poll_until([m], lambda: m.topic_assignment() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0)},
                   what="the two matching topics")
        create_topic(broker.bootstrap, f"{prefix}-c", 1)
        # resolved again at a heartbeat 10 s (Kafka's minimum) after the last resolution
        poll_until([m], lambda: (f"{prefix}-c", 0) in m.topic_assignment(), timeout=40, what="the new topic")
        assert not m.errors
    finally:
        m.close()


def test_static_member_rejoins_with_its_partitions_and_no_rebalance(broker):
    topic, group = names("cp-static")
    create_topic(broker.bootstrap, topic, 4)
    events: list = []
    a = ConsumerProtocol(broker.bootstrap, group, topic, "a", events, **{"group.instance.id": "i-a"})
    b = ConsumerProtocol(broker.bootstrap, group, topic, "b", events, **{"group.instance.id": "i-b"})
    members = [a, b]
    try:
        poll_until(members, lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, what="a 2/2 split")
        mine = a.assignment()
        epoch = describe(broker, group).group_epoch
        # the same instance id twice: the newcomer is refused (UNRELEASED_INSTANCE_ID, fatal)
        dup = ConsumerProtocol(broker.bootstrap, group, topic, "dup", **{"group.instance.id": "i-a"})
        try:
            poll_until([dup], lambda: dup.errors, timeout=20, what="the duplicate's error")
            assert any("instance ID is still used" in e.str() for e in dup.errors), dup.errors
        finally:
            dup.close()
        members.remove(a)
        a.close()           # a static member leaves with epoch -2: its partitions wait for it
        a2 = ConsumerProtocol(broker.bootstrap, group, topic, "a2", events, **{"group.instance.id": "i-a"})
        members.append(a2)
        poll_until(members, lambda: a2.assignment() == mine, what="a2 taking a's partitions back")
        assert b.assignment() == set(range(4)) - mine
        d = describe(broker, group)
        assert d.group_epoch == epoch and {m.instance_id for m in d.members} == {"i-a", "i-b"}
        owned_once(events)
    finally:
        close_all(members)


def test_admin_client_lists_and_describes_consumer_groups(broker):
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    topic, group = names("cp-admin")
    create_topic(broker.bootstrap, topic, 2)
    m = ConsumerProtocol(broker.bootstrap, group, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        poll_until([m], lambda: m.assignment() == {0, 1}, what="the assignment")
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert mine and mine[0].type == ConsumerGroupType.CONSUMER
        d = admin.describe_consumer_groups([group]).get(group).result(30)
        assert d.type == ConsumerGroupType.CONSUMER and str(d.state).endswith("STABLE")
        [member] = d.members
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        assert {tp.partition for tp in member.target_assignment.topic_partitions} == {0, 1}
    finally:
        m.close()


def _kcat_with_kip_848():
    """kcat and the environment that makes it speak KIP-848, or None. Debian's kcat 1.7.1 is
    linked against librdkafka 2.0.2, which has no ``group.protocol``; the librdkafka 2.16 that
    confluent-kafka's wheel ships is ABI-compatible, so kcat runs on it through LD_LIBRARY_PATH."""
    if KCAT is None:
        return None
    import confluent_kafka
    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    found = [f for f in os.listdir(libs) if f.startswith("librdkafka")] if os.path.isdir(libs) else []
    if not found:
        return None
    return os.path.join(libs, found[0])


def test_kcat_balanced_consumer_with_the_consumer_protocol(broker, tmp_path):
    own = kcat("-X", "group.protocol=consumer", "-b", broker.bootstrap, "-L", timeout=30)
    if own.returncode == 0:
        env = None
    else:
        # Debian's kcat: librdkafka 2.0.2 knows no group.protocol
        assert b"group.protocol" in own.stderr, own.stderr
        lib = _kcat_with_kip_848()
        if lib is None:
            pytest.skip("kcat's librdkafka has no group.protocol and no newer librdkafka is at hand")
        (tmp_path / "librdkafka.so.1").symlink_to(lib)
        env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}
    topic, group = names("cp-kcat")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 12)
    import subprocess
    args = [KCAT, "-b", broker.bootstrap, "-G", group, "-X", "group.protocol=consumer", "-X",
            "auto.offset.reset=earliest", "-c", "12", "-q", "-f", "%s\n", topic]
    r = subprocess.run(args, capture_output=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(r.stdout.split()) == sorted(b"v%d" % i for i in range(12))
    wait_until(lambda: sum(v for v in committed(broker.bootstrap, group, topic, 3).values() if v > 0) == 12,
               what="kcat's commits")


def test_consumer_groups_cli_and_metrics_show_consumer_protocol_groups(broker):
    """``compactlog consumer-groups`` through the broker and offline on its data dir (read-only
    beside it): --members --verbose prints Kafka 4's CURRENT-EPOCH / CURRENT-ASSIGNMENT /
    TARGET-EPOCH / TARGET-ASSIGNMENT, --state --verbose the group epochs (offline; the broker
    backend's library does not expose them); the metrics count the group by protocol and state."""
    import urllib.request
    from broker_support import run_cli
    from groups_support import table
    topic, group = names("cp-cli")
    create_topic(broker.bootstrap, topic, 2)
    m = ConsumerProtocol(broker.bootstrap, group, topic)
    try:
        poll_until([m], lambda: m.assignment() == {0, 1}, what="the assignment")

        def cg(*args, bootstrap=True):
            extra = ["--bootstrap-server", broker.bootstrap] if bootstrap else []
            r = run_cli(broker.data_dir, "consumer-groups", *extra, *args)
            assert r.returncode == 0, r.stderr.decode()
            return table(r.stdout.decode())
        for online in (True, False):
            rows = cg("--describe", "--group", group, "--members", "--verbose", bootstrap=online)
            assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                               "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
            assert rows[1][4] == "2" and rows[1][6] == f"{topic}(0,1)" and rows[1][8] == f"{topic}(0,1)"
            assert rows[1][5] == ("-" if online else "1") and rows[1][7] == ("-" if online else "1")
        rows = cg("--describe", "--group", group, "--state", "--verbose", bootstrap=False)
        assert rows[0][-4:] == ["STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert rows[1][-4:] == ["Stable", "1", "1", "1"]
        assert [group, "Stable"] in cg("--list", "--state")
        text = urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10).read().decode()
        counts = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
                  if line.startswith("kafka_server_group_coordinator_metrics")}
        assert counts['kafka_server_group_coordinator_metrics_group_count{protocol="consumer"}'] >= 1
        assert counts['kafka_server_group_coordinator_metrics_consumer_group_count{state="stable"}'] >= 1
    finally:
        m.close()


def test_partitions_added_and_topic_deleted_reach_the_members(broker):
    """The broker's metadata-change hook (spec §1.5): CreatePartitions 3 -> 5 bumps the group's
    epoch and the member gets partitions 3 and 4; DeleteTopics of one of two subscribed topics
    takes its partitions away."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    topic, group = names("cp-meta")
    other = topic + "-other"
    create_topic(broker.bootstrap, topic, 3)
    create_topic(broker.bootstrap, other, 1)
    m = ConsumerProtocol(broker.bootstrap, group, [topic, other])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        poll_until([m], lambda: m.topic_assignment() == {(topic, 0), (topic, 1), (topic, 2), (other, 0)},
                   what="both topics")
        epoch = describe(broker, group).group_epoch
        admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
        poll_until([m], lambda: {(topic, 3), (topic, 4)} <= m.topic_assignment(), what="the new partitions")
        assert describe(broker, group).group_epoch > epoch
        admin.delete_topics([other])[other].result(30)
        poll_until([m], lambda: m.topic_assignment() == {(topic, p) for p in range(5)}, what="the deleted topic gone")
    finally:
        m.close()


def test_classic_member_joins_a_consumer_group(broker):
    """Spec §11.1 with real clients: a classic confluent-kafka consumer (cooperative-sticky)
    joins a group whose member speaks KIP-848; the broker's assignor splits the partitions between
    them (the classic member rejoining when its partitions are free), revocation before assignment
    holds across the two protocols, and when it leaves the other owns everything again."""
    topic, group = names("cp-mixed")
    create_topic(broker.bootstrap, topic, 4)
    events: list = []
    a = ConsumerProtocol(broker.bootstrap, group, topic, "a", events)
    members = [a]
    try:
        poll_until(members, lambda: a.assignment() == set(range(4)), what="a owning all 4")
        c = classic_member(broker, group, topic, "classic", events)
        members.append(c)
        poll_until(members, lambda: len(a.assignment()) == 2 and len(c.assignment()) == 2, what="a 2/2 split")
        assert a.assignment() | c.assignment() == set(range(4))
        d = describe(broker, group)
        assert sorted(m.member_type for m in d.members) == [0, 1]
        owned_once(events)
        members.remove(c)
        c.close()
        poll_until(members, lambda: a.assignment() == set(range(4)), what="a owning all 4 again")
        owned_once(events)
        assert not a.errors and not c.errors
    finally:
        close_all(members)


def classic_member(broker, group, topic, name, events):
    """A classic confluent-kafka consumer (cooperative-sticky) recording its callbacks as
    ``ConsumerProtocol`` does."""
    from confluent_kafka import Consumer
    from groups_support import HEARTBEAT_MS, SESSION_MS
    c = ConsumerProtocol.__new__(ConsumerProtocol)
    c.name, c.events, c.errors = name, events, []
    c.c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                    "enable.auto.commit": False, "partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
    c.c.subscribe([topic], on_assign=lambda _, ps: c._event("assign", ps),
                  on_revoke=lambda _, ps: c._event("revoke", ps))
    return c


def test_online_upgrade_and_downgrade(broker):
    """Spec §11.2-11.3 (scenarios 19-20): two classic cooperative-sticky consumers own the
    partitions; a group.protocol=consumer member joins: the group becomes a consumer group (member
    types 0, 0, 1) and the three split the partitions, the classic members rejoining as told; the
    consumer member leaves: the group is classic again and its two members own everything."""
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    topic, group = names("cp-migrate")
    create_topic(broker.bootstrap, topic, 6)
    events: list = []
    c1, c2 = classic_member(broker, group, topic, "c1", events), classic_member(broker, group, topic, "c2", events)
    members = [c1, c2]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def group_type():
        return admin.describe_consumer_groups([group]).get(group).result(30).type
    try:
        poll_until(members, lambda: len(c1.assignment()) == 3 and len(c2.assignment()) == 3, what="a classic 3/3")
        assert group_type() == ConsumerGroupType.CLASSIC
        n = ConsumerProtocol(broker.bootstrap, group, topic, "n", events)
        members.append(n)
        poll_until(members, lambda: all(len(m.assignment()) == 2 for m in members), timeout=60,
                   what="a 2/2/2 split after the upgrade")
        assert set().union(*(m.assignment() for m in members)) == set(range(6))
        d = describe(broker, group)
        assert d.error_code == 0 and sorted(m.member_type for m in d.members) == [0, 0, 1]
        owned_once(events)
        members.remove(n)
        n.close()
        poll_until(members, lambda: len(c1.assignment()) == 3 and len(c2.assignment()) == 3, timeout=60,
                   what="a classic 3/3 after the downgrade")
        assert group_type() == ConsumerGroupType.CLASSIC
        owned_once(events)
    finally:
        close_all(members)
