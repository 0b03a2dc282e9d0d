"""The console tools as Kafka's, through the broker (issue 17's console-tools reproductions): produce
and consume with --bootstrap-server (Kafka's placement, --group commits, --partition/--offset, kcat's
--format), topics describe/alter and configs through the broker with the same answers as on its
data dir, metadata as kcat -L, --replication-factor, "did you mean", global options after the
subcommand, and a writer refused by the broker's lock told the command that works. One broker for
the module, on a free loopback port."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from broker_support import KCAT, Broker, kcat
from cli_support import run_in_process

pytest.importorskip("confluent_kafka")


def cli(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
    # in this process (the broker runs in its own): a fresh interpreter per command cost ~0.6 CPU-s
    return run_in_process(args, stdin=stdin, text=True)


def ok(r) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def one_error(r) -> str:
    assert r.returncode != 0, r.stdout
    lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("Processed a total")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("console") / "data") as b:
        yield b


KEYED = "".join(f"k{i}:v{i}\n" for i in range(30))
KEYS = ["--property", "parse.key=true", "--property", "key.separator=:"]


def test_produce_places_records_as_kafkas_producer_and_consume_prints_them_as_offline(broker, tmp_path):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "placed", "--partitions", "3",
           "--replication-factor", "1"))
    ok(cli("produce", "--bootstrap-server", b, "--topic", "placed", *KEYS, stdin=KEYED))
    offline = tmp_path / "offline"
    ok(cli("--data-dir", offline, "topics", "create", "--topic", "placed", "--partitions", "3"))
    ok(cli("--data-dir", offline, "produce", "--topic", "placed", *KEYS, stdin=KEYED))
    fmt = ["--format", "%p %o %k=%s %K %S\\n"]
    through = ok(cli("consume", "--bootstrap-server", b, "--topic", "placed", "--from-beginning", *fmt))
    kcat_like = ok(cli("consume", "--data-dir", offline, "--topic", "placed", "--from-beginning", *fmt))
    assert sorted(through.splitlines()) == sorted(kcat_like.splitlines()) and len(through.splitlines()) == 30
    props = ["--property", "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true"]
    through = ok(cli("consume", "--bootstrap-server", b, "--topic", "placed", "--from-beginning", *props))
    on_disk = ok(cli("consume", "--data-dir", offline, "--topic", "placed", "--from-beginning", *props))
    assert sorted(through.splitlines()) == sorted(on_disk.splitlines())
    assert "Partition:0\tOffset:0\t" in through
    # and kcat reads what produce sent through the broker, keys where Kafka's partitioner puts them
    if KCAT:
        r = kcat("-C", "-b", b, "-t", "placed", "-e", "-o", "beginning", "-f", "%p %o %k=%s %K %S\\n")
        assert sorted(r.stdout.decode().splitlines()) == sorted(kcat_like.splitlines())


def test_produce_null_markers_headers_json_and_refusals(broker):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "kv", "--config", "cleanup.policy=compact"))
    lines = "h1:a,h2:NULL\tk1:v1\nh1:b\tk2:NULL\n"
    ok(cli("produce", "--bootstrap-server", b, "--topic", "kv", *KEYS, "--property", "parse.headers=true",
           "--property", "null.marker=NULL", "--verbose", stdin=lines))
    jsonl = '{"key": "k3", "value_b64": "/wA=", "timestamp": 1700000000000, "headers": [{"key": "x", "value": "y"}]}\n'
    ok(cli("produce", "--bootstrap-server", b, "--topic", "kv", "--input-format", "jsonl", stdin=jsonl))
    out = ok(cli("consume", "--bootstrap-server", b, "--topic", "kv", "--from-beginning", "--output-format", "jsonl"))
    recs = [json.loads(x) for x in out.splitlines()]
    assert [(r["key"], r.get("value"), r["headers"]) for r in recs[:2]] == [
        ("k1", "v1", [{"key": "h1", "value": "a"}, {"key": "h2", "value": None}]),
        ("k2", None, [{"key": "h1", "value": "b"}])]
    assert recs[2]["value_b64"] == "/wA=" and recs[2]["timestamp"] == 1700000000000
    # a keyless record on a compacted topic: the broker's refusal, naming the line
    err = one_error(cli("produce", "--bootstrap-server", b, "--topic", "kv", *KEYS, "--property", "ignore.error=true",
                        stdin="k4:v4\nno key here\n"))
    # a batch is refused whole: the line range names every record of it
    assert ("line 2:" in err or "lines 1-2 (2 records):" in err) and "the broker refused the record: INVALID_RECORD" \
        in err, err
    # a line that does not parse sends nothing of its chunk
    before = ok(cli("get-offsets", "--bootstrap-server", b, "--topic", "kv"))
    err = one_error(cli("produce", "--bootstrap-server", b, "--topic", "kv", *KEYS, stdin="k5:v5\nnokey\n"))
    assert "line 2: no key separator" in err
    assert ok(cli("get-offsets", "--bootstrap-server", b, "--topic", "kv")) == before
    err = one_error(cli("produce", "--bootstrap-server", b, "--topic", "kv", "--request-required-acks", "2", stdin=""))
    assert "--request-required-acks '2'" in err


def test_produce_to_a_broker_that_is_not_there_fails_in_bounded_time():
    err = one_error(cli("produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--producer-property",
                        "message.timeout.ms=2000", stdin="x\n"))
    assert "line 1: not delivered to 127.0.0.1:1" in err and "Connection refused" in err


def test_consume_group_commits_what_was_printed_and_resumes(broker):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "grp", "--partitions", "2"))
    ok(cli("produce", "--bootstrap-server", b, "--topic", "grp", *KEYS, stdin=KEYED))
    first = ok(cli("consume", "--bootstrap-server", b, "--topic", "grp", "--group", "g", "--from-beginning",
                   "--max-messages", "7"))
    assert len(first.splitlines()) == 7
    rest = ok(cli("consume", "--bootstrap-server", b, "--topic", "grp", "--group", "g"))
    assert sorted(first.splitlines() + rest.splitlines()) == sorted(f"v{i}" for i in range(30))
    r = cli("consume", "--bootstrap-server", b, "--topic", "grp", "--group", "g")
    assert r.returncode == 0 and r.stdout == "" and "Processed a total of 0 messages" in r.stderr
    described = ok(cli("consumer-groups", "--bootstrap-server", b, "--describe", "--group", "g"))
    lags = [line.split()[5] for line in described.splitlines() if line.startswith("g ")]
    assert lags == ["0", "0"], described
    # no --group: nothing is committed anywhere
    ok(cli("consume", "--bootstrap-server", b, "--topic", "grp", "--from-beginning", "--max-messages", "1"))
    groups = ok(cli("consumer-groups", "--bootstrap-server", b, "--list"))
    assert "compactlog-console-consumer" not in groups


def test_consume_partition_offset_timestamp_and_waiting(broker):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "pos"))
    lines = "".join(f'{{"key": "k{i}", "value": "v{i}", "timestamp": {1000 * (i + 1)}}}\n' for i in range(10))
    ok(cli("produce", "--bootstrap-server", b, "--topic", "pos", "--input-format", "jsonl", stdin=lines))
    out = ok(cli("consume", "--bootstrap-server", b, "--topic", "pos", "--partition", "0", "--offset", "7",
                 "--format", "%o:%T\\n"))
    assert out.splitlines() == ["7:8000", "8:9000", "9:10000"]
    out = ok(cli("consume", "--bootstrap-server", b, "--topic", "pos", "--timestamp", "5500", "--max-messages", "2"))
    assert out.splitlines() == ["v5", "v6"]
    out = ok(cli("consume", "--bootstrap-server", b, "--topic", "pos", "--from-beginning", "--timeout-ms", "1500",
                 "--isolation-level", "read_committed"))
    assert len(out.splitlines()) == 10
    err = one_error(cli("consume", "--bootstrap-server", b, "--topic", "pos", "--partition", "3", "--offset", "0"))
    assert "partition pos-3 does not exist" in err
    err = one_error(cli("consume", "--bootstrap-server", b, "--topic", "missing", "--from-beginning"))
    assert "UNKNOWN_TOPIC_OR_PART" in err
    err = one_error(cli("consume", "--bootstrap-server", b, "--topic", "pos", "--format", "%e"))
    assert "unsupported formatter %e" in err


def test_topics_describe_alter_and_replication_factor(broker, tmp_path):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "desc", "--partitions", "2",
           "--config", "cleanup.policy=compact"))
    ok(cli("topics", "alter", "--bootstrap-server", b, "--topic", "desc", "--config", "segment.bytes=100000"))
    lines = ok(cli("topics", "describe", "--bootstrap-server", b, "--topic", "desc")).splitlines()
    head = lines[0].split("\t")
    assert head[0] == "Topic: desc" and head[1].startswith("TopicId: ") and head[2:] == [
        "PartitionCount: 2", "ReplicationFactor: 1", "Configs: cleanup.policy=compact,segment.bytes=100000"]
    assert lines[1:] == [f"\tTopic: desc\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A"
                         for p in (0, 1)]
    # the topic id is the one in the partition directories (URL-safe base64, as Kafka prints it)
    with open(os.path.join(broker.data_dir, "desc-0", "partition.metadata")) as f:
        assert f"topic_id: {head[1].split(': ')[1]}" in f.read()
    ok(cli("topics", "alter", "--bootstrap-server", b, "--topic", "desc", "--delete-config", "segment.bytes"))
    doc = json.loads(ok(cli("topics", "describe", "--bootstrap-server", b, "--topic", "desc", "--json")))
    assert [c["name"] for c in doc["configs"] if c["source"] != "DEFAULT_CONFIG"] == ["cleanup.policy"]
    assert doc["partitions"][1] == {"partition": 1, "leader": 0, "replicas": [0], "isr": [0]}
    err = one_error(cli("topics", "alter", "--bootstrap-server", b, "--topic", "desc", "--delete-config", "retention.ms"))
    assert "has no override for retention.ms" in err
    # --replication-factor: 1 accepted both ways, above 1 refused with Kafka's text, nothing made
    err = one_error(cli("topics", "create", "--bootstrap-server", b, "--topic", "rf3", "--replication-factor", "3"))
    assert "INVALID_REPLICATION_FACTOR" in err
    d = tmp_path / "d"
    err = one_error(cli("--data-dir", d, "topics", "create", "--topic", "rf3", "--replication-factor", "3"))
    assert err == "error: Replication factor: 3 larger than available brokers: 1."
    assert not d.exists()
    assert "between 1 and 32767" in one_error(cli("--data-dir", d, "topics", "create", "--topic", "x",
                                                  "--replication-factor", "0"))
    ok(cli("--data-dir", d, "topics", "create", "--topic", "rf1", "--replication-factor", "1"))


def test_configs_through_the_broker_and_on_its_data_dir_agree(broker, tmp_path):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "cfg"))
    out = ok(cli("configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                 "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]"))
    assert out == "Completed updating config for topic cfg.\n"
    through = ok(cli("configs", "--bootstrap-server", b, "--describe", "--topic", "cfg"))
    assert through.splitlines() == [
        "Dynamic configs for topic cfg are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        # Kafka's quirk, kept: the broker synonyms before log.retention.ms are dropped, and it has no default
        "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}"]
    # the data dir read beside the running broker answers the same, --all included
    assert ok(cli("configs", "--data-dir", broker.data_dir, "--describe", "--topic", "cfg")) == through
    assert ok(cli("configs", "--data-dir", broker.data_dir, "--describe", "--topic", "cfg", "--all")) == \
        ok(cli("configs", "--bootstrap-server", b, "--describe", "--topic", "cfg", "--all"))
    # the broker's own listeners (Kafka's and the metrics one) come from its command line
    # (--override), not the data dir
    def settings(text: str) -> list[str]:
        return [x for x in text.splitlines() if not x.startswith(("  listeners=", "  metrics.listener="))]
    assert settings(ok(cli("configs", "--data-dir", broker.data_dir, "--describe", "--broker", "0", "--all"))) == \
        settings(ok(cli("configs", "--bootstrap-server", b, "--describe", "--broker", "0", "--all")))
    err = one_error(cli("configs", "--bootstrap-server", b, "--alter", "--topic", "cfg", "--delete-config", "segment.ms"))
    assert err == "error: Invalid config(s): segment.ms"
    err = one_error(cli("configs", "--bootstrap-server", b, "--alter", "--topic", "cfg", "--add-config", "segmnt.ms=5"))
    assert "Unknown topic config name: segmnt.ms (did you mean segment.ms?)" in err
    ok(cli("configs", "--bootstrap-server", b, "--alter", "--topic", "cfg", "--delete-config", "retention.ms"))
    assert "retention.ms" not in ok(cli("configs", "--bootstrap-server", b, "--describe", "--topic", "cfg"))
    out = ok(cli("configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers"))
    assert out.splitlines() == ["Dynamic configs for broker 0 are:", "Default configs for brokers in the cluster are:"]
    assert ok(cli("configs", "--bootstrap-server", b, "--describe", "--topic", "nope")) == \
        "The topic 'nope' doesn't exist and doesn't have dynamic config.\n"
    # a setting Kafka cannot change at run time: Kafka's refusal, for a broker and the default
    for entity in (["--broker", "0"], ["--broker-defaults"]):
        err = one_error(cli("configs", "--bootstrap-server", b, "--alter", *entity, "--add-config",
                            "num.partitions=2"))
        assert "Cannot update these configs dynamically" in err
    # a name Kafka does not know: kept as a custom setting, as Kafka keeps it, and the tool says so
    r = cli("configs", "--bootstrap-server", b, "--alter", "--broker", "0", "--add-config", "log.retention.msx=5")
    assert r.returncode == 0 and ("note: log.retention.msx is not a Kafka broker setting: the broker keeps it as a "
                                  "custom setting (did you mean log.retention.ms?)") in r.stderr, r.stderr
    ok(cli("configs", "--bootstrap-server", b, "--alter", "--broker", "0", "--delete-config", "log.retention.msx"))
    # a dynamic one (Kafka's DynamicBrokerConfig): changed, described, deleted
    ok(cli("configs", "--bootstrap-server", b, "--alter", "--broker-defaults", "--add-config",
           "log.cleaner.backoff.ms=2000"))
    out = ok(cli("configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers"))
    assert "log.cleaner.backoff.ms=2000" in out, out
    ok(cli("configs", "--bootstrap-server", b, "--alter", "--broker-defaults", "--delete-config",
           "log.cleaner.backoff.ms"))


@pytest.mark.parametrize("args, words", [
    (["--describe", "--alter", "--topic", "t"], "exactly one action"),
    (["--describe"], "At least one entity type must be specified"),
    (["--describe", "--entity-type", "users"], "Invalid entity type users"),
    (["--alter", "--topic", "t"], "At least one of --add-config"),
    (["--alter", "--entity-type", "topics", "--add-config", "a=1"], "An entity name must be specified"),
    (["--alter", "--broker", "x", "--add-config", "a=1"], "must be a valid integer broker id"),
    (["--alter", "--topic", "t", "--add-config", "a=1,b"], "Invalid entity config"),
    (["--describe", "--topic", "t", "--entity-type", "topics"], "should not be used in conjunction"),
])
def test_configs_arguments_refused_as_kafka_configs_refuses_them(tmp_path, args, words):
    r = cli("--data-dir", tmp_path, "configs", *args)
    assert r.returncode == 2 and words in r.stderr, r.stderr


def test_configs_on_a_data_dir(tmp_path):
    d = tmp_path / "d"
    ok(cli("--data-dir", d, "topics", "create", "--topic", "t"))
    ok(cli("--data-dir", d, "configs", "--alter", "--topic", "t", "--add-config", "segment.ms=1000,retention.ms=5"))
    out = ok(cli("--data-dir", d, "configs", "--describe", "--entity-type", "topics"))
    assert out.splitlines()[0] == "Dynamic configs for topic t are:" and len(out.splitlines()) == 3
    err = one_error(cli("--data-dir", d, "configs", "--alter", "--topic", "t", "--add-config", "cleanup.polcy=compact"))
    assert "unknown topic configuration cleanup.polcy (did you mean cleanup.policy?)" in err
    # broker settings: server.properties, comments and order kept, checked as serve checks them
    (d / "server.properties").write_text("# mine\nlog.retention.hours=24\nnum.partitions = 3\n")
    ok(cli("--data-dir", d, "configs", "--alter", "--broker", "0", "--add-config", "num.partitions=5,log.cleaner.threads=2",
           "--delete-config", "log.retention.hours"))
    assert (d / "server.properties").read_text() == "# mine\nnum.partitions=5\nlog.cleaner.threads=2\n"
    assert "did you mean num.partitions?" in one_error(cli("--data-dir", d, "configs", "--alter", "--broker", "0",
                                                           "--add-config", "num.partitons=5"))
    assert "not a whole number" in one_error(cli("--data-dir", d, "configs", "--alter", "--broker", "0",
                                                 "--add-config", "num.partitions=x"))
    assert (d / "server.properties").read_text() == "# mine\nnum.partitions=5\nlog.cleaner.threads=2\n"
    out = ok(cli("--data-dir", d, "configs", "--describe", "--broker", "0", "--all"))
    assert "  num.partitions=5 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=5, " \
           "DEFAULT_CONFIG:num.partitions=1}" in out.splitlines()


def test_metadata_as_kcat_prints_it(broker):
    b = broker.bootstrap
    ok(cli("topics", "create", "--bootstrap-server", b, "--topic", "meta", "--partitions", "2"))
    out = ok(cli("metadata", "--bootstrap-server", b, "--topic", "meta"))
    assert out.splitlines()[1:] == [" 1 brokers:", f"  broker 0 at {b} (controller)", " 1 topics:",
                                    '  topic "meta" with 2 partitions:',
                                    "    partition 0, leader 0, replicas: 0, isrs: 0",
                                    "    partition 1, leader 0, replicas: 0, isrs: 0"]
    missing = ok(cli("metadata", "--bootstrap-server", b, "--topic", "not-there"))
    assert 'topic "not-there" with 0 partitions: Broker: Unknown topic or partition' in missing
    assert "not-there" not in ok(cli("topics", "list", "--bootstrap-server", b))      # asking creates nothing
    if KCAT:
        # librdkafka answers from whichever connection is up first, the bootstrap one (broker -1,
        # "<address>/bootstrap") or the one to the broker it learnt (0, "<address>/0"): the same
        # run of either tool can print either, so that line is compared by its form
        def origin(line: str) -> str:
            return re.sub(r"from broker (-1: \S+/bootstrap|0: \S+/0)\)", "from broker ...)", line)

        ours, theirs = ok(cli("metadata", "--bootstrap-server", b)), kcat("-L", "-b", b).stdout.decode()
        assert [origin(x) for x in ours.splitlines()] == [origin(x) for x in theirs.splitlines()]
        ours, theirs = (json.loads(ok(cli("metadata", "--bootstrap-server", b, "--json"))),
                        json.loads(kcat("-L", "-J", "-b", b).stdout))
        for doc in (ours, theirs):
            assert doc.pop("originating_broker") in ({"id": -1, "name": f"{b}/bootstrap"}, {"id": 0, "name": f"{b}/0"})
        assert ours == theirs


def test_writers_refused_by_the_brokers_lock_are_told_the_command_that_works(broker):
    d = broker.data_dir
    err = one_error(cli("produce", "--data-dir", d, "--topic", "t", *KEYS, stdin="a:1\n"))
    assert f"pid {broker.pid} (compactlog serve), a broker listening on {broker.bootstrap}" in err
    assert err.endswith(f"this command through it: compactlog produce --bootstrap-server {broker.bootstrap} --topic t "
                        f"--property parse.key=true --property key.separator=:")
    err = one_error(cli("--data-dir", d, "topics", "create", "--topic", "new"))
    assert err.endswith(f"compactlog topics create --bootstrap-server {broker.bootstrap} --topic new")
    err = one_error(cli("--data-dir", d, "clean", "--force"))
    assert f"--bootstrap-server {broker.bootstrap}" in err and "this command through it" not in err


def test_global_options_after_the_subcommand_and_misspelt_names(broker, tmp_path):
    d = tmp_path / "g"
    ok(cli("topics", "create", "--topic", "t", "--data-dir", d, "--override", "num.partitions=2"))
    assert ok(cli("topics", "list", "--data-dir", d, "--json")) == '[{"name": "t", "partitions": 2, "configured": true}]\n'
    ok(cli("produce", "--topic", "t", "--data-dir", d, *KEYS, stdin="a:1\n"))
    assert ok(cli("consume", "--topic", "t", "--from-beginning", "--data-dir", d, "--format", "%k=%s\\n")) == "a=1\n"
    err = one_error(cli("--data-dir", d, "topics", "create", "--topic", "u", "--config", "segmnt.bytes=100000"))
    assert "unknown topic configuration segmnt.bytes (did you mean segment.bytes?)" in err
    err = one_error(cli("--data-dir", d, "topics", "alter", "--topic", "t", "--delete-config", "retention.m"))
    assert "did you mean retention.ms?" in err
    err = one_error(cli("--data-dir", d, "clean", "--config", "cleanup.polcy=compact"))
    assert "did you mean cleanup.policy?" in err
    err = one_error(cli("topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "u",
                        "--config", "segmnt.bytes=100000"))
    assert "Unknown topic config name: segmnt.bytes (did you mean segment.bytes?)" in err


def test_acls_through_a_broker_without_an_authorizer_say_so(broker):
    # librdkafka reports an empty ACL list for DescribeAcls' SECURITY_DISABLED: the tool checks
    for args in (["--list"], ["--add", "--allow-principal", "User:alice", "--topic", "t"]):
        r = cli("acls", "--bootstrap-server", broker.bootstrap, *args)
        assert r.returncode == 1 and r.stdout == ""
        assert one_error(r) == ("error: DescribeAcls: SECURITY_DISABLED: No Authorizer is configured on the broker "
                                "(set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer)")
    r = cli("acls", "--bootstrap-server", broker.bootstrap, "--remove", "--topic", "t", "--force")
    assert r.returncode == 1 and "SECURITY_DISABLED" in one_error(r)
