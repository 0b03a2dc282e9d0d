"""A real Quix Streams application in ``processing_guarantee="exactly-once"`` on ``compactlog serve``
(issue 16 item 6): a stateful counter (tests/apps/quix_counter.py: a State store backed by a
compacted changelog topic, the running count per key produced to an output topic), fed a known
input at a steady rate. Read with a read_committed consumer, the output must hold, for every key,
the counts 1, 2, ..., N exactly once:

* through a SIGKILL of the app mid-stream, restarted with an EMPTY state dir, so that its state
  comes only from the changelog (the counts continue from the values the changelog held);
* through a kill -9 of the broker mid-stream (the app restarted if it died).

While the app runs, the broker's own cleaner compacts the changelog (4 KiB segments on it, set
when the topic is created, and ``log.cleaner.backoff.ms`` 200): each test checks the broker logged
cleanings of it, and that the changelog, read committed after the run, holds the final counts.

Quix Streams gives each start a random transactional id, so a SIGKILLed instance's open
transaction is aborted by the coordinator only when it times out (the app sets
``transaction.timeout.ms`` 5000; librdkafka's default is 60 s): until then the last stable offsets
of the output and the changelog stay behind it and the new instance's changelog recovery waits.
Kafka behaves the same (transactions.md §3.1); it is the framework's choice, not the broker's.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from apps_support import (App, AppRun, apps_python, assert_exactly_once, cleanings, counts_by_key,
                          restart_broker_after_kill9, wait_until)
from broker_support import Broker

BROKER = {"log.cleaner.backoff.ms": "200", "group.initial.rebalance.delay.ms": "0",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
# a checkpoint writes at most one changelog record per key of the partition (about 1.4 KB for 15
# keys): 2 KiB segments roll every checkpoint or two, and a batch never exceeds one (Kafka refuses a
# batch larger than segment.bytes with RECORD_LIST_TOO_LARGE, and so does compactlog)
CHANGELOG_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.3"}
TOTAL, KEYS, RATE = 4000, 30, 500.0
KILL_AT = 1500          # committed counts before the kill


@pytest.fixture(scope="module")
def python():
    return apps_python("quixstreams")


@pytest.fixture(scope="module")
def broker(tmp_path_factory, python):
    with Broker(tmp_path_factory.mktemp("quix") / "data", BROKER, extra_args=["--engine", "local"]) as b:
        yield b


def decode_changelog(key: bytes, value: bytes | None):
    """Quix Streams' changelog record: key ``<message key json>|<state key json>``, value json."""
    name, column = key.split(b"|", 1)
    assert column == b'"count"', key
    return json.loads(name), None if value is None else json.loads(value)


@pytest.fixture
def run(broker, python, tmp_path):
    tag = uuid.uuid4().hex[:6]
    group, source = f"counter-{tag}", f"events-{tag}"
    # Quix Streams names the store's changelog so; made here to give it small segments (the app
    # takes an existing topic after checking its partition count)
    r = AppRun(broker, python, tmp_path, script="quix_counter.py", group=group, input=source,
               output=f"counts-{tag}", changelog=f"changelog__{group}--{source}--default",
               changelog_config=CHANGELOG_CONFIG, decode_changelog=decode_changelog,
               total=TOTAL, keys=KEYS, rate=RATE)
    yield r
    r.close()


def rolled(broker, topic: str) -> bool:
    """A partition of ``topic`` has a segment besides its active one (something the cleaner may clean)."""
    for name in os.listdir(broker.data_dir):
        if name.rsplit("-", 1)[0] == topic:
            if sum(f.endswith(".log") for f in os.listdir(os.path.join(broker.data_dir, name))) > 1:
                return True
    return False


def start_app(run: AppRun, state_dir: str) -> App:
    return run.start_app(run.group, run.input, run.output, os.path.join(run.tmp, state_dir))


def test_exactly_once_through_sigkill_of_the_app(run, broker):
    first = start_app(run, "state-1")
    run.feeder.start()
    run.committed_output(KILL_AT, 60, f"{KILL_AT} committed counts before the kill")
    first.sigkill()
    # the state the transactions committed: the changelog and the output agree on it
    before, out_before = run.agreed_state()
    assert before
    # the changelog the new instance restores from has been compacted by the broker's cleaner, once
    # it has a segment to clean: on a loaded machine the app may have made a single checkpoint before
    # the kill (15 records a partition, all in the active segment, which no cleaner touches); the
    # end of the test asserts a cleaning either way
    if rolled(broker, run.changelog):
        wait_until(lambda: cleanings(broker, run.changelog), 60, what="a cleaning of the changelog by the broker")
    # a new instance with an empty state dir: its state can only come from the changelog
    second = start_app(run, "state-2")
    run.feeder.finish()
    records = run.all_output()
    assert second.alive(), second.log_tail()
    assert "Recovery process complete" in second.log_tail(100000)
    expected = run.expected()
    assert_exactly_once(records, expected)
    # the restored state went on from the values the changelog held at the kill
    after = counts_by_key(records[len(out_before):])
    assert {k: v[0] - 1 for k, v in after.items()} == {k: before.get(k, 0) for k in after}
    second.stop()
    assert run.changelog_state() == expected
    wait_until(lambda: cleanings(broker, run.changelog), 60, what="a cleaning of the changelog by the broker")


def test_exactly_once_through_kill9_of_the_broker(run, broker):
    start_app(run, "state-1")
    run.feeder.start()
    run.committed_output(KILL_AT, 60, f"{KILL_AT} committed counts before the broker's kill -9")
    # the app rides out the broker's absence or dies of it (librdkafka times out the transaction's
    # records once the broker is away longer than transaction.timeout.ms, which Quix Streams
    # treats as fatal, as it would with Kafka): a dead one is restarted on its state dir
    run.restarts_left = 2
    restart_broker_after_kill9(broker)
    run.feeder.finish()
    records = run.all_output()
    assert_exactly_once(records, run.expected())
    run.check_app()
    run.apps[-1].stop()
    assert run.changelog_state() == run.expected()
    wait_until(lambda: cleanings(broker, run.changelog), 60, what="a cleaning of the changelog by the broker")
    print(f"app restarts after the broker's kill -9: {run.restarted}")
