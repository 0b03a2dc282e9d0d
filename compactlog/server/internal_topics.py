"""The coordinators' internal topics, ``__consumer_offsets`` and ``__transaction_state``: their
partition count, one rule for both coordinators and the offline tools.

Kafka creates each on the first coordinator lookup, with ``offsets.topic.num.partitions`` /
``transaction.state.log.num.partitions`` partitions (50), and the count never changes: a group's or
a transactional id's partition is ``hash % count`` (``GroupCoordinator.partitionFor``,
``TransactionStateManager.partitionFor``, which checks at each load that the count is stable).
Kafka's controller records a topic's count before any broker makes a directory, so a crash never
makes a topic shorter; ``DataDir.create_topic`` does the same with the topics file.

The count (``partition_count``): what the topics file records; for a topic known only by its
directories (a Kafka dir copied here, or a creation by an older compactlog that a kill -9
interrupted: it wrote the record last), the broker's setting, or more when more directories exist
(a count is never lowered). So a topic created on purpose with fewer partitions
(``offsets.topic.num.partitions=3``) is whole at 3, and a topic left with 18 directories of 50 is
still 50.
"""

from __future__ import annotations

import logging

from ..record import consumer_offsets as R
from ..storage.datadir import INTERNAL_TOPIC_CONFIGS
from .txn.state_log import TRANSACTION_STATE_TOPIC

# the broker setting each internal topic is created with
PARTITION_SETTINGS = {R.OFFSETS_TOPIC: "offsets.topic.num.partitions",
                      TRANSACTION_STATE_TOPIC: "transaction.state.log.num.partitions"}


def offsets_topic_configs(broker) -> dict[str, str]:
    """The configs Kafka gives ``__consumer_offsets`` at creation (its segment size is the broker's
    ``offsets.topic.segment.bytes``)."""
    return {**INTERNAL_TOPIC_CONFIGS[R.OFFSETS_TOPIC],
            "segment.bytes": str(broker.get("offsets.topic.segment.bytes"))}


def partition_count(dd, topic: str, warn: logging.Logger | None = None) -> int:
    """The partitions of the internal ``topic`` of the data dir ``dd`` (see the module docstring):
    the recorded count, else the broker's setting, never less than its directories. ``warn``: the
    logger that says so when the count is not the setting (a coordinator's, at its start)."""
    setting = PARTITION_SETTINGS[topic]
    configured = dd.broker.get(setting)
    if not dd.has_topic(topic):
        return configured
    n = max(dd.partitions(topic), default=-1) + 1       # the record, and the directories beyond it
    if dd.registered_partitions(topic) is None:
        n = max(configured, n)
    if n != configured and warn is not None:
        warn.warning(f"{topic} has {n} partitions, not {setting}={configured}: keeping {n} (the count of a "
                     f"created topic never changes)")
    return n
