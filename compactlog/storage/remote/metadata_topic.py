"""Which ``__remote_log_metadata`` partition holds a user partition's events, as Kafka's
``RemoteLogMetadataTopicPartitioner`` decides: murmur2 (the producer's, ``storage.partitioner``) of
the 4 big-endian bytes of ``Objects.hash(topicId.lsb, topicId.msb, partition)``, made positive,
modulo the metadata topic's partition count (``rlmm.config.remote.log.metadata.topic.num.partitions``,
50 by default, fixed once the topic exists).

It lives here rather than beside the record codec because murmur2 is storage's; the hash itself is
``record.remote_log_metadata.objects_hash``.
"""

from __future__ import annotations

import struct

from ...record.remote_log_metadata import TOPIC, objects_hash
from ..partitioner import murmur2, to_positive

DEFAULT_NUM_PARTITIONS = 50     # TopicBasedRemoteLogMetadataManagerConfig.DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS

__all__ = ["TOPIC", "DEFAULT_NUM_PARTITIONS", "metadata_partition"]


def metadata_partition(topic_id: str, partition: int, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The metadata partition of ``topic_id`` (Kafka's base64 form) and ``partition``."""
    if num_partitions <= 0:
        raise ValueError(f"the metadata topic has at least one partition, not {num_partitions}")
    h = objects_hash(topic_id, partition)
    return to_positive(murmur2(struct.pack(">i", h))) % num_partitions
