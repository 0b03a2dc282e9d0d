"""A consume-transform-produce application for the exactly-once conformance test
(test_txn_conformance_eos.py): a read_committed consumer in a group, a transactional producer,
each poll's records written to the output topic (same key, value ``out:<value>``, same partition)
and the consumed offsets sent to the same transaction, then committed.

    python txn_eos_app.py CLIENT BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID

CLIENT is confluent, kafka-python or aiokafka; TXN_EOS_APP_IN_TXN_DELAY_S sets the pause between a
transaction's sends and its commit (0.05 s). The producer is initialised before the consumer
joins, so the previous instance's open transaction (same transactional id) is aborted before this
one reads the group's offsets. Prints ``ready``, then ``in-txn N`` once a transaction's records
are sent and ``commit N`` once it is committed (the test kills or stops the process between the
two); exits 3 when fenced (a zombie), 4 on another transaction error (the test restarts it)."""

from __future__ import annotations

import os
import sys
import time

BATCH = 10
# between the sends and the commit: the window the test's kills and stops aim at
IN_TXN_DELAY_S = float(os.environ.get("TXN_EOS_APP_IN_TXN_DELAY_S", "0.05"))
SESSION_MS = 600


def say(what: str) -> None:
    print(what, flush=True)


def run_confluent(bootstrap, src, dst, group, tid) -> int:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2,
                  "transaction.timeout.ms": 10000, "reconnect.backoff.max.ms": 200})
    p.init_transactions(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 100, "fetch.wait.max.ms": 50})
    c.subscribe([src])
    say("ready")
    n = 0
    try:
        while True:
            msgs = [m for m in c.consume(BATCH, 0.1) if m.error() is None]
            if not msgs:
                continue
            p.begin_transaction()
            ends = {}
            for m in msgs:
                p.produce(dst, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
                ends[m.partition()] = m.offset() + 1
            p.flush(30)
            say(f"in-txn {n}")
            time.sleep(IN_TXN_DELAY_S)
            p.send_offsets_to_transaction([TopicPartition(src, part, o) for part, o in ends.items()],
                                          c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            say(f"commit {n}")
            n += 1
    except KafkaException as e:
        err = e.args[0]
        say(f"error {err}")
        return 3 if err.fatal() else 4


def run_kafka_python(bootstrap, src, dst, group, tid) -> int:
    import kafka
    import kafka.errors as KE
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=2,
                            transaction_timeout_ms=10000, reconnect_backoff_max_ms=200)
    p.init_transactions()
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                            heartbeat_interval_ms=100, max_poll_records=BATCH, fetch_max_wait_ms=50)
    # the input's partitions known before the join (a kafka-python leader without them assigns
    # nothing until its next metadata refresh)
    while not c.partitions_for_topic(src):
        time.sleep(0.05)
    c.subscribe([src])
    # and in the consumer coordinator's snapshot of the subscription's metadata before the first
    # poll: a leader that assigned before it rejoins once more, and kafka-python 3.0.12 finishes
    # such a rejoin only inside the poll that started it; when the poll's timeout ends first (load)
    # the heartbeat stays disabled and the broker drops the member at its session timeout (the
    # same client bug and wait as test_txn_conformance_eos' kafka-python members)
    coordinator = getattr(c, "_coordinator", None)
    deadline = time.monotonic() + 30
    while (hasattr(coordinator, "_metadata_snapshot") and not coordinator._metadata_snapshot.get(src)
           and time.monotonic() < deadline):
        time.sleep(0.05)
    say("ready")
    n = 0
    try:
        while True:
            polled = c.poll(timeout_ms=100)
            if not polled:
                continue
            p.begin_transaction()
            ends = {}
            for tp, recs in polled.items():
                for r in recs:
                    p.send(dst, key=r.key, value=b"out:" + r.value, partition=tp.partition)
                ends[tp] = kafka.OffsetAndMetadata(recs[-1].offset + 1, "", -1)
            p.flush()
            say(f"in-txn {n}")
            time.sleep(IN_TXN_DELAY_S)
            p.send_offsets_to_transaction(ends, c.group_metadata())
            p.commit_transaction()
            say(f"commit {n}")
            n += 1
    except (KE.ProducerFencedError, KE.InvalidProducerEpochError) as e:
        say(f"error {e!r}")
        return 3
    except KE.KafkaError as e:
        say(f"error {e!r}")
        return 4


def run_aiokafka(bootstrap, src, dst, group, tid) -> int:
    """aiokafka's OffsetFetch cannot ask for stable offsets (no require_stable, KIP-447) and its
    TxnOffsetCommit (v0) carries no generation, so the broker cannot protect it from a rebalance
    inside a transaction: a member whose session lapses mid-transaction (a late heartbeat on a
    loaded machine) rejoins and reads the group's offsets while this transaction's are still
    pending, and would process its records a second time. As Kafka's own exactly-once consumers do
    (abort on revocation), the app ends the transaction before it lets a rebalance go on: the
    revocation waits for the transaction in flight, which aborts if it had not reached its commit."""
    import asyncio

    import aiokafka
    import aiokafka.errors as AE
    from aiokafka.abc import ConsumerRebalanceListener

    in_txn = asyncio.Lock()
    revoked = asyncio.Event()

    class AbortOnRevoke(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked_partitions):
            revoked.set()
            async with in_txn:          # the offsets are read again only after it ended
                pass

        async def on_partitions_assigned(self, assigned):
            pass

    async def main():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=2,
                                      transaction_timeout_ms=10000)
        await p.start()
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                      isolation_level="read_committed", enable_auto_commit=False,
                                      auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                                      heartbeat_interval_ms=100, fetch_max_wait_ms=50)
        c.subscribe([src], listener=AbortOnRevoke())
        await c.start()
        say("ready")
        n = 0
        try:
            while True:
                polled = await c.getmany(timeout_ms=100, max_records=BATCH)
                if not polled:
                    continue
                async with in_txn:
                    revoked.clear()
                    await p.begin_transaction()
                    ends = {}
                    futures = []
                    for tp, recs in polled.items():
                        for r in recs:
                            futures.append(await p.send(dst, key=r.key, value=b"out:" + r.value,
                                                        partition=tp.partition))
                        ends[tp] = recs[-1].offset + 1
                    for f in futures:
                        await f
                    say(f"in-txn {n}")
                    await asyncio.sleep(IN_TXN_DELAY_S)
                    if revoked.is_set():        # a rebalance began: these records go to whoever owns them
                        await p.abort_transaction()
                        say(f"abort {n}")
                        continue
                    await p.send_offsets_to_transaction(ends, group)
                    await p.commit_transaction()
                say(f"commit {n}")
                n += 1
        except AE.ProducerFenced as e:
            say(f"error {e!r}")
            return 3
        except AE.KafkaError as e:
            say(f"error {e!r}")
            return 4
    return asyncio.run(main())


if __name__ == "__main__":
    client, bootstrap, src, dst, group, tid = sys.argv[1:7]
    run = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[client]
    code = run(bootstrap, src, dst, group, tid)
    sys.stdout.flush()
    os._exit(code)          # no graceful close: a fenced instance just goes, as a crashed one would
