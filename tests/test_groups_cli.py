"""``compactlog consumer-groups`` against a running broker (through confluent-kafka's AdminClient)
and offline on the data dir (read-only beside a broker; ``--execute`` and ``--delete`` under the
data-dir lock), and the Kafka-written ``__consumer_offsets`` fixture loaded and described."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from broker_support import Broker, run_cli
from groups_support import (GROUP_BROKER, Confluent, committed, create_topic, names, poll_until, produce,
                            read_and_commit, table)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "kafka-vectors", "Niloufar1171+LDI-POC", "__consumer_offsets-6")


def cg(data, *args, bootstrap=None):
    extra = ["--bootstrap-server", bootstrap] if bootstrap else []
    r = run_cli(data, "consumer-groups", *extra, *args)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def test_kafka_written_offsets_topic_loads_and_is_described(tmp_path):
    data = tmp_path / "data"
    os.makedirs(data)
    shutil.copytree(FIXTURE, data / "__consumer_offsets-6")
    with Broker(data, GROUP_BROKER) as b:
        code, out, err = cg(data, "--list", bootstrap=b.bootstrap)
        assert code == 0 and out.split() == ["DEVSmileCDR"], err
        code, out, err = cg(data, "--describe", "--group", "DEVSmileCDR", bootstrap=b.bootstrap)
        assert code == 0, err
        rows = table(out)
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                           "CONSUMER-ID", "HOST", "CLIENT-ID"]
        # the group Kafka 3.7 left Stable with 17 members, four of them owning a partition
        by_topic = {r[1]: r for r in rows[1:]}
        assert set(by_topic) == {"TestTopicPatient", "Retry.TestTopicPatient",
                                 "batch2.work.notification.SHR_PROD.persistence",
                                 "subscription.matching.SHR_PROD.persistence"}
        assert by_topic["TestTopicPatient"][2:6] == ["0", "3", "-", "-"]   # the topic is not here
        assert by_topic["TestTopicPatient"][6].startswith("consumer-DEVSmileCDR-14-")
        assert by_topic["TestTopicPatient"][7] == "/172.18.0.5"
        code, out, _ = cg(data, "--describe", "--group", "DEVSmileCDR", "--state", bootstrap=b.bootstrap)
        assert table(out)[1][-2:] == ["Stable", "17"]
        # offline, beside the running broker: the same view, read-only
        code, out2, err = cg(data, "--describe", "--group", "DEVSmileCDR")
        assert code == 0, err
        code, out, _ = cg(data, "--describe", "--group", "DEVSmileCDR", bootstrap=b.bootstrap)
        assert sorted(table(out2)) == sorted(table(out))


def test_describe_reset_and_delete_through_the_broker(tmp_path):
    data = tmp_path / "data"
    topic, group = names("cli")
    with Broker(data, GROUP_BROKER) as b:
        create_topic(b.bootstrap, topic, 3)
        produce(b.bootstrap, topic, 30, partitions=3)
        m = Confluent(b.bootstrap, group, topic)
        read_and_commit(m, 30)
        produce(b.bootstrap, topic, 6, start=30, partitions=3)
        code, out, err = cg(data, "--describe", "--group", group, bootstrap=b.bootstrap)
        assert code == 0, err
        rows = table(out)[1:]
        assert [(r[2], r[3], r[4], r[5]) for r in rows] == [("0", "10", "12", "2"), ("1", "10", "12", "2"),
                                                             ("2", "10", "12", "2")]
        assert all(r[6] == m.c.memberid() and r[7] == "/127.0.0.1" for r in rows)
        code, out, err = cg(data, "--describe", "--group", group, "--members", "--verbose", bootstrap=b.bootstrap)
        assert table(out)[1][-2:] == ["3", f"{topic}(0,1,2)"]
        # an active group cannot be reset
        code, out, err = cg(data, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                            "--execute", bootstrap=b.bootstrap)
        assert f"Assignments can only be reset if the group '{group}' is inactive, but the current state is " \
               f"Stable." in out
        m.close()
        code, out, err = cg(data, "--describe", "--group", group, bootstrap=b.bootstrap)
        assert f"Consumer group '{group}' has no active members." in err
        assert [r[6:] for r in table(out)[1:]] == [["-", "-", "-"]] * 3

        def reset(*how, execute=True):
            code, out, err = cg(data, "--reset-offsets", "--group", group, "--topic", topic, *how,
                                "--execute" if execute else "--dry-run", bootstrap=b.bootstrap)
            assert code == 0, err
            return {int(r[2]): int(r[3]) for r in table(out)[1:]}, err

        plan, _ = reset("--to-earliest", execute=False)
        assert plan == {0: 0, 1: 0, 2: 0} and committed(b.bootstrap, group, topic, 3) == {0: 10, 1: 10, 2: 10}
        assert reset("--to-earliest")[0] == {0: 0, 1: 0, 2: 0} == committed(b.bootstrap, group, topic, 3)
        assert reset("--shift-by", "2")[0] == {0: 2, 1: 2, 2: 2} == committed(b.bootstrap, group, topic, 3)
        assert reset("--shift-by", "-5")[0] == {0: 0, 1: 0, 2: 0}
        plan, err = reset("--to-offset", "100")
        assert plan == {0: 12, 1: 12, 2: 12} and "is higher than latest offset" in err
        assert reset("--to-latest")[0] == {0: 12, 1: 12, 2: 12}
        assert reset("--to-datetime", "2000-01-01T00:00:00.000")[0] == {0: 0, 1: 0, 2: 0}
        assert reset("--to-datetime", "2999-01-01T00:00:00.000Z")[0] == {0: 12, 1: 12, 2: 12}
        # one partition only
        code, out, err = cg(data, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "4",
                            "--execute", bootstrap=b.bootstrap)
        assert committed(b.bootstrap, group, topic, 3) == {0: 12, 1: 4, 2: 12}
        # a new member resumes from the reset offsets
        again = Confluent(b.bootstrap, group, topic)
        more: list[bytes] = []
        try:
            poll_until([again], lambda: len(more) >= 8, got=more, what="the records after offset 4 of partition 1")
        finally:
            again.close()
        assert len(more) == 8
        code, out, _ = cg(data, "--delete", "--group", group, bootstrap=b.bootstrap)
        assert code == 0 and out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
        code, out, _ = cg(data, "--delete", "--group", group, bootstrap=b.bootstrap)
        assert code == 1 and "Error: Deletion of some consumer groups failed:" in out
        assert f"* Group '{group}' could not be deleted due to:" in out and "GROUP_ID_NOT_FOUND" in out
        code, out, _ = cg(data, "--describe", "--group", group, bootstrap=b.bootstrap)
        assert f"Error: Consumer group '{group}' does not exist." in out


def test_offline_reads_and_writes_under_the_data_dir_lock(tmp_path):
    data = tmp_path / "data"
    topic, group = "off-t", "off-g"
    with Broker(data, GROUP_BROKER) as b:
        create_topic(b.bootstrap, topic, 2)
        produce(b.bootstrap, topic, 10, partitions=2)
        m = Confluent(b.bootstrap, group, topic)
        read_and_commit(m, 10)
        m.close()
        # writing offline while the broker holds the data dir is refused, naming the holder
        code, out, err = cg(data, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1",
                            "--execute")
        assert code != 0 and "compactlog serve" in err and "lock" in err.lower()
        code, out, err = cg(data, "--list")
        assert code == 0 and group in out.split()
    code, out, err = cg(data, "--describe", "--group", group)
    assert code == 0, err
    assert [(r[2], r[3], r[4], r[5]) for r in table(out)[1:]] == [("0", "5", "5", "0"), ("1", "5", "5", "0")]
    code, out, err = cg(data, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1", "--execute")
    assert code == 0, err
    assert {int(r[2]): int(r[3]) for r in table(out)[1:]} == {0: 1, 1: 1}
    # the broker loads what the offline command wrote
    with Broker(data, GROUP_BROKER) as b:
        assert committed(b.bootstrap, group, topic, 2) == {0: 1, 1: 1}
    code, out, err = cg(data, "--delete", "--group", group)
    assert code == 0 and "was successful" in out, err
    code, out, _ = cg(data, "--list")
    assert group not in out.split()
    with Broker(data, GROUP_BROKER) as b:
        assert committed(b.bootstrap, group, topic, 2) == {0: -1001, 1: -1001}


@pytest.mark.parametrize("args, message", [
    ([], "exactly one action"),
    (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "requires one of the following scenarios"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "yesterday"], "--to-datetime 'yesterday'"),
])
def test_usage_errors(tmp_path, args, message):
    os.makedirs(tmp_path / "d")
    code, out, err = cg(tmp_path / "d", *args)
    assert code != 0 and re.search(re.escape(message), out + err), (out, err)
