"""A Quix Streams stateful counting app in exactly-once mode, run by tests/test_txn_quix.py with the
apps' own virtualenv (.venv-apps): it counts the records of each key in a State store (RocksDB,
backed by the compacted changelog topic ``changelog__GROUP--INPUT--default``) and produces the
running count of the key to the output topic as ``{"key": K, "count": N}``.

    python quix_counter.py BOOTSTRAP GROUP INPUT OUTPUT STATE_DIR [--transactional-id T]
                           [--guarantee exactly-once|at-least-once]

Client settings a user would pick for quick failover: a 6 s session timeout (the broker's
minimum; librdkafka's default is 45 s, the time a SIGKILLed member keeps its partitions) and a 5 s
transaction timeout (librdkafka's default is 60 s: with Quix Streams' random transactional id per
start, the transaction a SIGKILLed instance left open is only aborted by the coordinator when it
times out, and until then it holds back the last stable offset of the output and the changelog,
as it would on Kafka).
"""

import argparse

from quixstreams import Application


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "input", "output", "state_dir"):
        ap.add_argument(name)
    ap.add_argument("--transactional-id", default=None)
    ap.add_argument("--loglevel", default="INFO")
    ap.add_argument("--guarantee", default="exactly-once", choices=("exactly-once", "at-least-once"))
    a = ap.parse_args()
    producer_config = {"transaction.timeout.ms": 5000}
    if a.transactional_id:
        producer_config["transactional.id"] = a.transactional_id
    app = Application(broker_address=a.bootstrap, consumer_group=a.group, auto_offset_reset="earliest",
                      processing_guarantee=a.guarantee, state_dir=a.state_dir, commit_interval=0.5,
                      producer_extra_config=producer_config,
                      consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
                      loglevel=a.loglevel)
    source = app.topic(a.input, key_deserializer="str", value_deserializer="json")
    sink = app.topic(a.output, key_serializer="str", value_serializer="json")

    def count(value, key, timestamp, headers, state):
        n = state.get("count", 0) + 1
        state.set("count", n)
        return {"key": key, "count": n}

    sdf = app.dataframe(source)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
