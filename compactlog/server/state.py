"""What every request handler of the broker shares: the data dir it owns and who it is.

Kafka's handlers reach the ReplicaManager, LogManager, metadata cache and configs through
``KafkaApis``; here one ``BrokerState`` carries the equivalents. The data dir is opened for
writing for the broker's whole life (it holds the data-dir lock), so the handlers are the only
writers; every change to a partition goes through ``Log`` methods, which hold the partition's
lock (storage serialisation rules: ``storage/log.py``).

Handlers are plain functions ``handle_<api>(state, request) -> response body`` (kio objects), with
no I/O of their own beyond storage calls, so tests can call them without sockets. They run in the
broker's worker threads; everything here is safe to call from several threads at once.

Also here: ``meta.properties`` (KRaft's cluster and node identity, ``MetaProperties``), the
producer id allocator (Kafka's ``ProducerIdManager``: blocks of ids, the block's end persisted
before an id of it is handed out) and the append notifier that wakes long-polling fetches
(Kafka's ``DelayedFetch`` purgatory, checked on every append).
"""

from __future__ import annotations

import base64
import contextvars
import json
import logging
import os
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Iterable

from ..coordinator.internal_topics import INTERNAL_TOPICS  # noqa: F401 - Kafka's Topic.INTERNAL_TOPICS
from ..errors import ConfigError, StorageError, TopicError
from ..storage.checkpoint import decode_topic_id
from ..storage.config import LogConfig
from ..storage.datadir import INTERNAL_TOPIC_CONFIGS, DataDir
from ..storage import meta_properties
from ..storage.fsutil import atomic_write, read_text
from ..storage.meta_properties import META_PROPERTIES
from ..storage.log import Log
from .security.listeners import DEFAULT_PROTOCOL_MAP, parse_protocol_map

PRODUCER_ID_FILE = "compactlog.producer-ids.json"
PRODUCER_ID_BLOCK = 1000          # Kafka's controller hands out blocks of 1000 ids
ADMIN_CLIENT_ID = "__admin_client"

# the client's address as Kafka prints it (``InetAddress.toString()``: "/127.0.0.1"), set by the
# transport for each connection's task; group members record it (JoinGroup, DescribeGroups)
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9a-fA-F:.]*\]|[^:/\[\]]*):(-?[0-9]+)$")


@dataclass
class Listener:
    """One ``listeners`` / ``advertised.listeners`` entry: ``NAME://host:port``, with the security
    protocol ``listener.security.protocol.map`` gives the name."""
    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listeners(value: str, setting: str, protocol_map: dict[str, str] | None = None) -> list[Listener]:
    """Kafka's ``listeners`` syntax. Each name must be in ``protocol_map``
    (``listener.security.protocol.map``; Kafka's default names each protocol after itself)."""
    protocols = protocol_map if protocol_map is not None else parse_protocol_map(DEFAULT_PROTOCOL_MAP)
    out = []
    for item in (x.strip() for x in value.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if not m:
            raise ConfigError(f"invalid value {value!r} for configuration {setting}: {item!r} is not "
                              f"of the form NAME://host:port (PLAINTEXT://127.0.0.1:9092)")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if name not in protocols:
            raise ConfigError(f"invalid value {value!r} for configuration {setting}: no security protocol "
                              f"defined for listener {name} in listener.security.protocol.map "
                              f"({', '.join(f'{k}:{v}' for k, v in protocols.items())})")
        if not 0 <= port <= 65535:
            raise ConfigError(f"invalid value {value!r} for configuration {setting}: port {port} is "
                              f"outside 0-65535")
        if any(o.name == name for o in out):
            raise ConfigError(f"invalid value {value!r} for configuration {setting}: listener name "
                              f"{name} is listed twice")
        out.append(Listener(name, host, port, protocols[name]))
    if not out:
        raise ConfigError(f"invalid value {value!r} for configuration {setting}: no listener")
    return out


# -- meta.properties ----------------------------------------------------------------------------

def new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: URL-safe base64 of 16 random bytes, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def load_identity(data_dir: str, node_id: int | None) -> tuple[int, str]:
    """(node id, cluster id) from ``meta.properties``, written on first start (KRaft's format).

    ``node_id`` None: the stored one (else 0). A stored id that differs from an explicit
    ``node.id`` is refused, as Kafka refuses to start ("Stored node id ... doesn't match").
    """
    path = os.path.join(data_dir, META_PROPERTIES)
    props = meta_properties.read(data_dir)
    stored_id = meta_properties.stored_node_id(data_dir, props)
    stored = None if stored_id is None else str(stored_id)
    if stored_id is not None:
        if node_id is not None and node_id != stored_id:
            raise ConfigError(f"{path}: stored node.id {stored_id} does not match node.id={node_id}; "
                              f"this data dir belongs to node {stored_id}")
        node_id = stored_id
    node_id = 0 if node_id is None else node_id
    cluster_id = props.get("cluster.id")
    if not cluster_id or stored is None:
        cluster_id = cluster_id or new_cluster_id()
        text = ("#\n#Written by compactlog serve\n"
                f"cluster.id={cluster_id}\nnode.id={node_id}\nversion=1\n")
        atomic_write(path, text.encode("utf-8"))
    return node_id, cluster_id


# -- producer ids -------------------------------------------------------------------------------

class ProducerIdManager:
    """New producer ids that are never handed out twice, across restarts too.

    The end of the current block is written to ``compactlog.producer-ids.json`` before any id of
    the block is used (Kafka's controller persists its ``ProducerIdsRecord`` first). The first
    block starts above every producer id found in the logs, so a Kafka data dir copied here never
    sees one of its producers' ids again.
    """

    def __init__(self, data_dir: str, highest_in_logs: int = -1):
        self.path = os.path.join(data_dir, PRODUCER_ID_FILE)
        self._lock = threading.Lock()
        stored = 0
        if os.path.exists(self.path):
            try:
                doc = json.loads(read_text(self.path))
                stored = int(doc["next_block_start"])
            except (ValueError, KeyError, TypeError) as e:
                raise StorageError(f"{self.path}: not a producer id block file ({e})") from None
        self._next = max(stored, highest_in_logs + 1)
        self._block_end = self._next           # nothing reserved yet
        if not os.path.exists(self.path):
            # the logs' highest id is known now: a later start trusts the file instead of
            # opening every log to find it again (the broker opens logs on first use)
            self._persist(self._next)

    def _persist(self, next_block_start: int) -> None:
        atomic_write(self.path, (json.dumps({"version": 1, "next_block_start": next_block_start}) + "\n")
                     .encode("utf-8"))

    def observe(self, producer_ids) -> None:
        """Ids found in a log opened after start: never handed out from now on."""
        highest = max(producer_ids, default=-1)
        if highest >= self._next:
            with self._lock:
                self._next = max(self._next, highest + 1)

    def allocate(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                end = self._next + PRODUCER_ID_BLOCK
                self._persist(end)
                self._block_end = end
            pid = self._next
            self._next += 1
            return pid


# -- waking long polls --------------------------------------------------------------------------

class AppendNotifier:
    """Wakes fetches waiting for data on partitions (Kafka's fetch purgatory, keyed by partition).

    Waiters live on the event loop; appends happen in worker threads, which hand the wake-up to
    the loop (``call_soon_threadsafe``) only when somebody waits on one of the partitions.
    """

    def __init__(self):
        self._loop = None
        self._waiters: dict[tuple[str, int], set] = {}

    def bind(self, loop) -> None:
        self._loop = loop

    def register(self, keys: Iterable[tuple[str, int]], event) -> None:
        for k in keys:
            self._waiters.setdefault(k, set()).add(event)

    def unregister(self, keys: Iterable[tuple[str, int]], event) -> None:
        for k in keys:
            s = self._waiters.get(k)
            if s is not None:
                s.discard(event)
                if not s:
                    del self._waiters[k]

    def notify(self, keys: Iterable[tuple[str, int]]) -> None:
        """From any thread: partitions ``keys`` got data (or changed)."""
        loop = self._loop
        if loop is None:
            return
        waiting = self._waiters
        hit = [k for k in keys if k in waiting]
        if hit:
            try:
                loop.call_soon_threadsafe(self._fire, hit)
            except RuntimeError:
                pass        # the loop is closed: the broker is stopping

    def _fire(self, keys) -> None:
        for k in keys:
            for event in tuple(self._waiters.get(k, ())):
                event.set()

    def wake_all(self) -> None:
        """On the loop: every waiter answers now (shutdown)."""
        for s in tuple(self._waiters.values()):
            for event in tuple(s):
                event.set()


@dataclass
class BrokerState:
    datadir: DataDir                     # opened writable: the broker holds the data-dir lock
    node_id: int                         # node.id
    cluster_id: str                      # stable per data dir (kept in meta.properties, as KRaft's)
    advertised: Listener                 # what Metadata and FindCoordinator tell clients (first listener)
    # topic-level changes (create, delete, partitions, configs) are serialised with this lock;
    # partition-level ones use each Log's own lock
    metadata_lock: threading.RLock = field(default_factory=threading.RLock)
    appends: AppendNotifier = field(default_factory=AppendNotifier)
    producer_ids: ProducerIdManager | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("kafka.server.KafkaApis"))
    closing: threading.Event = field(default_factory=threading.Event)
    authorizer: object = None            # the StandardAuthorizer, or None: everything is allowed
    apis: object = None                  # the advertised SupportedApis (set at start)
    groups: object = None                # the GroupCoordinatorService (set at start)
    transactions: object = None          # the TransactionCoordinatorService (set at start)
    metrics: object = None               # the BrokerMetrics (server/metrics), None when not served
    security: object = None              # security.listeners.BrokerSecurity (set at start)
    remote: object = None                # storage.remote.manager.RemoteLogManager, None: tiered storage off
    # listener name -> its advertised endpoint: a client is told the endpoint of the listener its
    # request came on (security.md §1.1)
    advertised_listeners: dict = field(default_factory=dict)

    def advertised_for(self, request) -> Listener:
        """The endpoint to give the client of ``request`` (Kafka's
        ``getAliveBrokerNodes(request.context.listenerName)``)."""
        return self.advertised_listeners.get(getattr(request, "listener", None), self.advertised)

    @property
    def broker(self):
        """Broker settings (Kafka names): ``state.broker.get("message.max.bytes")``."""
        return self.datadir.broker

    # -- partitions ----------------------------------------------------------------------------
    def log(self, topic: str, partition: int) -> Log | None:
        """The open log of a partition, or None when the topic or partition does not exist.

        The hot path is one dict lookup. A log not open yet (after a clean shutdown the broker
        opens each on first use) is opened here, and its producer ids are never handed out. A
        deleted topic's logs leave ``datadir.logs`` (and are closed).
        """
        log = self.datadir.logs.get((topic, partition))
        if log is not None and not log.closed:
            return log
        with self.metadata_lock:
            if not self.datadir.has_topic(topic):
                return None
            try:
                if partition not in self.datadir.partitions(topic):
                    return None
                log = self.datadir.open_log(topic, partition, create=True)
            except TopicError:
                return None
        if self.producer_ids is not None and log.producer_state.producers:
            self.producer_ids.observe(log.producer_state.producers)
        return log

    def topics(self) -> list[str]:
        return self.datadir.topics()

    def partitions(self, topic: str) -> list[int]:
        return self.datadir.partitions(topic)

    def has_topic(self, topic: str) -> bool:
        return self.datadir.has_topic(topic)

    def topic_id(self, topic: str, known: dict | None = None) -> uuid.UUID:
        """The topic's id (``compactlog.topics.json``, else ``partition.metadata``). A topic that
        has none yet (a Kafka dir from before topic ids) gets one, written to its partitions'
        ``partition.metadata``, so that it stays the same across restarts. ``known``: the ids of
        ``topic_ids()``, to read the topics file once for many topics."""
        text = (known or {}).get(topic) or self.datadir.topic_id(topic)
        if not text:
            with self.metadata_lock:
                text = self.datadir.ensure_topic_id(topic)
        return uuid.UUID(bytes=decode_topic_id(text))

    def topic_ids(self) -> dict[str, str]:
        """topic -> id text, for the topics whose id is in the topics file (one read)."""
        return self.datadir.topic_ids()

    def create_topic(self, topic: str, partitions: int | None = None,
                     configs: dict[str, str] | None = None, *,
                     replication_factor: int | None = None) -> list[Log]:
        """Create a topic and open its logs (auto-creation and CreateTopics).

        ``partitions``/``replication_factor`` None: ``num.partitions`` / ``default.replication.factor``.
        One node holds one replica: a replication factor other than 1 is refused
        (Kafka's INVALID_REPLICATION_FACTOR), and so is ``min.insync.replicas`` above it.
        """
        rf = self.broker.get("default.replication.factor") if replication_factor is None \
            else replication_factor
        if rf != 1:
            raise ReplicationFactorError(
                f"topic {topic!r}: replication factor {rf} is larger than the 1 available broker "
                f"(compactlog serve is a single node)")
        try:
            # the effective value (the broker default too), before anything is written
            isr = LogConfig({**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **(configs or {})},
                            self.broker).get("min.insync.replicas")
        except ConfigError:
            isr = 1         # bad configs: datadir.create_topic refuses them, after its own checks
        if isr > 1:
            raise ConfigError(f"topic {topic!r}: min.insync.replicas={isr} cannot be met by one broker")
        with self.metadata_lock:
            self.datadir.create_topic(topic, self.broker.get("num.partitions")
                                      if partitions is None else partitions, configs)
            logs = [self.datadir.open_log(topic, p) for p in self.datadir.partitions(topic)]
        self.topics_changed([topic], created=True)
        return logs

    def topics_changed(self, topics, created: bool = False) -> None:
        """Topics were created, deleted or given partitions: the group coordinator's consumer
        groups re-read them (Kafka's onNewMetadataImage). Called outside the metadata lock."""
        groups = getattr(self, "groups", None)
        if groups is not None:
            groups.on_metadata_change(topics, created)


class ReplicationFactorError(TopicError):
    """A replication factor one node cannot provide (INVALID_REPLICATION_FACTOR)."""

    kafka_error_name = "invalid_replication_factor"
