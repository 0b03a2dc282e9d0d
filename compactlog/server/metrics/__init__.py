"""Prometheus metrics and health endpoints of ``compactlog serve`` (metrics.md).

Names are the ones Kafka operators' dashboards and alerts use (the Prometheus JMX exporter's and
Strimzi's rules: ``kafka_server_brokertopicmetrics_bytesin_total``,
``kafka_log_logcleaner_deadthreadcount``, ...), plus compactlog's own under ``compactlog_``.

- ``broker_metrics``: ``BrokerMetrics``, one broker's registry, hot-path counters and listener;
- ``topic_stats``: BrokerTopicMetrics, counted by Produce and Fetch;
- ``requests``: RequestMetrics, the transport's ``RequestObserver``; the event loop probe;
- ``collector``: logs, partitions, ReplicaManager, groups, connections: read at scrape time;
- ``cleaner``: LogCleaner, LogCleanerManager and compactlog's cleaning counters;
- ``health``: BrokerState, ``/v1/status/ready``, ``/v1/broker``, ``/v1/broker-state``, ``/healthz``;
- ``listener``: the HTTP listener and its routing table (``register_route``), where pages plug in.

``prometheus_client`` is imported only here, and only by the broker.
"""

from __future__ import annotations

from .broker_metrics import BrokerMetrics
from .listener import HttpListener, HttpRequest, HttpResponse, json_response

__all__ = ["BrokerMetrics", "HttpListener", "HttpRequest", "HttpResponse", "json_response"]
