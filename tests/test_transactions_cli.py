"""``compactlog transactions`` (kafka-transactions.sh) through a broker (kafka-python's admin client)
and offline on the broker's data dir, each subcommand both ways with the same answers; a hanging
transaction made as Kafka's pitfall makes one (the broker runs with
``transaction.partition.verification.enable=false``, so a transactional batch lands in a partition
its coordinator never added) is found by ``find-hanging`` and aborted by ``abort``, through the
broker and offline (the broker stopped), after which the partition's last stable offset reaches its
end and a read_committed consumer reads past it. Bad input answers one line, a non-zero exit and no
change. ``dump-log --transaction-log-decoder`` reads what this broker wrote to
``__transaction_state``."""

from __future__ import annotations

import os

import pytest

from broker_support import Broker
from compactlog.record.consumer_offsets import partition_for
from txn_tools_support import (init_producer, produce_hanging, produce_plain, read_committed, rows, run,
                               stable_and_end_offsets)

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

BROKER = {"transaction.partition.verification.enable": "false", "group.initial.rebalance.delay.ms": "0"}
MINUTE_MS = 60_000
LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txntools") / "data", BROKER) as b:
        yield b


@pytest.fixture(scope="module")
def scene(broker):
    """tx-ok: committed on orders-1; tx-open: an ongoing transaction on orders-1 (its coordinator
    knows it); tx-lost and tx-gone: Empty ids whose producers left a transactional record 20 minutes
    old in orders-0 and held-0 (hanging: nothing will ever end them), plain records after them."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("orders", 2, 1), NewTopic("held", 1, 1)]).values():
        f.result(30)
    ok = init_producer(broker.bootstrap, "tx-ok")
    ok.begin_transaction()
    for i in range(3):
        ok.produce("orders", value=b"ok-%d" % i, partition=1)
    ok.commit_transaction(30)
    live = init_producer(broker.bootstrap, "tx-open", **{"transaction.timeout.ms": 900000})
    live.begin_transaction()
    live.produce("orders", value=b"open", partition=1)
    assert live.flush(30) == 0
    init_producer(broker.bootstrap, "tx-lost")
    init_producer(broker.bootstrap, "tx-gone")
    lost = produce_hanging(broker.bootstrap, "tx-lost", "orders", 0, age_ms=20 * MINUTE_MS)
    gone = produce_hanging(broker.bootstrap, "tx-gone", "held", 0, age_ms=20 * MINUTE_MS)
    produce_plain(broker.bootstrap, "orders", 0, 3)
    produce_plain(broker.bootstrap, "held", 0, 2)
    ids = {r[0]: int(r[2]) for r in rows(tool(broker, "list").stdout)[1:]}
    yield {"lost": lost, "gone": gone, "ids": ids}
    try:
        live.abort_transaction(10)
    except Exception:           # noqa: BLE001 - the broker may have restarted under it: nothing to keep
        pass


def tool(broker, *args):
    """The subcommand through the broker."""
    return run("transactions", "--bootstrap-server", broker.bootstrap, *args)


def offline(broker, *args):
    """The subcommand on the broker's data dir, without asking the broker."""
    return run("--data-dir", broker.data_dir, "transactions", *args)


def both(broker, *args) -> list:
    """The subcommand both ways; each must succeed; their outputs."""
    out = []
    for r in (tool(broker, *args), offline(broker, *args)):
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        out.append(r.stdout)
    return out


# -- reading ---------------------------------------------------------------------------------------

def test_list(broker, scene):
    via, off = both(broker, "list")
    assert via == off
    table = rows(via)
    assert table[0] == LIST_HEADER
    assert sorted((r[0], r[1], r[3]) for r in table[1:]) == [
        ("tx-gone", "0", "Empty"), ("tx-lost", "0", "Empty"), ("tx-ok", "0", "CompleteCommit"),
        ("tx-open", "0", "Ongoing")]
    # Kafka's place for --bootstrap-server (before the subcommand) and compactlog's (after) alike
    r = run("transactions", "list", "--bootstrap-server", broker.bootstrap)
    assert r.returncode == 0 and r.stdout == via


def test_describe(broker, scene):
    via, off = both(broker, "describe", "--transactional-id", "tx-open")
    (header, row), (_, row_off) = rows(via), rows(off)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]
    assert row[:6] == ["0", "tx-open", str(scene["ids"]["tx-open"]), "0", "Ongoing", "900000"]
    assert int(row[6]) > 0 and int(row[7]) >= 0 and row[8] == "orders-1"
    assert row_off[:7] == row[:7] and row_off[8] == row[8]          # the duration is the clock's
    via, off = both(broker, "describe", "--transactional-id", "tx-lost")
    assert rows(via)[1][4:] == rows(off)[1][4:] == ["Empty", "60000", "None", "None", ""]
    for r in (tool(broker, "describe", "--transactional-id", "nobody"),
              offline(broker, "describe", "--transactional-id", "nobody")):
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr == ("error: Failed to describe transaction state of transactional-id `nobody`: "
                            "TRANSACTIONAL_ID_NOT_FOUND: The transactionalId could not be found.\n")


def test_describe_producers(broker, scene):
    via, off = both(broker, "describe-producers", "--topic", "orders", "--partition", "0")
    assert via == off
    table = rows(via)
    assert table[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                        "CurrentTransactionStartOffset"]
    hanging = [r for r in table[1:] if r[0] == str(scene["ids"]["tx-lost"])]
    assert len(hanging) == 1 and hanging[0][1:4] == ["0", "-1", "0"] and hanging[0][5] == str(scene["lost"])
    via, off = both(broker, "describe-producers", "--topic", "orders", "--partition", "1", "--broker-id", "0")
    assert via == off
    by_id = {r[0]: r for r in rows(via)[1:]}
    assert by_id[str(scene["ids"]["tx-ok"])][2] == "0" and by_id[str(scene["ids"]["tx-ok"])][5] == "None"
    assert by_id[str(scene["ids"]["tx-open"])][5] != "None"
    for r in (tool(broker, "describe-producers", "--topic", "orders", "--partition", "7"),
              offline(broker, "describe-producers", "--topic", "orders", "--partition", "7")):
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr.startswith("error: Failed to describe producers for partition orders-7 on leader: "
                                   "UNKNOWN_TOPIC_OR_PARTITION")


def test_find_hanging(broker, scene):
    lost, gone = str(scene["ids"]["tx-lost"]), str(scene["ids"]["tx-gone"])
    for args in (("--broker-id", "0"), ("--topic", "orders"), ("--topic", "orders", "--partition", "0"),
                 ("--topic", "held", "--max-transaction-timeout", "10")):
        via, off = both(broker, "find-hanging", *args)
        # the two runs are moments apart: Duration(min), the last column, may cross a minute between them
        assert [r[:-1] for r in rows(via)] == [r[:-1] for r in rows(off)]
        assert all(a[-1] == b[-1] or abs(int(a[-1]) - int(b[-1])) <= 1
                   for a, b in zip(rows(via)[1:], rows(off)[1:]))
        table = rows(via)
        assert table[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                            "LastTimestamp", "Duration(min)"]
        expected = {("orders", "0", lost, str(scene["lost"])), ("held", "0", gone, str(scene["gone"]))}
        if "--topic" in args:
            expected = {e for e in expected if e[0] == args[1]}
        assert {(r[0], r[1], r[2], r[5]) for r in table[1:]} == expected
        assert all(r[3:5] == ["0", "-1"] and int(r[7]) >= 20 for r in table[1:])
    # tx-open is as old as 0 minutes allow, but its coordinator will end it: not hanging
    via, off = both(broker, "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0")
    assert [r[2] for r in rows(via)[1:]] == [lost] and via == off
    # 30 minutes: no transaction is old enough; another broker's replicas: none here
    for args in (("--broker-id", "0", "--max-transaction-timeout", "30"), ("--broker-id", "5")):
        via, off = both(broker, "find-hanging", *args)
        assert rows(via) == rows(off) == [rows(via)[0]]


def test_bad_input_answers_one_line_and_changes_nothing(broker, scene):
    before = tool(broker, "describe-producers", "--topic", "orders", "--partition", "0").stdout
    end = stable_and_end_offsets(broker.bootstrap, "orders", 0)
    for r, code, text in [
            (tool(broker, "abort", "--topic", "orders", "--partition", "0", "--start-offset", "1"), 1,
             "error: Could not find any open transactions starting at offset 1 on partition orders-0\n"),
            (tool(broker, "abort", "--topic", "nope", "--partition", "0", "--start-offset", "0"), 1,
             "error: Failed to validate producer state for partition nope-0: UNKNOWN_TOPIC_OR_PARTITION"),
            (offline(broker, "abort", "--topic", "orders", "--partition", "0", "--start-offset", str(scene["lost"])),
             1, "the data directory is locked by another writer"),
            (run("transactions", "list"), 2, "error: give --bootstrap-server HOST:PORT"),
            (offline(broker, "describe"), 2, "Missing option '--transactional-id'"),
            (offline(broker, "describe-producers", "--topic", "orders", "--partition", "-1"), 2, "--partition"),
            (offline(broker, "find-hanging"), 2, "error: The `find-hanging` command requires either --topic or "
                                                 "--broker-id to limit the scope of the search\n"),
            (offline(broker, "find-hanging", "--broker-id", "0", "--partition", "0"), 2,
             "error: The --partition argument requires --topic to be provided\n"),
            (offline(broker, "find-hanging", "--topic", "orders", "--max-transaction-timeout", "x"), 2,
             "--max-transaction-timeout"),
            (tool(broker, "find-hanging", "--topic", "nope"), 1,
             "error: Failed to describe 1 topics: UNKNOWN_TOPIC_OR_PARTITION: nope: "),
            (offline(broker, "find-hanging", "--topic", "nope"), 1,
             "error: Failed to describe 1 topics: UNKNOWN_TOPIC_OR_PARTITION: nope: ")]:
        assert r.returncode == code, (r.args, r.stderr)
        assert text in r.stderr and r.stdout == "", (r.args, r.stderr)
        assert "Traceback" not in r.stderr
    # the refused offline writer names the way that works while the broker holds the dir
    r = offline(broker, "abort", "--topic", "orders", "--partition", "0", "--start-offset", str(scene["lost"]))
    assert "compactlog serve" in r.stderr and "--bootstrap-server" in r.stderr and len(r.stderr.splitlines()) == 1
    assert tool(broker, "describe-producers", "--topic", "orders", "--partition", "0").stdout == before
    assert stable_and_end_offsets(broker.bootstrap, "orders", 0) == end


def test_dump_log_reads_the_state_log_the_broker_wrote(broker, scene):
    pdir = os.path.join(broker.data_dir, f"__transaction_state-{partition_for('tx-ok', 50)}")
    r = run("dump-log", "--transaction-log-decoder", "--files", pdir)
    assert r.returncode == 0, r.stderr
    mine = [line for line in r.stdout.splitlines()
            if line.startswith("| offset") and 'key: {"type":"0","data":{"transactionalId":"tx-ok"}}' in line]
    states = [int(line.split('"transactionStatus":')[1].split(",")[0]) for line in mine]
    assert states == [0, 1, 2, 4]                     # Empty, Ongoing, PrepareCommit, CompleteCommit
    assert all(' payload: {"version":"1","data":{"producerId":' in line for line in mine)
    assert '"transactionPartitions":[{"topic":"orders","partitionIds":[1]}]' in mine[1]
    assert '"transactionPartitions":[]' in mine[3] and '"transactionPartitions":null' in mine[0]


# -- aborting a hanging transaction ------------------------------------------------------------------

def test_abort_through_the_broker(broker, scene):
    lso, end = stable_and_end_offsets(broker.bootstrap, "orders", 0)
    assert lso == scene["lost"] < end
    assert read_committed(broker.bootstrap, "orders", 0) == []           # stuck at the hanging record
    r = tool(broker, "abort", "--topic", "orders", "--partition", "0", "--start-offset", str(scene["lost"]))
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    lso, end_after = stable_and_end_offsets(broker.bootstrap, "orders", 0)
    assert lso == end_after == end + 1                                   # the ABORT marker
    assert read_committed(broker.bootstrap, "orders", 0) == [b"plain-0", b"plain-1", b"plain-2"]
    via, off = both(broker, "find-hanging", "--topic", "orders")
    assert rows(via) == rows(off) == [rows(via)[0]]
    producers = {r[0]: r for r in rows(tool(broker, "describe-producers", "--topic", "orders",
                                            "--partition", "0").stdout)[1:]}
    assert producers[str(scene["ids"]["tx-lost"])][2] == "0" and producers[str(scene["ids"]["tx-lost"])][5] == "None"
    # once is enough: the transaction is no longer open there
    r = tool(broker, "abort", "--topic", "orders", "--partition", "0", "--start-offset", str(scene["lost"]))
    assert r.returncode == 1 and "Could not find any open transactions" in r.stderr


def test_abort_offline_with_the_broker_stopped(broker, scene):
    lso, end = stable_and_end_offsets(broker.bootstrap, "held", 0)
    assert lso == scene["gone"] < end
    broker.stop()
    try:
        hanging = rows(offline(broker, "find-hanging", "--topic", "held").stdout)[1:]
        assert [(r[2], r[5]) for r in hanging] == [(str(scene["ids"]["tx-gone"]), str(scene["gone"]))]
        r = offline(broker, "abort", "--topic", "held", "--partition", "0", "--start-offset", str(scene["gone"]))
        assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
        assert rows(offline(broker, "find-hanging", "--topic", "held").stdout)[1:] == []
        r = run("--data-dir", broker.data_dir, "consume", "--topic", "held", "--from-beginning",
                "--isolation-level", "read_committed")
        assert r.returncode == 0 and r.stdout.split() == ["plain-0", "plain-1"], r.stderr
    finally:
        broker.start()
    lso, end_after = stable_and_end_offsets(broker.bootstrap, "held", 0)
    assert lso == end_after == end + 1
    assert read_committed(broker.bootstrap, "held", 0) == [b"plain-0", b"plain-1"]
    assert rows(tool(broker, "find-hanging", "--broker-id", "0").stdout)[1:] == []
