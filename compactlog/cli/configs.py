"""``configs``: kafka-configs.sh for topics and brokers, through a broker (``--bootstrap-server``:
DescribeConfigs and IncrementalAlterConfigs with confluent-kafka's AdminClient, in
``broker_configs.py``) or on a data dir; either side's entries are printed by ``config_entries.py``.

Kafka's options and output (ConfigCommand): ``--describe [--all]`` prints ``Dynamic configs for
topic T are:`` (or ``All configs ...``, ``Default configs for brokers in the cluster are:``) and one
``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` line per config, sorted by name;
``--alter --add-config k=v,k2=[a,b] / --add-config-file F / --delete-config k,k2`` prints
``Completed updating config for topic T.``. Entities: ``--entity-type topics|brokers`` with
``--entity-name N`` or ``--entity-default`` (brokers), or ``--topic T``, ``--broker N``,
``--broker-defaults``. Kafka's other entity types (clients, users, ips, client-metrics, groups,
broker-loggers) are not offered.

On a data dir (no broker running for ``--alter``, which takes the data-dir lock): a topic's configs
are its overrides in ``compactlog.topics.json``, described exactly as the broker describes them
(the same entries, sources and synonyms); a broker's settings are ``DIR/server.properties``
(STATIC_BROKER_CONFIG: ``--describe --all`` shows them, ``--alter`` rewrites the file, read when
``serve`` starts). Through a broker, a broker's ``--alter`` (``--entity-name N`` or
``--entity-default``) changes its dynamic configs (Kafka's DynamicBrokerConfig,
``storage/dynamic_config.py``): a setting Kafka cannot change at run time is refused with Kafka's
message, a name Kafka does not know is kept as a custom setting (``broker_configs.py`` says so).
"""

from __future__ import annotations

import os
import re

import typer

from ..errors import ConfigError, TopicError
from .apps import app
from .common import context, fail
from .config_entries import Entity, Entry, section_header, shown_entries

ENTITY_TYPES = ("topics", "brokers")
RESOURCE = {"topics": "topic", "brokers": "broker"}
SOURCE_NAMES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}

# ConfigCommand.parseConfigsToBeAdded: commas and '=' outside square brackets separate
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_KEY = re.compile(r"[$a-zA-Z0-9._-]*")


@app.command("configs")
def configs_cmd(ctx: typer.Context,
                describe: bool = typer.Option(False, "--describe", help="List configs for the given entity."),
                alter: bool = typer.Option(False, "--alter", help="Alter the configuration for the entity."),
                all_: bool = typer.Option(False, "--all", help="With --describe: every config, not only the "
                                                              "dynamic (overridden) ones."),
                entity_type: str = typer.Option(None, "--entity-type", help="topics or brokers."),
                entity_name: str = typer.Option(None, "--entity-name", help="The topic name or broker id."),
                entity_default: bool = typer.Option(False, "--entity-default",
                                                    help="The brokers' cluster-wide default (brokers only)."),
                topic: str = typer.Option(None, "--topic", help="Same as --entity-type topics --entity-name T."),
                broker: str = typer.Option(None, "--broker", help="Same as --entity-type brokers --entity-name N."),
                broker_defaults: bool = typer.Option(False, "--broker-defaults",
                                                     help="Same as --entity-type brokers --entity-default."),
                add_config: list[str] = typer.Option(None, "--add-config",
                                                     help="Configs to set: k1=v1,k2=[v1,v2],k3=v3 (square "
                                                          "brackets group values holding commas)."),
                add_config_file: str = typer.Option(None, "--add-config-file",
                                                    help="A properties file of configs to set."),
                delete_config: list[str] = typer.Option(None, "--delete-config",
                                                        help="Config names to remove: k1,k2 (repeatable)."),
                bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                     help="The broker to ask (HOST:PORT); default: the data dir.")):
    """Describe or alter topic and broker configs (kafka-configs.sh)."""
    if describe == alter:
        fail("Command must include exactly one action: --describe, --alter", 2)
    if describe and (add_config or add_config_file or delete_config):
        fail("--add-config, --add-config-file and --delete-config go with --alter, not --describe", 2)
    entity = _entity(entity_type, entity_name, entity_default, topic, broker, broker_defaults, alter)
    if describe:
        if bootstrap_server:
            from .broker_configs import describe_through_broker
            sections = describe_through_broker(bootstrap_server, entity, all_)
        else:
            sections = _describe_offline(context(ctx), entity, all_)
        for header, entries in sections:
            typer.echo(header)
            for e in entries:
                typer.echo(e.line())
        return
    if all_:
        fail("--all goes with --describe", 2)
    changes = configs_to_add(add_config, add_config_file)
    removals = [n.strip() for item in delete_config or () for n in item.split(",") if n.strip()]
    if not changes and not removals:
        fail("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter", 2)
    if bootstrap_server:
        from .broker_configs import alter_through_broker
        alter_through_broker(bootstrap_server, entity, changes, removals)
    else:
        _alter_offline(context(ctx), entity, changes, removals)
    if entity.name:
        typer.echo(f"Completed updating config for {entity.kind[:-1]} {entity.name}.")
    else:
        typer.echo(f"Completed updating default config for {entity.kind} in the cluster.")


def _entity(entity_type, entity_name, entity_default, topic, broker, broker_defaults, alter: bool) -> Entity:
    """ConfigCommand's checks of the entity options, in its words."""
    flags = [("topics", topic), ("brokers", broker)]
    flagged = [(k, v) for k, v in flags if v is not None] + ([("brokers", "")] if broker_defaults else [])
    generic = entity_type is not None or entity_name is not None or entity_default
    if generic and flagged:
        fail("--entity-{type,name,default} should not be used in conjunction with specific entity flags", 2)
    if len(flagged) > 1:
        fail("Only one entity may be given: --topic, --broker or --broker-defaults", 2)
    if flagged:
        kind, name = flagged[0]
    else:
        if entity_type is None:
            fail("At least one entity type must be specified", 2)
        if entity_type not in ENTITY_TYPES:
            fail(f"Invalid entity type {entity_type}, the entity type must be one of {', '.join(ENTITY_TYPES)} "
                 f"(clients, users, ips, client-metrics, groups and broker-loggers are not offered here)", 2)
        if entity_name is not None and entity_default:
            fail("--entity-name and --entity-default cannot be given together", 2)
        kind, name = entity_type, ("" if entity_default else entity_name)
    if kind == "topics" and name == "":
        fail(f"--entity-default must not be specified with --{'alter' if alter else 'describe'} of topics", 2)
    if kind == "brokers" and name:
        try:
            int(name)
        except ValueError:
            fail(f"The entity name for brokers must be a valid integer broker id, but it is: {name}", 2)
    if alter and name is None:
        fail("An entity name must be specified with --alter of topics" if kind == "topics" else
             "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips", 2)
    return Entity(kind, name)


def configs_to_add(add_config: list[str] | None, path: str | None) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded."""
    if add_config and path:
        fail("Only one of --add-config or --add-config-file must be specified", 2)
    out: dict[str, str] = {}
    if path:
        from ..storage.config import read_properties
        if not os.path.isfile(path):
            fail(f"--add-config-file {path}: no such file", 2)
        out.update(read_properties(path))
    for text in add_config or ():
        for item in re.split("," + _OUTSIDE_BRACKETS, text):
            pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
            if len(pair) != 2:
                fail('Invalid entity config: all configs to be added must be in the format "key=val" or '
                     '"key=[val1,val2]" to group values which contain commas.', 2)
            out[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    for key in out:
        if not _KEY.fullmatch(key):
            fail(f"Invalid character found for config key: {key}", 2)
    return out


# -- on a data dir --------------------------------------------------------------------------------

class _Node:
    """What the broker's DescribeConfigs helpers read (``config_entries``): the data dir and its
    broker settings."""

    def __init__(self, datadir, broker):
        self.datadir = datadir
        self.broker = broker


def entry_of(e) -> Entry:
    """A server-side ConfigEntry (server.apis.config_entries) as the tool prints it."""
    return Entry(e.name, e.value, SOURCE_NAMES.get(e.source, "UNKNOWN"), e.sensitive,
                 [(SOURCE_NAMES.get(s, "UNKNOWN"), n, v) for n, v, s in e.synonyms])


def _describe_offline(c, entity: Entity, all_: bool) -> list[tuple[str, list[Entry]]]:
    from ..server import broker_config_entries, topic_config_entries
    sections = []
    with c.open(write=False) as dd:
        node = _Node(dd, dd.broker)
        if entity.kind == "topics":
            if entity.name is not None and not dd.has_topic(entity.name):
                return [(f"The topic '{entity.name}' doesn't exist and doesn't have dynamic config.", [])]
            for name in [entity.name] if entity.name is not None else dd.topics():
                entries = [entry_of(e) for e in topic_config_entries(node, name)]
                sections.append((section_header(entity.kind, name, all_),
                                 shown_entries(entries, entity.kind, name, all_)))
            return sections
        node_id = node_id_of(dd.path, dd.broker)
        names = [entity.name] if entity.name is not None else [str(node_id), ""]
        for name in names:
            if name not in ("", str(node_id)):
                return [(f"The broker '{name}' doesn't exist and doesn't have dynamic config.", [])]
            entries = [] if name == "" else [entry_of(e) for e in broker_config_entries(node)]
            sections.append((section_header(entity.kind, name, all_), shown_entries(entries, entity.kind, name, all_)))
    return sections


def node_id_of(path: str, broker) -> int:
    """The node id a broker on this dir has: meta.properties, else node.id, else 0."""
    from .tools import _node_id
    if os.path.exists(os.path.join(path, "meta.properties")):
        return _node_id(path)
    try:
        return int(broker.props.get("node.id", 0))
    except ValueError:
        return 0


def _alter_offline(c, entity: Entity, changes: dict[str, str], removals: list[str]) -> None:
    if entity.kind == "topics":
        with c.open(write=True) as dd:
            if not dd.has_topic(entity.name):
                raise TopicError(f"topic {entity.name!r} does not exist in {dd.path}")
            current = dd.topic_config(entity.name)
            invalid = [n for n in removals if n not in current.overrides]
            if invalid:
                raise ConfigError(f"Invalid config(s): {','.join(invalid)}")
            current.with_overrides(changes, removals)   # every name and value checked first
            dd.alter_topic(entity.name, changes, removals)
        return
    from .server_properties import alter_server_properties
    with c.open(write=True) as dd:
        node_id = node_id_of(dd.path, dd.broker)
        if entity.name not in ("", str(node_id)):
            raise ConfigError(f"Unexpected broker id, expected {node_id} or empty string, but received {entity.name}")
        path = alter_server_properties(dd.path, changes, removals)
    typer.echo(f"note: {path} updated (static settings: the broker reads them when it starts)", err=True)
