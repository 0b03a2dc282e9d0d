"""``topics describe|alter --bootstrap-server``: kafka-topics.sh --describe through a broker (Kafka's
TopicCommand output: a topic line, then one line per partition) and topic config changes
through IncrementalAlterConfigs, with confluent-kafka's AdminClient."""

from __future__ import annotations

import json

import typer

from .remote import BrokerError, admin_client, alter_configs, config_entries, describe_topics, kafka_uuid, \
    source_name, topic_partitions

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def describe_through_broker(bootstrap: str, topic: str | None, as_json: bool) -> None:
    admin = admin_client(bootstrap)      # referenced until its futures resolve (librdkafka)
    names = [topic] if topic is not None else sorted(topic_partitions(admin, bootstrap, None))
    if not names:
        return
    for name, d in describe_topics(admin, names).items():
        described = _described(name, d, config_entries(admin, "topic", name))
        if as_json:
            typer.echo(json.dumps(described))
        else:
            _print(described)


def _described(name: str, d, entries) -> dict:
    parts = sorted(d.partitions, key=lambda p: p.id)
    return {"topic": name, "topicId": kafka_uuid(d.topic_id), "partitionCount": len(parts),
            "replicationFactor": len(parts[0].replicas) if parts else 0,
            "configs": [{"name": e.name, "value": e.value, "source": source_name(e.source)} for e in entries],
            "partitions": [{"partition": p.id, "leader": p.leader.id if p.leader is not None else None,
                            "replicas": [n.id for n in p.replicas], "isr": [n.id for n in p.isr]}
                           for p in parts]}


def _print(d: dict) -> None:
    """TopicCommand's TopicDescription and PartitionDescription lines (no ELR: the Metadata API
    has none, so Kafka's tool prints N/A too)."""
    configs = ",".join(f"{c['name']}={c['value']}" for c in d["configs"] if c["source"] != "DEFAULT_CONFIG")
    head = f"Topic: {d['topic']}"
    if d["topicId"] != ZERO_UUID:
        head += f"\tTopicId: {d['topicId']}"
    typer.echo(f"{head}\tPartitionCount: {d['partitionCount']}\tReplicationFactor: {d['replicationFactor']}"
               f"\tConfigs: {configs}")
    for p in d["partitions"]:
        leader = "none" if p["leader"] is None else p["leader"]
        typer.echo(f"\tTopic: {d['topic']}\tPartition: {p['partition']}\tLeader: {leader}"
                   f"\tReplicas: {','.join(map(str, p['replicas']))}\tIsr: {','.join(map(str, p['isr']))}"
                   f"\tElr: N/A\tLastKnownElr: N/A")


def alter_through_broker(bootstrap: str, topic: str, changes: dict[str, str], removals: list[str]) -> None:
    """Set and remove topic config overrides; removing one that is not set is refused before
    anything is sent, as offline (Kafka's broker would ignore it silently)."""
    admin = admin_client(bootstrap)
    if removals:
        overrides = {e.name for e in config_entries(admin, "topic", topic)
                     if source_name(e.source) == "DYNAMIC_TOPIC_CONFIG"}
        for name in removals:
            if name not in overrides:
                raise BrokerError(f"--delete-config {name}: topic {topic!r} has no override for {name}")
    alter_configs(admin, "topic", topic, changes, removals)
