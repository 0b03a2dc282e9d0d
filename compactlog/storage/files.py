"""Names of partition directories and segment files, as Kafka forms and parses them."""

from __future__ import annotations

import os
import re

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

_SUFFIXED_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def segment_file(dir_path: str, base_offset: int, suffix: str, extra: str = "") -> str:
    return os.path.join(dir_path, filename_prefix(base_offset) + suffix + extra)


def offset_from_filename(name: str) -> int:
    """The base offset in a segment/index/snapshot file name (text before the first dot)."""
    return int(os.path.basename(name).split(".", 1)[0])


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int]:
    """(topic, partition) of a live partition directory name; ValueError when it is not one."""
    base = os.path.basename(name.rstrip("/"))
    m = _SUFFIXED_DIR.match(base)
    if m:
        raise ValueError(f"{base} is a {m.group(4)} replica directory, not a live partition")
    if "-" not in base:
        raise ValueError(f"directory name {base} is not in the form topic-partition")
    topic, _, part = base.rpartition("-")
    if not topic or not part.isdecimal():
        raise ValueError(f"directory name {base} is not in the form topic-partition")
    return topic, int(part)


def is_partition_dir(name: str) -> bool:
    """Whether ``name`` (a path or a base name) is a live partition directory's name."""
    try:
        parse_partition_dir(name)
    except ValueError:
        return False
    return True


# the one directory in a log dir that Kafka's loader skips without parsing its name (tiered storage)
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"
_JAVA_INT = re.compile(r"[+-]?\d+")
_INT32 = range(-2 ** 31, 2 ** 31)


def kafka_loader_refuses(name: str) -> bool:
    """Whether a directory of this name in a log dir stops Kafka's broker from starting
    (LogManager.loadLogs parses every directory with UnifiedLog.parseTopicPartitionName:
    ``<topic>-<partition>``, or with a ``.<id>-delete`` / ``-future`` / ``-stray`` suffix, where the
    partition is whatever Java's Integer.parseInt accepts)."""
    if name == REMOTE_INDEX_CACHE_DIR:
        return False
    if "-" not in name:
        return True
    if name.endswith(("-delete", "-future", "-stray")):
        if not _SUFFIXED_DIR.match(name):
            return True
        name = name[:name.rindex(".")]
    topic, _, partition = name.rpartition("-")
    if not topic or not _JAVA_INT.fullmatch(partition):
        return True
    return int(partition) not in _INT32


def deleted_partition_dir(name: str) -> str | None:
    """``topic-p`` of a directory renamed for deletion (``<topic>-<p>.<id>-delete``), else None."""
    m = _SUFFIXED_DIR.match(name)
    return f"{m.group(1)}-{m.group(2)}" if m and m.group(4) == "delete" else None


def validate_topic_name(topic: str) -> None:
    if not topic or topic in (".", ".."):
        raise ValueError(f"topic name {topic!r} is illegal")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic name {topic!r} is longer than {MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(topic):      # match() with $ would accept a trailing newline
        raise ValueError(f"topic name {topic!r} may only contain ASCII letters, digits, '.', '_' and '-'")


def is_segment_log(name: str) -> bool:
    return name.endswith(LOG_SUFFIX) and name[:-len(LOG_SUFFIX)].isdecimal()
