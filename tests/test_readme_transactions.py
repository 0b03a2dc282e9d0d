"""The README's "Transactions" section runs as written, against a broker on a free port (the port
and the data dir substituted for ``127.0.0.1:9092`` and ``build/broker-data``): its Python blocks
(a transactional producer, the exactly-once consume-transform-produce loop) with their results
checked, then its command blocks line by line, through the broker and, with the broker stopped,
offline. The broker runs with ``transaction.partition.verification.enable=false`` so that the
hanging transactions the commands find and abort (at the offsets the README names) can be made;
the Python blocks behave the same with verification on."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from broker_support import COMMAND, Broker
from txn_tools_support import (init_producer, produce_hanging, produce_plain, read_committed, rows,
                               stable_and_end_offsets)

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MINUTE_MS = 60_000
HANGING_AT = 42            # the --start-offset the README's abort lines name


def section_blocks() -> list[tuple[str, str]]:
    """(language, code) of each block in the README's "### Transactions" section."""
    text = open(README, encoding="utf-8").read()
    start = text.index("### Transactions\n")
    end = text.index("\n## ", start)
    return BLOCK.findall(text[start:end])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    overrides = {"transaction.partition.verification.enable": "false"}
    with Broker(tmp_path_factory.mktemp("readme-txn") / "data", overrides) as b:
        yield b


def substituted(code: str, broker) -> str:
    return code.replace("127.0.0.1:9092", broker.bootstrap).replace("build/broker-data", broker.data_dir)


def run_python(code: str) -> None:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"{code}\n{r.stderr}"


def run_commands(block: str, broker) -> dict[str, str]:
    """Each line of a command block (``compactlog`` the CLI under test); each must succeed. The
    output of each line, by its subcommand words."""
    out = {}
    for line in substituted(block, broker).splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == "compactlog", line
        r = subprocess.run(COMMAND + words[1:], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{line}\n{r.stderr}"
        out[line] = r.stdout
    return out


def test_the_transactions_section_runs_as_written(broker):
    blocks = section_blocks()
    python = [code for lang, code in blocks if lang == "python"]
    commands = [code for lang, code in blocks if lang == ""]
    assert len(python) == 2 and len(commands) == 2

    run_python(substituted(python[0], broker))           # the transactional producer
    orders = [read_committed(broker.bootstrap, "orders", p) for p in (0, 1)]
    assert sorted(v for part in orders for v in part) == [b"3", b"5"]

    run_python(substituted(python[1], broker))           # consume-transform-produce, exactly once
    totals = [read_committed(broker.bootstrap, "totals", p) for p in (0, 1)]
    assert sorted(v for part in totals for v in part) == [b"3", b"5"]
    committed = _committed_offsets(broker.bootstrap, "totals-app", "orders")
    assert committed == {p: stable_and_end_offsets(broker.bootstrap, "orders", p)[1] for p in (0, 1)}

    # hanging transactions where the README's abort lines look for them: orders-0 and orders-1 at 42
    init_producer(broker.bootstrap, "lost-writer")
    for p in (0, 1):
        produce_plain(broker.bootstrap, "orders", p, HANGING_AT - stable_and_end_offsets(broker.bootstrap, "orders", p)[1])
        assert produce_hanging(broker.bootstrap, "lost-writer", "orders", p, age_ms=20 * MINUTE_MS) == HANGING_AT
        produce_plain(broker.bootstrap, "orders", p, 1)

    out = run_commands(commands[0], broker)               # through the broker, then offline beside it
    found = [v for k, v in out.items() if "find-hanging" in k]
    assert [(r[0], r[1], r[5]) for r in rows(found[0])[1:]] == [("orders", "0", "42"), ("orders", "1", "42")]
    assert [(r[0], r[1]) for r in rows(found[1])[1:]] == [("orders", "1")]       # after the abort of orders-0
    lso, end = stable_and_end_offsets(broker.bootstrap, "orders", 0)
    assert lso == end
    assert any('"transactionalId":"totals-app-1"' in v for k, v in out.items() if "dump-log" in k)

    broker.stop()                                          # the offline abort needs the data dir's lock
    try:
        run_commands(commands[1], broker)
        r = subprocess.run(COMMAND + ["--data-dir", broker.data_dir, "transactions", "find-hanging", "--broker-id",
                                      "0"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and rows(r.stdout)[1:] == []
    finally:
        broker.start()
    lso, end = stable_and_end_offsets(broker.bootstrap, "orders", 1)
    assert lso == end


def _committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=30)}
    finally:
        c.close()
