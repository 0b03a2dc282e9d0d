"""The classic group state machine through the shard, sans-IO: every state transition, Kafka's
error codes, the session / rebalance / sync timers, static membership, DescribeGroups and
ListGroups, and failed writes (GroupMetadataManager)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.api_data import JoinRequest
from compactlog.coordinator.group.classic_group_state import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from compactlog.coordinator.group.conftest import H, REBALANCE, SESSION, SUB_T, SUB_U

def test_join_validation_errors():
    h = H(min_session_timeout_ms=6000, max_session_timeout_ms=300000)
    assert h.join("").result(0).error == ErrorCode.invalid_group_id
    assert h.join(session=5999).result(0).error == ErrorCode.invalid_session_timeout
    assert h.join(session=300001).result(0).error == ErrorCode.invalid_session_timeout
    # a member id for a group that does not exist
    assert h.join("nope", "cli-123").result(0).error == ErrorCode.unknown_member_id
    assert "nope" not in h.c.groups
    # an Empty group needs a protocol type and at least one protocol
    assert h.join("x", ptype="").result(0).error == ErrorCode.inconsistent_group_protocol
    outcome, fut = h.c.join_group(JoinRequest("y", "", "consumer", [], SESSION, REBALANCE))
    assert fut.result(0).error == ErrorCode.inconsistent_group_protocol


def test_first_member_member_id_required_then_generation_one():
    h = H()
    first = h.join(client="my-client").result(0)
    assert first.error == ErrorCode.member_id_required and first.member_id.startswith("my-client-")
    # the new group is written at once: an empty GroupMetadata, generation 0
    (rec,) = h.log
    assert rec.key == R.GroupMetadataKey("g") and rec.value.generation == 0 and rec.value.members == []
    assert h.state() == EMPTY and h.c.groups["g"].pending_join_members == {first.member_id}
    fut = h.join("g", first.member_id, client="my-client")
    assert not fut.done() and h.state() == PREPARING_REBALANCE
    h.advance(0)                    # the initial rebalance delay ends (0 ms here)
    resp = fut.result(0)
    assert resp.error == ErrorCode.none and resp.generation_id == 1 and resp.leader == first.member_id
    assert resp.protocol_name == "range" and resp.protocol_type == "consumer"
    assert resp.members == [(first.member_id, None, SUB_T)]
    assert h.state() == COMPLETING_REBALANCE


def test_join_v3_adds_the_member_directly():
    h = H()
    fut = h.join(version=3)
    h.advance(0)
    resp = fut.result(0)
    assert resp.error == ErrorCode.none and resp.member_id.startswith("cli-") and resp.generation_id == 1


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
    assert h.join(protocols=[("roundrobin", SUB_T)]).result(0).error == ErrorCode.inconsistent_group_protocol
    assert h.join(ptype="connect").result(0).error == ErrorCode.inconsistent_group_protocol
    # a second member supporting range and roundrobin joins: range is the only common protocol
    b, fb = h.join_new(protocols=[("roundrobin", SUB_T), ("range", SUB_T)])
    fa = h.join("g", a)
    assert fa.result(0).protocol_name == "range" and fb.result(0).protocol_name == "range"


def test_late_joiner_rebalance_signalled_through_heartbeat():
    h = H()
    (a,), gen = h.stable_group()
    assert h.heartbeat("g", a, gen) == ErrorCode.none
    b, fb = h.join_new()
    assert h.state() == PREPARING_REBALANCE and not fb.done()
    # the existing member learns of the rebalance from its heartbeat
    assert h.heartbeat("g", a, gen) == ErrorCode.rebalance_in_progress
    # its commits of the current generation are still accepted while preparing
    assert h.commit("g", [("t", 0, 5, "")], gen, a) == [ErrorCode.none]
    fa = h.join("g", a)
    ra, rb = fa.result(0), fb.result(0)
    assert ra.generation_id == gen + 1 == rb.generation_id and ra.leader == a
    assert len(ra.members) == 2 and rb.members == []
    assert h.state() == COMPLETING_REBALANCE
    # old generation fenced
    assert h.heartbeat("g", a, gen) == ErrorCode.illegal_generation
    assert h.heartbeat("g", a, gen + 1) == ErrorCode.none         # CompletingRebalance: NONE
    assert h.commit("g", [("t", 0, 6, "")], gen + 1, a) == [ErrorCode.rebalance_in_progress]


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
    assert sl.result(0).error == ErrorCode.none and sf.result(0).error == ErrorCode.none
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
    assert h.sync("", a, gen).result(0).error == ErrorCode.invalid_group_id
    assert h.sync("nope", a, gen).result(0).error == ErrorCode.unknown_member_id
    assert h.sync("g", "stranger", gen).result(0).error == ErrorCode.unknown_member_id
    assert h.sync("g", a, gen + 7).result(0).error == ErrorCode.illegal_generation
    assert h.sync("g", a, gen, pname="roundrobin").result(0).error == ErrorCode.inconsistent_group_protocol
    assert h.sync("g", a, gen, ptype="connect").result(0).error == ErrorCode.inconsistent_group_protocol
    h.join_new()
    assert h.sync("g", a, gen).result(0).error == ErrorCode.rebalance_in_progress
    h2 = H()
    h2.commit("simple", [("t", 0, 1, "")])
    assert h2.sync("simple", "m", 0).result(0).error == ErrorCode.unknown_member_id     # Empty group


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
    assert sf.result(0).error == ErrorCode.rebalance_in_progress
    assert h.state() == PREPARING_REBALANCE


def test_member_rejoining_unchanged_during_completing_rebalance_gets_the_generation_again():
    h = H()
    a, fa = h.join_new()
    h.advance(0)
    gen = fa.result(0).generation_id
    again = h.join("g", a).result(0)
    assert again.error == ErrorCode.none and again.generation_id == gen and again.members == [(a, None, SUB_T)]
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
        assert h.heartbeat("g", b, gen) == ErrorCode.rebalance_in_progress
    h.advance(4999)
    assert h.state() == PREPARING_REBALANCE
    h.advance(1)
    assert h.state() == COMPLETING_REBALANCE and set(h.c.groups["g"].members) == {a, c}
    assert fc.result(0).generation_id == gen + 1


def test_session_expiry_removes_a_member_and_rebalances():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    h.advance(SESSION // 2)
    assert h.heartbeat("g", a, gen) == ErrorCode.none
    h.advance(SESSION // 2)
    # b's session ran out: a learns of the rebalance, rejoins alone
    assert b not in h.c.groups["g"].members
    assert h.heartbeat("g", a, gen) == ErrorCode.rebalance_in_progress
    r = h.join("g", a).result(0)
    assert r.generation_id == gen + 1 and r.members == [(a, None, SUB_T)]
    assert h.heartbeat("g", b, gen) == ErrorCode.unknown_member_id


def test_last_member_expiring_leaves_an_empty_group_written():
    h = H()
    (a,), gen = h.stable_group()
    n = len(h.log)
    h.advance(SESSION)
    assert h.state() == EMPTY and h.c.groups["g"].generation_id == gen + 1
    (rec,) = h.log[n:]
    assert rec.value.members == [] and rec.value.protocol is None and rec.value.generation == gen + 1
    assert rec.value.current_state_timestamp == h.now
    assert h.heartbeat("g", a, gen + 1) == ErrorCode.unknown_member_id


def test_pending_member_that_never_rejoins_expires():
    h = H()
    first = h.join().result(0)
    assert first.error == ErrorCode.member_id_required
    h.advance(SESSION)
    assert first.member_id not in h.c.groups["g"].pending_join_members
    assert h.join("g", first.member_id).result(0).error == ErrorCode.unknown_member_id


def test_new_member_join_is_bounded():
    h = H(new_member_join_timeout_ms=5000)
    (a, b), gen = h.stable_group(n=2)
    c, fc = h.join_new()                 # parked: a and b never rejoin, the rebalance timeout is long
    h.advance(5000)
    assert fc.result(0).error == ErrorCode.unknown_member_id and c not in h.c.groups["g"].members


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
        assert h.heartbeat("g", leader, gen) == ErrorCode.none
        assert h.state() == COMPLETING_REBALANCE
    h.advance(5000)
    assert leader not in h.c.groups["g"].members and follower in h.c.groups["g"].members
    assert parked.result(0).error == ErrorCode.rebalance_in_progress
    assert h.state() == PREPARING_REBALANCE


def test_leave_group():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    top, res = h.leave("g", (b, None), ("stranger", None))
    assert top == ErrorCode.none and res == [(b, None, ErrorCode.none), ("stranger", None, ErrorCode.unknown_member_id)]
    assert h.state() == PREPARING_REBALANCE
    h.join("g", a)
    assert h.state() == COMPLETING_REBALANCE
    n = len(h.log)
    h.leave("g", (a, None))
    assert h.state() == EMPTY and h.log[n:][0].value.members == []
    assert h.leave("", (a, None))[0] == ErrorCode.invalid_group_id
    assert h.leave("nope", (a, None)) == (ErrorCode.none, [(a, None, ErrorCode.unknown_member_id)])


def test_leave_of_a_pending_member_and_of_a_parked_joiner():
    h = H()
    first = h.join().result(0)
    assert h.leave("g", (first.member_id, None))[1] == [(first.member_id, None, ErrorCode.none)]
    h2 = H()
    (a, b), gen = h2.stable_group(n=2)
    fa = h2.join("g", a)                 # a is parked awaiting b
    h2.leave("g", (b, None))
    assert fa.result(0).generation_id == gen + 1     # b left: the join phase completes


# -- static membership (KIP-345) -------------------------------------------------------------------

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
    assert again.error == ErrorCode.none and again.member_id != a and again.generation_id == gen
    assert again.leader == a                     # Kafka answers with the leader as it was
    assert h.state() == STABLE
    (rec,) = h.log[n:]
    assert [m.member_id for m in rec.value.members] == [again.member_id]
    assert rec.value.members[0].group_instance_id == "i-1"
    # the old member id is fenced, the new one has the old assignment
    assert h.heartbeat("g", a, gen, "i-1") == ErrorCode.fenced_instance_id
    assert h.sync("g", again.member_id, gen, instance="i-1").result(0).assignment == b"A"
    assert h.heartbeat("g", again.member_id, gen, "i-1") == ErrorCode.none
    assert h.commit("g", [("t", 0, 1, "")], gen, a, "i-1") == [ErrorCode.fenced_instance_id]
    assert h.heartbeat("g", again.member_id, gen, "i-unknown") == ErrorCode.unknown_member_id


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
    assert parked.result(0).error == ErrorCode.fenced_instance_id
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
    assert res == [("", "i-1", ErrorCode.none)] and h.state() == EMPTY
    assert h.leave("g", ("", "i-1"))[1] == [("", "i-1", ErrorCode.unknown_member_id)]
    fb = h.join(instance="i-2", version=5)
    h.advance(0)
    b, gen = fb.result(0).member_id, fb.result(0).generation_id
    h.sync("g", b, gen, {b: b"B"}, instance="i-2")
    assert h.leave("g", ("other-id", "i-2"))[1] == [("other-id", "i-2", ErrorCode.fenced_instance_id)]
    h.advance(SESSION)                          # static members send no LeaveGroup: sessions end them
    assert h.state() == EMPTY


# -- group size, DescribeGroups / ListGroups -------------------------------------------------------

def test_group_max_size():
    h = H(max_size=1)
    (a,), gen = h.stable_group()
    r = h.join().result(0)
    assert r.error == ErrorCode.group_max_size_reached


def test_describe_and_list_groups():
    h = H()
    (a,), gen = h.stable_group()
    h.commit("simple", [("t", 0, 1, "")])
    (d, unknown) = h.c.describe_groups(["g", "nope"])
    assert (d.state, d.protocol_type, d.protocol_data) == (STABLE, "consumer", "range")
    (m,) = d.members
    assert m.metadata == SUB_T and m.assignment == R.encode_assignment([("t", [0])])
    assert m.client_host == "/127.0.0.1" and m.client_id == "cli"
    assert (unknown.error, unknown.state) == (ErrorCode.none, "Dead")
    h.join_new()
    d = h.c.describe_groups(["g"])[0]
    assert d.state == PREPARING_REBALANCE and d.protocol_data == "" and d.members[0].assignment == b""
    assert {(g.group_id, g.state, g.protocol_type) for g in h.c.list_groups()} == \
        {("g", PREPARING_REBALANCE, "consumer"), ("simple", EMPTY, "")}
    assert [g.group_id for g in h.c.list_groups(["EMPTY "])] == ["simple"]
    assert h.c.list_groups(types_filter=["consumer"]) == []
    assert len(h.c.list_groups(types_filter=["Classic"])) == 2


# -- failed writes ---------------------------------------------------------------------------------

def test_failed_assignment_write_answers_not_coordinator_and_rebalances():
    h = H()
    a, fa = h.join_new()
    h.advance(0)
    gen = fa.result(0).generation_id
    h.fail_writes = True
    r = h.sync("g", a, gen, {a: b"A"}).result(0)
    assert r.error == ErrorCode.not_coordinator
    assert h.state() in (PREPARING_REBALANCE, COMPLETING_REBALANCE)


def test_failed_new_group_write_removes_the_group():
    h = H()
    h.fail_writes = True
    first = h.join().result(0)
    assert "g" not in h.c.groups
    # the member's rejoin then finds no group, and it starts over (as with Kafka's reverted write)
    h.fail_writes = False
    assert h.join("g", first.member_id).result(0).error == ErrorCode.unknown_member_id
