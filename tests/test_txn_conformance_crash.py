"""Transaction conformance across a kill -9 of the broker (transactions.md §6.3 scenario 5) with
confluent-kafka, kafka-python and aiokafka producers, at each crash point of §4.4 (this module:
after the Prepare* record; test_txn_conformance_crash_marker.py: after the first marker). The
broker's test hook ``COMPACTLOG_TEST_CRASH_AFTER=prepare|first-marker`` exits with 137 right after
the PrepareCommit record, or right after the first marker; a restart on the same port then
completes the decided outcome in every data partition and in ``__consumer_offsets`` (the
transactional offsets become the group's), the client waiting in EndTxn ends committed, and a
second producer's transaction that was Ongoing at the crash is still open (its LSO held) and is
committed after the restart."""

from __future__ import annotations

import threading

import pytest

from broker_support import Broker
from compactlog.record import consumer_offsets as R
from txn_support import (ALL_CLIENTS, BROKER_CONFIG, E, Raw, TxnProducer, create_topics, markers, read, state_records,
                         states, uid, values, wait_until)

CRASH_ENV = "COMPACTLOG_TEST_CRASH_AFTER"


def group_metadata(client: str, bootstrap: str, group: str):
    """What each client's send_offsets_to_transaction takes for a group it does not join."""
    if client != "confluent":
        return group
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


# -- 5. kill -9 at each crash point ---------------------------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_kill_after_the_prepare_commit_record_then_restart(tmp_path, monkeypatch, client):
    kill_at_a_crash_point_then_restart(tmp_path, monkeypatch, client, "prepare")


def kill_at_a_crash_point_then_restart(tmp_path, monkeypatch, client: str, point: str) -> None:
    """The scenario at ``point`` (also run by test_txn_conformance_crash_marker.py, a module of
    its own so that the two halves run in parallel)."""
    data = tmp_path / "data"
    monkeypatch.setenv(CRASH_ENV, point)
    first = Broker(data, BROKER_CONFIG).start()
    monkeypatch.delenv(CRASH_ENV)
    second = None
    a = b = None
    try:
        plain, compacted, group = uid("crash"), uid("crash-c"), uid("group")
        create_topics(first.bootstrap, plain, compacted)
        offsets_partition = R.partition_for(group, 50)
        meta = group_metadata(client, first.bootstrap, group)
        a = TxnProducer(client, first.bootstrap, uid("tx-a")).init()
        b = TxnProducer(client, first.bootstrap, uid("tx-b")).init()
        b.begin()
        b.send(plain, b"b-open", partition=1)
        b.flush()
        a.begin()
        for topic in (plain, compacted):
            for part in (0, 1):
                a.send(topic, b"a-%d" % part, key=b"k", partition=part)
        a.send_offsets({(plain, 0): 3, (plain, 1): 4}, meta)
        a.flush()
        outcome: list = []

        def commit():
            try:
                a.commit()
                outcome.append("committed")
            except Exception as e:                  # noqa: BLE001 (reported below)
                outcome.append(e)
        t = threading.Thread(target=commit, daemon=True)
        t.start()
        first.proc.wait(30)
        assert first.proc.returncode == 137, first.log_text()[-3000:]
        first.kill()
        assert states(str(data), a.tid)[-1] == "PrepareCommit"
        parts = [(topic, part) for topic in (plain, compacted) for part in (0, 1)] + \
            [("__consumer_offsets", offsets_partition)]
        marked = [tp for tp in parts if markers(str(data), *tp)]
        assert len(marked) == (1 if point == "first-marker" else 0), marked

        second = Broker(data, BROKER_CONFIG, port=first.port).start()
        wait_until(lambda: states(str(data), a.tid)[-1:] == ["CompleteCommit"], timeout=20,
                   what="the re-driven commit")
        for tp in parts:
            kinds = {m[0] for m in markers(str(data), *tp)}
            assert kinds == {"COMMIT"}, tp                 # the one marked before the crash may have two
        with Raw(second.port) as raw:
            assert raw.offset_fetch(group, plain, [0, 1], require_stable=True) == {0: (E.none, 3), 1: (E.none, 4)}
        # the client that waited in EndTxn: its retry after the restart finds CompleteCommit (NONE)
        t.join(60)
        assert outcome == ["committed"], outcome
        # the transaction that was Ongoing at the crash is still open, its partition's LSO held
        # at its first offset (producer state rebuilt at the restart), and it can be committed
        [(_, b_pid, b_epoch)] = state_records(str(data), b.tid)[:1]
        with Raw(second.port) as raw:
            assert (b_pid, b_epoch, 0, -1, 0) in raw.describe_producers(plain, 1)
            assert raw.list_offset(plain, 1, read_committed=True) == 0
        b.send(plain, b"b-after", partition=1)
        b.commit()
        got = values(read(client, second.bootstrap, plain, "read_committed"))
        assert sorted(got) == [b"a-0", b"a-1", b"b-after", b"b-open"]
        with Raw(second.port) as raw:
            for part in (0, 1):                            # the compacted topic: LSO past A's marker
                assert raw.list_offset(compacted, part, read_committed=True) == \
                    raw.list_offset(compacted, part, read_committed=False) >= 2
    finally:
        for p in (a, b):
            if p is not None:
                p.close()
        if second is not None:
            second.kill()                   # nothing checked at shutdown: no graceful stop to wait for
        first.kill()
