"""The broker's state as metrics, read at scrape time: one collector, no second copy.

Kafka registers gauges that read its objects when JMX asks (``UnifiedLog.newMetrics``,
``ReplicaManager``, ``GroupMetadataManager``, ``KafkaServer``'s BrokerState); this collector does
the same for everything the broker already holds: the ``ReplicaManager`` counts and the
single-node constants (metrics.md §4.5), the groups by state (under the coordinator's lock), the
open transactions, the connections, the worker pool's queue, the event loop's and handler
threads' idle ratios, the data dir's disk, and BrokerState. A deleted topic's partitions are no
longer in ``DataDir.logs``, so their series are gone from the next scrape by themselves.

The per-partition families (``kafka.log:type=Log``, ``kafka.cluster:type=Partition``) are in
``partitions.py``, which reads every partition under its lock once per scrape for both.
"""

from __future__ import annotations

import os
from collections import Counter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ... import __version__
from ...coordinator.group.classic_group_state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE


def gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=list(labels or ()))
    g.add_metric(list((labels or {}).values()), value)
    return g


def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


class BrokerStateCollector:
    """Registered once per broker; ``metrics`` is the ``BrokerMetrics`` (state attached as the
    broker starts: before the logs are loaded only BrokerState and the build are served)."""

    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self, scan):
        """The families; ``scan``: every partition read for this scrape (a ``PartitionScan``,
        None before the logs are loaded)."""
        m = self.metrics
        yield gauge("kafka_server_kafkaserver_brokerstate", "Kafka's BrokerState: 1 starting, 2 recovering, "
                    "3 running, 7 shutting down", m.lifecycle.state)
        yield gauge("compactlog_build_info", "The compactlog version serving", 1, {"version": __version__})
        yield gauge("compactlog_uptime_seconds", "Seconds since the broker process started", m.lifecycle.uptime_s)
        if m.datadir is not None:
            yield from self._disk(m.datadir.path)
        state = m.state
        if state is None or scan is None:
            return
        yield from self._replica_manager(scan)
        yield gauge("compactlog_transactions_ongoing", "Open transactions holding back partitions' last "
                    "stable offset (and so the cleaner)", scan.open_txns)
        yield from self._groups(getattr(state, "groups", None))
        yield from self._network()

    def _replica_manager(self, scan):
        n = scan.partitions
        yield gauge("kafka_server_replicamanager_partitioncount", "Partitions on this node", n)
        yield gauge("kafka_server_replicamanager_leadercount", "Partitions led by this node (all)", n)
        yield gauge("kafka_server_replicamanager_atminisrpartitioncount", "Partitions at min ISR (all with "
                    "one replica, as Kafka counts them)", n)
        yield gauge("kafka_server_replicamanager_offlinereplicacount", "Partitions taken offline after a write "
                    "they could not undo or a failed fsync (KAFKA_STORAGE_ERROR until the broker restarts)",
                    scan.offline)
        for name in ("underreplicatedpartitions", "underminisrpartitioncount", "reassigningpartitions"):
            yield gauge(f"kafka_server_replicamanager_{name}", "Always 0 on one node", 0)
        yield gauge("kafka_server_replicamanager_produceridcount", "Producer ids in the partitions' producer state",
                    scan.producers)
        for name in ("isrshrinks", "isrexpands", "failedisrupdates"):
            yield counter(f"kafka_server_replicamanager_{name}", "Always 0 on one node", 0)
        yield gauge("kafka_controller_kafkacontroller_activecontrollercount", "This node answers as its own "
                    "controller", 1)
        yield gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Always 0 on one node", 0)
        yield counter("kafka_controller_controllerstats_uncleanleaderelections", "Always 0 on one node", 0)
        yield gauge("kafka_log_logmanager_offlinelogdirectorycount", "Data dirs offline after an I/O error", 0)

    # -- groups (GroupMetadataManager's gauges, group-coordinator-metrics' counts)
    def _groups(self, service):
        if service is None:
            return
        by_state = dict.fromkeys((PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, EMPTY, DEAD), 0)
        with service.lock:
            shard = service.coordinator
            for g in shard.groups.values():
                by_state[g.state] = by_state.get(g.state, 0) + 1
            offsets = shard.offset_manager.offsets
            num_offsets = sum(len(parts) for by_topic in offsets.values() for parts in by_topic.values())
            commits = shard.offset_manager.commits
            expirations = shard.offset_manager.expired_offsets
            rebalances = shard.group_manager.completed_rebalances
            consumer_states = Counter(g.state.value.lower() for g in shard.consumer.groups.values())
            consumer_rebalances = shard.consumer.rebalances
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield gauge(prefix + "numgroups", "Groups", sum(by_state.values()))
        yield gauge(prefix + "numoffsets", "Committed offsets: (group, partition) pairs", num_offsets)
        for state, name in ((PREPARING_REBALANCE, "numgroupspreparingrebalance"),
                            (COMPLETING_REBALANCE, "numgroupscompletingrebalance"), (STABLE, "numgroupsstable"),
                            (EMPTY, "numgroupsempty"), (DEAD, "numgroupsdead")):
            yield gauge(prefix + name, f"Groups in state {state}", by_state[state])
        yield counter("compactlog_group_offset_commits", "Offsets committed (offset-commit-count)", commits)
        yield counter("compactlog_group_offset_expirations", "Offsets expired (offset-expiration-count)",
                      expirations)
        yield counter("compactlog_group_completed_rebalances", "Rebalances completed "
                      "(group-completed-rebalance-count)", rebalances)
        # KIP-848 (GroupCoordinatorMetrics: group-count{protocol}, consumer-group-count{state},
        # consumer-group-rebalance-count); the GroupMetadataManager gauges above count classic groups
        g = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count", "Groups by protocol",
                              labels=["protocol"])
        g.add_metric(["classic"], sum(by_state.values()))
        g.add_metric(["consumer"], sum(consumer_states.values()))
        yield g
        g = GaugeMetricFamily("kafka_server_group_coordinator_metrics_consumer_group_count",
                              "Consumer groups (KIP-848) by state", labels=["state"])
        for state in ("empty", "assigning", "reconciling", "stable", "dead"):
            g.add_metric([state], consumer_states.get(state, 0))
        yield g
        yield counter("compactlog_group_consumer_group_rebalances", "Group epoch bumps of consumer groups "
                      "(consumer-group-rebalance-count)", consumer_rebalances)

    # -- connections, queues, idle ratios
    def _network(self):
        m = self.metrics
        server = m.server
        if server is not None:
            g = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open client connections",
                                  labels=["listener", "networkProcessor"])
            counts = dict.fromkeys(m.listener_names(), 0)
            for c in list(server.connections):
                name = m.listener_of(c)
                counts[name] = counts.get(name, 0) + 1
            for name, n in counts.items():
                g.add_metric((name, "0"), n)
            yield g
        queue = getattr(getattr(m.pool, "_work_queue", None), "qsize", lambda: 0)()
        yield gauge("kafka_network_requestchannel_requestqueuesize", "Work waiting for a request handler thread",
                    queue)
        loop_idle, handler_idle = m.loop_probe.idle_ratios() if m.loop_probe is not None else (1.0, 1.0)
        yield gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", "Fraction of the "
                    "request handler threads' time idle over the last minute (0-1)", handler_idle)
        yield gauge("kafka_network_socketserver_networkprocessoravgidle_percent", "Fraction of the event loop's "
                    "time idle over the last minute (0-1)", loop_idle)
        security = getattr(m.state, "security", None)
        listeners = security.listeners.values() if security is not None else ()
        yield gauge("kafka_network_socketserver_expiredconnectionskilledcount", "Connections closed at their "
                    "credential's expiry (KIP-368)", sum(x.stats.expired_connections_killed for x in listeners))
        yield from self._security(listeners)

    def _security(self, listeners):
        """Each listener's authentication counters (Kafka's Selector metrics: a failed TLS handshake
        is a failed authentication) and its TLS stores' earliest expiry (security.md, metrics.md 4.6)."""
        prefix = "kafka_server_socket_server_metrics_"
        for stat, doc in (("successful_authentication", "Connections authenticated (TLS or SASL)"),
                          ("failed_authentication", "Failed authentications, failed TLS handshakes included"),
                          ("successful_reauthentication", "SASL re-authentications (KIP-368) that succeeded"),
                          ("failed_reauthentication", "SASL re-authentications (KIP-368) that failed")):
            c = CounterMetricFamily(prefix + stat, doc, labels=["listener"])
            for x in listeners:
                c.add_metric((x.name,), getattr(x.stats, stat))
            yield c
        g = GaugeMetricFamily("compactlog_tls_certificate_expiry_timestamp_seconds", "Earliest notAfter of a TLS "
                              "listener's key store or trust store (UNIX seconds)", labels=["listener", "kind"])
        for x in listeners:
            tls = x.tls
            if tls is None:
                continue
            for kind, when in (("keystore", tls.keystore_not_after), ("truststore", tls.truststore_not_after)):
                if when is not None:
                    g.add_metric((x.name, kind), when)
        yield g

    def _disk(self, path: str):
        try:
            st = os.statvfs(path)
        except OSError:
            return
        yield gauge("compactlog_storage_disk_free_bytes", "Free bytes on the data dir's file system",
                    st.f_bavail * st.f_frsize)
        yield gauge("compactlog_storage_disk_total_bytes", "Size of the data dir's file system",
                    st.f_blocks * st.f_frsize)

