"""A Faust (faust-streaming) table app in exactly_once mode, run by tests/test_txn_faust.py with the
apps' own virtualenv (.venv-apps): an agent counts the records of each key of the input topic in
a Table (in memory, so a restarted worker rebuilds it from its compacted changelog topic
``APP_ID-counts-changelog``) and sends ``{"key": K, "count": N}`` to the output topic.

    python faust_counter.py BOOTSTRAP APP_ID INPUT OUTPUT DATA_DIR [--no-flush-before-commit]

The changelog gets small segments through the table's own topic config, so that the broker's
cleaner compacts it while the app runs; the producer's batches stay below them (Kafka refuses a
batch larger than the topic's segment.bytes). A 6 s session timeout (the broker's minimum) lets a
restarted worker take over a SIGKILLed one's partitions quickly.

Flush before commit: a table update hands its changelog record to Faust's send buffer, and
faust-streaming 0.15.3 flushes that buffer before committing the input offsets only in
at_least_once mode; with exactly_once the transaction that carries the offsets can be committed
while the changelog records of the same events still wait in the buffer, to be sent in the NEXT
transaction. A crash in between loses those counts (robinhood/faust#340, open; it happens on
Kafka too), and after the last input the final updates sit in a transaction that is never
committed. This app applies the at_least_once flush to the exactly_once commit as well (one
line, below), so that a graceful restart keeps the table exact; it does not make a SIGKILL safe
(the flushed records may then belong to events not acked yet, counted again after the restart).
``--no-flush-before-commit`` runs Faust as released.
"""

import argparse
import json
import sys

import faust
from faust.transport.consumer import TransactionManager


def flush_before_commit() -> None:
    commit = TransactionManager.commit

    async def flushed_commit(self, offsets, start_new_transaction=True):
        await self.app.producer.flush()         # as Consumer._commit_offsets does at_least_once
        return await commit(self, offsets, start_new_transaction=start_new_transaction)

    TransactionManager.commit = flushed_commit


def make_app(bootstrap: str, app_id: str, input_topic: str, output_topic: str, data_dir: str):
    app = faust.App(app_id, broker=f"kafka://{bootstrap}", processing_guarantee="exactly_once",
                    store="memory://", datadir=data_dir, topic_partitions=2,
                    broker_commit_every=100, broker_commit_interval=0.5,
                    broker_session_timeout=6.0, broker_heartbeat_interval=1.0,
                    producer_max_batch_size=2048, web_enabled=False)
    source = app.topic(input_topic, key_type=str, value_type=bytes, value_serializer="raw")
    sink = app.topic(output_topic, key_type=str, value_type=bytes, value_serializer="raw")
    counts = app.Table("counts", default=int, partitions=2,
                       extra_topic_configs={"segment.bytes": 8192, "min.cleanable.dirty.ratio": 0.3})

    @app.agent(source)
    async def count(stream):
        async for key, _value in stream.items():
            counts[key] += 1
            await sink.send(key=key, value=json.dumps({"key": key, "count": counts[key]}).encode())

    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "app_id", "input", "output", "data_dir"):
        ap.add_argument(name)
    ap.add_argument("--no-flush-before-commit", action="store_true")
    a = ap.parse_args()
    if not a.no_flush_before_commit:
        flush_before_commit()
    faust_app = make_app(a.bootstrap, a.app_id, a.input, a.output, a.data_dir)
    sys.argv = [sys.argv[0], "worker", "--loglevel", "info", "--without-web"]
    faust_app.main()
