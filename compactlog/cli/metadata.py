"""``metadata``: a broker's metadata as ``kcat -L`` prints it (brokers, the controller, topics, each
partition's leader, replicas and in-sync replicas, and any error), from a Metadata request through
confluent-kafka's AdminClient (which, unlike kcat's producer, never creates the topic it asks about).
``--json`` prints ``kcat -L -J``'s object."""

from __future__ import annotations

import json

import typer

from .apps import app
from .remote import TIMEOUT_S, BrokerError


@app.command("metadata")
def metadata_cmd(bootstrap_server: str = typer.Option(..., "--bootstrap-server",
                                                      help="The broker to ask (HOST:PORT)."),
                 topic: str = typer.Option(None, "--topic", help="Only this topic (default: every topic)."),
                 as_json: bool = typer.Option(False, "--json", help="kcat -L -J's JSON object.")):
    """Brokers, topics, partitions, leaders, replicas and ISRs of a broker's cluster (kcat -L)."""
    from confluent_kafka import KafkaException
    from .remote import admin_client
    admin = admin_client(bootstrap_server)
    try:
        md = admin.list_topics(topic=topic, timeout=TIMEOUT_S)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        raise BrokerError(f"{bootstrap_server}: cannot read metadata: "
                          f"{err.str() if hasattr(err, 'str') else err}") from None
    doc = _document(md, topic)
    typer.echo(json.dumps(doc, separators=(",", ":")) if as_json else "\n".join(_lines(doc)))


def _document(md, topic: str | None) -> dict:
    brokers = [{"id": b.id, "name": f"{b.host}:{b.port}"} for b in sorted(md.brokers.values(), key=lambda b: b.id)]
    topics = []
    for name in sorted(md.topics):
        t = md.topics[name]
        entry = {"topic": name}
        if t.error is not None:
            entry["error"] = t.error.str()
        entry["partitions"] = []
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            part = {"partition": p.id, "leader": p.leader, "replicas": [{"id": r} for r in p.replicas],
                    "isrs": [{"id": r} for r in p.isrs]}
            if p.error is not None:
                part["error"] = p.error.str()
            entry["partitions"].append(part)
        topics.append(entry)
    return {"originating_broker": {"id": md.orig_broker_id, "name": md.orig_broker_name},
            "query": {"topic": topic if topic is not None else "*"}, "controllerid": md.controller_id,
            "brokers": brokers, "topics": topics}


def _lines(doc: dict) -> list[str]:
    """kcat's metadata_print."""
    origin = doc["originating_broker"]
    topic = doc["query"]["topic"]
    out = [f"Metadata for {'all topics' if topic == '*' else topic} (from broker {origin['id']}: {origin['name']}):",
           f" {len(doc['brokers'])} brokers:"]
    for b in doc["brokers"]:
        controller = " (controller)" if b["id"] == doc["controllerid"] else ""
        out.append(f"  broker {b['id']} at {b['name']}{controller}")
    out.append(f" {len(doc['topics'])} topics:")
    for t in doc["topics"]:
        error = f" {t['error']}" if "error" in t else ""
        out.append(f"  topic \"{t['topic']}\" with {len(t['partitions'])} partitions:{error}")
        for p in t["partitions"]:
            error = f", {p['error']}" if "error" in p else ""
            out.append(f"    partition {p['partition']}, leader {p['leader']}, replicas: "
                       f"{','.join(str(r['id']) for r in p['replicas'])}, isrs: "
                       f"{','.join(str(r['id']) for r in p['isrs'])}{error}")
    return out
