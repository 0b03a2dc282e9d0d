"""``topics create|list|describe|alter|delete``: kafka-topics.sh / kafka-configs.sh on a data dir, or
through a broker with ``--bootstrap-server`` (``broker_topics.py`` for describe and config changes).

Every name and value is validated (Kafka's names, types and ranges) before anything is written, so
a refused command leaves the data dir as it was. ``describe`` only reads: partition sizes and
offsets come from the segment files and checkpoints (``storage.reader``), without running the
log loader.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import typer

from ..errors import StorageError, TopicError
from ..storage import files
from ..storage.config import TOPIC_CONFIGS, LogConfig, UnknownConfigError
from .common import context, fail, parse_configs
from .apps import topics_app

@dataclass
class PartitionSummary:
    partition: int
    size_bytes: int
    log_start_offset: int
    log_end_offset: int
    segments: int


@dataclass
class ConfigRow:
    name: str
    value: str
    source: str        # override, broker (set in server.properties / --override) or default


# -- commands -----------------------------------------------------------------------------------

@topics_app.command("create")
def create_cmd(ctx: typer.Context,
               topic: str = typer.Option(..., "--topic", help="The topic to create."),
               partitions: int = typer.Option(None, "--partitions",
                                              help="Number of partitions (default: the broker's num.partitions)."),
               config: list[str] = typer.Option(None, "--config",
                                                help="A topic config K=V with Kafka's name, repeatable."),
               if_not_exists: bool = typer.Option(False, "--if-not-exists",
                                                  help="Succeed without a change when the topic exists."),
               bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                    help="Create it through this broker (HOST:PORT)."),
               replication_factor: int = typer.Option(None, "--replication-factor",
                                                      help="Copies of each partition: 1 (one node; the "
                                                           "default). Kafka's scripts pass it, so it is "
                                                           "accepted; above 1 is refused as Kafka refuses "
                                                           "it with one broker.")):
    """Create a topic: its partition directories and its configs."""
    c = context(ctx)
    configs = parse_configs(config)
    if replication_factor is not None and not 1 <= replication_factor <= 32767:
        fail("The replication factor must be between 1 and 32767 inclusive", 2)   # kafka-topics.sh's check
    if bootstrap_server:
        _create_remote(bootstrap_server, topic, partitions, replication_factor, configs, if_not_exists)
        return
    if replication_factor is not None and replication_factor > 1:
        # Kafka's InvalidReplicationFactorException, with this node as the only broker
        raise TopicError(f"Replication factor: {replication_factor} larger than available brokers: 1.")
    broker = c.broker()
    count = broker.get("num.partitions") if partitions is None else partitions
    # validated before the data dir is opened (or created): a refused command writes nothing
    _validate_topic_name(topic)
    if count < 1:
        fail(f"--partitions must be at least 1, got {count}")
    LogConfig(configs, broker)
    with c.open(write=True, create=True) as dd:
        if if_not_exists and dd.has_topic(topic):
            return
        dd.create_topic(topic, count, configs)
    typer.echo(f"Created topic {topic}.")


def _create_remote(bootstrap: str, topic: str, partitions: int | None, replication_factor: int | None,
                   configs: dict, if_not_exists: bool) -> None:
    from confluent_kafka.admin import NewTopic
    from .remote import BrokerError, admin_client, result, unknown_name_hint
    admin = admin_client(bootstrap)
    new = NewTopic(topic, num_partitions=-1 if partitions is None else partitions,
                   replication_factor=-1 if replication_factor is None else replication_factor, config=configs)
    try:
        result(admin.create_topics([new])[topic], f"topic {topic!r}")
    except BrokerError as e:
        if if_not_exists and "TOPIC_ALREADY_EXISTS" in str(e):
            return
        raise BrokerError(f"{e}{unknown_name_hint(str(e), list(configs), 'topic')}") from None
    typer.echo(f"Created topic {topic}.")


@topics_app.command("list")
def list_cmd(ctx: typer.Context,
             as_json: bool = typer.Option(False, "--json", help="One JSON array of {name, partitions, "
                                          "configured} objects."),
             bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                  help="List the topics of this broker (HOST:PORT)."),
             exclude_internal: bool = typer.Option(False, "--exclude-internal",
                                                   help="Leave out topics whose name starts with __.")):
    """Every topic of the data dir, one per line (also topics Kafka wrote, found by their directories)."""
    if bootstrap_server:
        from .remote import admin_client, topic_partitions
        admin = admin_client(bootstrap_server)
        rows = [{"name": t, "partitions": len(p)}
                for t, p in sorted(topic_partitions(admin, bootstrap_server, None).items())]
    else:
        with context(ctx).open(write=False) as dd:
            rows = [{"name": t, "partitions": len(dd.partitions(t)), "configured": dd.is_configured(t)}
                    for t in dd.topics()]
    if exclude_internal:
        rows = [r for r in rows if not r["name"].startswith("__")]
    if as_json:
        typer.echo(json.dumps(rows))
        return
    for r in rows:
        typer.echo(r["name"])


@topics_app.command("describe")
def describe_cmd(ctx: typer.Context,
                 topic: str = typer.Option(None, "--topic", help="The topic to describe (default: every topic)."),
                 as_json: bool = typer.Option(False, "--json", help="One JSON object per topic."),
                 bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                      help="Describe it through this broker (HOST:PORT), as "
                                                           "kafka-topics.sh --describe prints it: a topic line, "
                                                           "then each partition's leader, replicas and ISR.")):
    """Configs (override or default) and, per partition, size, log start/end offset and segments."""
    if bootstrap_server:
        from .broker_topics import describe_through_broker
        describe_through_broker(bootstrap_server, topic, as_json)
        return
    with context(ctx).open(write=False) as dd:
        names = [topic] if topic is not None else dd.topics()
        for name in names:
            if not dd.has_topic(name):
                raise TopicError(f"topic {name!r} does not exist in {dd.path}")
            described = _describe_topic(dd, name)
            if as_json:
                typer.echo(json.dumps(described))
            else:
                _print_description(described)


@topics_app.command("alter")
def alter_cmd(ctx: typer.Context,
              topic: str = typer.Option(..., "--topic", help="The topic to alter."),
              config: list[str] = typer.Option(None, "--config", help="Set a topic config K=V, repeatable."),
              delete_config: list[str] = typer.Option(None, "--delete-config",
                                                      help="Remove an override (back to the default), repeatable."),
              partitions: int = typer.Option(None, "--partitions",
                                             help="Grow the topic to this many partitions (kafka-topics.sh --alter "
                                                  "--partitions; a topic never shrinks)."),
              bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                   help="Alter it through this broker (HOST:PORT): partitions "
                                                        "with CreatePartitions, configs with "
                                                        "IncrementalAlterConfigs.")):
    """Set or remove topic config overrides (kafka-configs.sh --alter), or add partitions."""
    c = context(ctx)
    changes = parse_configs(config)
    removals = list(delete_config or [])
    if not changes and not removals and partitions is None:
        fail("nothing to alter: give --config K=V, --delete-config K or --partitions N")
    if partitions is not None:
        if changes or removals:
            fail("--partitions cannot be combined with --config/--delete-config (two separate commands, "
                 "as kafka-topics.sh and kafka-configs.sh)")
        _add_partitions(c, topic, partitions, bootstrap_server)
        return
    if bootstrap_server:
        from .broker_topics import alter_through_broker
        alter_through_broker(bootstrap_server, topic, changes, removals)
        typer.echo(f"Completed updating config for topic {topic}.")
        return
    with c.open(write=True) as dd:
        if not dd.has_topic(topic):
            raise TopicError(f"topic {topic!r} does not exist in {dd.path}")
        current = dd.topic_config(topic)
        for name in removals:
            if name not in TOPIC_CONFIGS:
                fail(f"--delete-config {name}: {UnknownConfigError(name)}")
            if name not in current.overrides:
                # Kafka refuses to delete a config that is not set (InvalidConfigurationException)
                fail(f"--delete-config {name}: topic {topic!r} has no override for {name}")
        current.with_overrides(changes, removals)   # validates every name and value first
        dd.alter_topic(topic, changes, removals)
    typer.echo(f"Completed updating config for topic {topic}.")


def _add_partitions(c, topic: str, count: int, bootstrap: str | None) -> None:
    if count < 1:
        fail(f"--partitions must be at least 1, got {count}")
    if bootstrap:
        from confluent_kafka.admin import NewPartitions
        from .remote import admin_client, result
        admin = admin_client(bootstrap)      # referenced until its future resolves (librdkafka)
        result(admin.create_partitions([NewPartitions(topic, count)])[topic], f"topic {topic!r}")
    else:
        with c.open(write=True) as dd:
            added = dd.add_partitions(topic, count)
        if not added:
            return
    typer.echo(f"Topic {topic} now has {count} partitions.")


@topics_app.command("delete")
def delete_cmd(ctx: typer.Context, topic: str = typer.Option(..., "--topic", help="The topic to delete."),
               bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                    help="Delete it through this broker (HOST:PORT).")):
    """Delete a topic: its partition directories, its configs and its checkpoint entries."""
    if bootstrap_server:
        from .remote import admin_client, result
        admin = admin_client(bootstrap_server)      # referenced until its future resolves (librdkafka)
        result(admin.delete_topics([topic])[topic], f"topic {topic!r}")
    else:
        with context(ctx).open(write=True) as dd:
            dd.delete_topic(topic)
    typer.echo(f"Deleted topic {topic}.")


# -- describe -----------------------------------------------------------------------------------

def _validate_topic_name(topic: str) -> None:
    try:
        files.validate_topic_name(topic)
    except ValueError as e:
        raise TopicError(str(e)) from None


def _describe_topic(dd, topic: str) -> dict:
    config = dd.topic_config(topic)
    partitions = [partition_summary(dd.path, topic, p) for p in dd.partitions(topic)]
    return {"topic": topic, "topicId": _topic_id(dd.path, topic, dd.partitions(topic)),
            "partitionCount": len(partitions),
            "configs": [asdict(r) for r in config_rows(config)],
            "partitions": [asdict(p) for p in partitions]}


def config_rows(config: LogConfig) -> list[ConfigRow]:
    rows = []
    for name, d in TOPIC_CONFIGS.items():
        if not config.is_default(name):
            source = "override"
        elif any(prop in config.broker.props for prop in d.broker):
            source = "broker"
        else:
            source = "default"
        rows.append(ConfigRow(name, format_config_value(config.get(name)), source))
    return rows


def format_config_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(v)
    return str(v)


def _topic_id(root: str, topic: str, partitions: list[int]) -> str | None:
    from ..storage.checkpoint import PartitionMetadataFile
    for p in partitions:
        try:
            tid = PartitionMetadataFile(os.path.join(root, files.partition_dir_name(topic, p),
                                                     files.PARTITION_METADATA)).read()
        except StorageError:
            tid = None
        if tid:
            return tid
    return None


def _print_description(d: dict) -> None:
    overrides = ",".join(f"{r['name']}={r['value']}" for r in d["configs"] if r["source"] == "override")
    typer.echo(f"Topic: {d['topic']}\tTopicId: {d['topicId'] or '-'}\tPartitionCount: {d['partitionCount']}"
               f"\tConfigs: {overrides}")
    typer.echo("  Configs:")
    _print_table([("NAME", "VALUE", "SOURCE")] + [(r["name"], r["value"], r["source"]) for r in d["configs"]])
    typer.echo("  Partitions:")
    _print_table([("PARTITION", "SIZE-BYTES", "LOG-START-OFFSET", "LOG-END-OFFSET", "SEGMENTS")]
                 + [(str(p["partition"]), str(p["size_bytes"]), str(p["log_start_offset"]),
                     str(p["log_end_offset"]), str(p["segments"])) for p in d["partitions"]])


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        typer.echo("    " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())


# -- read-only partition facts --------------------------------------------------------------------

def partition_summary(root: str, topic: str, partition: int) -> PartitionSummary:
    """Size, log start/end offset and segment count of a partition, from its files only (the
    read-only reader resolves leftover .swap/.cleaned/.deleted files as Kafka's loader would)."""
    from ..storage.reader import PartitionReader
    pdir = os.path.join(root, files.partition_dir_name(topic, partition))
    if not os.path.isdir(pdir):
        return PartitionSummary(partition, 0, 0, 0, 0)
    reader = PartitionReader(pdir)
    segments = reader.segments()
    return PartitionSummary(partition, sum(s.size for s in segments), reader.log_start_offset,
                            reader.log_end_offset, len(segments))
