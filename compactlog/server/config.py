"""The broker's own settings: its listeners and node (Kafka's SocketServerConfigs, KRaftConfigs,
ServerConfigs), topic creation's defaults (``num.partitions``, ``default.replication.factor``,
``auto.create.topics.enable``) and the HTTP listener of the metrics (server/metrics), each with
its type, default, validator, documentation, importance and update mode, registered with every
owner's (storage/config_registry.py). TLS and SASL: security/config.py; the coordinators':
groups/config.py and txn/config.py; the authorizer's: authorizer/config.py.
"""

from __future__ import annotations

from ..storage.config_def import CLUSTER_WIDE, PER_BROKER, ConfigDef, at_least
from ..storage.config_registry import register

BROKER_SETTINGS = (
    # listeners are checked when the broker starts (server/state.py)
    ConfigDef("listeners", "string", "PLAINTEXT://127.0.0.1:9092", dynamic=PER_BROKER, importance="high",
              doc="Addresses the broker listens on, as PLAINTEXT://host:port."),
    ConfigDef("advertised.listeners", "string", "", dynamic=PER_BROKER, importance="high",
              doc="Addresses handed to clients, when they differ from listeners."),
    ConfigDef("node.id", "int", 0, check=at_least(0), importance="high",
              doc="This node's id, the broker and controller id clients see."),
    ConfigDef("num.io.threads", "int", 8, check=at_least(1), dynamic=CLUSTER_WIDE, importance="high",
              doc="Threads that handle requests."),
    ConfigDef("socket.request.max.bytes", "int", 104857600, check=at_least(1), importance="high",
              doc="Largest request accepted; a larger one closes the connection."),
    ConfigDef("connections.max.idle.ms", "long", 600000, importance="medium",
              doc="Idle time after which a connection is closed."),
    ConfigDef("num.partitions", "int", 1, check=at_least(1), importance="medium",
              doc="Partitions of a topic created without a count (auto-creation, -1)."),
    ConfigDef("default.replication.factor", "int", 1, check=at_least(1), importance="medium",
              doc="Replication factor of a topic created without one; only 1 is possible on one node."),
    ConfigDef("auto.create.topics.enable", "bool", True, importance="high",
              doc="Whether a Metadata request may create an unknown topic."),
    # the HTTP listener of /metrics and the health endpoints (server/metrics; empty: none)
    ConfigDef("metrics.listener", "string", "127.0.0.1:9644", importance="medium",
              doc="host:port of the HTTP listener serving /metrics and the health endpoints (loopback by "
                  "default; empty: no listener, no metrics)."),
    ConfigDef("metrics.listener.allow.non.loopback", "bool", False, importance="low",
              doc="Whether metrics.listener may bind an address other than loopback (the endpoint has no TLS or "
                  "authentication)."),
    ConfigDef("metrics.partition.level", "bool", True, importance="low",
              doc="Whether the per-partition metric series are served (false above a few thousand partitions)."),
)

register("server", __name__, BROKER_SETTINGS)
