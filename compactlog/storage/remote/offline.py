"""The remote tier of a stopped broker's data dir, for the offline cleaner (``compactlog clean``,
``clean --dry-run``, ``explain``): the broker's own ``RemoteLogManager`` (manager.py), opened
from the data dir's broker config (``remote.log.storage.system.enable``, ``rsm.config.*``, as
``RemoteTier.of`` reads them), so that an offline round over a tiered compacted partition is the
broker's round (compaction.py: ``tiered_source``, ``commit_remote``, ``delete_due``), not a
second copy of it.

* ``open_for_clean`` (writes): the manager is started as the broker starts it (the journal
  ``__remote_log_metadata`` replayed), then each tiered partition to be cleaned is taken by the
  manifest's conditional write (``PartitionManifestWriter.take_ownership``: owner = this run, a
  fresh incarnation, generation + 1) and reconciled with the journal (§3.4 rule 6, the manifest
  wins) — which also finishes or rolls back what a killed run (or broker) left. A broker started
  later takes the partition back the same way; one still running with an older incarnation is
  fenced at its next CAS (the data dir's lock already keeps a broker on this dir out). After the
  round, ``finish`` deletes the replaced segments whose grace period
  (``compactlog.remote.compaction.delete.delay.ms``) is over and sweeps orphans (step G); the
  others stay listed in ``pendingDeletion`` for the next run or the broker.
* ``open_read_only`` (writes nothing): each tiered partition's manifest read as it is (GET only)
  behind the attributes the planner and ``tiered_source`` read, so ``cleaner status``-like
  decisions, the dry run and ``explain`` plan the same logical log over both tiers as the clean.

Either way a store that does not answer is one ``RemoteStorageError`` before anything is written
(the caller turns it into one error line). Kafka has no counterpart: its tiered storage refuses
compacted topics, and its tools never write a remote tier.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager

from ...errors import CompactlogError, TopicError
from . import compaction
from .metadata_topic import TOPIC
from .partition_manifest import Owner, PartitionManifest, PartitionManifestWriter
from .store import RemoteStorageError, StoreConfig, open_store

log = logging.getLogger("kafka.log.remote.RemoteLogManager")


def _identity(datadir) -> tuple[int, str]:
    """(broker id, cluster id) the data dir's broker runs as, from its ``meta.properties`` (read,
    never written: an offline run is not the broker's first start); the broker config's
    ``node.id`` and an empty cluster id without one."""
    from ..meta_properties import read, stored_node_id
    props = read(datadir.path)
    broker_id = stored_node_id(datadir.path, props)      # a non-number: the error naming the file
    if broker_id is None:
        try:
            broker_id = int(datadir.broker.get("node.id"))
        except (TypeError, ValueError, KeyError):
            broker_id = 0
    return max(broker_id, 0), props.get("cluster.id", "")


def tiered_partitions(datadir, partitions) -> list[tuple[str, int]]:
    """Those of ``partitions`` ((topic, partition)) whose topic is tiered and compacted."""
    out = []
    for t, p in partitions:
        if t == TOPIC:
            continue
        cfg = datadir.topic_config(t)
        if cfg.remote_log_enabled and cfg.compact:
            out.append((t, p))
    return out


def _enabled(datadir) -> bool:
    broker = datadir.broker
    return bool(broker.get("remote.log.storage.system.enable")) and bool(broker.get(compaction.ENABLE))


def _store_error(e: Exception, config: StoreConfig) -> CompactlogError:
    where = f"s3://{config.bucket}/{config.key_prefix}" if config.backend == "s3" else config.root
    return CompactlogError(f"the remote tier ({where}) could not be read: {e}; nothing was cleaned or changed "
                           f"(local or remote)")


class OfflineRemoteTier:
    """The remote log manager of an offline run (see the module docstring)."""

    def __init__(self, rm, datadir, partitions: list[tuple[str, int]]):
        self.rm = rm
        self.datadir = datadir
        self.partitions = partitions

    def finish(self) -> dict[tuple[str, int], int]:
        """Step G for the partitions: replaced segments past their grace period deleted, orphans
        swept; (topic, partition) -> segments deleted. A store failing here changes nothing
        committed: what is left is deleted by the next run or the broker."""
        deleted = {}
        for t, p in self.partitions:
            plog = self.datadir.open_log(t, p)
            try:
                n = compaction.delete_due(self.rm, plog, self.rm.clock())
            except (RemoteStorageError, OSError) as e:
                log.warning(f"{plog.name}: deleting the replaced remote segments failed ({e}); the next run or the "
                            f"broker deletes them")
                continue
            if n:
                deleted[(t, p)] = n
        return deleted

    def pending(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> replaced segments still waiting for their grace period."""
        out = {}
        for t, p in self.partitions:
            rp = self.rm.partitions.get((t, p))
            if rp is not None and rp.manifest is not None and rp.manifest.pending_deletion:
                out[(t, p)] = len(rp.manifest.pending_deletion)
        return out


@contextmanager
def open_for_clean(datadir, partitions: list[tuple[str, int]]):
    """The data dir's remote log manager, each tiered compacted partition of ``partitions`` taken
    and reconciled; None when no partition is tiered or remote compaction is off. Yields an
    ``OfflineRemoteTier``; the manager is closed (and unregistered) on exit."""
    chosen = tiered_partitions(datadir, partitions)
    if not chosen or not _enabled(datadir):
        yield None
        return
    from .manager import RemoteLogManager
    broker_id, cluster_id = _identity(datadir)
    config = StoreConfig.from_properties(datadir.broker.props)

    def open_log(topic: str, partition: int):
        try:
            return datadir.open_log(topic, partition)
        except TopicError:
            return None
    # the wall clock, not the run's --now-ms: the grace period protects readers that are running
    # now (a broker, a Spark job reading the bucket), and the orphan sweep compares the store's
    # modification times with it
    rm = RemoteLogManager(datadir, broker_id=broker_id, cluster_id=cluster_id, open_log=open_log,
                          create_topic=lambda name, n, configs: datadir.create_topic(name, n, configs),
                          clock=lambda: int(time.time() * 1000))
    try:
        try:
            rm.start()
            for t, p in chosen:
                rm.partition(datadir.open_log(t, p))
        except (RemoteStorageError, OSError) as e:
            raise _store_error(e, config) from None
        yield OfflineRemoteTier(rm, datadir, chosen)
    finally:
        rm.close()


class _ReadOnlyManager:
    """What the planner and ``compaction.tiered_source`` read of a remote log manager, over
    manifests read once (GET only): ``datadir``, ``partitions`` (``RemotePartition`` by (topic,
    partition), reconciled as far as reading goes), ``store``, ``store_config``, ``broker_id``."""

    def __init__(self, datadir, config: StoreConfig):
        self.datadir = datadir
        self.store_config = config
        self.store = open_store(config)
        self.prefix = config.key_prefix
        self.broker_id = _identity(datadir)[0]
        self.partitions = {}

    def load(self, topic: str, partition: int) -> None:
        from .manager import RemotePartition
        topic_id = self.datadir.topic_id(topic)
        owner = Owner("", self.broker_id, "read-only")
        writer = PartitionManifestWriter(self.store, self.prefix, topic, topic_id or "", partition, owner)
        m = writer.read()[0] if topic_id is not None else None
        # never uploaded: an empty remote tier (the whole log is local)
        writer.current = m if m is not None else PartitionManifest(topic, topic_id or "", partition)
        rp = RemotePartition(topic, partition, topic_id or "", writer, ready=True)
        self.partitions[(topic, partition)] = rp
        plog = self.datadir.open_log(topic, partition)
        plog.highest_remote_offset = writer.current.highest_offset

    def due(self, now_ms: int) -> dict[tuple[str, int], int]:
        """(topic, partition) -> replaced segments whose grace period is over at ``now_ms``: work
        for a run even when nothing is to be cleaned (a run killed after its commit left them)."""
        out = {}
        for key, rp in self.partitions.items():
            n = sum(1 for d in rp.manifest.pending_deletion if d.delete_after_ms <= now_ms)
            if n:
                out[key] = n
        return out

    def close(self) -> None:
        self.store.close()


@contextmanager
def open_read_only(datadir, partitions: list[tuple[str, int]]):
    """The manifests of the tiered compacted partitions among ``partitions``, read (GET only) and
    registered for the data dir, so plans cover both tiers and write nothing; yields the view
    (``due``), None when no partition is tiered or remote compaction is off."""
    chosen = tiered_partitions(datadir, partitions)
    if not chosen or not _enabled(datadir):
        yield None
        return
    config = StoreConfig.from_properties(datadir.broker.props)
    view = _ReadOnlyManager(datadir, config)
    try:
        try:
            for t, p in chosen:
                view.load(t, p)
        except (RemoteStorageError, OSError) as e:
            raise _store_error(e, config) from None
        compaction.register(datadir.path, view)
        yield view
    finally:
        compaction.unregister(datadir.path, view)
        view.close()


__all__ = ["open_for_clean", "open_read_only", "tiered_partitions", "OfflineRemoteTier"]
