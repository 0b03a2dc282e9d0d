"""Topic configs (Kafka's LogConfig) and broker settings, with Kafka's names, defaults and ranges.

A topic config's default comes from its broker property (``server.properties`` or ``--override``)
when set there, else from Kafka's default. ``segment.bytes`` accepts values down to 14, as Kafka
3.x did, so that tests and demos can roll tiny segments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


def _bool(v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError("expected true or false")


def _list(v: str) -> list[str]:
    return [x.strip().lower() for x in str(v).split(",") if x.strip()]


@dataclass(frozen=True)
class ConfigDef:
    name: str
    kind: str              # int, long, double, bool, list, string
    default: Any
    broker: tuple[str, ...] = ()   # broker properties that set the default, first match wins
    check: Callable[[Any], str | None] | None = None
    doc: str = ""

    def parse(self, raw) -> Any:
        try:
            if self.kind in ("int", "long"):
                v = int(str(raw).strip())
                if self.kind == "int" and not -2**31 <= v < 2**31:
                    raise ValueError("out of int range")
                if self.kind == "long" and not -2**63 <= v < 2**63:
                    raise ValueError("out of long range")
            elif self.kind == "double":
                v = float(str(raw).strip())
            elif self.kind == "bool":
                v = _bool(raw)
            elif self.kind == "list":
                v = _list(raw)
            else:
                v = str(raw).strip()
        except ValueError as e:
            raise ConfigError(f"invalid value {raw!r} for configuration {self.name}: {e}") from None
        if self.check is not None:
            problem = self.check(v)
            if problem:
                raise ConfigError(f"invalid value {raw!r} for configuration {self.name}: {problem}")
        return v


def at_least(lo):
    return lambda v: None if v >= lo else f"value must be at least {lo}"


def between(lo, hi):
    return lambda v: None if lo <= v <= hi else f"value must be between {lo} and {hi}"


def one_of(*options):
    return lambda v: None if v in options else f"value must be one of {', '.join(options)}"


def _policy(v: list[str]) -> str | None:
    if not v:
        return "cleanup.policy must name compact, delete or both"
    bad = [x for x in v if x not in ("compact", "delete")]
    return f"unknown cleanup policy {', '.join(bad)}" if bad else None


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "value must be -1 or between 1 and 9"


TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("cleanup.policy", "list", ["delete"], ("log.cleanup.policy",), _policy),
    ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, ("log.cleaner.min.cleanable.ratio",), between(0.0, 1.0)),
    ConfigDef("min.compaction.lag.ms", "long", 0, ("log.cleaner.min.compaction.lag.ms",), at_least(0)),
    ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, ("log.cleaner.max.compaction.lag.ms",), at_least(1)),
    ConfigDef("delete.retention.ms", "long", 86400000, ("log.cleaner.delete.retention.ms",), at_least(0)),
    ConfigDef("segment.bytes", "int", 1073741824, ("log.segment.bytes",), at_least(14)),
    ConfigDef("segment.ms", "long", 604800000, ("log.roll.ms", "log.roll.hours"), at_least(1)),
    ConfigDef("segment.jitter.ms", "long", 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0)),
    ConfigDef("segment.index.bytes", "int", 10485760, ("log.index.size.max.bytes",), at_least(4)),
    ConfigDef("index.interval.bytes", "int", 4096, ("log.index.interval.bytes",), at_least(0)),
    ConfigDef("retention.ms", "long", 604800000, ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), at_least(-1)),
    ConfigDef("retention.bytes", "long", -1, ("log.retention.bytes",)),
    ConfigDef("file.delete.delay.ms", "long", 60000, ("log.segment.delete.delay.ms",), at_least(0)),
    ConfigDef("max.message.bytes", "int", 1048588, ("message.max.bytes",), at_least(0)),
    ConfigDef("message.timestamp.type", "string", "CreateTime", ("log.message.timestamp.type",), one_of("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX, ("log.message.timestamp.before.max.ms",), at_least(0)),
    ConfigDef("message.timestamp.after.max.ms", "long", LONG_MAX, ("log.message.timestamp.after.max.ms",), at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", "long", LONG_MAX, ("log.message.timestamp.difference.max.ms",), at_least(0)),
    ConfigDef("compression.type", "string", "producer", ("compression.type",), one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "int", -1, ("compression.gzip.level",), _gzip_level),
    ConfigDef("compression.lz4.level", "int", 9, ("compression.lz4.level",), between(1, 17)),
    ConfigDef("compression.zstd.level", "int", 3, ("compression.zstd.level",), between(-131072, 22)),
    ConfigDef("preallocate", "bool", False, ("log.preallocate",)),
    ConfigDef("flush.messages", "long", LONG_MAX, ("log.flush.interval.messages",), at_least(1)),
    ConfigDef("flush.ms", "long", LONG_MAX, ("log.flush.interval.ms",), at_least(0)),
    ConfigDef("min.insync.replicas", "int", 1, ("min.insync.replicas",), at_least(1)),
    ConfigDef("unclean.leader.election.enable", "bool", False, ("unclean.leader.election.enable",)),
    ConfigDef("message.downconversion.enable", "bool", True, ("log.message.downconversion.enable",)),
    ConfigDef("local.retention.ms", "long", -2, ("log.local.retention.ms",), at_least(-2)),
    ConfigDef("local.retention.bytes", "long", -2, ("log.local.retention.bytes",), at_least(-2)),
    ConfigDef("remote.storage.enable", "bool", False, ()),
]}

_BROKER_UNIT = {"log.roll.hours": 3600000, "log.roll.jitter.hours": 3600000,
                "log.retention.minutes": 60000, "log.retention.hours": 3600000}

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("log.cleaner.enable", "bool", True),
    ConfigDef("log.cleaner.threads", "int", 1, check=at_least(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728),
    ConfigDef("log.cleaner.io.buffer.size", "int", 524288, check=at_least(0)),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, check=at_least(0)),
    ConfigDef("message.max.bytes", "int", 1048588, check=at_least(0)),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, check=at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, check=at_least(1)),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, check=at_least(1)),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, check=at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, check=at_least(0)),
    ConfigDef("num.partitions", "int", 1, check=at_least(1)),
    ConfigDef("auto.create.topics.enable", "bool", True),
    # compactlog's own settings (not Kafka's)
    ConfigDef("compactlog.spark.master", "string", "local[*]"),
    ConfigDef("compactlog.spark.local.dir", "string", ""),
    ConfigDef("compactlog.cleaner.task.memory.bytes", "long", 2147483648, check=at_least(1024)),
    ConfigDef("compactlog.cleaner.map", "string", "auto", check=one_of("auto", "task", "distributed")),
]}


class BrokerConfig:
    """Broker-level settings: Kafka names from server.properties and --override."""

    def __init__(self, props: dict[str, str] | None = None):
        self.props: dict[str, str] = dict(props or {})

    def get(self, name: str):
        d = BROKER_CONFIGS.get(name)
        if d is None:
            if name in self.props:
                return self.props[name]
            raise ConfigError(f"unknown broker configuration {name}")
        if name in self.props:
            return d.parse(self.props[name])
        return d.default

    def validate(self) -> None:
        for name, raw in self.props.items():
            if name in BROKER_CONFIGS:
                BROKER_CONFIGS[name].parse(raw)
            else:
                for d in TOPIC_CONFIGS.values():
                    if name in d.broker:
                        d.parse(raw)
                        break

    def topic_default(self, d: ConfigDef):
        for prop in d.broker:
            if prop in self.props:
                raw = self.props[prop]
                if prop in _BROKER_UNIT:
                    try:
                        return int(raw) * _BROKER_UNIT[prop]
                    except ValueError:
                        raise ConfigError(f"invalid value {raw!r} for broker configuration {prop}") from None
                return d.parse(raw)
        return d.default

    def __getitem__(self, name: str):
        return self.get(name)


def parse_properties(text: str) -> dict[str, str]:
    """A Java .properties subset: ``key=value`` or ``key: value`` lines, # and ! comments."""
    props = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep_i, ch in enumerate(s):
            if ch in "=:":
                props[s[:sep_i].strip()] = s[sep_i + 1:].strip()
                break
        else:
            props[s] = ""
    return props


def parse_assignments(items: list[str] | None, what: str) -> dict[str, str]:
    """``K=V`` strings (from --config / --override) into a dict, with a clear error."""
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ConfigError(f"{what} {item!r} is not of the form name=value")
        out[k.strip()] = v.strip()
    return out


class LogConfig:
    """The effective configs of one topic: overrides, else broker defaults, else Kafka defaults."""

    def __init__(self, overrides: dict[str, Any] | None = None, broker: BrokerConfig | None = None):
        self.broker = broker or BrokerConfig()
        self.overrides: dict[str, str] = {}
        for name, raw in (overrides or {}).items():
            self.validate_one(name, raw)
            self.overrides[name] = raw if isinstance(raw, str) else _format(raw)
        self._values = {}
        for name, d in TOPIC_CONFIGS.items():
            if name in self.overrides:
                self._values[name] = d.parse(self.overrides[name])
            else:
                self._values[name] = self.broker.topic_default(d)

    @staticmethod
    def validate_one(name: str, raw) -> None:
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"unknown topic configuration {name}")
        d.parse(raw if isinstance(raw, str) else _format(raw))

    def get(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise ConfigError(f"unknown topic configuration {name}") from None

    __getitem__ = get

    def is_default(self, name: str) -> bool:
        return name not in self.overrides

    def with_overrides(self, changes: dict[str, Any], removals: list[str] = ()) -> "LogConfig":
        merged = dict(self.overrides)
        for name in removals:
            if name not in TOPIC_CONFIGS:
                raise ConfigError(f"unknown topic configuration {name}")
            merged.pop(name, None)
        merged.update(changes)
        return LogConfig(merged, self.broker)

    # -- the values the storage layer reads, by their Kafka meaning
    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def segment_bytes(self) -> int:
        return self._values["segment.bytes"]

    @property
    def segment_ms(self) -> int:
        return self._values["segment.ms"]

    @property
    def max_index_size(self) -> int:
        return self._values["segment.index.bytes"]

    @property
    def index_interval_bytes(self) -> int:
        return self._values["index.interval.bytes"]

    @property
    def max_message_size(self) -> int:
        return self._values["max.message.bytes"]

    @property
    def max_compaction_lag_ms(self) -> int:
        return self._values["max.compaction.lag.ms"]

    @property
    def min_compaction_lag_ms(self) -> int:
        return self._values["min.compaction.lag.ms"]

    @property
    def delete_retention_ms(self) -> int:
        return self._values["delete.retention.ms"]

    @property
    def max_segment_ms(self) -> int:
        """segment.ms, capped by max.compaction.lag.ms on compacted topics (Kafka's roll rule)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        return self.segment_bytes if self._values["preallocate"] else 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)


def _format(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(v)
    return str(v)
