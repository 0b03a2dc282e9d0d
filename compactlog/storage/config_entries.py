"""The entries of a DescribeConfigs answer and how ``configs --describe`` prints them: Kafka's
``ConfigHelper.describeConfigs``, ``createTopicConfigEntry`` and ``createBrokerConfigEntry`` with
``DynamicBrokerConfig.brokerConfigSynonyms``, and ``ConfigCommand.describeResourceConfig``. The
broker's DescribeConfigs (server/apis/configs.py) and ``configs --describe`` on a data dir
(cli/configs.py) both answer from here, and both print through ``Entry`` (the through-a-broker
side too: cli/broker_configs.py).

Every entry comes from the settings' definitions, gathered from their owners
(config_registry.py): value type, Kafka's default, documentation (DescribeConfigs v3+, in
compactlog's words) and whether a setting may change at run time (``read_only``) are the owner's.

Synonyms come in Kafka's order (the topic override, then the broker's static setting, then Kafka's
default), with Kafka's quirk of dropping the synonyms that precede the primary broker name
(``retention.ms`` described with only ``log.retention.hours`` set lists no synonym and says
DEFAULT_CONFIG, as Kafka does). A broker setting set dynamically (storage/dynamic_config.py) comes
first, as DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG; the settings Kafka can change at
run time are not read-only. GROUP resources are described as ``createGroupConfigEntry`` does: the
group's override, else the broker setting that defaults it, else Kafka's default. Topic configs are those of ``storage.config.TOPIC_CONFIGS`` (the ones compactlog
implements); Kafka's ``leader/follower.replication.throttled.replicas``, ``remote.log.copy.disable``,
``remote.log.delete.on.disable`` and ``message.format.version`` are unknown names here.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import Protocol

from .config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, kafka_string
from .config_def import is_secret_setting
from .dynamic_config import GROUP_BROKER_DEFAULTS, GROUP_CONFIGS, broker_kind, group_default, is_dynamic
from .kafka_names import KAFKA_BROKER_SETTINGS


class Described(Protocol):
    """What the entries are read from: a broker's state, or a data dir opened by the CLI."""
    datadir: object         # storage.datadir.DataDir
    broker: BrokerConfig

# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8
# as Kafka's tools print them (ConfigEntry.ConfigSource)
SOURCE_NAMES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                8: "GROUP_CONFIG"}

# DescribeConfigsResponse.ConfigType
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "password": 9}


@dataclass
class ConfigEntry:
    """One DescribeConfigs entry, before it becomes the response version's kio class."""
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, int]]
    config_type: int
    documentation: str | None

    def printed(self) -> "Entry":
        """The entry as ``configs --describe`` prints it."""
        return Entry(self.name, self.value, SOURCE_NAMES.get(self.source, "UNKNOWN"), self.sensitive,
                     [(SOURCE_NAMES.get(s, "UNKNOWN"), n, v) for n, v, s in self.synonyms])


# DynamicBrokerConfig.brokerConfigSynonyms: broker settings that stand for one another
_SYNONYM_GROUPS = {name: d.broker for d in TOPIC_CONFIGS.values() if len(d.broker) > 1 for name in d.broker}
_TOPIC_BY_BROKER_NAME = {name: d for d in TOPIC_CONFIGS.values() for name in d.broker}
# broker settings whose Kafka default is null (KafkaConfig.defaultValues leaves them out) or in
# another unit than the topic config they stand for
_NO_BROKER_DEFAULT = frozenset({"log.roll.ms", "log.roll.jitter.ms", "log.retention.ms",
                                "log.retention.minutes", "log.flush.interval.ms"})
UNIT_SETTINGS = {"log.roll.hours": ("int", "168"), "log.roll.jitter.hours": ("int", "0"),
                  "log.retention.minutes": ("int", None), "log.retention.hours": ("int", "168")}


def _broker_default(name: str) -> str | None:
    if name in _NO_BROKER_DEFAULT:
        return None
    if name in UNIT_SETTINGS:
        return UNIT_SETTINGS[name][1]
    d = BROKER_CONFIGS.get(name) or _TOPIC_BY_BROKER_NAME.get(name)
    if d is None or d.default is None:
        return None
    return kafka_string(d.kind, d.default)


def _broker_kind(name: str) -> str | None:
    if name in UNIT_SETTINGS:
        return UNIT_SETTINGS[name][0]
    d = BROKER_CONFIGS.get(name) or _TOPIC_BY_BROKER_NAME.get(name)
    return d.kind if d is not None else None


def _broker_synonyms(name: str, broker) -> list[tuple[str, str | None, int]]:
    """ConfigHelper.configSynonyms: this broker's dynamic settings, the cluster-wide dynamic ones,
    the static ones, then Kafka's defaults, of ``name`` and the settings standing for it, with the
    ones before ``name`` itself dropped (as Kafka does)."""
    group = _SYNONYM_GROUPS.get(name, (name,))
    found = []
    for layer, source in ((broker.dynamic_broker, SOURCE_DYNAMIC_BROKER),
                          (broker.dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
                          (broker.static_props, SOURCE_STATIC_BROKER)):
        found += [(n, layer[n], source) for n in group if n in layer]
    found += [(n, default, SOURCE_DEFAULT) for n in group if (default := _broker_default(n)) is not None]
    while found and found[0][0] != name:
        found.pop(0)
    return found


def topic_config_entries(state: Described, topic: str) -> list[ConfigEntry]:
    """Every topic config of ``topic`` with its effective value, source and synonyms
    (ConfigHelper.createTopicConfigEntry), sorted by name."""
    cfg = state.datadir.topic_config(topic)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        value = kafka_string(d.kind, cfg.get(name))
        synonyms = [(name, value, SOURCE_TOPIC)] if name in cfg.overrides else []
        if d.broker:
            synonyms += _broker_synonyms(d.broker[0], state.broker)
        entries.append(ConfigEntry(name, value, synonyms[0][2] if synonyms else SOURCE_DEFAULT, False,
                                   False, synonyms, CONFIG_TYPES[d.kind], d.doc or None))
    return entries


def _is_sensitive(name: str, kind: str | None) -> bool:
    # KafkaConfig.maybeSensitive: a PASSWORD setting, or one whose type is not known; compactlog
    # knows Kafka's names but not their types, so a known name is shown unless it holds a secret
    if is_secret_setting(name) or kind == "password":     # a declared PASSWORD, whatever its name
        return True
    if kind is not None:
        return False
    if name not in KAFKA_BROKER_SETTINGS and not name.startswith("listener.name."):
        return True
    return "password" in name or name.endswith("jaas.config") or "secret" in name


def broker_config_entries(state: Described, *, per_broker: bool = True) -> list[ConfigEntry]:
    """The node's settings (ConfigHelper.createBrokerConfigEntry): compactlog's broker settings,
    the broker settings that default topic configs, and whatever server.properties, --override or
    a dynamic change set; each with its source and synonyms, read-only unless Kafka can change it
    at run time. Not ``per_broker`` (the resource named ""): the cluster-wide dynamic defaults only."""
    broker = state.broker
    if not per_broker:
        return [ConfigEntry(name, None if _is_sensitive(name, _dynamic_kind(name)) else value,
                            SOURCE_DYNAMIC_DEFAULT_BROKER, False, _is_sensitive(name, _dynamic_kind(name)),
                            [(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER)],
                            CONFIG_TYPES.get(_dynamic_kind(name), 0), _broker_doc(name))
                for name, value in sorted(broker.dynamic_default.items())]
    props = broker.props
    names = set(BROKER_CONFIGS) | set(_TOPIC_BY_BROKER_NAME) | set(UNIT_SETTINGS) | set(props)
    entries = []
    for name in sorted(names):
        kind = _broker_kind(name) or _dynamic_kind(name)
        sensitive = _is_sensitive(name, kind)
        value = props[name] if name in props else _broker_default(name)
        synonyms = [(n, None if sensitive else v, s) for n, v, s in _broker_synonyms(name, broker)]
        entries.append(ConfigEntry(name, None if sensitive else value,
                                   synonyms[0][2] if synonyms else SOURCE_DEFAULT,
                                   not is_dynamic(name), sensitive,
                                   synonyms, CONFIG_TYPES.get(kind, 0), _broker_doc(name)))
    return entries


def _dynamic_kind(name: str) -> str | None:
    return broker_kind(name)


def group_config_entries(state: Described, group: str) -> list[ConfigEntry]:
    """A group's configs (ConfigHelper.createGroupConfigEntry): the group's override (GROUP_CONFIG),
    else the broker setting that defaults it (with its own synonyms), else Kafka's default."""
    broker = state.broker
    overrides = broker.dynamic_groups.get(group, {})
    entries = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        if d.broker is not None:
            synonyms = _broker_synonyms(d.broker, broker) or [(d.broker, GROUP_BROKER_DEFAULTS[d.broker],
                                                               SOURCE_DEFAULT)]
        else:
            synonyms = [(name, d.default, SOURCE_DEFAULT)]
        value = overrides.get(name, group_default(broker, d))
        if name in overrides:
            synonyms = [(name, value, SOURCE_GROUP)] + synonyms
        entries.append(ConfigEntry(name, value, synonyms[0][2], False, False, synonyms,
                                   CONFIG_TYPES[d.kind], d.doc or None))
    return entries


def _broker_doc(name: str) -> str | None:
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name].doc
    d = _TOPIC_BY_BROKER_NAME.get(name)
    if d is not None:
        return f"Default of the topic config {d.name} for topics that do not set it."
    return None


# -- how configs --describe prints them (Kafka's ConfigCommand) -----------------------------------

# the source of the entries a --describe without --all shows
DYNAMIC_SOURCE = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG"}
DEFAULT_BROKER_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"


@dataclass
class Entity:
    kind: str                # topics or brokers
    name: str | None         # None: every entity of the kind; "": the brokers' default


@dataclass
class Entry:
    """One described config as the tool prints it, from the data dir (``ConfigEntry.printed``) or
    from a broker's answer (sources by their names)."""
    name: str
    value: str | None
    source: str
    sensitive: bool
    synonyms: list[tuple[str, str, str | None]]      # (source, name, value)

    def line(self) -> str:
        syn = ", ".join(f"{s}:{n}={_java(v)}" for s, n, v in self.synonyms)
        return f"  {self.name}={_java(self.value)} sensitive={'true' if self.sensitive else 'false'} synonyms={{{syn}}}"


def _java(value) -> str:
    return "null" if value is None else str(value)


def section_header(kind: str, name: str, all_: bool) -> str:
    """The line over one entity's entries."""
    if name == "":
        return f"Default configs for {kind} in the cluster are:"
    return f"{'All' if all_ else 'Dynamic'} configs for {kind[:-1]} {name} are:"


def shown_entries(entries: list[Entry], kind: str, name: str, all_: bool) -> list[Entry]:
    """ConfigCommand.getResourceConfig: the dynamic entries (all of them with --all), by name."""
    if not all_:
        source = DEFAULT_BROKER_SOURCE if kind == "brokers" and name == "" else DYNAMIC_SOURCE[kind]
        entries = [e for e in entries if e.source == source]
    return sorted(entries, key=lambda e: e.name)
