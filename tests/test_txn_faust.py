"""A real Faust (faust-streaming) table app in ``processing_guarantee='exactly_once'`` on
``compactlog serve`` (issue 16 item 6): tests/apps/faust_counter.py counts the records of each
key in a Table (in memory, backed by its compacted changelog topic) and sends the running count
to an output topic. The table, read committed from its changelog, counts the first half of the
input exactly; the worker is stopped and restarted, rebuilds the table from the changelog
(compacted meanwhile by the broker's own cleaner: small segments from the table's topic config,
``log.cleaner.backoff.ms`` 200), its counts resume from the values the changelog held, and the
table ends exactly at the input's counts.

What Faust's exactly_once covers, and what it does not (the framework's doing, Kafka would show
the same; the broker's side checked against transactions.md):
* Its transactions hold the table's changelog records and the input offsets (one transactional
  producer per input partition, ids ``APP_ID-<group>-<partition>``): a restarted worker's
  InitProducerId fences the old one and aborts whatever transaction it left open (§2.2).
* The changelog records and the input offsets of one transaction do not cover the same events.
  As released, the offsets run ahead: the changelog records of events already counted as
  consumed wait in Faust's send buffer and go into the NEXT transaction (robinhood/faust#340:
  a crash loses counts; after the last input those updates sit in a transaction nobody commits,
  so the table never shows them). The app flushes the buffer before each commit as Faust does
  at_least_once; then the changelog runs ahead instead, by the events processed but not yet
  acked, and a SIGKILL counts those twice (seen here: +1 on the keys the killed worker had in
  flight; the coordinator's ABORT of its transaction and the offsets it committed checked in the
  dumped logs). Neither is the broker's: so Faust is restarted with SIGTERM here, and SIGKILL
  through exactly-once is the Quix Streams test's (test_txn_quix.py).
* A ``topic.send()`` to a topic the worker does not consume goes through a transaction producer
  only when the worker's consumer happens to hold that topic's metadata, else through the plain
  idempotent producer, outside any transaction (faust-streaming issue #177, open): the output is
  checked at least once with nothing skipped, the table exactly once.
* A restarted worker's changelog recovery waits two 5 s idle polls before it takes the
  changelog's end for reached ("Aborted tx until highwater": under transactions the last offset is
  a marker, never a record), so a restart costs about 10 s.
* A restarted worker takes input only once it is ready (its Recovery logged "Worker ready"):
  faust-streaming 0.15.3 with aiokafka loses and double-counts records it is handed before that.
  ``Recovery.on_recovery_completed`` resumes the input partitions and only then awaits
  ``perform_seek`` (an OffsetFetch and a seek, in the consumer's thread). aiokafka has already
  fetched the input from the committed offsets, so the agent counts records during that round
  trip; the seek then puts aiokafka back at the committed offset and Faust's bookkeeping
  (``_read_offset``, ``_committed_offset``) back under the records in flight. Seen with traces of
  every event, fetch and commit (b3, b7, b8, b12, b13 of tests/apps/NOTES-faust-eos.md, 8 of 25
  runs at load 9-25): 1 to 6 records handed over around the seek are never counted; their offsets
  are committed over anyway when a single one is missing (``Consumer._new_offset`` lets a
  one-offset hole at the head through) or the partition's commits stop for good when more are
  (its transaction stays open, the changelog's last stable offset with it); and the range
  aiokafka fetches again after the seek reaches the drain loop once the batch in hand is done,
  where ``offset >= _read_offset`` (the last offset handed over, not the next) lets exactly the
  partition's last record through a second time: "k7 ends at 135, want 134" (k7 is the last
  record of input partition 0, k9 of partition 1). Every offset the broker committed is one
  Faust sent in a transaction that the broker committed with its markers; the broker's side of
  the same loop is test_txn_conformance_eos.py's, with three clients. A first start has no
  committed offsets to seek to, and was never seen to lose or repeat a record. A rebalance in the
  middle of a run would open the same window again (none was seen here).
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from apps_support import (AppRun, CommittedReader, Feeder, apps_python, assert_at_least_once, cleanings,
                          counts_by_key, expected_counts, wait_until)
from broker_support import Broker

BROKER = {"log.cleaner.backoff.ms": "200", "group.initial.rebalance.delay.ms": "0",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
TOTAL, KEYS, RATE = 4000, 30, 500.0
HALF = TOTAL // 2       # fed before the restart, the rest after it


@pytest.fixture(scope="module")
def python():
    return apps_python("faust")


@pytest.fixture(scope="module")
def broker(tmp_path_factory, python):
    with Broker(tmp_path_factory.mktemp("faust") / "data", BROKER, extra_args=["--engine", "local"]) as b:
        yield b


def decode_changelog(key: bytes, value: bytes | None):
    """Faust's table changelog record: the table's key and value, json."""
    return json.loads(key), None if value is None else json.loads(value)


def worker_ready(app, log_at: int) -> bool:
    """Faust's Recovery logged "Worker ready" past ``log_at`` of the app's log (it is logged after
    the input partitions are sought to the committed offsets); an app that exited fails."""
    assert app.alive(), app.log_tail()
    with open(app.log_path, "rb") as f:
        f.seek(log_at)
        return b"]: Worker ready" in f.read()


@pytest.fixture
def run(broker, python, tmp_path):
    app_id = f"counter-{uuid.uuid4().hex[:6]}"
    r = AppRun(broker, python, tmp_path, script="faust_counter.py", group=app_id,
               input=f"{app_id}-events", output=f"{app_id}-counts", output_partitions=2,
               changelog=f"{app_id}-counts-changelog", decode_changelog=decode_changelog,
               total=TOTAL, keys=KEYS, rate=RATE)
    yield r
    r.close()


def test_table_counts_right_and_resume_after_restart(run, broker):
    def start():
        return run.start_app(run.group, run.input, run.output, os.path.join(run.tmp, "faust-data"))

    def table_reaches(expected, what):
        wait_until(lambda: run.changelog_state() == expected, 60, interval=0.5, what=what)

    # everything the app sends, aborted transactions included: where the first worker stopped
    sent = CommittedReader(broker.bootstrap, run.output, 2, isolation="read_uncommitted")
    try:
        first = start()
        run.feeder = Feeder(broker.bootstrap, run.input, HALF, KEYS, RATE)
        run.feeder.start()
        run.feeder.finish()
        before = expected_counts(HALF, KEYS)
        table_reaches(before, "the table's committed changelog to count the first half")
        first.stop()
        assert first.proc.returncode == 0, first.log_tail()
        sent_before = len(sent.poll_all(20.0))
        # the changelog the new worker restores from has been compacted by the broker's cleaner
        wait_until(lambda: cleanings(broker, run.changelog), 60, what="a cleaning of the changelog by the broker")
        log_at = os.path.getsize(run.apps[-1].log_path)
        second = start()
        # no input before the restarted worker sought it to the committed offsets (docstring)
        wait_until(lambda: worker_ready(second, log_at), 120, interval=0.2,
                   what="the restarted worker to be ready (its input sought to the committed offsets)")
        run.feeder = Feeder(broker.bootstrap, run.input, TOTAL, KEYS, RATE, first=HALF)
        run.feeder.start()
        run.feeder.finish()
        expected = run.expected()
        table_reaches(expected, "the table's committed changelog to reach the input's counts")
        assert_at_least_once(run.all_output(), expected)
        assert second.alive(), second.log_tail()
        # the table rebuilt from the changelog went on from the values it held before the restart
        resumed = counts_by_key(sent.poll_all(20.0)[sent_before:])
        assert {k: v[0] - 1 for k, v in resumed.items()} == before
    finally:
        sent.close()
