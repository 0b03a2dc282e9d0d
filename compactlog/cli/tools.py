"""Kafka's tools that compactlog lacked: ``get-offsets`` (kafka-get-offsets.sh), ``delete-records``
(kafka-delete-records.sh) and ``log-dirs`` (kafka-log-dirs.sh), with Kafka's option names and
output, on a data dir (``--data-dir``) or through a broker (``--bootstrap-server``)."""

from __future__ import annotations

import json
import os
import re

import typer

from ..errors import CompactlogError, TopicError
from ..storage import files
from .common import context, fail
from .apps import app

SPECIAL_TIMES = {"-1": -1, "latest": -1, "-2": -2, "earliest": -2, "-3": -3, "max-timestamp": -3}


def _time(value: str) -> int:
    if value in SPECIAL_TIMES:
        return SPECIAL_TIMES[value]
    try:
        t = int(value)
    except ValueError:
        fail(f"--time {value!r}: expected -1 (latest), -2 (earliest), -3 (max timestamp) or a time in ms", 2)
    if t < 0:
        fail(f"--time {t}: expected -1 (latest), -2 (earliest), -3 (max timestamp) or a time in ms "
             f"(0 or more; -4 and -5 name tiered storage, which a data dir does not have)", 2)
    return t


def _partition_filter(partitions: str | None):
    if partitions is None:
        return None
    out = set()
    for item in partitions.split(","):
        item = item.strip()
        try:
            if "-" in item:
                lo, hi = item.split("-", 1)
                out.update(range(int(lo), int(hi) + 1))
            else:
                out.add(int(item))
        except ValueError:
            fail(f"--partitions {partitions!r}: expected a comma-separated list of partitions or ranges (0,2-4)", 2)
    return out


def _topic_matcher(topic: str | None, exclude_internal: bool):
    try:
        rx = re.compile(topic) if topic is not None else None
    except re.error as e:
        fail(f"--topic {topic!r}: not a regular expression ({e})", 2)

    def match(name: str) -> bool:
        if exclude_internal and name.startswith("__"):
            return False
        return rx is None or rx.fullmatch(name) is not None
    return match


@app.command("get-offsets")
def get_offsets_cmd(ctx: typer.Context,
                    bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                         help="Ask this broker (HOST:PORT) instead of reading --data-dir."),
                    topic_partitions: str = typer.Option(None, "--topic-partitions",
                                                         help="Comma-separated topic-partition patterns, as Kafka's: "
                                                              "TOPIC_REGEX[:PARTITIONS], PARTITIONS a number, a range "
                                                              "N-M (M excluded), N- or -M, or nothing for all; an empty "
                                                              "topic matches any (t1:1,t2:0-3,t3,t4:5-,t5:-3,:0). Not "
                                                              "with --topic or --partitions."),
                    topic: str = typer.Option(None, "--topic", help="Topics to list: a name or a regular expression "
                                                                     "(default: all)."),
                    partitions: str = typer.Option(None, "--partitions", help="Only these partitions: 0,2-4."),
                    time_: str = typer.Option("-1", "--time", help="-1 or latest (the log end offset), -2 or "
                                              "earliest (the log start offset), -3 or max-timestamp (the record with "
                                              "the largest timestamp), or a time in ms (the first record at or after "
                                              "it)."),
                    exclude_internal: bool = typer.Option(False, "--exclude-internal-topics",
                                                          help="Leave out topics whose name starts with __.")):
    """topic:partition:offset per partition, as kafka-get-offsets.sh prints them."""
    when = _time(time_)
    if topic_partitions is not None:
        if topic is not None or partitions is not None:
            fail("--topic-partitions cannot be used with --topic or --partitions", 2)
        match, allowed = _topic_partition_filter(topic_partitions, exclude_internal)
    else:
        keep = _partition_filter(partitions)
        match = _topic_matcher(topic, exclude_internal)

        def allowed(t: str, p: int) -> bool:
            return keep is None or p in keep
    rows = (_offsets_from_broker(bootstrap_server, match, allowed, when) if bootstrap_server
            else _offsets_from_dir(context(ctx), match, allowed, when))
    if topic_partitions is not None and not rows:
        raise TopicError("Could not match any topic-partitions with the specified filters")
    if topic is not None and not rows:
        raise TopicError(f"no topic matches {topic!r}")
    for t, p, off in sorted(rows):
        typer.echo(f"{t}:{p}:{'' if off is None else off}")


# GetOffsetShell.TOPIC_PARTITION_PATTERN: a topic regex (empty: any topic), then optionally ':' and
# a partition (N), a range (N-M, M excluded; N- ; -M) or nothing (every partition)
_TOPIC_PARTITION = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_INT_MAX = 2 ** 31 - 1


def _java_split(text: str, sep: str) -> list[str]:
    """Java's String.split: the trailing empty strings dropped (``"a,"`` is one rule, ``""`` one
    empty rule)."""
    if sep not in text:
        return [text]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _topic_partition_filter(spec: str, exclude_internal: bool):
    """GetOffsetShell.createTopicPartitionFilterWithPatternList: a topic or partition passes when
    any rule lets it through. (topic test, (topic, partition) test)."""
    rules = []
    for rule in _java_split(spec, ","):
        m = _TOPIC_PARTITION.fullmatch(rule)
        if m is None:
            fail(f"Invalid rule specification: {rule}", 2)
        topic_rx, exact, low, high = (m.group(i) or None for i in range(1, 5))
        numbers = [int(n) for n in (exact, low, high) if n is not None]
        if any(n > _INT_MAX for n in numbers):
            fail(f"Invalid rule specification: {rule} (a partition is at most {_INT_MAX})", 2)
        if exact is not None:
            low, high = int(exact), int(exact) + 1
        else:
            low, high = int(low or 0), int(high) if high is not None else _INT_MAX
        rules.append((_include_list(topic_rx if topic_rx is not None else ".*"), low, high))

    def match(name: str) -> bool:
        if exclude_internal and name.startswith("__"):
            return False
        return any(rx.fullmatch(name) for rx, _, _ in rules)

    def allowed(name: str, p: int) -> bool:
        return any(rx.fullmatch(name) and low <= p < high for rx, low, high in rules)
    return match, allowed


def _include_list(raw: str) -> re.Pattern:
    """Kafka's TopicFilter.IncludeList: the regex trimmed, ',' as '|', spaces and surrounding quotes
    dropped (property files may bring quotes), matched against the whole topic name."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        fail(f"{regex} is an invalid regex.", 2)


def _offsets_from_dir(c, match, allowed, when: int) -> list[tuple[str, int, int | None]]:
    # consume --timestamp's lookup (Kafka's ListOffsets, its special times included), one reader
    # per partition; MAX_TIMESTAMP from batch headers, as the broker answers it
    from ..storage.reader import PartitionReader
    from .consume import start_at_time
    start = start_at_time(when)
    rows = []
    with c.open(write=False) as dd:
        for t in dd.topics():
            if not match(t):
                continue
            for p in dd.partitions(t):
                if not allowed(t, p):
                    continue
                reader = PartitionReader(os.path.join(dd.path, files.partition_dir_name(t, p)))
                rows.append((t, p, reader.visible().start_offset(start, f"{t}-{p}")))
    return rows


def _offsets_from_broker(bootstrap: str, match, allowed, when: int) -> list[tuple[str, int, int | None]]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    from .remote import admin_client, result, topic_partitions
    admin = admin_client(bootstrap)
    wanted = [TopicPartition(t, p) for t, parts in topic_partitions(admin, bootstrap, None).items()
              if match(t) for p in parts if allowed(t, p)]
    if not wanted:
        return []
    spec = {-1: OffsetSpec.latest(), -2: OffsetSpec.earliest(), -3: OffsetSpec.max_timestamp()}.get(when) \
        or OffsetSpec.for_timestamp(when)
    futures = admin.list_offsets({tp: spec for tp in wanted})
    rows = []
    for tp, fut in futures.items():
        info = result(fut, f"{tp.topic}-{tp.partition}")
        rows.append((tp.topic, tp.partition, None if info.offset < 0 else info.offset))
    return rows


@app.command("delete-records")
def delete_records_cmd(ctx: typer.Context,
                       offset_json_file: str = typer.Option(..., "--offset-json-file",
                                                            help='{"partitions": [{"topic": "t", "partition": 0, '
                                                                 '"offset": 10}], "version": 1}; offset -1 is the '
                                                                 'high watermark.'),
                       bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                            help="Ask this broker (HOST:PORT) instead of writing "
                                                                 "--data-dir.")):
    """Move each partition's log start offset up to the given offset (kafka-delete-records.sh):
    records below it are no longer served, and the segments wholly below it go at the next
    retention check."""
    wanted = _offset_json(offset_json_file)
    typer.echo("Executing records delete operation")
    if bootstrap_server:
        results = _delete_through_broker(bootstrap_server, wanted)
    else:
        results = _delete_in_dir(context(ctx), wanted)
    typer.echo("Records delete operation completed:")
    failed = False
    for (t, p), (low, err) in sorted(results.items()):
        if err is None:
            typer.echo(f"partition: {t}-{p}\tlow_watermark: {low}")
        else:
            failed = True
            typer.echo(f"partition: {t}-{p}\terror: {err}")
    if failed:
        raise typer.Exit(1)


def _offset_json(path: str) -> dict[tuple[str, int], int]:
    try:
        with open(path, "r", encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        fail(f"--offset-json-file {path}: no such file", 2)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail(f"--offset-json-file {path}: not JSON ({e})", 2)
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list) or not parts:
        fail(f'--offset-json-file {path}: expected {{"partitions": [{{"topic": ..., "partition": ..., '
             f'"offset": ...}}], "version": 1}}', 2)
    out = {}
    for i, item in enumerate(parts):
        ok = isinstance(item, dict) and isinstance(item.get("topic"), str) and \
            isinstance(item.get("partition"), int) and isinstance(item.get("offset"), int)
        if not ok:
            fail(f"--offset-json-file {path}: partitions[{i}] needs a string topic, an int partition and an "
                 f"int offset, found {item!r}", 2)
        key = (item["topic"], item["partition"])
        if key in out:
            fail(f"--offset-json-file {path}: partition {key[0]}-{key[1]} is listed twice", 2)
        out[key] = item["offset"]
    return out


def _delete_in_dir(c, wanted: dict) -> dict:
    results = {}
    with c.open(write=True) as dd:
        for (t, p), off in wanted.items():
            try:
                if not dd.has_topic(t) or p not in dd.partitions(t):
                    raise TopicError(f"partition {t}-{p} does not exist")
                target = dd.open_log(t, p).high_watermark if off == -1 else off
                results[(t, p)] = (dd.delete_records(t, p, target), None)
            except CompactlogError as e:
                results[(t, p)] = (None, str(e))
    return results


def _delete_through_broker(bootstrap: str, wanted: dict) -> dict:
    from confluent_kafka import TopicPartition
    from .remote import BrokerError, admin_client, result
    admin = admin_client(bootstrap)
    futures = admin.delete_records([TopicPartition(t, p, off) for (t, p), off in wanted.items()])
    results = {}
    for tp, fut in futures.items():
        try:
            info = result(fut, f"{tp.topic}-{tp.partition}")
            results[(tp.topic, tp.partition)] = (info.low_watermark, None)
        except BrokerError as e:
            results[(tp.topic, tp.partition)] = (None, str(e))
    return results


@app.command("log-dirs")
def log_dirs_cmd(ctx: typer.Context,
                 describe: bool = typer.Option(False, "--describe", help="Describe the log directories."),
                 bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                      help="Ask this broker (HOST:PORT) instead of reading --data-dir."),
                 topic_list: str = typer.Option(None, "--topic-list", help="Only these topics (comma-separated)."),
                 broker_list: str = typer.Option(None, "--broker-list", help="Brokers to query (one node here).")):
    """kafka-log-dirs.sh --describe: each log dir, its partitions, their sizes (Kafka's JSON)."""
    if not describe:
        fail("log-dirs needs --describe (kafka-log-dirs.sh's only action)", 2)
    topics = [t.strip() for t in topic_list.split(",") if t.strip()] if topic_list else None
    if bootstrap_server:
        dirs = _log_dirs_from_broker(bootstrap_server, topics)
        node = _broker_id(bootstrap_server)
    else:
        dirs, node = _log_dirs_from_dir(context(ctx), topics)
    if broker_list is not None and str(node) not in [b.strip() for b in broker_list.split(",")]:
        dirs = []
    typer.echo("Querying brokers for log directories information")
    typer.echo(f"Received log directory information from brokers {node}")
    doc = {"brokers": [{"broker": node, "logDirs": [
        {"partitions": [{"partition": f"{t}-{p}", "size": size, "offsetLag": lag, "isFuture": fut}
                        for t, p, size, lag, fut in parts],
         "error": None if not err else f"error code {err}", "logDir": path}
        for path, err, parts in dirs]}], "version": 1}
    typer.echo(json.dumps(doc, separators=(",", ":")))


def _log_dirs_from_dir(c, topics: list[str] | None):
    from ..storage.reader import PartitionReader
    with c.open(write=False) as dd:
        parts = []
        for t in dd.topics():
            if topics is not None and t not in topics:
                continue
            for p in dd.partitions(t):
                pdir = os.path.join(dd.path, files.partition_dir_name(t, p))
                if not os.path.isdir(pdir):
                    continue
                size = sum(s.size for s in PartitionReader(pdir).segments())
                parts.append((t, p, size, 0, False))
        node = _node_id(dd.path)
        return [(dd.path, None, parts)], node


def _node_id(path: str) -> int:
    """The node id a broker on this dir used (meta.properties), else 0."""
    from ..errors import CompactlogError
    from ..storage import meta_properties
    try:
        node = meta_properties.stored_node_id(path, meta_properties.read(path))
    except CompactlogError:
        return 0
    return 0 if node is None else node


def _log_dirs_from_broker(bootstrap: str, topics: list[str] | None):
    from .remote import describe_log_dirs
    return describe_log_dirs(bootstrap, topics)


def _broker_id(bootstrap: str) -> int:
    from .remote import admin_client, result
    admin = admin_client(bootstrap)      # referenced until its future resolves (librdkafka)
    cluster = result(admin.describe_cluster(), "DescribeCluster")
    return cluster.nodes[0].id if cluster.nodes else 0
