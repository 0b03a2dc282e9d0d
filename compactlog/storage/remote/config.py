"""The broker settings of the remote tier: Kafka's ``RemoteLogManagerConfig`` and
``TopicBasedRemoteLogMetadataManagerConfig`` (names, types, defaults, validators), and the store
settings under the names of Aiven's open-source RemoteStorageManager (``rsm.config.*``, parsed by
``store.StoreConfig.from_properties``), registered as the ``remote`` owner (config_registry.py).

What is applied, and what is only accepted so that a Kafka ``server.properties`` carries over:

* applied: ``remote.log.storage.system.enable`` (false: a topic may not set
  ``remote.storage.enable=true``, ``LogConfig.validateRemoteStorageOnlyIfSystemEnabled``, and no
  remote work runs); ``remote.log.manager.task.interval.ms`` (the copy task's pace);
  ``remote.log.reader.threads`` and ``remote.log.reader.max.pending.tasks`` (a full queue answers
  UNKNOWN_SERVER_ERROR, as Kafka's ``RejectedExecutionException``); ``remote.fetch.max.wait.ms``
  (KIP-1018: a slower remote read answers empty, no error);
  ``remote.log.index.file.cache.total.size.bytes`` (the in-memory index cache's bound);
  ``rlmm.config.remote.log.metadata.topic.num.partitions`` and ``.retention.ms`` (when the broker
  creates ``__remote_log_metadata``, replication factor 1: one node); a metadata manager other
  than Kafka's ``TopicBasedRemoteLogMetadataManager`` is refused; the ``rsm.config.*`` store
  settings; compactlog's ``compactlog.remote.fetch.cache.bytes`` and ``…orphan.min.age.ms``;
* accepted, not applied yet: ``remote.log.storage.manager.class.*`` (the built-in store serves:
  Aiven's S3 and filesystem backends by ``rsm.config.storage.backend.class``); the thread pool
  sizes (one thread copies, partition after partition); the retry backoff (a failed copy is
  reconciled and retried at the next task run); the copy and fetch quotas; the custom metadata
  bound (compactlog writes none); ``remote.list.offsets.request.timeout.ms`` (a ListOffsets by
  timestamp searches the remote tier before it answers).
"""

from __future__ import annotations

from ..config_def import CLUSTER_WIDE, LONG_MAX, ConfigDef, at_least, between, block
from ..config_registry import register

TOPIC_BASED_RLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
SYSTEM_ENABLE = "remote.log.storage.system.enable"
NUM_PARTITIONS = "rlmm.config.remote.log.metadata.topic.num.partitions"
GiB = 1 << 30

_STORE = "rsm.config.storage."


def _quota(kind: str, what: str) -> tuple[ConfigDef, ...]:
    """Kafka's copy or fetch quota: its bytes per second and its windows (accepted, not applied)."""
    return block(f"remote.log.manager.{kind}.", (
        ("max.bytes.per.second", "long", LONG_MAX,
         f"Kafka's {kind} quota ({what}); accepted, not applied yet.",
         {"dynamic": CLUSTER_WIDE, "importance": "medium"}),
        ("quota.window.num", "int", 11, f"Windows of Kafka's {kind} quota; accepted."),
        ("quota.window.size.seconds", "int", 1, f"Length of one window of Kafka's {kind} quota; accepted."),
    ), check=at_least(1), importance="low")


SETTINGS = (
    ConfigDef(SYSTEM_ENABLE, "bool", False, importance="medium",
              doc="Whether tiered storage is on in this broker: topics may then set remote.storage.enable=true, "
                  "and their rolled segments are copied to the store the rsm.config.* settings name."),
    ConfigDef("remote.log.storage.manager.class.name", "string", None, importance="medium",
              doc="Kafka's RemoteStorageManager class; accepted and ignored: compactlog's own store serves "
                  "(rsm.config.storage.backend.class picks S3 or a directory)."),
    ConfigDef("remote.log.storage.manager.class.path", "string", None, importance="low",
              doc="Kafka's class path of the RemoteStorageManager plugin; accepted and ignored."),
    ConfigDef("remote.log.metadata.manager.class.name", "string", TOPIC_BASED_RLMM, importance="medium",
              doc="Kafka's RemoteLogMetadataManager class; only TopicBasedRemoteLogMetadataManager (the "
                  "__remote_log_metadata topic) is supported."),
    ConfigDef("remote.log.metadata.manager.listener.name", "string", None, importance="medium",
              doc="The listener the metadata manager's clients use in Kafka; accepted and ignored (the broker "
                  "writes __remote_log_metadata itself)."),
    ConfigDef("remote.log.manager.task.interval.ms", "long", 30000, check=at_least(1), importance="low",
              doc="Interval between two runs of the copy and expiration tasks of each tiered partition."),
    ConfigDef("remote.log.manager.thread.pool.size", "int", 10, check=at_least(1), importance="medium",
              doc="Threads of the remote log manager's tasks in Kafka; accepted (one thread copies here)."),
    ConfigDef("remote.log.manager.copier.thread.pool.size", "int", -1, check=at_least(-1), importance="medium",
              doc="Threads copying segments in Kafka (-1: the pool size); accepted (one thread copies here)."),
    ConfigDef("remote.log.manager.expiration.thread.pool.size", "int", -1, check=at_least(-1), importance="medium",
              doc="Threads applying remote retention in Kafka (-1: the pool size); accepted (it runs with local retention here)."),
    ConfigDef("remote.log.manager.task.retry.backoff.ms", "long", 500, check=at_least(1), importance="low",
              doc="First wait before a failed copy is retried in Kafka; accepted (retried at the next task run here)."),
    ConfigDef("remote.log.manager.task.retry.backoff.max.ms", "long", 30000, check=at_least(1), importance="low",
              doc="Longest wait before a failed copy is retried in Kafka; accepted."),
    ConfigDef("remote.log.manager.task.retry.jitter", "double", 0.2, check=between(0, 0.5), importance="low",
              doc="Random share of each retry wait in Kafka; accepted."),
    *_quota("copy", "bytes per second to the store"),
    *_quota("fetch", "bytes per second read from the store for fetches"),
    ConfigDef("remote.log.reader.threads", "int", 10, check=at_least(1), importance="medium",
              doc="Threads reading from the store for fetches."),
    ConfigDef("remote.log.reader.max.pending.tasks", "int", 100, check=at_least(1), importance="medium",
              doc="Remote reads queued at most; past it a fetch of remote data answers UNKNOWN_SERVER_ERROR."),
    ConfigDef("remote.fetch.max.wait.ms", "int", 500, check=at_least(1), dynamic=CLUSTER_WIDE, importance="medium",
              doc="How long a fetch waits for a remote read before it answers empty (KIP-1018)."),
    ConfigDef("remote.list.offsets.request.timeout.ms", "long", 30000, check=at_least(1), dynamic=CLUSTER_WIDE,
              importance="medium",
              doc="How long a ListOffsets by timestamp waits for a search of the remote tier in Kafka (KIP-1075); accepted (the search answers before the response here)."),
    ConfigDef("remote.log.index.file.cache.total.size.bytes", "long", GiB, check=at_least(1),
              dynamic=CLUSTER_WIDE, importance="low",
              doc="Bytes of remote segments' indexes kept in memory."),
    ConfigDef("remote.log.metadata.custom.metadata.max.bytes", "int", 128, check=at_least(0), importance="low",
              doc="Largest custom metadata of a segment (compactlog writes none)."),
    ConfigDef(NUM_PARTITIONS, "int", 50, check=at_least(1), importance="medium",
              doc="Partitions of __remote_log_metadata when the broker creates it (fixed from then on)."),
    ConfigDef("rlmm.config.remote.log.metadata.topic.retention.ms", "long", -1, check=at_least(-1), importance="low",
              doc="retention.ms of __remote_log_metadata when the broker creates it."),
    ConfigDef("compactlog.remote.fetch.cache.bytes", "long", 256 << 20, check=at_least(0), importance="low",
              doc="Bytes of remote segment data (chunks of rsm.config.chunk.size) kept in memory for fetches."),
    ConfigDef("compactlog.remote.orphan.min.age.ms", "long", 86400000, check=at_least(0), importance="low",
              doc="Age after which an object of a partition that no manifest and no journal entry names is "
                  "deleted by the orphan sweep."),
    # the store, by Aiven's names (store.StoreConfig parses and checks them together)
    *block(_STORE, (
        ("backend.class", "string", "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
         "The store: Aiven's S3Storage (S3 API) or FileSystemStorage (a directory, rsm.config.storage.root).",
         {"importance": "high"}),
        ("s3.bucket.name", "string", None, "The S3 bucket of the remote tier.", {"importance": "high"}),
        ("s3.region", "string", None, "The bucket's region.", {"importance": "medium"}),
        ("s3.endpoint.url", "string", None, "An S3-compatible endpoint instead of AWS's.", {"importance": "medium"}),
        ("s3.path.style.access.enabled", "string", None,
         "true: path-style requests (endpoint/bucket/key) instead of virtual-hosted ones."),
        ("aws.access.key.id", "string", None,
         "Static access key; without it the AWS credential chain applies (environment, web identity, "
         "container and instance credentials, profiles).", {"importance": "medium"}),
        ("aws.secret.access.key", "password", None, "Secret of the static access key.", {"importance": "medium"}),
        ("aws.session.token", "password", None, "Session token of temporary credentials."),
        ("aws.certificate.check.enabled", "string", None, "false: TLS certificates of the endpoint are not checked."),
        ("s3.api.call.timeout", "string", None, "Whole time of one store call, retries included (ms)."),
        ("s3.api.call.attempt.timeout", "string", None, "Time of one attempt of a store call (ms)."),
        ("s3.multipart.upload.part.size", "string", None, "Part size of multipart uploads (bytes, 25 MiB by default)."),
        ("root", "string", None, "The directory of the FileSystemStorage backend.", {"importance": "medium"}),
    ), importance="low"),
    ConfigDef("rsm.config.key.prefix", "string", "", importance="medium",
              doc="Prefix of every object key, pasted as is (Aiven's layout)."),
    ConfigDef("rsm.config.chunk.size", "string", None, importance="medium",
              doc="Chunk size of segment objects (bytes; 4 MiB): the unit of ranged reads and of the fetch cache."),
    ConfigDef("rsm.config.compression.enabled", "string", None, importance="low",
              doc="Aiven's chunk compression; compactlog writes uncompressed segment objects."),
    ConfigDef("rsm.config.encryption.enabled", "string", None, importance="low",
              doc="Aiven's encryption; true is refused (compactlog reads and writes unencrypted objects)."),
    ConfigDef("compactlog.remote.store.max.retries", "string", None, importance="low",
              doc="Retries of one store request (obstore's own default when unset)."),
    ConfigDef("compactlog.remote.multipart.threshold.bytes", "string", None, importance="low",
              doc="Objects of this size and more are uploaded in parts (64 MiB)."),
)


def _check(broker) -> None:
    """With tiered storage on: the metadata manager is Kafka's topic-based one and the store
    settings read (a missing bucket, encryption, a bad number: refused at start)."""
    if not broker.get(SYSTEM_ENABLE):
        return
    from ...errors import ConfigError
    rlmm = broker.get("remote.log.metadata.manager.class.name")
    if rlmm != TOPIC_BASED_RLMM:
        raise ConfigError(f"remote.log.metadata.manager.class.name={rlmm} is not supported: compactlog keeps remote "
                          f"log metadata in __remote_log_metadata ({TOPIC_BASED_RLMM})")
    from .store import StoreConfig
    StoreConfig.from_properties(broker.props)


register("remote", __name__, SETTINGS, _check)
