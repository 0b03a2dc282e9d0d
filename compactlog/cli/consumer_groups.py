"""``consumer-groups``: kafka-consumer-groups.sh (Kafka's ``ConsumerGroupCommand``).

``--list``, ``--describe --group G`` (the offsets view: committed offset, log end offset and lag
per partition with the member that owns it; ``--members``; ``--state``), ``--reset-offsets --group
G --topic T[:P,...] | --all-topics`` with ``--to-earliest | --to-latest | --to-offset N |
--to-datetime YYYY-MM-DDTHH:mm:SS.sss | --shift-by N`` and ``--dry-run | --execute``, and ``--delete
--group G``, with Kafka's output and messages.

With ``--bootstrap-server HOST:PORT`` the command acts through a broker with a real client
library (confluent-kafka's AdminClient), as Kafka's tool does. Without it, with ``--data-dir``, it
reads ``__consumer_offsets`` and the logs of the data dir directly (read-only, beside a running
broker too); ``--execute`` and ``--delete`` then write the offsets topic exactly as the broker's
coordinator would, under the data-dir lock, so they are refused while a broker runs on the dir.
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import dataclass, field

import typer

from ..errors import CompactlogError
from .common import context, fail
from .main import app

MISSING = "-"
TIMEOUT_S = 30.0


@dataclass
class MemberInfo:
    consumer_id: str
    host: str
    client_id: str
    instance_id: str | None
    partitions: list = field(default_factory=list)      # [(topic, partition)]


@dataclass
class GroupInfo:
    group_id: str
    state: str                      # Kafka's ConsumerGroupState names: Stable, Empty, Dead, ...
    members: list = field(default_factory=list)
    assignor: str = ""
    coordinator: str = MISSING


# -- backends ------------------------------------------------------------------------------------

class BrokerBackend:
    """Through a broker, with confluent-kafka's AdminClient (the library's own requests)."""

    def __init__(self, bootstrap: str):
        # imported here: loading librdkafka would slow every other command of the CLI
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def _wait(self, fut):
        from confluent_kafka import KafkaException
        try:
            return fut.result(TIMEOUT_S)
        except KafkaException as e:
            raise CompactlogError(str(e.args[0].str() if e.args else e)) from None

    def list_groups(self) -> list[tuple[str, str]]:
        res = self._wait(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S))
        return [(g.group_id, _state_name(g.state)) for g in res.valid]

    def describe(self, group: str) -> GroupInfo:
        d = self._wait(self.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group])
        members = [MemberInfo(m.member_id, m.host, m.client_id, m.group_instance_id,
                              [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])])
                   for m in d.members]
        coord = d.coordinator
        where = f"{coord.host}:{coord.port} ({coord.id})" if coord is not None else MISSING
        return GroupInfo(group, _state_name(d.state), members, d.partition_assignor or "", where)

    def committed(self, group: str) -> dict:
        from confluent_kafka import ConsumerGroupTopicPartitions
        res = self._wait(self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                                request_timeout=TIMEOUT_S)[group])
        return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}

    def partitions(self, topic: str) -> list[int]:
        # every topic is listed, not this one: a request naming it could create it
        t = self.admin.list_topics(timeout=TIMEOUT_S).topics.get(topic)
        if t is None or t.error is not None:
            raise CompactlogError(f"topic {topic!r} does not exist")
        return sorted(t.partitions)

    def offsets(self, tps, spec: str, timestamp: int | None = None) -> dict:
        """spec: earliest, latest or timestamp; -1 where nothing matches the timestamp."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        if not tps:
            return {}
        # partitions of topics the broker does not have are left out (shown as "-"): asking for
        # them would fail the whole request
        known = {(t, p) for t, md in self.admin.list_topics(timeout=TIMEOUT_S).topics.items()
                 if md.error is None for p in md.partitions}
        tps = [tp for tp in tps if tuple(tp) in known]
        if not tps:
            return {}
        s = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}.get(spec)
        req = {TopicPartition(t, p): (s() if s else OffsetSpec.for_timestamp(timestamp)) for t, p in tps}
        res = self.admin.list_offsets(req, request_timeout=TIMEOUT_S)
        return {(tp.topic, tp.partition): self._wait(f).offset for tp, f in res.items()}

    def alter(self, group: str, offsets: dict) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        res = self._wait(self.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, tps)], request_timeout=TIMEOUT_S)[group])
        errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in res.topic_partitions if tp.error]
        if errors:
            raise CompactlogError(f"resetting the offsets of group {group!r} failed: {'; '.join(errors)}")

    def delete(self, groups: list[str]) -> dict:
        from confluent_kafka import KafkaException
        out = {}
        for g, fut in self.admin.delete_consumer_groups(groups, request_timeout=TIMEOUT_S).items():
            try:
                fut.result(TIMEOUT_S)
                out[g] = None
            except KafkaException as e:
                out[g] = e.args[0] if e.args else e
        return out

    def close(self) -> None:
        pass


class DataDirBackend:
    """The data dir's ``__consumer_offsets`` and logs, read directly (and written for --execute)."""

    def __init__(self, dd):
        # imported here, as every heavy module of the CLI: the server package loads kio's tables
        from ..server.groups import coordinator, records
        from ..server.groups.service import GroupCoordinatorService
        self.C, self.R = coordinator, records
        self.dd = dd
        self.svc = GroupCoordinatorService(dd)
        self.svc.load_now()
        self.c = self.svc.coordinator

    def list_groups(self):
        return [(g.group_id, g.state) for g in self.c.list_groups()]

    def describe(self, group: str) -> GroupInfo:
        R = self.R
        g = self.c.groups.get(group)
        if g is None:
            return GroupInfo(group, "Dead")
        members = []
        for m in g.members.values():
            parts = []
            if g.protocol_type == R.CONSUMER_PROTOCOL_TYPE and m.assignment:
                try:
                    parts = [(t, p) for t, ps in R.decode_assignment(m.assignment).partitions for p in ps]
                except R.RecordFormatError:
                    parts = []
            members.append(MemberInfo(m.member_id, m.client_host, m.client_id, m.group_instance_id, parts))
        return GroupInfo(group, g.state, members, g.protocol_name or "", MISSING)

    def committed(self, group: str) -> dict:
        return {k: o.offset for k, o in self.c.committed(group).items()}

    def partitions(self, topic: str) -> list[int]:
        if not self.dd.has_topic(topic):
            raise CompactlogError(f"topic {topic!r} does not exist in {self.dd.path}")
        return self.dd.partitions(topic)

    def offsets(self, tps, spec: str, timestamp: int | None = None) -> dict:
        out = {}
        for t, p in tps:
            try:
                lg = self.dd.open_log(t, p)
            except CompactlogError:
                continue            # not in this data dir: shown as "-"
            if spec == "earliest":
                out[(t, p)] = lg.log_start_offset
            elif spec == "latest":
                out[(t, p)] = lg.high_watermark
            else:
                found = lg.offset_for_timestamp(timestamp)
                out[(t, p)] = found[0] if found is not None and found[0] < lg.high_watermark else -1
        return out

    def alter(self, group: str, offsets: dict) -> None:
        parts = [self.C.CommitPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        errors = self.svc.commit_offsets(group, -1, "", None, parts)
        bad = [f"{c.topic}-{c.partition}: error {e}" for c, e in zip(parts, errors) if e != self.C.NONE]
        if bad:
            raise CompactlogError(f"resetting the offsets of group {group!r} failed: {'; '.join(bad)}")

    def delete(self, groups: list[str]) -> dict:
        C = self.C
        names = {C.GROUP_ID_NOT_FOUND: "GROUP_ID_NOT_FOUND", C.NON_EMPTY_GROUP: "NON_EMPTY_GROUP",
                 C.INVALID_GROUP_ID: "INVALID_GROUP_ID"}
        results = self.svc.call(self.c.delete_groups, list(groups))
        return {g: None if code == 0 else names.get(code, f"error {code}") for g, code in results}

    def close(self) -> None:
        self.svc.stop()


def _state_name(state) -> str:
    # confluent-kafka's ConsumerGroupState enum: STABLE -> Stable, PREPARING_REBALANCING -> ...
    name = getattr(state, "name", str(state))
    return {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "PREPARING_REBALANCING": "PreparingRebalance",
            "COMPLETING_REBALANCING": "CompletingRebalance", "UNKNOWN": "Unknown"}.get(name, name)


# -- output ----------------------------------------------------------------------------------------

def out(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)


def print_error(msg: str) -> None:
    """ConsumerGroupCommand.printError: on stdout, after an empty line."""
    out(f"\nError: {msg}")


def _pad(values, widths) -> str:
    return " ".join(f"{v:<{w}}" for v, w in zip(values, widths))


def state_says_print(group: str, state: str, rows: int | None) -> bool:
    """shouldPrintMemberState: the notes Kafka prints before a group's table."""
    if rows is None or state == "Dead":
        print_error(f"Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        sys.stderr.write(f"\nConsumer group '{group}' has no active members.\n")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        sys.stderr.write(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
    return rows > 0


def describe_offsets(backend, group: str) -> None:
    info = backend.describe(group)
    if info.state == "Dead":
        state_says_print(group, "Dead", None)
        return
    committed = backend.committed(group)
    rows = []          # group, topic, partition, offset, end, consumer id, host, client id
    assigned = set()
    for m in sorted((m for m in info.members if m.partitions), key=lambda m: -len(m.partitions)):
        tps = sorted(m.partitions, key=lambda tp: tp[1])
        assigned.update(tps)
        rows += [(tp, committed.get(tp), m.consumer_id, m.host, m.client_id) for tp in tps]
    rows += [(tp, committed[tp], MISSING, MISSING, MISSING) for tp in sorted(committed) if tp not in assigned]
    ends = backend.offsets([r[0] for r in rows], "latest")
    if not state_says_print(group, info.state, len(rows)):
        return
    table = []
    for (t, p), offset, cid, host, client in rows:
        end = ends.get((t, p))
        lag = end - offset if offset is not None and end is not None else None
        table.append((group, t, str(p), _s(offset), _s(end), _s(lag), cid, host, client))
    widths = [max([15] + [len(r[0]) for r in table]), max([15] + [len(r[1]) for r in table]), 10, 15, 15, 15,
              max([15] + [len(r[6]) for r in table]), max([15] + [len(r[7]) for r in table]), 0]
    out()
    out(_pad(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
              "HOST", "CLIENT-ID"), widths).rstrip())
    for r in table:
        out(_pad(r, widths).rstrip())
    out()


def describe_members(backend, group: str, verbose: bool) -> None:
    info = backend.describe(group)
    if not state_says_print(group, info.state, None if info.state == "Dead" else len(info.members)):
        return
    with_instance = any(m.instance_id for m in info.members)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if verbose else [])
    rows = []
    for m in info.members:
        row = [group, m.consumer_id] + ([m.instance_id or ""] if with_instance else []) + \
            [m.host, m.client_id, str(len(m.partitions))]
        if verbose:
            by_topic: dict = {}
            for t, p in sorted(m.partitions):
                by_topic.setdefault(t, []).append(str(p))
            row.append(", ".join(f"{t}({','.join(ps)})" for t, ps in by_topic.items()) or MISSING)
        rows.append(row)
    minimum = {"GROUP-INSTANCE-ID": 17, "#PARTITIONS": 15, "ASSIGNMENT": 0}
    widths = [minimum[h] if h in ("#PARTITIONS", "ASSIGNMENT")
              else max([minimum.get(h, 15)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    out()
    out(_pad(header, widths).rstrip())
    for r in rows:
        out(_pad(r, widths).rstrip())
    out()


def describe_state(backend, group: str) -> None:
    info = backend.describe(group)
    if not state_says_print(group, info.state, None if info.state == "Dead" else 1):
        return
    widths = [max(15, len(group)), 25, 20, 15, 0]
    out()
    out(_pad(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"), widths).rstrip())
    out(_pad((group, info.coordinator, info.assignor, info.state, str(len(info.members))), widths).rstrip())
    out()


def _s(v) -> str:
    return MISSING if v is None else str(v)


# -- reset ------------------------------------------------------------------------------------------

def parse_datetime(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+hh:mm``); without one, the local time zone."""
    try:
        dt = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CompactlogError(f"--to-datetime {text!r}: not a date and time of the form "
                              f"YYYY-MM-DDTHH:mm:SS.sss (optionally with Z or +hh:mm)") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.timestamp() * 1000)


def partitions_to_reset(backend, group: str, topics: list[str], all_topics: bool) -> list:
    if all_topics:
        return sorted(backend.committed(group))
    out_ = []
    for spec in topics:
        if ":" in spec:
            topic, _, parts = spec.partition(":")
            try:
                out_ += [(topic, int(p)) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise CompactlogError(f"--topic {spec!r}: partitions must be numbers (TOPIC:0,1,2)") from None
        else:
            out_ += [(spec, p) for p in backend.partitions(spec)]
    return out_


def check_range(backend, requested: dict) -> dict:
    """checkOffsetsRange: offsets above the log end go to the end, below the start to the start."""
    starts = backend.offsets(list(requested), "earliest")
    ends = backend.offsets(list(requested), "latest")
    res = {}
    for tp, offset in requested.items():
        end, start = ends.get(tp), starts.get(tp)
        if end is not None and offset > end:
            sys.stderr.write(f"New offset ({offset}) is higher than latest offset for topic partition "
                             f"{tp[0]}-{tp[1]}. Value will be set to {end}\n")
            res[tp] = end
        elif start is not None and offset < start:
            sys.stderr.write(f"New offset ({offset}) is lower than earliest offset for topic partition "
                             f"{tp[0]}-{tp[1]}. Value will be set to {start}\n")
            res[tp] = start
        else:
            res[tp] = offset
    return res


def prepare_reset(backend, group: str, tps: list, how: tuple) -> dict:
    kind, arg = how
    if kind == "to-offset":
        return check_range(backend, {tp: arg for tp in tps})
    if kind in ("to-earliest", "to-latest"):
        found = backend.offsets(tps, "earliest" if kind == "to-earliest" else "latest")
        missing = [tp for tp in tps if tp not in found]
        if missing:
            raise CompactlogError(f"Error getting {'starting' if kind == 'to-earliest' else 'ending'} offset "
                                  f"of topic partition: {missing[0][0]}-{missing[0][1]}")
        return {tp: found[tp] for tp in tps}
    if kind == "shift-by":
        current = backend.committed(group)
        requested = {}
        for tp in tps:
            if tp not in current:
                raise CompactlogError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                                      f"current committed offset")
            requested[tp] = current[tp] + arg
        return check_range(backend, requested)
    # to-datetime: the first offset at or after the time, else the log end (Kafka's tool)
    by_time = backend.offsets(tps, "timestamp", arg)
    ends = backend.offsets([tp for tp in tps if by_time.get(tp, -1) < 0], "latest")
    res = {}
    for tp in tps:
        o = by_time.get(tp, -1)
        if o < 0:
            o = ends.get(tp)
        if o is None:
            raise CompactlogError(f"Error getting offset by timestamp of topic partition: {tp[0]}-{tp[1]}")
        res[tp] = o
    return res


def reset_offsets(backend, group: str, tps_spec, how, execute: bool) -> None:
    info = backend.describe(group)
    if info.state not in ("Empty", "Dead"):
        print_error(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                    f"state is {info.state}.")
        out()
        return
    tps = partitions_to_reset(backend, group, *tps_spec)
    planned = prepare_reset(backend, group, tps, how)
    if execute:
        backend.alter(group, planned)
    widths = [30, 30, 10, 15]
    if planned:
        out()
        out(_pad(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), widths).rstrip())
        for (t, p), o in sorted(planned.items()):
            out(_pad((group, t, str(p), str(o)), widths).rstrip())
    out()


def delete_groups(backend, groups: list[str]) -> bool:
    results = backend.delete(groups)
    failed = {g: e for g, e in results.items() if e is not None}
    done = [g for g, e in results.items() if e is None]
    if not failed:
        out(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return True
    print_error("Deletion of some consumer groups failed:")
    for g, e in failed.items():
        out(f"* Group '{g}' could not be deleted due to: {e}")
    if done:
        out(f"\nThese consumer groups were deleted successfully: '{', '.join(done)}'")
    return False


# -- the command ------------------------------------------------------------------------------------

@app.command("consumer-groups")
def consumer_groups_cmd(
        ctx: typer.Context,
        bootstrap: str = typer.Option(None, "--bootstrap-server", help="HOST:PORT of a broker to act "
                                      "through; without it, --data-dir is read (and written) directly."),
        list_: bool = typer.Option(False, "--list", help="List all consumer groups."),
        describe: bool = typer.Option(False, "--describe", help="Describe a group: offsets and lag per "
                                      "partition (--members: its members, --state: its state)."),
        delete: bool = typer.Option(False, "--delete", help="Delete groups (they must have no members)."),
        reset: bool = typer.Option(False, "--reset-offsets", help="Reset a group's committed offsets "
                                   "(the group must have no members)."),
        groups: list[str] = typer.Option(None, "--group", help="The group (repeatable for --describe and --delete)."),
        topics: list[str] = typer.Option(None, "--topic", help="Topics to reset: TOPIC or TOPIC:0,1,2."),
        all_topics: bool = typer.Option(False, "--all-topics", help="Reset every partition the group has "
                                        "an offset for."),
        to_earliest: bool = typer.Option(False, "--to-earliest"),
        to_latest: bool = typer.Option(False, "--to-latest"),
        to_offset: int = typer.Option(None, "--to-offset"),
        to_datetime: str = typer.Option(None, "--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]"),
        shift_by: int = typer.Option(None, "--shift-by"),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only show the new offsets (the default)."),
        execute: bool = typer.Option(False, "--execute", help="Write the new offsets."),
        members: bool = typer.Option(False, "--members"),
        state: bool = typer.Option(False, "--state"),
        verbose: bool = typer.Option(False, "--verbose")):
    """Manage consumer groups, as kafka-consumer-groups.sh does."""
    actions = [a for a, on in (("--list", list_), ("--describe", describe), ("--delete", delete),
                               ("--reset-offsets", reset)) if on]
    if len(actions) != 1:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets", 2)
    groups = list(groups or [])
    if actions[0] != "--list" and not groups:
        fail(f"Option {actions[0]} needs --group", 2)
    how = None
    if reset:
        chosen = [(k, v) for k, v in (("to-earliest", True if to_earliest else None),
                                      ("to-latest", True if to_latest else None), ("to-offset", to_offset),
                                      ("to-datetime", to_datetime), ("shift-by", shift_by)) if v is not None]
        if len(chosen) != 1:
            fail("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset, "
                 "--to-datetime, --shift-by", 2)
        if not topics and not all_topics:
            fail("One of the reset scopes should be defined: --all-topics, --topic.", 2)
        if dry_run and execute:
            fail("--dry-run and --execute exclude each other", 2)
        how = chosen[0]
        if how[0] == "to-datetime":
            how = ("to-datetime", parse_datetime(how[1]))
    writes = (reset and execute) or delete
    if bootstrap:
        backend = BrokerBackend(bootstrap)
        dd = None
    else:
        c = context(ctx)
        dd = c.open(write=writes)
        backend = DataDirBackend(dd)
    ok = True
    try:
        if list_:
            for g, _ in sorted(backend.list_groups()):
                out(g)
        elif describe:
            for g in groups:
                if members:
                    describe_members(backend, g, verbose)
                elif state:
                    describe_state(backend, g)
                else:
                    describe_offsets(backend, g)
        elif reset:
            for g in groups:
                reset_offsets(backend, g, (list(topics or []), all_topics), how, execute)
        else:
            ok = delete_groups(backend, groups)
    finally:
        backend.close()
        if dd is not None:
            dd.close()
    if not ok:
        raise typer.Exit(1)
