"""``consumer-groups``: kafka-consumer-groups.sh (Kafka's ``ConsumerGroupCommand``, the option rules of
``ConsumerGroupCommandOptions.checkArgs`` and the reset plans of ``GroupOffsetsResetter``).

``--list [--state [STATE,...]]``; ``--describe --group G... | --all-groups`` (the offsets view:
committed offset, log end offset and lag per partition with the member that owns it; ``--members
[--verbose]``; ``--state``); ``--reset-offsets --group G... | --all-groups`` with ``--topic
T[:P,...] | --all-topics`` and one of ``--to-earliest | --to-latest | --to-current | --to-offset N
| --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS | --from-file
CSV``, ``--dry-run | --execute`` and ``--export`` (the plan as CSV); ``--delete --group G... |
--all-groups``; ``--delete-offsets --group G --topic T[:P,...]``; with Kafka's output, messages
and option conflicts (usage errors exit with 2).

With ``--bootstrap-server HOST:PORT`` the command acts through a broker with real client libraries
(confluent-kafka's AdminClient; kafka-python's KafkaAdminClient for OffsetDelete, which
confluent-kafka's binding does not expose), as Kafka's tool does. Without it, with
``--data-dir``, it reads ``__consumer_offsets`` and the logs of the data dir directly (read-only,
beside a running broker too); ``--execute``, ``--delete`` and ``--delete-offsets`` then write the
offsets topic exactly as the broker's coordinator would, under the data-dir lock, so they are
refused while a broker runs on the dir.
"""

from __future__ import annotations

import csv
import datetime
import io
import re
import sys
import time
from dataclasses import dataclass, field

import typer

from ..errors import CompactlogError
from .common import context, fail
from .main import app

MISSING = "-"
TIMEOUT_S = 30.0

# Kafka's GroupState names a consumer group may have, in Kafka's order (the --state filter's list)
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
# the reset scenarios, in the order of ConsumerGroupCommandOptions.checkArgs
SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current", "shift-by",
             "from-file")

# Kafka's Errors: the codes OffsetDelete answers, with Kafka's names and messages
UNKNOWN_TOPIC_OR_PARTITION = 3
KAFKA_ERRORS = {
    3: ("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition."),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", "The coordinator is loading and hence can't process requests."),
    15: ("COORDINATOR_NOT_AVAILABLE", "The coordinator is not available."),
    16: ("NOT_COORDINATOR", "This is not the correct coordinator."),
    24: ("INVALID_GROUP_ID", "The configured groupId is invalid."),
    29: ("TOPIC_AUTHORIZATION_FAILED", "Topic authorization failed."),
    30: ("GROUP_AUTHORIZATION_FAILED", "Group authorization failed."),
    68: ("NON_EMPTY_GROUP", "The group is not empty."),
    69: ("GROUP_ID_NOT_FOUND", "The group id does not exist."),
    86: ("GROUP_SUBSCRIBED_TO_TOPIC", "Deleting offsets of a topic is forbidden while the consumer group is "
                                      "actively subscribed to it."),
}


class UsageError(Exception):
    """A command line Kafka's tool refuses with printUsageAndExit (exit code 2 here)."""


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

# confluent-kafka's ConsumerGroupState members for Kafka's state names (it has no KIP-848 states)
_CK_STATES = {"Stable": "STABLE", "Empty": "EMPTY", "Dead": "DEAD", "PreparingRebalance": "PREPARING_REBALANCING",
              "CompletingRebalance": "COMPLETING_REBALANCING"}


class BrokerBackend:
    """Through a broker, with confluent-kafka's AdminClient (the library's own requests)."""

    def __init__(self, bootstrap: str):
        # imported here: loading librdkafka would slow every other command of the CLI
        from confluent_kafka.admin import AdminClient
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def _wait(self, fut):
        from confluent_kafka import KafkaException
        try:
            return fut.result(TIMEOUT_S)
        except KafkaException as e:
            raise CompactlogError(str(e.args[0].str() if e.args else e)) from None

    def list_groups(self, states: set[str] | None = None) -> list[tuple[str, str]]:
        from confluent_kafka import ConsumerGroupState
        kw = {}
        # the broker filters (ListGroups' StatesFilter) when every state has a name in the
        # library; the filter below keeps the answer right either way
        if states and all(s in _CK_STATES for s in states):
            kw["states"] = {getattr(ConsumerGroupState, _CK_STATES[s]) for s in states}
        res = self._wait(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S, **kw))
        listed = [(g.group_id, _state_name(g.state)) for g in res.valid]
        return [g for g in listed if not states or g[1] in states]

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

    def _topics(self) -> dict:
        from confluent_kafka import KafkaException
        # every topic is listed, not the ones asked for: a request naming a topic could create it
        try:
            return self.admin.list_topics(timeout=TIMEOUT_S).topics
        except KafkaException as e:
            raise CompactlogError(f"{self.bootstrap}: cannot read metadata: "
                                  f"{e.args[0].str() if e.args else e}") from None

    def topic_partitions(self, topics) -> dict:
        """{topic: [partition]}, None for a topic the broker does not have."""
        md = self._topics()
        return {t: sorted(md[t].partitions) if t in md and md[t].error is None else None for t in topics}

    def partitions(self, topic: str) -> list[int]:
        found = self.topic_partitions([topic])[topic]
        if found is None:
            raise CompactlogError(f"topic {topic!r} does not exist")
        return found

    def offsets(self, tps, spec: str, timestamp: int | None = None) -> dict:
        """spec: earliest, latest or timestamp; -1 where nothing matches the timestamp."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        if not tps:
            return {}
        # partitions of topics the broker does not have are left out (shown as "-"): asking for
        # them would fail the whole request
        known = {(t, p) for t, md in self._topics().items() if md.error is None for p in md.partitions}
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

    def delete_offsets(self, group: str, tps: list) -> tuple[int, dict]:
        """OffsetDelete through kafka-python's KafkaAdminClient: (the request's error code,
        {(topic, partition): error code})."""
        import kafka
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient
        from kafka.errors import BrokerResponseError, KafkaError
        if not hasattr(KafkaAdminClient, "delete_group_offsets"):
            raise CompactlogError(f"--delete-offsets through a broker needs kafka-python 3 or later "
                                  f"(KafkaAdminClient.delete_group_offsets); {kafka.__version__} is installed")
        try:
            client = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
        except KafkaError as e:
            raise CompactlogError(f"{self.bootstrap}: cannot connect: {e}") from None
        try:
            res = client.delete_group_offsets(group, [TopicPartition(t, p) for t, p in tps])
        except BrokerResponseError as e:
            return e.errno, {}
        except KafkaError as e:
            raise CompactlogError(f"deleting the offsets of group {group!r} failed: {e}") from None
        finally:
            client.close()
        return 0, {(tp.topic, tp.partition): err.errno for tp, err in res.items()}

    def close(self) -> None:
        pass


class DataDirBackend:
    """The data dir's ``__consumer_offsets`` and logs, read directly (and written for --execute,
    --delete and --delete-offsets)."""

    def __init__(self, dd):
        # imported here, as every heavy module of the CLI: the server package loads kio's tables
        from ..record import consumer_offsets
        from ..server.groups import api_data
        from ..server.groups.service import GroupCoordinatorService
        self.C, self.R = api_data, consumer_offsets
        self.dd = dd
        self.svc = GroupCoordinatorService(dd)
        self.svc.load_now()
        self.c = self.svc.coordinator

    def list_groups(self, states: set[str] | None = None):
        return [(g.group_id, g.state) for g in self.c.list_groups(states or ())]

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

    def topic_partitions(self, topics) -> dict:
        return {t: self.dd.partitions(t) if self.dd.has_topic(t) else None for t in topics}

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
                found = lg.fetch_offset_for_timestamp(timestamp)
                out[(t, p)] = found[0] if found is not None else -1
        return out

    def alter(self, group: str, offsets: dict) -> None:
        parts = [self.C.CommitPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        errors = self.svc.commit_offsets(group, -1, "", None, parts)
        bad = [f"{c.topic}-{c.partition}: error {e}" for c, e in zip(parts, errors) if e != 0]
        if bad:
            raise CompactlogError(f"resetting the offsets of group {group!r} failed: {'; '.join(bad)}")

    def delete(self, groups: list[str]) -> dict:
        results = self.svc.call(self.c.delete_groups, list(groups))
        return {g: None if code == 0 else KAFKA_ERRORS.get(code, (f"error {code}",))[0] for g, code in results}

    def delete_offsets(self, group: str, tps: list) -> tuple[int, dict]:
        """As the broker's OffsetDelete handler: partitions this data dir does not have answer
        UNKNOWN_TOPIC_OR_PARTITION without asking the coordinator, which writes a tombstone for
        every other committed offset unless the group is subscribed to the topic."""
        known = self.topic_partitions({t for t, _ in tps})
        wanted: dict = {}
        per = {}
        for t, p in tps:
            parts = wanted.setdefault(t, [])
            if known[t] is not None and p in known[t]:
                parts.append(p)
            else:
                per[(t, p)] = UNKNOWN_TOPIC_OR_PARTITION
        top, results = self.svc.call(self.c.delete_offsets, group, list(wanted.items()))
        if top != 0:
            return top, {}
        for t, res in results:
            for p, code in res:
                per[(t, p)] = code
        return 0, per

    def close(self) -> None:
        self.svc.stop()


def _state_name(state) -> str:
    # confluent-kafka's ConsumerGroupState enum: STABLE -> Stable, PREPARING_REBALANCING -> ...
    name = getattr(state, "name", str(state))
    return {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "PREPARING_REBALANCING": "PreparingRebalance",
            "COMPLETING_REBALANCING": "CompletingRebalance", "UNKNOWN": "Unknown"}.get(name, name)


def error_text(code: int) -> tuple[str, str]:
    """(Kafka's name of an error code, its message)."""
    if code in KAFKA_ERRORS:
        return KAFKA_ERRORS[code]
    from kafka.errors import for_code
    err = for_code(code)
    return err.message, err.description


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


def list_groups(backend, with_state: bool, states: set[str] | None) -> None:
    """listGroups: the ids, or with --state a GROUP / STATE table (filtered by the states given)."""
    groups = sorted(backend.list_groups(states))
    if not with_state:
        for g, _ in groups:
            out(g)
        return
    width = max([15] + [len(g) for g, _ in groups]) + 10
    out(_pad(("GROUP", "STATE"), (width, 20)).rstrip())
    for g, s in groups:
        out(_pad((g, s), (width, 20)).rstrip())


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


# -- parsing option values ----------------------------------------------------------------------------

def _java_split(text: str, sep: str) -> list[str]:
    """String.split as Java's tools use it: trailing empty strings are dropped."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


_INT = re.compile(r"[+-]?[0-9]+")


def _int(text: str, bits: int) -> int | None:
    """Integer.parseInt / Long.parseLong: the value, None when the text is not one."""
    if not _INT.fullmatch(text):
        return None
    v = int(text)
    return v if -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None


def parse_topic_arg(spec: str) -> tuple[str, list[int] | None]:
    """``TOPIC`` (every partition) or ``TOPIC:0,1,2`` (GroupOffsetsResetter.parseTopicsWithPartitions)."""
    if ":" not in spec:
        return spec, None
    parts = _java_split(spec, ":")
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{spec}', expected topic name and partitions")
    out_ = []
    for p in _java_split(parts[1], ","):
        n = _int(p, 32)
        if n is None:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{spec}'")
        out_.append(n)
    return parts[0], out_


def parse_states(text: str | None) -> set[str] | None:
    """The --state filter of --list (ConsumerGroupCommand.groupStatesFromString): names in any case."""
    if not text:
        return None
    by_upper = {s.upper(): s for s in STATES}
    parsed = {by_upper.get(s.strip().upper()) for s in _java_split(text, ",")}
    if None in parsed:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return parsed


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


# java.time.Duration.parse's grammar: days, then T with hours, minutes and seconds (a fraction of
# up to 9 digits); a sign before P and before each number; letters in either case
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


def parse_duration_ns(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMnS`` as ``java.time.Duration.parse`` reads it, in nanoseconds."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(3) or "").upper() == "T" or all(m.group(i) is None for i in (2, 4, 5, 6)):
        raise CompactlogError(f"--by-duration {text!r}: Text cannot be parsed to a Duration (the format is "
                              f"PnDTnHnMnS, e.g. PT30M, PT1H30M or P2DT12H)")
    sign, days, hours, minutes, seconds, fraction = m.group(1, 2, 4, 5, 6, 7)
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)) \
        * 1_000_000_000
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        total += -nanos if (seconds or "").startswith("-") else nanos
    return -total if sign == "-" else total


def read_reset_plan(path: str, groups_given: list[str]) -> dict:
    """--from-file: {group: {(topic, partition): offset}} from Kafka's CSV, without a header:
    ``topic,partition,offset`` lines for the one --group given, else ``group,topic,partition,offset``
    (GroupOffsetsResetter.parseResetPlan)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CompactlogError(f"--from-file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise CompactlogError(f"--from-file {path}: not UTF-8 text (byte {e.start})") from None
    rows = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if line.strip():
            rows.append((n, line, next(csv.reader([line]))))

    def record(fields: list[str], with_group: bool):
        if len(fields) != (4 if with_group else 3):
            return None
        t, p, o = fields[-3:]
        partition, offset = _int(p.strip(), 32), _int(o.strip(), 64)
        if partition is None or offset is None:
            return None
        return (fields[0] if with_group else None), t, partition, offset

    single = len(groups_given) == 1
    # Kafka's rule: the first line decides; three columns mean the plan of the one --group given
    without_group = single and bool(rows) and record(rows[0][2], False) is not None
    plan: dict = {}
    for n, line, fields in rows:
        r = record(fields, not without_group)
        if r is None:
            if not without_group and len(fields) == 3 and record(fields, False) is not None:
                raise CompactlogError(f"--from-file {path}: line {n}: {line!r} has no group column: a file of "
                                      f"topic,partition,offset lines is the plan of exactly one --group")
            expected = "topic,partition,offset" if without_group else "group,topic,partition,offset"
            raise CompactlogError(f"--from-file {path}: line {n}: {line!r}: expected {expected} "
                                  f"(the partition and the offset numbers)")
        group = groups_given[0] if without_group else r[0]
        plan.setdefault(group, {})[(r[1], r[2])] = r[3]
    return plan


# -- reset ------------------------------------------------------------------------------------------

def partitions_to_reset(backend, group: str, topics: list, all_topics: bool) -> list:
    """topics: parsed --topic values [(topic, [partition] or None)]."""
    if all_topics:
        return sorted(backend.committed(group))
    out_ = []
    for topic, parts in topics:
        out_ += [(topic, p) for p in (parts if parts is not None else backend.partitions(topic))]
    return out_


def check_partitions_exist(backend, tps: list) -> None:
    """GroupOffsetsResetter.checkAllTopicPartitionsValid."""
    known = backend.topic_partitions({t for t, _ in tps})
    missing = [(t, p) for t, p in tps if known[t] is None or p not in known[t]]
    if missing:
        raise CompactlogError(f'The partitions "{",".join(f"{t}-{p}" for t, p in missing)}" do not exist')


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
    if kind == "to-current":
        # the committed offset; the log end where the group has none (resetToCurrent)
        current = backend.committed(group)
        res = {tp: current[tp] for tp in tps if tp in current}
        rest = [tp for tp in tps if tp not in current]
        ends = backend.offsets(rest, "latest")
        for tp in rest:
            if tp not in ends:
                raise CompactlogError(f"Error getting ending offset of topic partition: {tp[0]}-{tp[1]}")
            res[tp] = ends[tp]
        return res
    # to-datetime, by-duration: the first offset at or after the time, else the log end. A time
    # before 1970 asks for 0: negative timestamps are ListOffsets' earliest/latest markers.
    timestamp = max(arg() if callable(arg) else arg, 0)
    by_time = backend.offsets(tps, "timestamp", timestamp)
    empty = [tp for tp in tps if by_time.get(tp, -1) < 0]
    for t, p in empty:
        if (t, p) in by_time:
            sys.stderr.write(f"Warn: Partition {p} from topic {t} is empty. Falling back to latest known offset.\n")
    ends = backend.offsets(empty, "latest")
    res = {}
    for tp in tps:
        o = by_time.get(tp, -1)
        if o < 0:
            o = ends.get(tp)
        if o is None:
            raise CompactlogError(f"Error getting offset by timestamp of topic partition: {tp[0]}-{tp[1]}")
        res[tp] = o
    return res


def reset_offsets(backend, groups: list[str], topics: list, all_topics: bool, how: tuple | None,
                  plan_file: dict | None, execute: bool) -> dict:
    """ConsumerGroupService.resetOffsets: {group: {(topic, partition): new offset}}; an active group
    is reported and left out (an empty plan)."""
    result = {}
    for g in groups:
        info = backend.describe(g)
        if info.state not in ("Empty", "Dead"):
            print_error(f"Assignments can only be reset if the group '{g}' is inactive, but the current "
                        f"state is {info.state}.")
            result[g] = {}
            continue
        if plan_file is not None:
            requested = plan_file.get(g)
            if requested is None:
                print_error(f"No reset plan for group {g} found.")
                result[g] = {}
                continue
            planned = check_range(backend, requested)
        else:
            tps = partitions_to_reset(backend, g, topics, all_topics)
            check_partitions_exist(backend, tps)
            planned = prepare_reset(backend, g, tps, how)
        if execute and planned:
            backend.alter(g, planned)
        result[g] = planned
    return result


def print_reset(result: dict) -> None:
    """printOffsetsToReset: one table for every group (the header once any group was asked for)."""
    widths = [30, 30, 10, 15]
    if result:
        out()
        out(_pad(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), widths).rstrip())
        for g in sorted(result):
            for (t, p), o in sorted(result[g].items()):
                out(_pad((g, t, str(p), str(o)), widths).rstrip())
    out()


def export_csv(result: dict, with_group: bool) -> str:
    """exportOffsetsToCsv: ``topic,partition,offset`` lines when one --group was given, else
    ``group,topic,partition,offset`` (the format --from-file reads back)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for g in sorted(result):
        for (t, p), o in sorted(result[g].items()):
            w.writerow(([g] if with_group else []) + [t, p, o])
    return buf.getvalue()


def delete_groups(backend, groups: list[str]) -> bool:
    results = backend.delete(groups) if groups else {}
    failed = {g: e for g, e in results.items() if e is not None}
    done = [g for g, e in results.items() if e is None]
    if not failed:
        out(f"Deletion of requested consumer groups ({', '.join(repr_q(g) for g in done)}) was successful.")
        return True
    print_error("Deletion of some consumer groups failed:")
    for g, e in failed.items():
        out(f"* Group '{g}' could not be deleted due to: {e}")
    if done:
        out(f"\nThese consumer groups were deleted successfully: {', '.join(repr_q(g) for g in done)}")
    return False


def repr_q(name: str) -> str:
    return f"'{name}'"


def delete_offsets(backend, group: str, topics: list) -> bool:
    """ConsumerGroupService.deleteOffsets: the request's outcome, then one row per partition (a
    topic the cluster does not have gets one row, partition "-")."""
    explicit, whole = [], []
    for topic, parts in topics:
        if parts is None:
            whole.append(topic)
        else:
            explicit += [(topic, p) for p in parts]
    results: dict = {}
    known = backend.topic_partitions(whole) if whole else {}
    wanted = set(explicit)
    for t in whole:
        if known[t] is None:
            results[(t, -1)] = UNKNOWN_TOPIC_OR_PARTITION
        else:
            wanted.update((t, p) for p in known[t])
    top, per = backend.delete_offsets(group, sorted(wanted))
    if top == 0:
        # the admin client's all(): the first partition's error when the request itself succeeded
        top = next((per[tp] for tp in sorted(wanted) if per.get(tp, 0) != 0), 0)
        results.update({tp: per.get(tp, 0) for tp in wanted})
    else:
        results.update({tp: top for tp in wanted})
    name, message = error_text(top) if top else ("NONE", "")
    if top == 0:
        out(f"Request succeeded for deleting offsets from group {group}.")
    elif name in ("INVALID_GROUP_ID", "GROUP_ID_NOT_FOUND", "GROUP_AUTHORIZATION_FAILED", "NON_EMPTY_GROUP"):
        print_error(message)
    elif name in ("GROUP_SUBSCRIBED_TO_TOPIC", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PARTITION"):
        print_error("Encountered some partition-level error, see the follow-up details.")
    else:
        print_error(f"Encountered some unknown error: {name}")
    width = max([15] + [len(t) for t, _ in results])
    out()
    out(_pad(("TOPIC", "PARTITION", "STATUS"), (width, 10, 15)).rstrip())
    # Kafka sorts on the topic and the partition number glued together, as text
    for (t, p), code in sorted(results.items(), key=lambda kv: f"{kv[0][0]}{kv[0][1]}"):
        status = "Successful" if code == 0 else "Error: {}: {}".format(*error_text(code))
        out(_pad((t, str(p) if p >= 0 else MISSING, status), (width, 10, 15)).rstrip())
    return top == 0 and not any(results.values())


# -- the options ------------------------------------------------------------------------------------

def check_args(has: dict, state_value: str | None, n_groups: int) -> None:
    """ConsumerGroupCommandOptions.checkArgs (and the checks Kafka's tool makes once running that
    need no broker): a UsageError naming the conflict."""
    def opt(name):
        return f"[{name}]"

    for name, allowed in (("members", ("describe",)), ("verbose", ("describe",)), ("offsets", ("describe",)),
                          ("state", ("describe", "list"))):
        if has[name] and not any(has[a] for a in allowed):
            raise UsageError(f"Option(s) {opt(name)} are unavailable given other options on the command line")
    group_scope = f"{opt('all-groups')}, {opt('group')}"
    if has["describe"]:
        if not has["group"] and not has["all-groups"]:
            raise UsageError(f"Option {opt('describe')} takes one of these options: {group_scope}")
        if sum(has[o] for o in ("members", "offsets", "state")) > 1:
            raise UsageError(f"Option {opt('describe')} takes at most one of these options: "
                             f"{opt('members')}, {opt('offsets')}, {opt('state')}")
        if has["state"] and state_value is not None:
            raise UsageError(f"Option {opt('describe')} does not take a value for {opt('state')}")
    if has["delete"]:
        if not has["group"] and not has["all-groups"]:
            raise UsageError(f"Option {opt('delete')} takes one of these options: {group_scope}")
        if has["topic"]:
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if has["delete-offsets"] and (not has["group"] or not has["topic"]):
        raise UsageError(f"Option {opt('delete-offsets')} takes the following options: {opt('group')}, "
                         f"{opt('topic')}")
    if has["reset-offsets"]:
        if has["dry-run"] and has["execute"]:
            raise UsageError(f"Option {opt('reset-offsets')} only accepts one of {opt('execute')} and "
                             f"{opt('dry-run')}")
        if not has["group"] and not has["all-groups"]:
            raise UsageError(f"Option {opt('reset-offsets')} takes one of these options: {group_scope}")
        for used in SCENARIOS:
            for other in SCENARIOS:
                if other != used and has[used] and has[other]:
                    raise UsageError(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')
    for used, others in (("group", ("all-groups",)), ("group", ("list",)), ("topic", ("list", "describe"))):
        for other in others:
            if has[used] and has[other]:
                raise UsageError(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')
    actions = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
    if sum(has[a] for a in actions) != 1:
        raise UsageError(f"Command must include exactly one action: {', '.join('--' + a for a in actions)}")
    if has["reset-offsets"]:
        if not any(has[s] for s in SCENARIOS):
            raise UsageError(f"Option '{opt('reset-offsets')}' requires one of the following scenarios: "
                             f"{', '.join(opt(s) for s in SCENARIOS)}")
        if not has["from-file"] and not has["topic"] and not has["all-topics"]:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if has["delete-offsets"] and n_groups > 1:
        raise UsageError("Found multiple arguments for option group, but you asked for only one")


# -- the command ------------------------------------------------------------------------------------

@app.command("consumer-groups", context_settings={"allow_extra_args": True})
def consumer_groups_cmd(
        ctx: typer.Context,
        bootstrap: str = typer.Option(None, "--bootstrap-server", help="HOST:PORT of a broker to act "
                                      "through; without it, --data-dir is read (and written) directly."),
        list_: bool = typer.Option(False, "--list", help="List all consumer groups."),
        describe: bool = typer.Option(False, "--describe", help="Describe groups: offsets and lag per "
                                      "partition (--members: their members, --state: their state)."),
        delete: bool = typer.Option(False, "--delete", help="Delete groups (they must have no members)."),
        reset: bool = typer.Option(False, "--reset-offsets", help="Reset groups' committed offsets "
                                   "(the groups must have no members)."),
        delete_offsets_: bool = typer.Option(False, "--delete-offsets", help="Delete a group's committed "
                                             "offsets of the --topic partitions."),
        groups: list[str] = typer.Option(None, "--group", help="A group (repeatable except for --delete-offsets)."),
        all_groups: bool = typer.Option(False, "--all-groups", help="Every group, for --describe, --delete "
                                        "and --reset-offsets."),
        topics: list[str] = typer.Option(None, "--topic", help="TOPIC or TOPIC:0,1,2 (repeatable)."),
        all_topics: bool = typer.Option(False, "--all-topics", help="Reset every partition the group has "
                                        "an offset for."),
        to_earliest: bool = typer.Option(False, "--to-earliest"),
        to_latest: bool = typer.Option(False, "--to-latest"),
        to_current: bool = typer.Option(False, "--to-current", help="The committed offset (the log end "
                                        "where there is none)."),
        to_offset: int = typer.Option(None, "--to-offset"),
        to_datetime: str = typer.Option(None, "--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]"),
        by_duration: str = typer.Option(None, "--by-duration", help="PnDTnHnMnS: the offset at that long "
                                        "before now."),
        from_file: str = typer.Option(None, "--from-file", help="CSV of topic,partition,offset (one "
                                      "--group) or group,topic,partition,offset lines."),
        shift_by: int = typer.Option(None, "--shift-by"),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only show the new offsets (the default)."),
        execute: bool = typer.Option(False, "--execute", help="Write the new offsets."),
        export: bool = typer.Option(False, "--export", help="Print the new offsets as CSV (what --from-file "
                                    "reads) instead of the table."),
        members: bool = typer.Option(False, "--members"),
        offsets_: bool = typer.Option(False, "--offsets", help="The offsets view of --describe (the default)."),
        state: bool = typer.Option(False, "--state", help="With --describe: the groups' state. With --list: "
                                   "each group's state, optionally only groups in the states given "
                                   "(--state Stable,Empty)."),
        verbose: bool = typer.Option(False, "--verbose")):
    """Manage consumer groups, as kafka-consumer-groups.sh does."""
    groups = list(groups or [])
    topics = list(topics or [])
    # --state takes an optional value (Kafka's withOptionalArg), which the CLI parser cannot
    # express: a flag here, its value the one word left over
    extra = list(ctx.args)
    state_value = None
    if state and len(extra) == 1:
        state_value = extra.pop()
    if extra:
        fail(f"unexpected argument{'s' if len(extra) > 1 else ''}: {' '.join(extra)}", 2)
    has = {"list": list_, "describe": describe, "delete": delete, "reset-offsets": reset,
           "delete-offsets": delete_offsets_, "group": bool(groups), "all-groups": all_groups,
           "topic": bool(topics), "all-topics": all_topics, "dry-run": dry_run, "execute": execute,
           "export": export, "members": members, "offsets": offsets_, "state": state, "verbose": verbose,
           "to-offset": to_offset is not None, "to-datetime": to_datetime is not None,
           "by-duration": by_duration is not None, "to-earliest": to_earliest, "to-latest": to_latest,
           "to-current": to_current, "shift-by": shift_by is not None, "from-file": from_file is not None}
    try:
        check_args(has, state_value, len(groups))
        parsed_topics = [parse_topic_arg(t) for t in topics]
        states = parse_states(state_value) if list_ else None
    except UsageError as e:
        fail(str(e), 2)
    how, plan_file = None, None
    if reset:
        if not dry_run and not execute:
            sys.stderr.write("WARN: No action will be performed as the --execute option is missing; "
                             "add --dry-run to say so explicitly.\n")
        if from_file is not None:
            plan_file = read_reset_plan(from_file, groups)
        elif to_datetime is not None:
            how = ("timestamp", parse_datetime(to_datetime))
        elif by_duration is not None:
            nanos = parse_duration_ns(by_duration)
            # now minus the duration, taken when the plan is made
            how = ("timestamp", lambda: (time.time_ns() - nanos) // 1_000_000)
        else:
            how = next((k, v) for k, v in (("to-earliest", to_earliest or None), ("to-latest", to_latest or None),
                                           ("to-current", to_current or None), ("to-offset", to_offset),
                                           ("shift-by", shift_by)) if v is not None)
    writes = (reset and execute) or delete or delete_offsets_
    if bootstrap:
        backend = BrokerBackend(bootstrap)
        dd = None
    else:
        c = context(ctx)
        dd = c.open(write=writes)
        backend = DataDirBackend(dd)
    ok = True
    try:
        if all_groups and not list_:
            selected = [g for g, _ in sorted(backend.list_groups())]
        else:
            selected = groups
        if list_:
            list_groups(backend, state, states)
        elif describe:
            # Kafka collects the groups in a TreeMap: each once, in name order
            for g in sorted(set(selected)):
                if members:
                    describe_members(backend, g, verbose)
                elif state:
                    describe_state(backend, g)
                else:
                    describe_offsets(backend, g)
        elif reset:
            result = reset_offsets(backend, selected, parsed_topics, all_topics, how, plan_file, execute)
            if export:
                out(export_csv(result, with_group=len(groups) != 1))
            else:
                print_reset(result)
        elif delete:
            ok = delete_groups(backend, selected)
        else:
            ok = delete_offsets(backend, groups[0], parsed_topics)
    finally:
        backend.close()
        if dd is not None:
            dd.close()
    if not ok:
        raise typer.Exit(1)
