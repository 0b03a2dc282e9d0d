"""Where ``transactions`` asks (and, for ``abort``, writes): ``BrokerBackend`` through a broker
with a real client library (kafka-python's ``KafkaAdminClient``: ListTransactions,
DescribeTransactions, DescribeProducers and WriteTxnMarkers, the requests Kafka's tool sends;
confluent-kafka's binding has none of them), ``DataDirBackend`` on a data dir without one through
the Python API's ``Transactions`` (``__transaction_state`` loaded as the coordinator loads it, the
partitions' producer state, the ABORT marker appended by the broker's marker function). Both
answer with ``service``'s plain data and raise ``RequestError`` with Kafka's error name.
"""

from __future__ import annotations

from ...errors import CompactlogError
from .service import Description, Listing, Producer, RequestError, TransactionalIdNotFound

TIMEOUT_MS = 30_000


# -- through a broker -------------------------------------------------------------------------------

class BrokerBackend:
    def __init__(self, bootstrap: str):
        # imported here: loading the client would slow every other command of the CLI
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError
        self.bootstrap = bootstrap
        try:
            self.client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS,
                                           client_id="compactlog-transactions")
        except KafkaError as e:
            raise CompactlogError(f"{bootstrap}: cannot connect: {e}") from None
        except ValueError as e:             # a malformed HOST:PORT
            raise CompactlogError(f"--bootstrap-server {bootstrap!r}: {e}") from None

    def _call(self, fn, *args, **kwargs):
        """``fn``'s answer; a Kafka error answer becomes RequestError (its name and text)."""
        from kafka.errors import BrokerResponseError, KafkaError, TransactionalIdNotFoundError
        try:
            return fn(*args, **kwargs)
        except TransactionalIdNotFoundError as e:
            raise TransactionalIdNotFound(e.description) from None
        except BrokerResponseError as e:
            raise RequestError(e.message, e.description) from None
        except KafkaError as e:            # the client's own failure (no connection, unknown broker id)
            raise RequestError(type(e).__name__, ", ".join(str(a) for a in e.args)) from None

    def list_transactions(self, producer_ids=()) -> dict[int, list[Listing]]:
        found = self._call(self.client.list_transactions, producer_id_filters=list(producer_ids) or None)
        return {broker: [Listing(t.transactional_id, t.producer_id, _state(t.state)) for t in listings]
                for broker, listings in sorted(found.items())}

    def describe(self, transactional_id: str) -> Description:
        d = self._call(self.client.describe_transactions, [transactional_id])[transactional_id]
        return Description(d.coordinator_id, transactional_id, d.producer_id, d.producer_epoch, _state(d.state),
                           d.transaction_timeout_ms, d.transaction_start_time_ms,
                           tuple(sorted((tp.topic, tp.partition) for tp in d.topic_partitions)))

    def describe_producers(self, tps, broker_id: int | None) -> dict[tuple[str, int], list[Producer]]:
        from kafka import TopicPartition
        found = self._call(self.client.describe_producers, [TopicPartition(t, p) for t, p in tps],
                           broker_id=broker_id)
        return {(tp.topic, tp.partition): [Producer(p.producer_id, p.producer_epoch, p.last_sequence,
                                                    p.last_timestamp, p.coordinator_epoch,
                                                    p.current_transaction_start_offset)
                                           for p in state.active_producers]
                for tp, state in found.items()}

    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              coordinator_epoch: int) -> None:
        from kafka import TopicPartition
        from kafka.admin import AbortTransactionSpec
        self._call(self.client.abort_transaction,
                   AbortTransactionSpec(TopicPartition(topic, partition), producer_id, producer_epoch,
                                        coordinator_epoch))

    def topics(self) -> list[str]:
        """Every topic but the internal ones (Admin.listTopics' default)."""
        return sorted(t["name"] for t in self._call(self.client.describe_topics) if not t.get("is_internal"))

    def topic_partitions(self, topics: list[str], broker_id: int | None) -> list[tuple[str, int]]:
        """The partitions of ``topics`` (only those with a replica on ``broker_id`` when given)."""
        from kafka.errors import for_code
        out = []
        for t in self._call(self.client.describe_topics, list(topics)):
            if t["error_code"]:
                err = for_code(t["error_code"])
                raise RequestError(err.message, f"{t['name']}: {err.description}")
            out += [(t["name"], p["partition_index"]) for p in sorted(t["partitions"], key=lambda p: p["partition_index"])
                    if broker_id is None or broker_id in p["replica_nodes"]]
        return out

    def close(self) -> None:
        self.client.close()


def _state(state) -> str:
    # kafka-python's TransactionState is a str enum whose value is Kafka's name
    return getattr(state, "value", str(state))


# -- on a data dir, without a broker -------------------------------------------------------------------

class DataDirBackend:
    """The data dir's ``__transaction_state`` and producer state through the Python API; this
    node (the data dir's ``node.id``) is the coordinator and the leader of every partition."""

    def __init__(self, dd, node_id: int):
        # imported here, as every heavy module of the CLI
        from ...api import Transactions
        self.dd = dd
        self.node_id = node_id
        self.txns = Transactions(dd)

    def _refused(self, code, subject: str | None = None) -> RequestError:
        """The error as a broker's answer reads (kafka-python's names and texts for Kafka's codes),
        with the loader's reason for a ``__transaction_state`` partition it could not read."""
        from kafka.errors import for_code
        from kio.schema.errors import ErrorCode
        err = for_code(int(code))
        detail = f"{subject}: {err.description}" if subject else err.description
        if code == ErrorCode.coordinator_not_available and self.txns.unreadable:
            detail += " (" + "; ".join(self.txns.unreadable.values()) + ")"
        if code == ErrorCode.transactional_id_not_found:
            return TransactionalIdNotFound(detail)
        return RequestError(err.message, detail)

    def list_transactions(self, producer_ids=()) -> dict[int, list[Listing]]:
        code, _, found = self.txns.list_transactions(producer_ids=producer_ids)
        if code:
            raise self._refused(code)
        return {self.node_id: [Listing(t.transactional_id, t.producer_id, t.state) for t in found]}

    def describe(self, transactional_id: str) -> Description:
        code, d = self.txns.describe(transactional_id)
        if code:
            raise self._refused(code)
        return Description(self.node_id, transactional_id, d.producer_id, d.producer_epoch, d.state,
                           d.transaction_timeout_ms, d.transaction_start_time_ms, d.partitions)

    def describe_producers(self, tps, broker_id: int | None) -> dict[tuple[str, int], list[Producer]]:
        if broker_id is not None and broker_id != self.node_id:
            # what the client answers for a broker id the cluster does not have
            raise RequestError("UnknownBrokerIdError", f"{broker_id} (this data dir is node {self.node_id}'s)")
        out = {}
        for t, p in tps:
            code, _, producers = self.txns.describe_producers(t, p)
            if code:
                raise self._refused(code)
            out[(t, p)] = [Producer(*pr) for pr in producers]
        return out

    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              coordinator_epoch: int) -> None:
        code = self.txns.abort(topic, partition, producer_id, producer_epoch, coordinator_epoch)
        if code:
            raise self._refused(code)

    def topics(self) -> list[str]:
        from ...coordinator import INTERNAL_TOPICS
        return sorted(t for t in self.dd.topics() if t not in INTERNAL_TOPICS)

    def topic_partitions(self, topics: list[str], broker_id: int | None) -> list[tuple[str, int]]:
        out = []
        for t in topics:
            if not self.dd.has_topic(t):
                raise self._refused(3, t)       # UNKNOWN_TOPIC_OR_PARTITION, as Metadata answers it
            if broker_id is None or broker_id == self.node_id:
                out += [(t, p) for p in self.dd.partitions(t)]
        return out

    def close(self) -> None:
        self.txns.close()
