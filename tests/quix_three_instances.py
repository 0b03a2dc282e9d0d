"""Three Quix Streams instances of tests/apps/quix_counter.py in one group on ``compactlog serve``,
with the broker killed twice, run by hand (about 50 s a run, over the suite's budget):

    .venv/bin/python tests/quix_three_instances.py [--guarantee exactly-once|at-least-once]
                                                   [--runs N] [--down SECONDS]

A run: 12000 records over a 4-partition input at 300/s, 40 keys; instance a starts, b joins and
they split the input; c joins and 1.5 s later (mid-rebalance) the broker is killed -9 and restarted
on its port; once the three share the input, a is SIGKILLed and, unless ``--down 0``, the broker
is killed -9 again right after (down ``--down`` s, 0.2 by default: a's open transaction has to be
aborted by the reloaded transaction coordinator when it times out), and a is restarted on its old
state dir. A supervisor restarts any instance that exits. Printed: the output checked exactly once
(or at least once), the changelog's committed state against the input's counts, the broker's
cleanings of the changelog and the restarts.

Seen at load 2-6: 9 runs exactly-once (2 of them with this scenario in an earlier form) and 1
at-least-once, every one with the output and the changelog exact, 76-164 cleanings of the
changelog. In 6 of the 10 one or two live instances died and were restarted: each time, after a
broker restart, the instance's consumer logged librdkafka's client-side "Consumer group session
timed out (in join-state steady) after 6003 ms without a successful response from the group
coordinator (broker 0, last error was Success)" and Quix Streams stopped on the error that
followed (a transaction's message timed out, UNKNOWN_MEMBER_ID on TxnOffsetCommit, or
DbClosedError); the broker had removed the member exactly 6 s (its session) after it loaded the
group, no heartbeat of it having arrived since, as Kafka's coordinator does (GroupMetadataManager
gives every member of a loaded classic group a session timer). The client's side, from a run
with librdkafka's cgrp debug log (and a temporary heartbeat log line in the broker, not kept):
the broker was down 1.4 s and accepting connections again at :52.14; the consumer had its
coordinator's address at :52.63 and then sat in ``wait-broker-transport`` until :56.47, its
GroupCoordinator connection held back by librdkafka's reconnect backoff after the refusals of the
restart, so no heartbeat went out and its own 6 s session timer ran out at :55.67. Kafka would
see the same with these clients and a 6 s session (the app's choice for quick failover; Kafka's
default is 45 s). Plain confluent-kafka members through two quick broker restarts (6 s sessions,
250 ms or 1 s heartbeats, gaps 0.5-2 s) kept their membership every time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from apps_support import (APPS_VENV, assert_at_least_once, assert_exactly_once, cleanings,  # noqa: E402
                          restart_broker_after_kill9, wait_until)
from broker_support import Broker  # noqa: E402
from test_apps_multi_quix import make_run, split_between, start  # noqa: E402
from test_txn_quix import BROKER  # noqa: E402

TOTAL = 12000


def one_run(tmp: Path, guarantee: str, down: float) -> str:
    python = os.path.join(APPS_VENV, "bin", "python")
    broker = Broker(tmp / "data", BROKER, extra_args=["--engine", "local"]).start()
    run = make_run(broker, python, tmp)
    run.total = run.feeder.total = TOTAL
    apps, restarts = {}, []

    def supervise() -> None:
        for name, app in list(apps.items()):
            if not app.alive() and app.proc.returncode != -9:
                restarts.append(f"{name} (exit {app.proc.returncode})")
                apps[name] = start(run, f"{name}-{len(restarts)}", guarantee, state=name)

    def counted() -> int:
        supervise()
        return len(run.out.poll_all(1.0))
    try:
        apps["a"] = start(run, "a", guarantee)
        run.feeder.start()
        wait_until(lambda: counted() >= 1000, 60, what="1000 counts")
        apps["b"] = start(run, "b", guarantee)
        wait_until(lambda: split_between(run, 2), 60, interval=0.5, what="a and b sharing the input")
        apps["c"] = start(run, "c", guarantee)
        time.sleep(1.5)
        restart_broker_after_kill9(broker)
        wait_until(lambda: (supervise(), split_between(run, 3))[1], 90, interval=0.5, what="three sharing")
        apps["a"].sigkill()
        if down > 0:
            restart_broker_after_kill9(broker, down_for=down)
        apps["a"] = start(run, "a-again", guarantee, state="a")
        run.feeder.finish()
        wait_until(lambda: counted() >= TOTAL, 120, interval=0.5, what=f"all {TOTAL} counts")
        time.sleep(2)
        records = run.out.poll_all(10.0)
        check = assert_exactly_once if guarantee == "exactly-once" else assert_at_least_once
        try:
            check(records, run.expected())
            output = f"output {guarantee}"
        except AssertionError as e:
            output = f"OUTPUT WRONG {e}"
        for app in apps.values():
            app.stop()
        state = run.changelog_state()
        expected = run.expected()
        table = "changelog exact" if state == expected else \
            "CHANGELOG WRONG " + str({k: (state.get(k), v) for k, v in expected.items() if state.get(k) != v})
        return (f"{output}; {table}; {len(cleanings(broker, run.changelog))} cleanings; "
                f"restarts {restarts or 'none'}; in {tmp}")
    finally:
        run.close()
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--guarantee", default="exactly-once", choices=("exactly-once", "at-least-once"))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--down", type=float, default=0.2)
    a = ap.parse_args()
    for i in range(a.runs):
        tmp = Path(tempfile.mkdtemp(prefix="quix-three-"))
        t = time.monotonic()
        print(f"run {i}: {one_run(tmp, a.guarantee, a.down)} ({time.monotonic() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
