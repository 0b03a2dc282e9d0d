"""Several instances of one Quix Streams app in one consumer group on ``compactlog serve``: the
counter of tests/apps/quix_counter.py over a 4-partition input, its changelog (4 partitions, 2 KiB
segments) compacted by the broker's cleaner while the instances run.

One instance starts; a second joins mid-stream (a rebalance: partitions and their state move to
it, the changelog is replayed into its store); the first is SIGKILLed mid-stream (its partitions
stay with the dead member until its 6 s session expires, its open transaction until its 5 s
transaction timeout) and restarted on its old state dir (whose store is behind the changelog for
the partitions the second instance worked on meanwhile). Read with a read_committed consumer:

* exactly-once: every key's counts are 1, 2, ..., N once each, in order;
* at-least-once: every key's counts reach N with none skipped (a count may repeat after the kill).

Either way the changelog, read committed at the end, holds the input's counts, and the broker's
cleaner has cleaned it during the run.
"""

from __future__ import annotations

import os
import uuid

import pytest

from apps_support import (AppRun, apps_python, assert_at_least_once, assert_exactly_once, cleanings,
                          restart_broker_after_kill9,
                          wait_until)
from broker_support import Broker
from confluent_kafka.admin import AdminClient
from test_txn_quix import BROKER, CHANGELOG_CONFIG, decode_changelog

PARTITIONS = 4
TOTAL, KEYS, RATE = 9000, 40, 300.0


@pytest.fixture(scope="module")
def python():
    return apps_python("quixstreams")


@pytest.fixture(scope="module")
def broker(tmp_path_factory, python):
    with Broker(tmp_path_factory.mktemp("quixmulti") / "data", BROKER, extra_args=["--engine", "local"]) as b:
        yield b


def make_run(broker, python, tmp_path) -> AppRun:
    tag = uuid.uuid4().hex[:6]
    group, source = f"multi-{tag}", f"events-{tag}"
    return AppRun(broker, python, tmp_path, script="quix_counter.py", group=group, input=source,
                  output=f"counts-{tag}", changelog=f"changelog__{group}--{source}--default",
                  changelog_config=CHANGELOG_CONFIG, decode_changelog=decode_changelog,
                  total=TOTAL, keys=KEYS, rate=RATE, input_partitions=PARTITIONS)


def start(run: AppRun, name: str, guarantee: str, state: str | None = None):
    return run.start_app(run.group, run.input, run.output, os.path.join(run.tmp, f"state-{state or name}"),
                         "--guarantee", guarantee, log=f"app-{name}.log")


def output_at_least(run: AppRun, n: int, live, timeout: float, what: str) -> None:
    """Wait until the committed output holds ``n`` records, every app in ``live`` still running."""
    def enough():
        for app in live:
            assert app.alive(), f"{app.log_path} exited with {app.proc.returncode}:\n{app.log_tail()}"
        return len(run.out.poll_all(1.0)) >= n
    wait_until(enough, timeout, interval=0.1, what=what)


def group_members(run: AppRun) -> list[tuple[str, set[int]]]:
    """(member id, input partitions) of each member of the app's group, as the broker describes it."""
    admin = AdminClient({"bootstrap.servers": run.broker.bootstrap})
    desc = admin.describe_consumer_groups([run.group])[run.group].result(10)
    return [(m.member_id, {tp.partition for tp in m.assignment.topic_partitions if tp.topic == run.input})
            for m in desc.members]


def split_between(run: AppRun, n: int, other_than=frozenset()) -> bool:
    """The group has ``n`` members, not the set ``other_than``, sharing every input partition."""
    members = group_members(run)
    owned = sorted(p for _m, ps in members for p in ps)
    return (len(members) == n and {m for m, _ in members} != set(other_than)
            and all(ps for _m, ps in members) and owned == list(range(PARTITIONS)))


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_two_instances_join_kill9_and_restart(broker, python, tmp_path, guarantee):
    run = make_run(broker, python, tmp_path)
    try:
        a = start(run, "a", guarantee)
        run.feeder.start()
        output_at_least(run, 1000, [a], 60, "the first instance's first 1000 counts")
        b = start(run, "b", guarantee)
        # the second instance takes half the input's partitions (their state from the changelog)
        wait_until(lambda: split_between(run, 2), 60, interval=0.5, what="the input split between two instances")
        output_at_least(run, 3000, [a, b], 60, "3000 counts with two instances")
        members = {m for m, _ in group_members(run)}
        a.sigkill()
        # restarted on its old state dir, behind the changelog of the partitions b worked on
        a2 = start(run, "a2", guarantee, state="a")
        # the dead member's session expires, the group is the second and the restarted instance
        wait_until(lambda: split_between(run, 2, other_than=members), 60, interval=0.5,
                   what="the input split between the second and the restarted instance")
        assert run.feeder.is_alive(), "the input ended before the restarted instance took partitions"
        run.feeder.finish()
        run.committed_output(TOTAL, 120, f"all {TOTAL} counts")
        records = run.all_output(60)
        assert a2.alive() and b.alive(), a2.log_tail() + b.log_tail()
        if guarantee == "exactly-once":
            assert_exactly_once(records, run.expected())
        else:
            assert_at_least_once(records, run.expected())
        a2.stop()
        b.stop()
        assert run.changelog_state() == run.expected()
        wait_until(lambda: cleanings(broker, run.changelog), 60, what="a cleaning of the changelog by the broker")
    finally:
        run.close()


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_two_instances_through_a_broker_kill9(broker, python, tmp_path, guarantee):
    """Two instances sharing the input when the broker is killed -9 and restarted on its port:
    they reconnect (or die of it and are restarted on their state dirs, as an operator's
    supervisor would) and the output ends exact (or at least once) with the changelog."""
    run = make_run(broker, python, tmp_path)
    try:
        apps = {"a": start(run, "a", guarantee), "b": start(run, "b", guarantee)}
        run.feeder.start()
        wait_until(lambda: split_between(run, 2), 60, interval=0.5, what="the input split between two instances")
        output_at_least(run, 2500, list(apps.values()), 60, "2500 counts before the broker's kill -9")
        restart_broker_after_kill9(broker)
        restarts = 0

        def supervise():
            nonlocal restarts
            for name, app in list(apps.items()):
                if not app.alive():
                    assert restarts < 4, f"{name} keeps dying:\n{app.log_tail()}"
                    restarts += 1
                    apps[name] = start(run, f"{name}{restarts}", guarantee, state=name)
            return len(run.out.poll_all(1.0)) >= TOTAL
        run.feeder.finish()
        wait_until(supervise, 120, interval=0.1, what=f"all {TOTAL} counts after the broker's restart")
        records = run.all_output(60)
        if guarantee == "exactly-once":
            assert_exactly_once(records, run.expected())
        else:
            assert_at_least_once(records, run.expected())
        for app in apps.values():
            app.stop()
        assert run.changelog_state() == run.expected()
        print(f"app restarts after the broker's kill -9: {restarts}")
    finally:
        run.close()
