"""The classic group state machine, sans-IO: every state transition, Kafka's error codes, the
session / rebalance / sync timers, static membership, committed offsets, expiry and replay.

A fake clock and an in-memory "log" stand in for the broker: ``H.run`` writes an outcome's
records (or fails the write), replays them when asked and runs the callback, as the service does.
"""

from __future__ import annotations


from compactlog.record import consumer_offsets as R
from compactlog.server.groups import coordinator as C
from compactlog.server.groups.coordinator import (COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE,
                                                  STABLE, CommitPartition, GroupConfig, JoinRequest,
                                                  SyncRequest)

SESSION = 10000
REBALANCE = 30000
SUB_T = R.encode_subscription(["t"])
SUB_U = R.encode_subscription(["u"])


class StorageFailure(Exception):
    kafka_error = 56


class H:
    """A coordinator with a fake clock and an in-memory __consumer_offsets."""

    def __init__(self, **config):
        self.now = 1_000_000
        cfg = {"initial_rebalance_delay_ms": 0, **config}
        self.c = C.GroupCoordinator(GroupConfig(**cfg), clock=lambda: self.now)
        self.log: list[R.CoordinatorRecord] = []
        self.fail_writes = False

    def run(self, outcome: C.Outcome) -> None:
        error = None
        if outcome.records:
            if self.fail_writes:
                error = StorageFailure("disk gone")
            else:
                base = len(self.log)
                self.log.extend(outcome.records)
                if outcome.replay:
                    for i, rec in enumerate(outcome.records):
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
        assert first.error == C.MEMBER_ID_REQUIRED
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


# -- JoinGroup ------------------------------------------------------------------------------------

def test_join_validation_errors():
    h = H(min_session_timeout_ms=6000, max_session_timeout_ms=300000)
    assert h.join("").result(0).error == C.INVALID_GROUP_ID
    assert h.join(session=5999).result(0).error == C.INVALID_SESSION_TIMEOUT
    assert h.join(session=300001).result(0).error == C.INVALID_SESSION_TIMEOUT
    # a member id for a group that does not exist
    assert h.join("nope", "cli-123").result(0).error == C.UNKNOWN_MEMBER_ID
    assert "nope" not in h.c.groups
    # an Empty group needs a protocol type and at least one protocol
    assert h.join("x", ptype="").result(0).error == C.INCONSISTENT_GROUP_PROTOCOL
    outcome, fut = h.c.join_group(JoinRequest("y", "", "consumer", [], SESSION, REBALANCE))
    assert fut.result(0).error == C.INCONSISTENT_GROUP_PROTOCOL


def test_first_member_member_id_required_then_generation_one():
    h = H()
    first = h.join(client="my-client").result(0)
    assert first.error == C.MEMBER_ID_REQUIRED and first.member_id.startswith("my-client-")
    # the new group is written at once: an empty GroupMetadata, generation 0
    (rec,) = h.log
    assert rec.key == R.GroupMetadataKey("g") and rec.value.generation == 0 and rec.value.members == []
    assert h.state() == EMPTY and h.c.groups["g"].pending_join_members == {first.member_id}
    fut = h.join("g", first.member_id, client="my-client")
    assert not fut.done() and h.state() == PREPARING_REBALANCE
    h.advance(0)                    # the initial rebalance delay ends (0 ms here)
    resp = fut.result(0)
    assert resp.error == C.NONE and resp.generation_id == 1 and resp.leader == first.member_id
    assert resp.protocol_name == "range" and resp.protocol_type == "consumer"
    assert resp.members == [(first.member_id, None, SUB_T)]
    assert h.state() == COMPLETING_REBALANCE


def test_join_v3_adds_the_member_directly():
    h = H()
    fut = h.join(version=3)
    h.advance(0)
    resp = fut.result(0)
    assert resp.error == C.NONE and resp.member_id.startswith("cli-") and resp.generation_id == 1


def test_initial_rebalance_delay_collects_members_and_is_extended():
    h = H(initial_rebalance_delay_ms=3000)
    a, fa = h.join_new()
    assert h.state() == PREPARING_REBALANCE and not fa.done()
    h.advance(2000)
    b, fb = h.join_new()          # arrives within the delay: the delay is extended once more
    h.advance(1000)
    assert not fa.done() and not fb.done()
    h.advance(3000)
    ra, rb = fa.result(0), fb.result(0)
    assert ra.generation_id == rb.generation_id == 1 and ra.leader == a
    assert {m for m, _, _ in ra.members} == {a, b} and rb.members == []


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    h = H(initial_rebalance_delay_ms=3000)
    a, fa = h.join_new(rebalance=4000)
    for _ in range(5):              # members keep coming
        h.advance(1000)
        if fa.done():
            break
        h.join_new(rebalance=4000)
    assert fa.done() and h.now - 1_000_000 <= 4000 + 3000


def test_inconsistent_protocols_and_protocol_selection():
    h = H()
    (a,), gen = h.stable_group()
    assert h.join(protocols=[("roundrobin", SUB_T)]).result(0).error == C.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(ptype="connect").result(0).error == C.INCONSISTENT_GROUP_PROTOCOL
    # a second member supporting range and roundrobin joins: range is the only common protocol
    b, fb = h.join_new(protocols=[("roundrobin", SUB_T), ("range", SUB_T)])
    fa = h.join("g", a)
    assert fa.result(0).protocol_name == "range" and fb.result(0).protocol_name == "range"


def test_late_joiner_rebalance_signalled_through_heartbeat():
    h = H()
    (a,), gen = h.stable_group()
    assert h.heartbeat("g", a, gen) == C.NONE
    b, fb = h.join_new()
    assert h.state() == PREPARING_REBALANCE and not fb.done()
    # the existing member learns of the rebalance from its heartbeat
    assert h.heartbeat("g", a, gen) == C.REBALANCE_IN_PROGRESS
    # its commits of the current generation are still accepted while preparing
    assert h.commit("g", [("t", 0, 5, "")], gen, a) == [C.NONE]
    fa = h.join("g", a)
    ra, rb = fa.result(0), fb.result(0)
    assert ra.generation_id == gen + 1 == rb.generation_id and ra.leader == a
    assert len(ra.members) == 2 and rb.members == []
    assert h.state() == COMPLETING_REBALANCE
    # old generation fenced
    assert h.heartbeat("g", a, gen) == C.ILLEGAL_GENERATION
    assert h.heartbeat("g", a, gen + 1) == C.NONE         # CompletingRebalance: NONE
    assert h.commit("g", [("t", 0, 6, "")], gen + 1, a) == [C.REBALANCE_IN_PROGRESS]


def test_sync_group_completes_all_members_and_writes_the_assignment():
    h = H()
    a, fa = h.join_new()
    b, fb = h.join_new()
    h.advance(0)
    gen = h.c.groups["g"].generation_id
    assert fa.result(0).generation_id == fb.result(0).generation_id == gen == 1
    leader, follower = a, b
    sf = h.sync("g", follower, gen)
    assert not sf.done()                        # parked until the leader's assignment
    n_before = len(h.log)
    sl = h.sync("g", leader, gen, {a: b"A", b: b"B", "stranger": b"X"})
    assert sl.result(0).error == C.NONE and sf.result(0).error == C.NONE
    assert {leader: sl.result(0).assignment, follower: sf.result(0).assignment} == {a: b"A", b: b"B"}
    assert sl.result(0).protocol_name == "range" and sl.result(0).protocol_type == "consumer"
    assert h.state() == STABLE
    (rec,) = h.log[n_before:]
    assert rec.value.generation == gen and rec.value.leader == leader
    assert {m.member_id: m.assignment for m in rec.value.members} == {a: b"A", b: b"B"}
    assert all(m.client_host == "/127.0.0.1" and m.subscription == SUB_T for m in rec.value.members)
    # in Stable a SyncGroup answers with the stored assignment at once
    assert h.sync("g", follower, gen).result(0).assignment == (b"B" if follower == b else b"A")


def test_sync_group_errors():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    assert h.sync("", a, gen).result(0).error == C.INVALID_GROUP_ID
    assert h.sync("nope", a, gen).result(0).error == C.UNKNOWN_MEMBER_ID
    assert h.sync("g", "stranger", gen).result(0).error == C.UNKNOWN_MEMBER_ID
    assert h.sync("g", a, gen + 7).result(0).error == C.ILLEGAL_GENERATION
    assert h.sync("g", a, gen, pname="roundrobin").result(0).error == C.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", a, gen, ptype="connect").result(0).error == C.INCONSISTENT_GROUP_PROTOCOL
    h.join_new()
    assert h.sync("g", a, gen).result(0).error == C.REBALANCE_IN_PROGRESS
    h2 = H()
    h2.commit("simple", [("t", 0, 1, "")])
    assert h2.sync("simple", "m", 0).result(0).error == C.UNKNOWN_MEMBER_ID     # Empty group


def test_rebalance_during_completing_rebalance_fails_parked_syncs():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    h.join("g", a)                                   # leader rejoins: forces a rebalance
    h.join("g", b)
    gen2 = h.c.groups["g"].generation_id
    assert gen2 == gen + 1 and h.state() == COMPLETING_REBALANCE
    follower = b if h.c.groups["g"].leader_id == a else a
    sf = h.sync("g", follower, gen2)
    c, fc = h.join_new()                            # a new member arrives before the leader syncs
    assert sf.result(0).error == C.REBALANCE_IN_PROGRESS
    assert h.state() == PREPARING_REBALANCE


def test_member_rejoining_unchanged_during_completing_rebalance_gets_the_generation_again():
    h = H()
    a, fa = h.join_new()
    h.advance(0)
    gen = fa.result(0).generation_id
    again = h.join("g", a).result(0)
    assert again.error == C.NONE and again.generation_id == gen and again.members == [(a, None, SUB_T)]
    changed = h.join("g", a, [("range", SUB_U)]).result(0)
    assert changed.generation_id == gen + 1       # changed metadata: a new generation


def test_follower_rejoining_stable_unchanged_gets_the_current_generation():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    follower = b if h.c.groups["g"].leader_id == a else a
    r = h.join("g", follower).result(0)
    assert r.generation_id == gen and r.members == [] and h.state() == STABLE
    # with new metadata it rebalances
    h.join("g", follower, [("range", SUB_U)])
    assert h.state() == PREPARING_REBALANCE


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    c, fc = h.join_new(rebalance=REBALANCE)
    h.join("g", a)
    # b keeps heartbeating (it is told to rejoin) but never rejoins: the join phase ends at the
    # rebalance timeout without it
    for _ in range(REBALANCE // 5000 - 1):
        h.advance(5000)
        assert h.heartbeat("g", b, gen) == C.REBALANCE_IN_PROGRESS
    h.advance(4999)
    assert h.state() == PREPARING_REBALANCE
    h.advance(1)
    assert h.state() == COMPLETING_REBALANCE and set(h.c.groups["g"].members) == {a, c}
    assert fc.result(0).generation_id == gen + 1


def test_session_expiry_removes_a_member_and_rebalances():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    h.advance(SESSION // 2)
    assert h.heartbeat("g", a, gen) == C.NONE
    h.advance(SESSION // 2)
    # b's session ran out: a learns of the rebalance, rejoins alone
    assert b not in h.c.groups["g"].members
    assert h.heartbeat("g", a, gen) == C.REBALANCE_IN_PROGRESS
    r = h.join("g", a).result(0)
    assert r.generation_id == gen + 1 and r.members == [(a, None, SUB_T)]
    assert h.heartbeat("g", b, gen) == C.UNKNOWN_MEMBER_ID


def test_last_member_expiring_leaves_an_empty_group_written():
    h = H()
    (a,), gen = h.stable_group()
    n = len(h.log)
    h.advance(SESSION)
    assert h.state() == EMPTY and h.c.groups["g"].generation_id == gen + 1
    (rec,) = h.log[n:]
    assert rec.value.members == [] and rec.value.protocol is None and rec.value.generation == gen + 1
    assert rec.value.current_state_timestamp == h.now
    assert h.heartbeat("g", a, gen + 1) == C.UNKNOWN_MEMBER_ID


def test_commits_keep_the_session_alive():
    h = H()
    (a,), gen = h.stable_group()
    for _ in range(4):
        h.advance(SESSION - 1)
        assert h.commit("g", [("t", 0, 1, "")], gen, a) == [C.NONE]
    assert h.state() == STABLE


def test_pending_member_that_never_rejoins_expires():
    h = H()
    first = h.join().result(0)
    assert first.error == C.MEMBER_ID_REQUIRED
    h.advance(SESSION)
    assert first.member_id not in h.c.groups["g"].pending_join_members
    assert h.join("g", first.member_id).result(0).error == C.UNKNOWN_MEMBER_ID


def test_new_member_join_is_bounded():
    h = H(new_member_join_timeout_ms=5000)
    (a, b), gen = h.stable_group(n=2)
    c, fc = h.join_new()                 # parked: a and b never rejoin, the rebalance timeout is long
    h.advance(5000)
    assert fc.result(0).error == C.UNKNOWN_MEMBER_ID and c not in h.c.groups["g"].members


def test_sync_timeout_removes_members_that_do_not_sync():
    h = H()
    leader, fa = h.join_new()
    follower, fb = h.join_new()
    h.advance(0)
    gen = h.c.groups["g"].generation_id
    parked = h.sync("g", follower, gen)
    # the leader stays alive (heartbeats) but never sends the assignment
    for _ in range(REBALANCE // 5000 - 1):
        h.advance(5000)
        assert h.heartbeat("g", leader, gen) == C.NONE
        assert h.state() == COMPLETING_REBALANCE
    h.advance(5000)
    assert leader not in h.c.groups["g"].members and follower in h.c.groups["g"].members
    assert parked.result(0).error == C.REBALANCE_IN_PROGRESS
    assert h.state() == PREPARING_REBALANCE


def test_leave_group():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    top, res = h.leave("g", (b, None), ("stranger", None))
    assert top == C.NONE and res == [(b, None, C.NONE), ("stranger", None, C.UNKNOWN_MEMBER_ID)]
    assert h.state() == PREPARING_REBALANCE
    h.join("g", a)
    assert h.state() == COMPLETING_REBALANCE
    n = len(h.log)
    h.leave("g", (a, None))
    assert h.state() == EMPTY and h.log[n:][0].value.members == []
    assert h.leave("", (a, None))[0] == C.INVALID_GROUP_ID
    assert h.leave("nope", (a, None)) == (C.NONE, [(a, None, C.UNKNOWN_MEMBER_ID)])


def test_leave_of_a_pending_member_and_of_a_parked_joiner():
    h = H()
    first = h.join().result(0)
    assert h.leave("g", (first.member_id, None))[1] == [(first.member_id, None, C.NONE)]
    h2 = H()
    (a, b), gen = h2.stable_group(n=2)
    fa = h2.join("g", a)                 # a is parked awaiting b
    h2.leave("g", (b, None))
    assert fa.result(0).generation_id == gen + 1     # b left: the join phase completes


# -- static membership (KIP-345) --------------------------------------------------------------------

def test_static_member_restart_keeps_its_assignment_without_rebalance():
    h = H()
    fa = h.join(instance="i-1", version=5)
    h.advance(0)
    a = fa.result(0).member_id
    assert a.startswith("i-1-")                 # static members need no MEMBER_ID_REQUIRED round
    gen = fa.result(0).generation_id
    h.sync("g", a, gen, {a: b"A"}, instance="i-1")
    assert h.state() == STABLE
    n = len(h.log)
    again = h.join(instance="i-1", version=5).result(0)
    assert again.error == C.NONE and again.member_id != a and again.generation_id == gen
    assert again.leader == a                     # Kafka answers with the leader as it was
    assert h.state() == STABLE
    (rec,) = h.log[n:]
    assert [m.member_id for m in rec.value.members] == [again.member_id]
    assert rec.value.members[0].group_instance_id == "i-1"
    # the old member id is fenced, the new one has the old assignment
    assert h.heartbeat("g", a, gen, "i-1") == C.FENCED_INSTANCE_ID
    assert h.sync("g", again.member_id, gen, instance="i-1").result(0).assignment == b"A"
    assert h.heartbeat("g", again.member_id, gen, "i-1") == C.NONE
    assert h.commit("g", [("t", 0, 1, "")], gen, a, "i-1") == [C.FENCED_INSTANCE_ID]
    assert h.heartbeat("g", again.member_id, gen, "i-unknown") == C.UNKNOWN_MEMBER_ID


def test_static_member_replacement_fences_parked_requests_and_rebalances_when_completing():
    h = H()
    f1 = h.join(instance="i-1", version=5)
    f2 = h.join(instance="i-2", version=5)
    h.advance(0)
    m2, gen = f2.result(0).member_id, f2.result(0).generation_id
    parked = h.sync("g", m2, gen, instance="i-2")
    assert not parked.done()
    # i-2 restarts before the leader assigned: its old parked sync is fenced, the group rebalances
    again = h.join(instance="i-2", version=5)
    assert parked.result(0).error == C.FENCED_INSTANCE_ID
    assert h.state() == PREPARING_REBALANCE and not again.done()
    h.join("g", f1.result(0).member_id, instance="i-1", version=5)
    assert again.result(0).generation_id == gen + 1


def test_static_member_rejoining_with_a_protocol_change_rebalances():
    h = H()
    fa = h.join(instance="i-1", version=5)
    h.advance(0)
    a, gen = fa.result(0).member_id, fa.result(0).generation_id
    h.sync("g", a, gen, {a: b"A"}, instance="i-1")
    r = h.join(instance="i-1", version=5, protocols=[("roundrobin", SUB_T), ("range", SUB_T)]).result(0)
    assert r.generation_id == gen + 1 and r.protocol_name == "roundrobin"


def test_static_member_leaves_by_instance_id_and_expires_by_session():
    h = H()
    fa = h.join(instance="i-1", version=5)
    h.advance(0)
    a, gen = fa.result(0).member_id, fa.result(0).generation_id
    h.sync("g", a, gen, {a: b"A"}, instance="i-1")
    top, res = h.leave("g", ("", "i-1"))
    assert res == [("", "i-1", C.NONE)] and h.state() == EMPTY
    assert h.leave("g", ("", "i-1"))[1] == [("", "i-1", C.UNKNOWN_MEMBER_ID)]
    fb = h.join(instance="i-2", version=5)
    h.advance(0)
    b, gen = fb.result(0).member_id, fb.result(0).generation_id
    h.sync("g", b, gen, {b: b"B"}, instance="i-2")
    assert h.leave("g", ("other-id", "i-2"))[1] == [("other-id", "i-2", C.FENCED_INSTANCE_ID)]
    h.advance(SESSION)                          # static members send no LeaveGroup: sessions end them
    assert h.state() == EMPTY


# -- group size ----------------------------------------------------------------------------------------

def test_group_max_size():
    h = H(max_size=1)
    (a,), gen = h.stable_group()
    r = h.join().result(0)
    assert r.error == C.GROUP_MAX_SIZE_REACHED


# -- loading -------------------------------------------------------------------------------------------

def test_requests_while_loading():
    h = H()
    p = h.c.partition_for("g")
    h.c.start_loading(p)
    assert h.join().result(0).error == C.COORDINATOR_LOAD_IN_PROGRESS
    assert h.sync("g", "m", 1).result(0).error == C.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", "m", 1) == C.NONE                    # answered blindly
    assert h.commit("g", [("t", 0, 1, "")]) == [C.COORDINATOR_LOAD_IN_PROGRESS]
    assert h.c.fetch_offsets("g", None)[0] == C.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.describe_groups(["g"])[0].error == C.COORDINATOR_LOAD_IN_PROGRESS
    assert h.leave("g", ("m", None))[0] == C.COORDINATOR_LOAD_IN_PROGRESS
    h.c.on_loaded(p)
    assert h.join().result(0).error == C.MEMBER_ID_REQUIRED


def test_replay_rebuilds_groups_and_offsets_then_absent_members_expire():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    assert h.commit("g", [("t", 0, 11, "md"), ("t", 1, 12, "")], gen, a) == [C.NONE, C.NONE]
    h.commit("simple", [("u", 0, 3, "")])
    # a new coordinator replays the log (a broker restart)
    h2 = H()
    p = h2.c.partition_for("g")
    h2.c.start_loading(p)
    for i, rec in enumerate(h.log):
        h2.c.replay(R.decode_record(rec.key_bytes(), rec.value_bytes()), i)
    h2.c.on_loaded(p)
    g = h2.c.groups["g"]
    assert g.state == STABLE and g.generation_id == gen and set(g.members) == {a, b}
    assert g.subscribed_topics == {"t"}
    assert {m: g.members[m].assignment for m in g.members} == {a: R.encode_assignment([("t", [0])]),
                                                               b: R.encode_assignment([("t", [1])])}
    err, topics = h2.c.fetch_offsets("g", [("t", [0, 1, 2])])
    assert err == C.NONE and [(f.partition, f.offset, f.metadata) for f in topics[0][1]] == \
        [(0, 11, "md"), (1, 12, ""), (2, -1, "")]
    assert h2.c.groups["simple"].state == EMPTY and h2.c.groups["simple"].protocol_type is None
    # members that do not come back are removed when their session ends; the group empties
    n = len(h2.log)
    h2.advance(SESSION)
    assert h2.state() == EMPTY
    assert h2.log[n:][0].value.members == []


def test_replay_of_tombstones_and_transactional_offsets():
    c = C.GroupCoordinator(GroupConfig(), clock=lambda: 5)
    c.replay(R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(1, -1, "", 1)), 0)
    c.replay(R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(9, -1, "", 2)), 1, producer_id=7)
    assert c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == 1
    assert c.fetch_offsets("g", [("t", [0])], require_stable=True)[1][0][1][0].error == C.UNSTABLE_OFFSET_COMMIT
    c.replay_end_txn(7, commit=True)
    assert c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == 9
    c.replay(R.offset_commit_record("g", "t", 1, R.OffsetCommitValue(4, -1, "", 2)), 2, producer_id=8)
    c.replay_end_txn(8, commit=False)
    assert c.fetch_offsets("g", [("t", [1])])[1][0][1][0].offset == -1
    # a transactional commit older than a plain one does not win when it commits
    c.replay(R.offset_commit_record("g", "t", 2, R.OffsetCommitValue(50, -1, "", 2)), 3, producer_id=9)
    c.replay(R.offset_commit_record("g", "t", 2, R.OffsetCommitValue(60, -1, "", 2)), 4)
    c.replay_end_txn(9, commit=True)
    assert c.fetch_offsets("g", [("t", [2])])[1][0][1][0].offset == 60
    c.replay(R.offset_commit_record("g", "t", 0, None), 5)
    assert c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == -1
    c.replay(R.group_metadata_record("g", None), 6)
    assert "g" not in c.groups


# -- OffsetCommit / OffsetFetch -------------------------------------------------------------------------

def test_manual_commits_make_a_simple_group():
    h = H()
    assert h.commit("manual", [("t", 0, 5, "meta"), ("t", 1, 6, None)]) == [C.NONE, C.NONE]
    g = h.c.groups["manual"]
    assert g.state == EMPTY and g.protocol_type is None
    assert [r.value.offset for r in h.log] == [5, 6] and h.log[1].value.metadata == ""
    assert h.log[0].value_version == 3 and h.log[0].value.commit_timestamp == h.now
    err, topics = h.c.fetch_offsets("manual", None)
    assert topics == [("t", [C.FetchedOffset(0, 5, -1, "meta"), C.FetchedOffset(1, 6, -1, "")])]
    # a retention time (OffsetCommit v2-4) writes a v1 value with an expire timestamp
    h.commit("manual", [("t", 0, 7, "")], retention=60000)
    assert h.log[-1].value_version == 1 and h.log[-1].value.expire_timestamp == h.now + 60000


def test_commit_errors():
    h = H(offset_metadata_max_bytes=3)
    assert h.commit("", [("t", 0, 1, "")]) == [C.INVALID_GROUP_ID]
    assert h.commit("nope", [("t", 0, 1, "")], generation=1, member="m") == [C.ILLEGAL_GENERATION]
    assert h.commit("nope", [("t", 0, 1, "")], generation=1, member="m", version=9) == [C.GROUP_ID_NOT_FOUND]
    assert h.commit("nope", [("t", 0, 1, "toolong"), ("t", 1, 1, "ok")]) == [C.OFFSET_METADATA_TOO_LARGE, C.NONE]
    h2 = H()
    (a,), gen = h2.stable_group()
    assert h2.commit("g", [("t", 0, 1, "")], gen, "stranger") == [C.UNKNOWN_MEMBER_ID]
    assert h2.commit("g", [("t", 0, 1, "")], gen + 1, a) == [C.ILLEGAL_GENERATION]
    # generation -1 without a member id on a group with members
    assert h2.commit("g", [("t", 0, 1, "")]) == [C.UNKNOWN_MEMBER_ID]
    assert h2.commit("g", [("t", 0, 1, "")], gen, a) == [C.NONE]


def test_fetch_offsets():
    h = H()
    assert h.c.fetch_offsets(None, None)[0] == C.INVALID_GROUP_ID
    assert h.c.fetch_offsets("nothing", [("t", [0])]) == (C.NONE, [("t", [C.FetchedOffset(0)])])
    assert h.c.fetch_offsets("nothing", None) == (C.NONE, [])


# -- DescribeGroups / ListGroups / DeleteGroups / OffsetDelete ------------------------------------------

def test_describe_and_list_groups():
    h = H()
    (a,), gen = h.stable_group()
    h.commit("simple", [("t", 0, 1, "")])
    (d, unknown) = h.c.describe_groups(["g", "nope"])
    assert (d.state, d.protocol_type, d.protocol_data) == (STABLE, "consumer", "range")
    (m,) = d.members
    assert m.metadata == SUB_T and m.assignment == R.encode_assignment([("t", [0])])
    assert m.client_host == "/127.0.0.1" and m.client_id == "cli"
    assert (unknown.error, unknown.state) == (C.NONE, "Dead")
    h.join_new()
    d = h.c.describe_groups(["g"])[0]
    assert d.state == PREPARING_REBALANCE and d.protocol_data == "" and d.members[0].assignment == b""
    assert {(g.group_id, g.state, g.protocol_type) for g in h.c.list_groups()} == \
        {("g", PREPARING_REBALANCE, "consumer"), ("simple", EMPTY, "")}
    assert [g.group_id for g in h.c.list_groups(["EMPTY "])] == ["simple"]
    assert h.c.list_groups(types_filter=["consumer"]) == []
    assert len(h.c.list_groups(types_filter=["Classic"])) == 2


def test_delete_groups():
    h = H()
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, "")], gen, a)
    h.commit("simple", [("t", 0, 1, ""), ("u", 3, 2, "")])
    outcome, results = h.c.delete_groups(["g", "simple", "nope", ""])
    assert results == [("g", C.NON_EMPTY_GROUP), ("simple", C.NONE), ("nope", C.GROUP_ID_NOT_FOUND),
                       ("", C.INVALID_GROUP_ID)]
    assert [(r.key, r.value) for r in outcome.records] == [
        (R.OffsetCommitKey("simple", "t", 0), None), (R.OffsetCommitKey("simple", "u", 3), None),
        (R.GroupMetadataKey("simple"), None)]
    h.run(outcome)
    assert "simple" not in h.c.groups and h.c.fetch_offsets("simple", None) == (C.NONE, [])


def test_offset_delete():
    h = H()
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, ""), ("u", 0, 2, "")], gen, a)
    outcome, err, res = h.c.delete_offsets("g", [("t", [0]), ("u", [0, 1])])
    assert err == C.NONE
    assert res == [("t", [(0, C.GROUP_SUBSCRIBED_TO_TOPIC)]), ("u", [(0, C.NONE), (1, C.NONE)])]
    assert [(r.key, r.value) for r in outcome.records] == [(R.OffsetCommitKey("g", "u", 0), None)]
    assert h.c.delete_offsets("nope", [("t", [0])])[1] == C.GROUP_ID_NOT_FOUND
    h2 = H()
    h2.join(ptype="connect", version=3)
    assert h2.c.delete_offsets("g", [("t", [0])])[1] == C.NON_EMPTY_GROUP


# -- expiry ------------------------------------------------------------------------------------------------

def test_simple_group_offsets_expire_after_retention_then_the_group_goes():
    h = H(retention_ms=60000)
    h.commit("simple", [("t", 0, 1, "")])
    h.now += 59999
    assert h.c.cleanup_expired().records == []
    h.now += 1
    outcome = h.c.cleanup_expired()
    assert [(r.key, r.value) for r in outcome.records] == [(R.OffsetCommitKey("simple", "t", 0), None),
                                                           (R.GroupMetadataKey("simple"), None)]
    h.run(outcome)
    assert "simple" not in h.c.groups


def test_empty_consumer_group_expires_from_when_it_became_empty():
    h = H(retention_ms=60000)
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, "")], gen, a)
    h.now += 50000
    h.leave("g", (a, None))                      # Empty from now
    emptied = h.now
    h.now = emptied + 59999
    assert h.c.cleanup_expired().records == []
    h.now = emptied + 60000
    assert len(h.c.cleanup_expired().records) == 2


def test_stable_consumer_group_expires_only_unsubscribed_topics_and_explicit_expiry_wins():
    h = H(retention_ms=60000)
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, ""), ("old", 0, 2, "")], gen, a)
    h.commit("g", [("old", 1, 3, "")], gen, a, retention=1000)
    h.now += 1000
    assert [r.key for r in h.c.cleanup_expired().records] == [R.OffsetCommitKey("g", "old", 1)]
    h.now += 60000
    keys = [r.key for r in h.c.cleanup_expired().records]
    assert keys == [R.OffsetCommitKey("g", "old", 0), R.OffsetCommitKey("g", "old", 1)]
    # a group still rebalancing expires nothing
    h.join_new()
    assert h.c.cleanup_expired().records == []


# -- failed writes ---------------------------------------------------------------------------------

def test_failed_assignment_write_answers_not_coordinator_and_rebalances():
    h = H()
    a, fa = h.join_new()
    h.advance(0)
    gen = fa.result(0).generation_id
    h.fail_writes = True
    r = h.sync("g", a, gen, {a: b"A"}).result(0)
    assert r.error == C.NOT_COORDINATOR
    assert h.state() in (PREPARING_REBALANCE, COMPLETING_REBALANCE)


def test_failed_new_group_write_removes_the_group():
    h = H()
    h.fail_writes = True
    first = h.join().result(0)
    assert "g" not in h.c.groups
    # the member's rejoin then finds no group, and it starts over (as with Kafka's reverted write)
    h.fail_writes = False
    assert h.join("g", first.member_id).result(0).error == C.UNKNOWN_MEMBER_ID


def test_timer_order_and_replacement():
    t = C.Timer()
    fired = []
    t.schedule("a", 10, lambda: fired.append("a"))
    t.schedule("b", 5, lambda: fired.append("b"))
    t.schedule("a", 20, lambda: fired.append("a2"))
    for _, fn in t.pop_due(15):
        fn()
    assert fired == ["b"] and t.next_deadline() == 20
    t.cancel("a")
    assert t.next_deadline() is None and len(t) == 0
