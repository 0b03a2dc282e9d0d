"""Where ``consumer-groups`` reads and writes groups (Kafka's tool has only the first):
``BrokerBackend`` acts through a broker with real client libraries (confluent-kafka's
AdminClient; kafka-python's KafkaAdminClient for OffsetDelete, which confluent-kafka's binding does
not expose); ``DataDirBackend`` works on a data dir without one, the groups through the Python
API's ``ConsumerGroups`` (``__consumer_offsets`` loaded as a broker loads it, written as its
coordinator writes) and the log offsets from the data dir's logs. Both answer with the same
plain data (``GroupInfo``, {(topic, partition): offset}, Kafka's error codes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...errors import CompactlogError
from .printing import MISSING, error_name

TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1       # Kafka's retry.backoff.ms
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_NOT_READY = (14, 15, 16)


@dataclass
class MemberInfo:
    consumer_id: str
    host: str
    client_id: str
    instance_id: str | None
    partitions: list = field(default_factory=list)      # [(topic, partition)]
    # KIP-848 consumer groups: the member's epoch (None when not known) and target assignment
    member_epoch: int | None = None
    target: list | None = None


@dataclass
class GroupInfo:
    group_id: str
    state: str                      # Kafka's GroupState names: Stable, Empty, Dead, Assigning, ...
    members: list = field(default_factory=list)
    assignor: str = ""
    coordinator: str = MISSING
    group_type: str = "classic"     # "consumer": a KIP-848 group
    group_epoch: int | None = None
    assignment_epoch: int | None = None


# -- through a broker -------------------------------------------------------------------------------

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

    def _ask(self, request):
        """``request()``'s future's result, asked again while the group coordinator is not ready
        (a broker just started reads its offsets topic first), within TIMEOUT_S: Kafka's Java admin
        retries these errors, librdkafka's hands them to the caller."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                return request().result(TIMEOUT_S)
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if getattr(err, "code", lambda: None)() in COORDINATOR_NOT_READY and time.monotonic() < deadline:
                    time.sleep(RETRY_BACKOFF_S)
                    continue
                raise CompactlogError(str(err.str() if err is not None else e)) from None

    def list_groups(self, states: set[str] | None = None) -> list[tuple[str, str]]:
        from confluent_kafka import ConsumerGroupState
        kw = {}
        # the broker filters (ListGroups' StatesFilter) when every state has a name in the
        # library; the filter below keeps the answer right either way
        if states and all(s in _CK_STATES for s in states):
            kw["states"] = {getattr(ConsumerGroupState, _CK_STATES[s]) for s in states}
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            res = self._wait(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S, **kw))
            # a broker's error is in ``errors``, beside what the others listed: a list without
            # a loading coordinator's groups would be short, so it is asked again or refused
            codes = [e.code() for e in res.errors]
            if not codes:
                break
            if all(c in COORDINATOR_NOT_READY for c in codes) and time.monotonic() < deadline:
                time.sleep(RETRY_BACKOFF_S)
                continue
            raise CompactlogError("listing the groups failed: " + "; ".join(e.str() for e in res.errors))
        listed = [(g.group_id, _state_name(g.state)) for g in res.valid]
        return [g for g in listed if not states or g[1] in states]

    def describe(self, group: str) -> GroupInfo:
        d = self._ask(lambda: self.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group])
        consumer = getattr(getattr(d, "type", None), "name", "") == "CONSUMER"
        members = [MemberInfo(m.member_id, m.host, m.client_id, m.group_instance_id,
                              [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])],
                              target=[(tp.topic, tp.partition) for tp in
                                      (getattr(m.target_assignment, "topic_partitions", None) or [])]
                              if consumer else None)
                   for m in d.members]
        coord = d.coordinator
        where = f"{coord.host}:{coord.port} ({coord.id})" if coord is not None else MISSING
        # confluent-kafka's binding does not expose the epochs of a KIP-848 group: shown as "-"
        return GroupInfo(group, _state_name(d.state), members, d.partition_assignor or "", where,
                         "consumer" if consumer else "classic")

    def committed(self, group: str) -> dict:
        from confluent_kafka import ConsumerGroupTopicPartitions
        res = self._ask(lambda: self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
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
        res = self._ask(lambda: self.admin.alter_consumer_group_offsets(
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


# -- on a data dir, without a broker ---------------------------------------------------------------

class DataDirBackend:
    """The data dir's ``__consumer_offsets`` and logs, read directly (and written for --execute,
    --delete and --delete-offsets), the groups through the Python API."""

    def __init__(self, dd):
        # imported here, as every heavy module of the CLI: the group coordinator loads kio's tables
        from ...api import ConsumerGroups
        self.dd = dd
        self.groups = ConsumerGroups(dd)

    def list_groups(self, states: set[str] | None = None):
        return self.groups.list_groups(states or ())

    def describe(self, group: str) -> GroupInfo:
        d = self.groups.describe_group(group)
        if d.state == "Dead":
            return GroupInfo(group, "Dead")
        members = [MemberInfo(m.member_id, m.client_host, m.client_id, m.group_instance_id, list(m.partitions),
                              m.member_epoch, None if m.target is None else list(m.target))
                   for m in d.members]
        return GroupInfo(group, d.state, members, d.protocol, MISSING, d.group_type, d.group_epoch,
                         d.assignment_epoch)

    def committed(self, group: str) -> dict:
        return self.groups.committed_offsets(group)

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
        errors = self.groups.commit_offsets(group, offsets)
        bad = [f"{t}-{p}: {error_name(e)}" for (t, p), e in errors.items() if e != 0]
        failure = self.groups.last_commit_failure
        if bad and failure is not None:
            raise failure          # the write that failed, named as every command names one (its file)
        if bad:
            raise CompactlogError(f"resetting the offsets of group {group!r} failed: {'; '.join(bad)}")

    def delete(self, groups: list[str]) -> dict:
        return {g: None if code == 0 else error_name(code) for g, code in self.groups.delete_groups(groups).items()}

    def delete_offsets(self, group: str, tps: list) -> tuple[int, dict]:
        """As the broker's OffsetDelete handler answers (see ``ConsumerGroups.delete_offsets``)."""
        return self.groups.delete_offsets(group, tps)

    def close(self) -> None:
        self.groups.close()


def _state_name(state) -> str:
    # confluent-kafka's ConsumerGroupState enum: STABLE -> Stable, PREPARING_REBALANCING -> ...
    name = getattr(state, "name", str(state))
    return {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "PREPARING_REBALANCING": "PreparingRebalance",
            "COMPLETING_REBALANCING": "CompletingRebalance", "UNKNOWN": "Unknown", "ASSIGNING": "Assigning",
            "RECONCILING": "Reconciling"}.get(name, name)
