"""Talking to a broker (``--bootstrap-server``) with a real Kafka client library, as Kafka's own
tools do: confluent-kafka's AdminClient (librdkafka), and kafka-python for the one request
librdkafka's Python binding does not expose (DescribeLogDirs). Client errors become one line."""

from __future__ import annotations

import logging

from ..errors import CompactlogError

TIMEOUT_S = 30


class BrokerError(CompactlogError):
    """A request to the broker failed (Kafka's error name and message)."""


class ClientLog(logging.Handler):
    """librdkafka's log and error callbacks for a client of this command: nothing printed (its
    retries would flood stderr), the last connection problem kept for the error message."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self.logger = logging.getLogger(f"compactlog.client.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.handlers[:] = [self]

    def config(self) -> dict:
        """The client settings that route its log and errors here."""
        return {"logger": self.logger, "error_cb": self._on_error}

    def emit(self, record) -> None:
        # "[thrd:...]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused ..."
        self.last = record.getMessage().split("]: ", 1)[-1]

    def _on_error(self, err) -> None:
        self.last = f"{err.name()}: {err.str()}"

    def why(self) -> str:
        return f" (last connection problem: {self.last})" if self.last else ""


def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": TIMEOUT_S * 1000,
                        **ClientLog().config()})


def result(future, what: str):
    """A future's result, a Kafka error turned into one BrokerError line."""
    from confluent_kafka import KafkaException
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        name = err.name() if hasattr(err, "name") else type(err).__name__
        text = err.str() if hasattr(err, "str") else str(err)
        raise BrokerError(f"{what}: {name}: {text}") from None
    except TimeoutError:
        raise BrokerError(f"{what}: no answer within {TIMEOUT_S} s") from None


def topic_partitions(admin, bootstrap: str, topic: str | None) -> dict[str, list[int]]:
    """topic -> partitions, from the broker's metadata."""
    from confluent_kafka import KafkaException
    try:
        md = admin.list_topics(topic=topic, timeout=TIMEOUT_S)
    except KafkaException as e:
        raise BrokerError(f"{bootstrap}: cannot read metadata: {e.args[0].str() if e.args else e}") from None
    out = {}
    for name, t in md.topics.items():
        if t.error is not None:
            if topic is not None:
                raise BrokerError(f"topic {name!r}: {t.error.name()}: {t.error.str()}")
            continue
        out[name] = sorted(t.partitions)
    return out


def describe_log_dirs(bootstrap: str, topics: list[str] | None) -> list:
    """DescribeLogDirs through kafka-python's admin client: [(log dir, error, [(topic, partition,
    size, offset lag, is future)])]."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError
    try:
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: cannot connect: {e}") from None
    try:
        response = client.describe_log_dirs()
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: DescribeLogDirs: {e}") from None
    finally:
        client.close()
    # kafka-python 3: [{"broker": id, "log_dirs": [{"error_code", "log_dir", "topics": [{"name",
    # "partitions": [{"partition_index", "partition_size", "offset_lag", "is_future_key"}]}]}]}]
    out = []
    for broker in response if isinstance(response, list) else [response]:
        for r in _get(broker, "log_dirs", 1) or ():
            parts = []
            for t in _get(r, "topics", 2) or ():
                name = _get(t, "name", 0)
                for p in _get(t, "partitions", 1) or ():
                    parts.append((name, _get(p, "partition_index", 0), _get(p, "partition_size", 1),
                                  _get(p, "offset_lag", 2), bool(_get(p, "is_future_key", 3))))
            if topics is not None:
                parts = [x for x in parts if x[0] in topics]
            out.append((_get(r, "log_dir", 1), _get(r, "error_code", 0), parts))
    return out


def _get(obj, name: str, index: int):
    """A field of kafka-python's response structs, which are objects, dicts or tuples by version."""
    if isinstance(obj, dict):
        return obj.get(name)
    if hasattr(obj, name):
        return getattr(obj, name)
    return obj[index]
