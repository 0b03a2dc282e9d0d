"""The log cleaner's broker settings: Kafka's ``CleanerConfig`` (``log.cleaner.*``) and compactlog's
own (where a round runs, its memory, its run log, a dead thread's restart), each with its type,
default, validator, documentation, importance and update mode, registered with every owner's
(storage/config_registry.py). The per-topic cleaning configs (``min.cleanable.dirty.ratio``, ...)
are topic configs, Kafka's LogConfig's: storage/config.py.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..storage.config import CLUSTER_WIDE, INT_MAX, MIB, ConfigDef, at_least, one_of
from ..storage.config_registry import register

CLEANER_SETTINGS = (
    ConfigDef("log.cleaner.enable", "bool", True, importance="medium",
              doc="Whether the broker runs the log cleaner, which compacts topics with the compact policy."),
    ConfigDef("log.cleaner.threads", "int", 1, check=at_least(0), dynamic=CLUSTER_WIDE, importance="medium",
              doc="Number of cleaner threads."),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, check=at_least(0), dynamic=CLUSTER_WIDE, importance="medium",
              doc="Memory for the cleaners' key-to-offset maps, shared by all threads."),
    ConfigDef("log.cleaner.io.buffer.size", "int", 524288, check=at_least(0), dynamic=CLUSTER_WIDE, importance="medium",
              doc="Memory for the cleaners' read and write buffers, shared by all threads."),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9, dynamic=CLUSTER_WIDE, importance="medium",
              doc="How full a cleaner's offset map may get."),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, dynamic=CLUSTER_WIDE, importance="medium",
              doc="Cap on the cleaners' combined read and write rate."),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, check=at_least(0), dynamic=CLUSTER_WIDE, importance="medium",
              doc="Sleep of a cleaner thread when no log needs cleaning."),
    ConfigDef("compactlog.cleaner.task.memory.bytes", "long", 2147483648, check=at_least(1024), importance="medium",
              doc="Memory a cleaning task may use for its offset map."),
    ConfigDef("compactlog.cleaner.map", "string", "auto", check=one_of("auto", "task", "distributed"), importance="medium",
              doc="Where the offset map is built: in one task, distributed, or chosen by size."),
    # where the cleaner's run log goes (default: <data dir>.logs, never inside the data dir)
    ConfigDef("compactlog.cleaner.log.dir", "string", "", importance="low",
              doc="Where the cleaner's run log goes (default: DIR.logs next to the data dir; never inside it, "
                  "which Kafka's loader refuses)."),
    # a cleaner thread whose loop died is started again after this long, doubled per death in a
    # row up to 5 minutes (Kafka leaves it dead until the broker restarts); a minute by default so
    # that DeadThreadCount shows the death to a Prometheus scraping every 15-60 s
    ConfigDef("compactlog.cleaner.thread.restart.backoff.ms", "long", 60000, check=at_least(0), importance="low",
              doc="Wait before a cleaner thread whose loop died is started again (doubled per death in a row, "
                  "up to 5 minutes)."),
)


def check_cleaner_settings(broker) -> None:
    """The cleaner's settings together (Kafka's KafkaConfig.validateValues and the cleaner
    thread's own start-up checks)."""
    threads = broker.get("log.cleaner.threads")
    if threads == 0:
        return      # no cleaner: its buffers are never allocated
    dedupe = broker.get("log.cleaner.dedupe.buffer.size")
    if dedupe // threads <= MIB:
        raise ConfigError(f"invalid value {dedupe} for configuration log.cleaner.dedupe.buffer.size: "
                          f"it must be more than 1 MiB per cleaner thread (Kafka's rule; "
                          f"log.cleaner.threads={threads})")
    io_buffer = broker.get("log.cleaner.io.buffer.size")
    # each thread reads and writes through buffers of io.buffer.size / threads / 2 bytes (Kafka's
    # Cleaner) that grow by doubling when a batch does not fit: from 0 they never grow and the
    # cleaner spins forever (Kafka's does too); from 1 byte up they reach any batch
    if io_buffer // threads // 2 < 1:
        raise ConfigError(f"invalid value {io_buffer} for configuration log.cleaner.io.buffer.size: "
                          f"each cleaner thread's buffers would be io.buffer.size / threads / 2 = 0 bytes, "
                          f"which never grow (the cleaner would loop forever); with log.cleaner.threads="
                          f"{threads} it must be at least {2 * threads}")
    load_factor = broker.get("log.cleaner.io.buffer.load.factor")
    slots = min(dedupe // threads, INT_MAX) // 24
    if not slots * load_factor > 1:
        # Kafka's cleaner thread refuses to start: its offset map (24 bytes a key, filled up to
        # the load factor) would not hold a single key
        raise ConfigError(f"invalid value {load_factor} for configuration log.cleaner.io.buffer.load.factor: "
                          f"the offset map ({slots} slots of 24 bytes per cleaner thread) would not hold "
                          f"one key; it must be more than {1 / slots:.3g}")


register("cleaner", __name__, CLEANER_SETTINGS, check_cleaner_settings)
