"""``transactions``' rules over a fake backend: Kafka's tables, the abort's choice of producer and
coordinator epoch, and find-hanging's candidates and verdicts."""

from __future__ import annotations

import pytest

from compactlog.errors import CompactlogError

from . import service as S
from .service import Description, Listing, Producer, RequestError, TransactionalIdNotFound

NOW = 10_000_000
MIN = 60_000


class FakeBackend:
    def __init__(self, producers=None, listings=None, descriptions=None, topics=None):
        self.producers = producers or {}          # (topic, partition) -> [Producer]
        self.listings = listings or []            # [Listing]
        self.descriptions = descriptions or {}    # id -> Description
        self.topic_map = topics or {}             # topic -> [partition]
        self.aborted = []
        self.asked = []

    def list_transactions(self, producer_ids=()):
        return {0: [t for t in self.listings if not producer_ids or t.producer_id in producer_ids]}

    def describe(self, tid):
        self.asked.append(tid)
        if tid not in self.descriptions:
            raise TransactionalIdNotFound("The transactionalId could not be found.")
        return self.descriptions[tid]

    def describe_producers(self, tps, broker_id):
        for tp in tps:
            if tp not in self.producers:
                raise RequestError("UNKNOWN_TOPIC_OR_PARTITION", "no such partition")
        return {tp: self.producers[tp] for tp in tps}

    def abort(self, *spec):
        self.aborted.append(spec)

    def topics(self):
        return sorted(self.topic_map)

    def topic_partitions(self, topics, broker_id):
        return [(t, p) for t in topics for p in self.topic_map[t]]


def producer(pid, start=-1, last=NOW - 20 * MIN, coordinator_epoch=-1, epoch=0):
    return Producer(pid, epoch, 3, last, coordinator_epoch, start)


def test_tables_are_kafkas_pretty_print():
    assert S.table(("A", "Bee"), [["long value", "1"]]) == ["A         \tBee\t", "long value\t1  \t"]
    assert S.table(("A",), []) == ["A\t"]
    b = FakeBackend(listings=[Listing("tx", 5, "Ongoing")])
    assert S.list_transactions(b) == ["TransactionalId\tCoordinator\tProducerId\tTransactionState\t",
                                      "tx             \t0          \t5         \tOngoing         \t"]


def test_describe_shows_none_without_a_transaction_and_the_duration_with_one():
    b = FakeBackend(descriptions={"a": Description(0, "a", 1, 2, "Empty", 60000, -1, ()),
                                  "b": Description(0, "b", 3, 0, "Ongoing", 60000, NOW - 500,
                                                   (("t", 1), ("s", 0)))})
    row = S.describe(b, "a", NOW)[1].split("\t")
    assert row[5:9] == ["60000               ", "None                         ", "None                 ",
                        "               "]
    row = [c.strip() for c in S.describe(b, "b", NOW)[1].split("\t")]
    assert row[4:9] == ["Ongoing", "60000", str(NOW - 500), "500", "s-0,t-1"]
    with pytest.raises(CompactlogError, match="^Failed to describe transaction state of transactional-id `c`: "
                                              "TRANSACTIONAL_ID_NOT_FOUND: The transactionalId could not be found."):
        S.describe(b, "c", NOW)


def test_describe_producers_prints_none_for_no_open_transaction():
    b = FakeBackend(producers={("t", 0): [producer(7), producer(8, start=40, coordinator_epoch=2)]})
    rows = [[c.strip() for c in line.split("\t")][:6] for line in S.describe_producers(b, "t", 0, None)[1:]]
    assert rows == [["7", "0", "-1", "3", str(NOW - 20 * MIN), "None"], ["8", "0", "2", "3", str(NOW - 20 * MIN), "40"]]
    with pytest.raises(CompactlogError, match="^Failed to describe producers for partition t-1 on broker 4: "
                                              "UNKNOWN_TOPIC_OR_PARTITION"):
        S.describe_producers(b, "t", 1, 4)


def test_abort_takes_the_producer_of_the_start_offset_and_coordinator_epoch_at_least_0():
    b = FakeBackend(producers={("t", 0): [producer(7, start=10, coordinator_epoch=3, epoch=2),
                                          producer(8, start=40)]})
    assert str(S.abort(b, "t", 0, 40)) == ("AbortTransactionSpec(topicPartition=t-0, producerId=8, producerEpoch=0, "
                                           "coordinatorEpoch=0)")
    S.abort(b, "t", 0, 10)
    assert b.aborted == [("t", 0, 8, 0, 0), ("t", 0, 7, 2, 3)]
    with pytest.raises(CompactlogError, match="^Could not find any open transactions starting at offset 11 on "
                                              "partition t-0$"):
        S.abort(b, "t", 0, 11)
    with pytest.raises(CompactlogError, match="^Failed to validate producer state for partition t-9: "):
        S.abort(b, "t", 9, 0)
    assert len(b.aborted) == 2


def test_find_hanging_follows_kafkas_rule():
    listings = [Listing("known-elsewhere", 1, "Ongoing"), Listing("known-here", 2, "Ongoing"),
                Listing("forgotten", 3, "CompleteAbort")]
    descriptions = {"known-elsewhere": Description(0, "known-elsewhere", 1, 0, "Ongoing", 60000, NOW, (("t", 1),)),
                    "known-here": Description(0, "known-here", 2, 0, "Ongoing", 60000, NOW, (("t", 0),))}
    producers = {("t", 0): [producer(1, start=5), producer(2, start=6), producer(3, start=7), producer(4, start=8),
                            producer(5, start=9, last=NOW - 5 * MIN),       # young: a live transaction
                            producer(6)],                                   # no open transaction
                 ("t", 1): [producer(1, start=3)]}
    b = FakeBackend(producers, listings, descriptions, topics={"t": [0, 1]})
    found = S.hanging_transactions(b, broker_id=None, topic="t", partition=None, max_timeout_ms=15 * MIN, now_ms=NOW)
    # 1: its id's transaction is elsewhere; 3: its id is unknown to the coordinator; 4: no id at all;
    # 2 on t-0 and 1 on t-1 will get their markers from the coordinator
    assert sorted((h.topic, h.partition, h.producer.producer_id) for h in found) == \
        [("t", 0, 1), ("t", 0, 3), ("t", 0, 4)]
    lines = S.find_hanging(b, broker_id=None, topic="t", partition=0, max_timeout_ms=15 * MIN, now_ms=NOW)
    assert lines[0].split("\t")[:8] == list(S.HANGING_HEADERS)
    assert [c.strip() for c in lines[1].split("\t")][:8] == ["t", "0", "1", "0", "-1", "5", str(NOW - 20 * MIN), "20"]
    # a longer --max-transaction-timeout leaves them out
    assert S.find_hanging(b, broker_id=None, topic="t", partition=None, max_timeout_ms=30 * MIN, now_ms=NOW) == \
        [S.table(S.HANGING_HEADERS, [])[0]]


def test_find_hanging_without_candidates_asks_no_coordinator():
    b = FakeBackend(producers={("t", 0): [producer(1)]}, topics={"t": [0]})
    assert S.hanging_transactions(b, broker_id=0, topic=None, partition=None, max_timeout_ms=0, now_ms=NOW) == []
    assert b.asked == []
