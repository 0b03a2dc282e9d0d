"""The coordinators' internal topics (server/internal_topics.py): their partition count, for a
topic a kill -9 left short during its creation (compactlog made the partition directories first
and recorded the count last, so such a topic passed for one of 18 partitions)."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.record import transaction_log as TL
from compactlog.server import internal_topics as IT
from compactlog.server.txn.conftest import Broker, Clock
from compactlog.server.txn.state_log import TRANSACTION_STATE_TOPIC as TXN
from compactlog.server.txn.state_log import partition_for, replay
from compactlog.storage import files
from compactlog.storage.checkpoint import PartitionMetadataFile, new_topic_id
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import TOPICS_FILE, DataDir

OFFSETS = R.OFFSETS_TOPIC


def open_dir(path, **props) -> DataDir:
    return DataDir(str(path), broker=BrokerConfig(props), writable=True, create=True, command="test")


def left_short(path, topic: str, present) -> str:
    """A data dir as a kill -9 during ``topic``'s creation left it before the count was recorded
    first: the first partition directories, each with the topic id, and no record of the count."""
    topic_id = new_topic_id()
    for p in present:
        pdir = os.path.join(str(path), files.partition_dir_name(topic, p))
        os.makedirs(pdir)
        PartitionMetadataFile(os.path.join(pdir, files.PARTITION_METADATA)).write(topic_id)
    return topic_id


def test_both_coordinators_take_a_short_topic_for_the_setting(tmp_path):
    """Without the repair (an offline tool), a topic left short is still the setting's count: an id's
    partition is hash % 50, never hash % the directories found (the transaction coordinator kept 18)."""
    path = tmp_path / "d"
    os.makedirs(path)
    left_short(path, TXN, range(18))
    left_short(path, OFFSETS, range(11))
    b = Broker(path, Clock(), **{"offsets.topic.num.partitions": "50", "transaction.state.log.num.partitions": "50"})
    try:
        assert b.svc.config.num_partitions == 50
        assert b.state.groups.config.num_partitions == 50
        assert b.svc.coordinator.partition_for("tx-0") == partition_for("tx-0", 50)
    finally:
        b.close()
