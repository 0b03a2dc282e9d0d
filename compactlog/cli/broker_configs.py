"""``configs --bootstrap-server``: kafka-configs.sh's describe and alter through a broker
(ConfigCommand.describeResourceConfig / alterResourceConfig) with confluent-kafka's AdminClient."""

from __future__ import annotations

from ..storage.config_entries import Entity, Entry, section_header, shown_entries
from .remote import BrokerError, admin_client, alter_configs, alter_default_broker_configs, config_entries, \
    default_broker_entries, result, source_name, topic_partitions


def _entries(admin, entity: Entity, name: str, bootstrap: str) -> list[Entry]:
    if entity.kind == "brokers" and name == "":
        return [Entry(*e) for e in default_broker_entries(bootstrap)]
    out = []
    for e in config_entries(admin, "topic" if entity.kind == "topics" else "broker", name):
        synonyms = [(source_name(s.source), s.name, s.value) for s in e.synonyms.values()]
        out.append(Entry(e.name, e.value, source_name(e.source), e.is_sensitive, synonyms))
    return out


def _broker_ids(admin) -> list[str]:
    return [str(n.id) for n in result(admin.describe_cluster(), "DescribeCluster").nodes]


def describe_through_broker(bootstrap: str, entity: Entity, all_: bool) -> list[tuple[str, list[Entry]]]:
    admin = admin_client(bootstrap)      # referenced until its futures resolve (librdkafka)
    if entity.kind == "topics":
        names = sorted(topic_partitions(admin, bootstrap, None))
        if entity.name is not None:
            if entity.name not in names:
                return [(f"The topic '{entity.name}' doesn't exist and doesn't have dynamic config.", [])]
            names = [entity.name]
    else:
        ids = _broker_ids(admin)
        if entity.name is not None:
            if entity.name not in ids and entity.name != "":
                return [(f"The broker '{entity.name}' doesn't exist and doesn't have dynamic config.", [])]
            names = [entity.name]
        else:
            names = ids + [""]
    return [(section_header(entity.kind, n, all_),
             shown_entries(_entries(admin, entity, n, bootstrap), entity.kind, n, all_))
            for n in names]


def alter_through_broker(bootstrap: str, entity: Entity, changes: dict[str, str], removals: list[str]) -> None:
    admin = admin_client(bootstrap)
    if removals:
        # as Kafka's tool: a config to delete must be one the entity has (a dynamic one)
        dynamic = {e.name for e in shown_entries(_entries(admin, entity, entity.name, bootstrap), entity.kind,
                                                 entity.name, False)}
        invalid = [n for n in removals if n not in dynamic]
        if invalid:
            raise BrokerError(f"Invalid config(s): {','.join(invalid)}")
    if entity.kind == "brokers":
        _note_custom_names(changes)
    if entity.kind == "brokers" and entity.name == "":
        alter_default_broker_configs(bootstrap, changes, removals)
        return
    alter_configs(admin, "topic" if entity.kind == "topics" else "broker", entity.name, changes, removals)


def _note_custom_names(changes: dict[str, str]) -> None:
    """A broker keeps a name it does not know as a custom setting (as Kafka's does), so a typo is
    not refused: say so on stderr, with the name it may have meant."""
    import typer
    from ..storage.config import broker_setting_names, did_you_mean
    known = broker_setting_names()
    for name in changes:
        if name not in known and not name.startswith("listener.name."):
            typer.echo(f"note: {name} is not a Kafka broker setting: the broker keeps it as a custom setting"
                       f"{did_you_mean(name, known)}", err=True)

