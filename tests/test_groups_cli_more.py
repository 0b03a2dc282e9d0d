"""``compactlog consumer-groups``: --all-groups, --list --state, --to-current, --by-duration,
--from-file, --export and --delete-offsets, through one broker for the module (confluent-kafka's
AdminClient, kafka-python's for OffsetDelete) and offline on a data dir (tombstones written under
the data-dir lock); Kafka's option conflicts as usage errors (exit code 2)."""

from __future__ import annotations

import time

import pytest

from groups_support import (GROUP_BROKER, Confluent, committed, create_topic, module_broker, produce, read_and_commit,
                            table, uid)

from compactlog.cli.consumer_groups.options import parse_duration_ns
from compactlog.errors import CompactlogError
from compactlog.record import consumer_offsets as R
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

HOUR_MS = 3_600_000


broker = module_broker("groups-cli-more", GROUP_BROKER)


def produce_aged(bootstrap, topic, partitions, now_ms) -> None:
    """Ten records in each partition: five two hours old, then five of now."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(10):
            p.produce(topic, key=b"k%d" % i, value=b"v", partition=part,
                      timestamp=now_ms - 2 * HOUR_MS if i < 5 else now_ms)
    assert p.flush(30) == 0


def offset_records(data_dir, group) -> dict:
    """{(topic, partition): [offset or None for a tombstone, ...]}: the group's offset records in
    ``__consumer_offsets``, in log order, read from the files (read-only, beside a broker too)."""
    dd = DataDir(str(data_dir), broker=BrokerConfig({}))
    out: dict = {}
    try:
        for p in dd.partitions(R.OFFSETS_TOPIC):
            for r in dd.open_log(R.OFFSETS_TOPIC, p).records():
                rec = R.decode_record(r.key, r.value)
                if isinstance(rec.key, R.OffsetCommitKey) and rec.key.group == group:
                    out.setdefault((rec.key.topic, rec.key.partition), []).append(
                        None if rec.value is None else rec.value.offset)
    finally:
        dd.close()
    return out


# -- through the broker ------------------------------------------------------------------------------

def test_to_current_by_duration_export_and_from_file(broker, cli, tmp_path):
    bs = broker.bootstrap
    topic, g, h = uid("t"), uid("g"), uid("h")
    create_topic(bs, topic, 2)
    produce_aged(bs, topic, 2, int(time.time() * 1000))

    def cg(*args):
        return cli("consumer-groups", "--bootstrap-server", bs, *args)

    r = cg("--reset-offsets", "--group", g, "--topic", f"{topic}:0", "--to-offset", "3", "--execute")
    assert r.code == 0, r.err
    # the committed offset, the log end where the group has none; --export prints Kafka's CSV
    r = cg("--reset-offsets", "--group", g, "--topic", topic, "--to-current", "--dry-run", "--export")
    assert r.code == 0 and r.out == f"{topic},0,3\n{topic},1,10\n\n", (r.out, r.err)
    assert committed(bs, g, topic, 2) == {0: 3, 1: -1001}
    # now minus the duration: the first records younger than an hour
    r = cg("--reset-offsets", "--group", g, "--topic", topic, "--by-duration", "PT1H", "--execute", "--export")
    assert r.code == 0 and r.out == f"{topic},0,5\n{topic},1,5\n\n", (r.out, r.err)
    assert committed(bs, g, topic, 2) == {0: 5, 1: 5}
    r = cg("--reset-offsets", "--group", g, "--topic", topic, "--by-duration", "pt2h30m", "--dry-run")
    assert [row[2:] for row in table(r.out)[1:]] == [["0", "0"], ["1", "0"]]
    # a negative duration is a time to come: no record, the log end (Kafka's fallback and note)
    r = cg("--reset-offsets", "--group", g, "--topic", f"{topic}:1", "--by-duration", "-P1D", "--dry-run")
    assert table(r.out)[1][2:] == ["1", "10"] and \
        f"Partition 1 from topic {topic} is empty. Falling back to latest known offset." in r.err
    r = cg("--reset-offsets", "--group", g, "--topic", topic, "--by-duration", "1h", "--dry-run")
    assert r.code == 1 and "Text cannot be parsed to a Duration" in r.err and "Traceback" not in r.err
    assert committed(bs, g, topic, 2) == {0: 5, 1: 5}

    # two groups: the CSV has the group column; --from-file brings the plan back
    assert cg("--reset-offsets", "--group", h, "--topic", topic, "--to-offset", "7", "--execute").code == 0
    r = cg("--reset-offsets", "--group", g, "--group", h, "--all-topics", "--to-current", "--dry-run", "--export")
    assert r.out == f"{g},{topic},0,5\n{g},{topic},1,5\n{h},{topic},0,7\n{h},{topic},1,7\n\n", r.out
    plan = tmp_path / "plan.csv"
    plan.write_text(r.out)
    assert cg("--reset-offsets", "--group", g, "--group", h, "--all-topics", "--to-earliest", "--execute").code == 0
    assert committed(bs, g, topic, 2) == {0: 0, 1: 0} == committed(bs, h, topic, 2)
    r = cg("--reset-offsets", "--group", g, "--group", h, "--from-file", str(plan), "--execute")
    assert r.code == 0, r.err
    assert committed(bs, g, topic, 2) == {0: 5, 1: 5} and committed(bs, h, topic, 2) == {0: 7, 1: 7}
    # one group: topic,partition,offset lines; offsets past the log end go to the end
    one = tmp_path / "one.csv"
    one.write_text(f"{topic},0,2\n{topic},1,400\n")
    r = cg("--reset-offsets", "--group", g, "--from-file", str(one), "--execute")
    assert [row[1:] for row in table(r.out)[1:]] == [[topic, "0", "2"], [topic, "1", "10"]]
    assert committed(bs, g, topic, 2) == {0: 2, 1: 10}
    # a group the file has no plan for
    r = cg("--reset-offsets", "--group", uid("none"), "--group", g, "--from-file", str(plan), "--dry-run")
    assert "Error: No reset plan for group none-" in r.out


def test_delete_offsets(broker, cli):
    bs = broker.bootstrap
    topic, other, g = uid("t"), uid("o"), uid("g")
    create_topic(bs, topic, 2)
    create_topic(bs, other, 1)
    produce(bs, topic, 10, partitions=2)

    def cg(*args):
        return cli("consumer-groups", "--bootstrap-server", bs, *args)

    # an offset of a topic the group will not subscribe to, then a member of the topic
    assert cg("--reset-offsets", "--group", g, "--topic", other, "--to-offset", "0", "--execute").code == 0
    m = Confluent(bs, g, topic)
    try:
        read_and_commit(m, 10)
        r = cg("--delete-offsets", "--group", g, "--topic", topic, "--topic", other)
        assert r.code == 1
        assert "Error: Encountered some partition-level error, see the follow-up details." in r.out
        rows = table(r.out.split("follow-up details.")[1])
        assert rows[0] == ["TOPIC", "PARTITION", "STATUS"]
        assert {(row[0], row[1]): " ".join(row[2:]) for row in rows[1:]} == {
            (other, "0"): "Successful",
            (topic, "0"): "Error: GROUP_SUBSCRIBED_TO_TOPIC: Deleting offsets of a topic is forbidden while "
                          "the consumer group is actively subscribed to it.",
            (topic, "1"): "Error: GROUP_SUBSCRIBED_TO_TOPIC: Deleting offsets of a topic is forbidden while "
                          "the consumer group is actively subscribed to it."}
        assert committed(bs, g, topic, 2) == {0: 5, 1: 5} and committed(bs, g, other, 1) == {0: -1001}
    finally:
        m.close()
    r = cg("--delete-offsets", "--group", g, "--topic", f"{topic}:0")
    assert r.code == 0, (r.out, r.err)
    assert r.out.startswith(f"Request succeeded for deleting offsets from group {g}.\n")
    assert table(r.out)[1:] == [["TOPIC", "PARTITION", "STATUS"], [topic, "0", "Successful"]]
    assert committed(bs, g, topic, 2) == {0: -1001, 1: 5}
    r = cg("--describe", "--group", g)
    assert [row[1:4] for row in table(r.out)[1:]] == [[topic, "1", "5"]]
    # the coordinator wrote tombstones
    recs = offset_records(broker.data_dir, g)
    assert recs[(topic, 0)][-1] is None and recs[(other, 0)][-1] is None and recs[(topic, 1)][-1] == 5
    # a group that does not exist; a topic that does not exist
    nog = uid("nog")
    r = cg("--delete-offsets", "--group", nog, "--topic", topic)
    assert r.code == 1 and "\nError: The group id does not exist.\n" in r.out
    assert [row[:3] for row in table(r.out)[2:]] == [[topic, "0", "Error:"], [topic, "1", "Error:"]]
    assert "GROUP_ID_NOT_FOUND" in r.out
    r = cg("--delete-offsets", "--group", g, "--topic", "no-such-topic")
    assert r.code == 1 and table(r.out)[-1][:4] == ["no-such-topic", "-", "Error:", "UNKNOWN_TOPIC_OR_PARTITION:"]


def test_list_state_and_all_groups(broker, cli):
    bs = broker.bootstrap
    topic, active, idle = uid("t"), uid("active"), uid("idle")
    create_topic(bs, topic, 1)
    produce(bs, topic, 4, partitions=1)

    def cg(*args):
        return cli("consumer-groups", "--bootstrap-server", bs, *args)

    assert cg("--reset-offsets", "--group", idle, "--topic", topic, "--to-offset", "2", "--execute").code == 0
    m = Confluent(bs, active, topic)
    try:
        read_and_commit(m, 4)
        r = cg("--list", "--state")
        rows = table(r.out)
        assert r.code == 0 and rows[0] == ["GROUP", "STATE"]
        assert [active, "Stable"] in rows and [idle, "Empty"] in rows
        r = cg("--list", "--state", "empty")
        assert [idle, "Empty"] in table(r.out) and active not in r.out
        r = cg("--list", "--state", "Stable,PreparingRebalance")
        assert [active, "Stable"] in table(r.out) and idle not in r.out
        r = cg("--list", "--state", "Running")
        assert r.code == 2 and "Invalid state list 'Running'. Valid states are: PreparingRebalance" in r.err

        r = cg("--describe", "--all-groups")
        by_group = {row[0]: row for row in table(r.out) if row[0] in (active, idle)}
        assert by_group[active][1:4] == [topic, "0", "4"] and by_group[idle][1:6] == [topic, "0", "2", "4", "2"]
        r = cg("--describe", "--all-groups", "--state")
        states = {row[0]: row[-2] for row in table(r.out) if row[0] in (active, idle)}
        assert states == {active: "Stable", idle: "Empty"}
        # every group: the active one is reported and left alone
        r = cg("--reset-offsets", "--all-groups", "--topic", topic, "--to-earliest", "--dry-run")
        assert r.code == 0, r.err
        assert f"Error: Assignments can only be reset if the group '{active}' is inactive, but the current " \
               f"state is Stable." in r.out
        plan = {row[0]: row[1:] for row in table(r.out) if row[0] in (active, idle)}
        assert plan == {idle: [topic, "0", "0"]}
        assert committed(bs, idle, topic, 1) == {0: 2}
    finally:
        m.close()


# -- offline ------------------------------------------------------------------------------------------

@pytest.fixture
def offline(tmp_path):
    """A data dir with topics t (2 partitions) and u (1), ten records each."""
    data = tmp_path / "data"
    dd = DataDir(str(data), broker=BrokerConfig({}), writable=True, create=True, command="test")
    for topic, n in (("t", 2), ("u", 1)):
        dd.create_topic(topic, n, {})
        for p in range(n):
            dd.open_log(topic, p).append_records([b"k%d" % i for i in range(10)], [b"v"] * 10,
                                                 timestamps=[1_700_000_000_000 + i for i in range(10)])
    dd.close()
    return data


def member_record(data, group: str, topics: list[str]) -> None:
    """A group-metadata record with one consumer member subscribed to ``topics``: what the
    coordinator of a broker that stopped while the member was in the group leaves behind."""
    dd = DataDir(str(data), broker=BrokerConfig({}), writable=True, command="test")
    try:
        n = len(dd.partitions(R.OFFSETS_TOPIC))
        member = R.MemberMetadata("m-1", None, "cli-test", "/127.0.0.1", 30000, 10000,
                                  R.encode_subscription(topics), R.encode_assignment([(topics[0], [0])]))
        rec = R.group_metadata_record(group, R.GroupMetadataValue("consumer", 1, "range", "m-1",
                                                                  1_700_000_000_000, [member]))
        dd.open_log(R.OFFSETS_TOPIC, R.partition_for(group, n)).append_records(
            [rec.key_bytes()], [rec.value_bytes()], timestamps=[1_700_000_000_000])
    finally:
        dd.close()


def test_offline_delete_offsets_writes_tombstones_and_spares_subscribed_topics(offline, cli):
    def cg(*args):
        return cli("--data-dir", offline, "consumer-groups", *args)

    for g, o in (("idle", "4"), ("busy", "6")):
        r = cg("--reset-offsets", "--group", g, "--topic", "t", "--topic", "u", "--to-offset", o, "--execute")
        assert r.code == 0, r.err
    member_record(offline, "busy", ["t"])
    r = cg("--describe", "--group", "busy", "--state")
    assert table(r.out)[1][-2:] == ["Stable", "1"]
    r = cg("--delete-offsets", "--group", "busy", "--topic", "t", "--topic", "u")
    assert r.code == 1 and "Encountered some partition-level error" in r.out
    assert [row[:3] for row in table(r.out)[2:]] == [["t", "0", "Error:"], ["t", "1", "Error:"],
                                                     ["u", "0", "Successful"]]
    assert r.out.count("GROUP_SUBSCRIBED_TO_TOPIC") == 2
    r = cg("--delete-offsets", "--group", "idle", "--topic", "t:1", "--topic", "u:0")
    assert r.code == 0 and r.out.startswith("Request succeeded for deleting offsets from group idle.")
    r = cg("--describe", "--group", "idle")
    assert [row[1:4] for row in table(r.out)[1:]] == [["t", "0", "4"]]
    idle, busy = offset_records(offline, "idle"), offset_records(offline, "busy")
    assert idle == {("t", 0): [4], ("t", 1): [4, None], ("u", 0): [4, None]}
    assert busy == {("t", 0): [6], ("t", 1): [6], ("u", 0): [6, None]}
    # partitions the data dir does not have are not asked for, as the broker's handler does
    r = cg("--delete-offsets", "--group", "idle", "--topic", "t:5", "--topic", "nope")
    assert r.code == 1 and [row[:3] for row in table(r.out)[2:]] == [["nope", "-", "Error:"], ["t", "5", "Error:"]]
    r = cg("--delete-offsets", "--group", "ghost", "--topic", "t")
    assert r.code == 1 and "Error: The group id does not exist." in r.out


def test_offline_all_groups_list_state_export_and_delete(offline, cli, tmp_path):
    def cg(*args):
        return cli("--data-dir", offline, "consumer-groups", *args)

    for g in ("a", "b,c"):          # a group id with a comma is quoted in the CSV
        assert cg("--reset-offsets", "--group", g, "--topic", "t", "--to-offset", "3", "--execute").code == 0
    r = cg("--list", "--state")
    assert table(r.out) == [["GROUP", "STATE"], ["a", "Empty"], ["b,c", "Empty"]]
    assert table(cg("--list", "--state", "stable").out) == [["GROUP", "STATE"]]
    r = cg("--describe", "--all-groups")
    assert [row[:4] for row in table(r.out) if row[0] != "GROUP"] == [["a", "t", "0", "3"], ["a", "t", "1", "3"],
                                                                      ["b,c", "t", "0", "3"], ["b,c", "t", "1", "3"]]
    r = cg("--reset-offsets", "--all-groups", "--all-topics", "--to-latest", "--execute", "--export")
    assert r.code == 0 and r.out == 'a,t,0,10\na,t,1,10\n"b,c",t,0,10\n"b,c",t,1,10\n\n', r.out
    plan = tmp_path / "plan.csv"
    plan.write_text(r.out.replace(",10\n", ",1\n"))
    r = cg("--reset-offsets", "--all-groups", "--from-file", str(plan), "--execute")
    assert r.code == 0, r.err
    assert [row[3:6] for row in table(cg("--describe", "--group", "b,c").out)[1:]] == [["1", "10", "9"]] * 2
    bad = tmp_path / "bad.csv"
    bad.write_text("a,t,0,1\na,t,zero,1\n")
    r = cg("--reset-offsets", "--group", "a", "--from-file", str(bad), "--execute")
    assert r.code == 1 and f"--from-file {bad}: line 2: 'a,t,zero,1': expected group,topic,partition,offset" in r.err
    r = cg("--delete", "--all-groups")
    assert r.code == 0 and r.out == "Deletion of requested consumer groups ('a', 'b,c') was successful.\n"
    assert cg("--list").out == ""


# -- option rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--describe", "--group", "g", "--all-groups"], 'Option "[group]" can\'t be used with option "[all-groups]"'),
    (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
    (["--delete"], "Option [delete] takes one of these options: [all-groups], [group]"),
    (["--delete", "--group", "g", "--topic", "t"], "does not support topic-specific offset deletion"),
    (["--delete-offsets", "--all-groups", "--topic", "t"], "Option [delete-offsets] takes the following options: "
                                                           "[group], [topic]"),
    (["--delete-offsets", "--group", "g"], "Option [delete-offsets] takes the following options"),
    (["--delete-offsets", "--group", "a", "--group", "b", "--topic", "t"], "Found multiple arguments for option group"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-current"],
     'Option "[to-earliest]" can\'t be used with option "[to-current]"'),
    (["--reset-offsets", "--group", "g", "--by-duration", "PT1H", "--from-file", "f.csv"],
     'Option "[by-duration]" can\'t be used with option "[from-file]"'),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"],
     "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    (["--reset-offsets", "--all-groups", "--to-latest"], "One of the reset scopes should be defined: --all-topics, "
                                                         "--topic."),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "Option '[reset-offsets]' requires one of the following "
                                                          "scenarios: [to-offset]"),
    (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"],
     "Invalid partition 'x' specified in topic arg 't:x'"),
    (["--reset-offsets", "--group", "g", "--topic", "t:1:2", "--to-latest"], "Invalid topic arg 't:1:2'"),
    (["--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
    (["--describe", "--group", "g", "--topic", "t"], 'Option "[topic]" can\'t be used with option "[describe]"'),
    (["--describe", "--group", "g", "--members", "--state"], "Option [describe] takes at most one of these options"),
    (["--describe", "--group", "g", "--state", "Stable"], "Option [describe] does not take a value for [state]"),
    (["--list", "--state", "Running"], "Invalid state list 'Running'."),
    (["--list", "--members"], "Option(s) [members] are unavailable given other options on the command line"),
    (["--list", "--describe", "--all-groups"], "Command must include exactly one action"),
    (["--list", "stray"], "unexpected argument: stray"),
])
def test_usage_errors_exit_2(tmp_path, cli, args, message):
    r = cli("--data-dir", tmp_path / "missing", "consumer-groups", *args)
    assert r.code == 2 and message in r.err and "Traceback" not in r.err, (r.code, r.err)


@pytest.mark.parametrize("text, seconds", [
    ("PT1H", 3600), ("pt30m", 1800), ("P2D", 172800), ("P1DT2H3M4S", 93784), ("PT20.345S", 20.345),
    ("-PT6H3M", -21780), ("PT-1.5S", -1.5), ("+P1D", 86400), ("P-1DT1H", -82800),
])
def test_duration_is_read_as_java_reads_it(text, seconds):
    assert parse_duration_ns(text) == round(seconds * 1_000_000_000)


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1h", "PT1.5H", "P1W", "P1Y", "PT1H ", ""])
def test_bad_durations_are_refused(text):
    with pytest.raises(CompactlogError, match="Text cannot be parsed to a Duration"):
        parse_duration_ns(text)
