"""Helpers for the group coordinator's unit tests: ``H``, a coordinator shard driven as the
service drives it, with a fake clock and an in-memory ``__consumer_offsets``: ``H.run`` writes an
outcome's records (or fails the write), replays them when asked and runs the callback."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.api_data import CommitPartition, JoinRequest, SyncRequest
from compactlog.coordinator.group.classic_group_state import STABLE
from compactlog.coordinator.group.config import GroupConfig
from compactlog.coordinator.runtime import Outcome
from compactlog.coordinator.group.shard import GroupCoordinatorShard

SESSION = 10000
REBALANCE = 30000
SUB_T = R.encode_subscription(["t"])
SUB_U = R.encode_subscription(["u"])


class StorageFailure(Exception):
    kafka_error = 56


class H:
    """A coordinator shard with a fake clock and an in-memory __consumer_offsets."""

    # True: each record written goes through its bytes (encoded, then decoded as the loader reads it)
    through_bytes = False

    def __init__(self, **config):
        self.now = 1_000_000
        self.c = GroupCoordinatorShard(GroupConfig(**self.config_of(config)), clock=lambda: self.now)
        self.log: list[R.CoordinatorRecord] = []
        self.fail_writes = False

    def config_of(self, config: dict) -> dict:
        return {"initial_rebalance_delay_ms": 0, **config}

    def run(self, outcome: Outcome) -> None:
        error = None
        if outcome.records:
            if self.fail_writes:
                error = StorageFailure("disk gone")
            else:
                base = len(self.log)
                for i, rec in enumerate(outcome.records):
                    if self.through_bytes:
                        rec = R.decode_record(rec.key_bytes(), rec.value_bytes(), consumer_groups=True)
                    self.log.append(rec)
                    if outcome.replay:
                        self.c.replay(rec, base + i)
        if outcome.on_written is not None:
            outcome.on_written(error)
        for o in self.c.take_pending():
            self.run(o)

    def advance(self, ms: int) -> None:
        self.now += ms
        for o in self.c.run_timers(self.now):
            self.run(o)

    # -- requests
    def join(self, group="g", member="", protocols=None, *, client="cli", instance=None, version=7,
             session=SESSION, rebalance=REBALANCE, ptype="consumer"):
        req = JoinRequest(group, member, ptype, protocols or [("range", SUB_T)], session, rebalance,
                          instance, client, "/127.0.0.1", version)
        outcome, fut = self.c.join_group(req)
        self.run(outcome)
        return fut

    def join_new(self, group="g", **kw):
        """A v4+ member: MEMBER_ID_REQUIRED, then the rejoin (parked); the future of the rejoin."""
        first = self.join(group, **kw).result(0)
        assert first.error == ErrorCode.member_id_required
        return first.member_id, self.join(group, first.member_id, **kw)

    def sync(self, group, member, generation, assignments=None, *, instance=None, ptype=None, pname=None):
        outcome, fut = self.c.sync_group(SyncRequest(group, generation, member, instance, ptype, pname,
                                                     assignments or {}))
        self.run(outcome)
        return fut

    def heartbeat(self, group, member, generation, instance=None):
        outcome, code = self.c.heartbeat(group, member, instance, generation)
        self.run(outcome)
        return code

    def leave(self, group, *members):
        outcome, top, results = self.c.leave_group(group, [(m, i, None) for m, i in members])
        self.run(outcome)
        return top, results

    def commit(self, group, offsets, generation=-1, member="", instance=None, version=8, retention=-1):
        parts = [CommitPartition(t, p, o, -1, md) for t, p, o, md in offsets]
        outcome, errors = self.c.commit_offsets(group, generation, member, instance, parts, retention, version)
        self.run(outcome)
        return errors

    def state(self, group="g"):
        return self.c.groups[group].state

    def stable_group(self, group="g", n=1):
        """``n`` members joined (in one initial rebalance) and synced: (member ids, generation);
        the first member is the leader."""
        pairs = [self.join_new(group) for _ in range(n)]
        self.advance(0)             # the initial rebalance delay (0 here) ends
        ids = [m for m, _ in pairs]
        gen = self.c.groups[group].generation_id
        assert all(f.result(0).generation_id == gen for _, f in pairs)
        leader = self.c.groups[group].leader_id
        assert leader == ids[0]
        self.sync(group, leader, gen, {m: R.encode_assignment([("t", [i])]) for i, m in enumerate(ids)})
        for m in ids:
            if m != leader:
                self.sync(group, m, gen)
        assert self.state(group) == STABLE
        return ids, gen
