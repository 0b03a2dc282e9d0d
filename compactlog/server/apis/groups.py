"""The group APIs: kio requests in, ``GroupCoordinatorService`` calls, kio responses out.

Kafka's ``KafkaApis.handle{FindCoordinator,JoinGroup,SyncGroup,Heartbeat,LeaveGroup,OffsetCommit,
OffsetFetch,TxnOffsetCommit,DescribeGroups,ListGroups,DeleteGroups,OffsetDelete}Request`` on one node: every
group's coordinator is this broker. Each handler is ``handle_<api>(state, request)`` and runs in a
worker thread (the coordinator's appends touch storage); JoinGroup and SyncGroup are coroutines
``handle_<api>(state, request, run)`` that park until the rebalance answers them (``run`` runs a
function in a worker thread). Each API is declared at the end of the module (``GROUP_APIS``, which
``server/dispatch.py`` collects), with its versions and Kafka's ``getErrorResponse`` for it.

As in KafkaApis, OffsetCommit, TxnOffsetCommit and OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for partitions
that do not exist without asking the coordinator, and FindCoordinator creates ``__consumer_offsets``
on the first group lookup. Kafka then answers COORDINATOR_NOT_AVAILABLE until the topic is
created by its controller; here it is created at once and the answer names this broker (the
clients retry either way). A transactional id (key type 1) is answered by the transaction
coordinator (``apis/transactions.py``).

Authorization (security.md §7.4, ``KafkaApis``): FindCoordinator needs DESCRIBE on the group or
transactional id; JoinGroup, SyncGroup, Heartbeat, LeaveGroup READ on the group; OffsetCommit READ on
the group, then READ on each topic; OffsetFetch DESCRIBE on the group, then DESCRIBE on each topic
(an all-topics fetch leaves the others out); TxnOffsetCommit WRITE on the transactional id, READ on
the group and on each topic; DescribeGroups DESCRIBE on each group; ListGroups lists every group
with DESCRIBE on the cluster, else only those the principal may DESCRIBE; DeleteGroups DELETE on
each group; OffsetDelete DELETE on the group, then READ on each topic.
"""

from __future__ import annotations

import asyncio
import datetime

from kio.schema.errors import ErrorCode

from .handler import ASYNC, THREAD, ApiHandler
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, OPERATIONS_NOT_REQUESTED, build, error_code, millis, nested, response_class
from ...errors import CompactlogError
from ..state import CLIENT_HOST, BrokerState
from ..wire_errors import coordinator_error
from .transactions import transaction_coordinator
from ...coordinator.group.api_data import (CommitPartition, FetchedOffset, HeartbeatRequest, JoinRequest,
                                           JoinResponse, SyncRequest)
from ...coordinator.group.consumer.javaorder import java_order
from ...coordinator.group.consumer_group_manager import check_heartbeat
from ...record.consumer_offsets import OFFSETS_TOPIC, java_string_hash
from ...coordinator.runtime import GroupError, Outcome

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# the AclOperations a group has here: READ, DELETE, DESCRIBE (no group configs, so not Kafka's
# DESCRIBE_CONFIGS and ALTER_CONFIGS); all of them without an authorizer
_GROUP_ACL_OPERATIONS = (auth_helper.READ, auth_helper.DELETE, auth_helper.DESCRIBE)
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_DEFAULT_RETENTION = -1
GROUP_DENIED = ErrorCode.group_authorization_failed
TOPIC_DENIED = ErrorCode.topic_authorization_failed


def _group_denied(state: BrokerState, request, operation, group_id: str) -> bool:
    return not auth_helper.authorize(state, request, operation, auth_helper.GROUP, group_id)


def _service(state: BrokerState):
    svc = getattr(state, "groups", None)
    if svc is None:
        raise RuntimeError("the group coordinator is not running")
    return svc


# -- FindCoordinator (10) -------------------------------------------------------------------------

SHARE_KEY_TYPE = 2          # CoordinatorType.SHARE (FindCoordinator v6+)
# Errors.INVALID_REQUEST.message(): what getErrorResponse answers for an unknown key type
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")


def _coordinator_for(state: BrokerState, request, key_type: int, key: str) -> tuple[int, str]:
    if key_type == GROUP_KEY_TYPE and _group_denied(state, request, auth_helper.DESCRIBE, key):
        return GROUP_DENIED, auth_helper.DENIED_MESSAGE[GROUP_DENIED]
    if key_type == TRANSACTION_KEY_TYPE:
        if not auth_helper.authorize(state, request, auth_helper.DESCRIBE, auth_helper.TRANSACTIONAL_ID, key):
            code = ErrorCode.transactional_id_authorization_failed
            return code, auth_helper.DENIED_MESSAGE[code]
        return transaction_coordinator(state, key)
    if key_type != GROUP_KEY_TYPE:
        # a share key (2) is refused below v6; any other type makes CoordinatorType.forId throw
        return ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE
    try:
        _service(state).ensure_topic()
    except (CompactlogError, OSError) as e:
        # __consumer_offsets cannot be created (a full disk): Kafka's lookup answers that the
        # coordinator is not available, and the client retries
        state.logger.error(f"FindCoordinator: creating __consumer_offsets failed: {e}")
        return coordinator_error(e, state.datadir.path)
    return ErrorCode.none, "NONE"


def handle_find_coordinator(state: BrokerState, request):
    """One node coordinates every group. FindCoordinator also matters without groups: librdkafka
    enables LZ4 only when the broker lists FindCoordinator v0 (its feature map dates LZ4 by the
    API that came with it)."""
    body = request.body
    cls = response_class(request)
    key_type = getattr(body, "key_type", GROUP_KEY_TYPE)
    me = state.advertised_for(request)
    if request.api_version >= 4:
        if key_type > SHARE_KEY_TYPE:
            # CoordinatorType.forId throws: getErrorResponse's prepareErrorResponse for every key
            return _find_coordinator_error(body, cls, ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE)
        c_cls = nested(cls, "Coordinator")
        out = []
        for key in body.coordinator_keys:
            code, _ = _coordinator_for(state, request, key_type, key)
            ok = code == ErrorCode.none
            # handleFindCoordinatorRequestV4AndAbove sets a key's code, never a message
            out.append(build(c_cls, key=key, node_id=state.node_id if ok else -1, host=me.host if ok else "",
                             port=me.port if ok else -1, error_code=code, error_message=None))
        return build(cls, throttle_time=NO_THROTTLE, coordinators=tuple(out))
    code, message = _coordinator_for(state, request, key_type, body.key)
    ok = code == ErrorCode.none
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                 node_id=state.node_id if ok else -1, host=me.host if ok else "", port=me.port if ok else -1)


# -- JoinGroup (11) / SyncGroup (14): parked until the rebalance answers ----------------------------

async def handle_join_group(state: BrokerState, request, run):
    body = request.body
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return JOIN_GROUP.error_body(request, GROUP_DENIED)
    svc = _service(state)
    session = millis(body.session_timeout)
    rebalance = millis(getattr(body, "rebalance_timeout", body.session_timeout))
    req = JoinRequest(group_id=body.group_id, member_id=body.member_id, protocol_type=body.protocol_type,
                      protocols=[(p.name, p.metadata) for p in body.protocols],
                      session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                      group_instance_id=getattr(body, "group_instance_id", None),
                      client_id=request.client_id, client_host=CLIENT_HOST.get(),
                      api_version=request.api_version, reason=getattr(body, "reason", None))
    future = await run(svc.call, svc.coordinator.join_group, req)
    resp = await asyncio.wrap_future(future)
    return join_response(request, resp)


def join_response(request, resp: JoinResponse):
    cls = response_class(request)
    m_cls = nested(cls, "JoinGroupResponseMember")
    flexible_names = request.api_version >= 7
    members = tuple(build(m_cls, member_id=mid, group_instance_id=iid, metadata=md)
                    for mid, iid, md in resp.members)
    return build(cls, throttle_time=NO_THROTTLE, error_code=error_code(resp.error),
                 generation_id=resp.generation_id, protocol_type=resp.protocol_type,
                 # before v7 the protocol name is not nullable (JoinGroupResponse writes "")
                 protocol_name=resp.protocol_name if flexible_names else (resp.protocol_name or ""),
                 leader=resp.leader, skip_assignment=resp.skip_assignment, member_id=resp.member_id,
                 members=members)


async def handle_sync_group(state: BrokerState, request, run):
    body = request.body
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return SYNC_GROUP.error_body(request, GROUP_DENIED)
    svc = _service(state)
    req = SyncRequest(group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
                      group_instance_id=getattr(body, "group_instance_id", None),
                      protocol_type=getattr(body, "protocol_type", None),
                      protocol_name=getattr(body, "protocol_name", None),
                      assignments={a.member_id: a.assignment for a in body.assignments})
    future = await run(svc.call, svc.coordinator.sync_group, req)
    resp = await asyncio.wrap_future(future)
    return build(response_class(request), throttle_time=NO_THROTTLE, error_code=error_code(resp.error),
                 protocol_type=resp.protocol_type, protocol_name=resp.protocol_name,
                 assignment=resp.assignment)


# -- Heartbeat (12) / LeaveGroup (13) ---------------------------------------------------------------

def handle_heartbeat(state: BrokerState, request):
    body = request.body
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return HEARTBEAT.error_body(request, GROUP_DENIED)
    svc = _service(state)
    code = svc.call(svc.coordinator.heartbeat, body.group_id, body.member_id,
                    getattr(body, "group_instance_id", None), body.generation_id)
    return build(response_class(request), throttle_time=NO_THROTTLE, error_code=error_code(code))


def handle_leave_group(state: BrokerState, request):
    body = request.body
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return LEAVE_GROUP.error_body(request, GROUP_DENIED)
    svc = _service(state)
    if request.api_version >= 3:
        members = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in body.members]
    else:
        members = [(body.member_id, None, None)]
    top, results = svc.call(svc.coordinator.leave_group, body.group_id, members)
    cls = response_class(request)
    if request.api_version < 3:
        # one member: its error is the answer (LeaveGroupResponse before v3)
        if top == ErrorCode.none and results:
            top = results[0][2]
        return build(cls, throttle_time=NO_THROTTLE, error_code=error_code(top))
    r_cls = nested(cls, "MemberResponse")
    return build(cls, throttle_time=NO_THROTTLE, error_code=error_code(top), members=tuple(
        build(r_cls, member_id=mid, group_instance_id=iid, error_code=error_code(e)) for mid, iid, e in results))


# -- OffsetCommit (8) / OffsetFetch (9) ---------------------------------------------------------------

def handle_offset_commit(state: BrokerState, request):
    body = request.body
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return OFFSET_COMMIT.error_body(request, GROUP_DENIED)
    svc = _service(state)
    denied = auth_helper.denied(state, request, auth_helper.READ, auth_helper.TOPIC, (t.name for t in body.topics))
    known, slots = _commit_triage(state, body.topics, denied)
    retention = millis(getattr(body, "retention_time", _DEFAULT_RETENTION))
    errors = iter(svc.commit_offsets(body.group_id, body.generation_id_or_member_epoch, body.member_id,
                                     getattr(body, "group_instance_id", None), known, retention,
                                     request.api_version) if known else [])
    codes = [s if s is not None else error_code(next(errors)) for s in slots]
    return _commit_response(request, body.topics, codes, "OffsetCommit")


# -- TxnOffsetCommit (28) ----------------------------------------------------------------------------

def handle_txn_offset_commit(state: BrokerState, request):
    """KafkaApis.handleTxnOffsetCommitRequest: unknown partitions answered here, the others through
    the coordinator (verification, group checks, the transactional write); for v0 and v1 a
    loading coordinator is answered COORDINATOR_NOT_AVAILABLE, which the clients of that time
    retry (KAFKA-7296: they crashed on COORDINATOR_LOAD_IN_PROGRESS)."""
    body = request.body
    if not auth_helper.authorize(state, request, auth_helper.WRITE, auth_helper.TRANSACTIONAL_ID,
                                 body.transactional_id):
        return TXN_OFFSET_COMMIT.error_body(request, ErrorCode.transactional_id_authorization_failed)
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return TXN_OFFSET_COMMIT.error_body(request, GROUP_DENIED)
    svc = _service(state)
    version = request.api_version
    denied = auth_helper.denied(state, request, auth_helper.READ, auth_helper.TOPIC, (t.name for t in body.topics))
    known, slots = _commit_triage(state, body.topics, denied)
    errors = iter(svc.commit_transactional_offsets(
        body.transactional_id, body.group_id, body.producer_id, body.producer_epoch,
        getattr(body, "generation_id", -1), getattr(body, "member_id", ""),
        getattr(body, "group_instance_id", None), known, version, getattr(state, "transactions", None))
        if known else [])
    codes = [s if s is not None else error_code(next(errors)) for s in slots]
    if version < 2:
        codes = [ErrorCode.coordinator_not_available if c == ErrorCode.coordinator_load_in_progress else c
                 for c in codes]
    return _commit_response(request, body.topics, codes, "TxnOffsetCommit")


def _commit_triage(state: BrokerState, topics, denied) -> tuple[list[CommitPartition], list]:
    """The partitions of an (Txn)OffsetCommit the coordinator is asked about, and a slot per
    requested partition: its error when answered here (topic not authorized, unknown partition),
    None when the coordinator's answer goes there (KafkaApis splits a commit the same way)."""
    known, slots = [], []
    for t in topics:
        for p in t.partitions:
            if t.name in denied:
                slots.append(TOPIC_DENIED)
            elif state.log(t.name, p.partition_index) is None:
                slots.append(ErrorCode.unknown_topic_or_partition)
            else:
                slots.append(None)
                known.append(CommitPartition(t.name, p.partition_index, p.committed_offset,
                                             getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
    return known, slots


def _commit_response(request, topics, codes: list, api: str):
    """The (Txn)OffsetCommit response: ``codes`` in the request's partition order."""
    it = iter(codes)
    cls = response_class(request)
    t_cls, p_cls = nested(cls, f"{api}ResponseTopic"), nested(cls, f"{api}ResponsePartition")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p.partition_index, error_code=next(it)) for p in t.partitions))
        for t in topics))


def _fetch_group(state: BrokerState, request, svc, group_id, topics, require_stable: bool,
                 member_id: str | None = None, member_epoch: int = -1):
    """(group error, [(topic, [FetchedOffset])]) of one group, as the principal may see them
    (KafkaApis.fetchOffsetsForGroup / fetchAllOffsetsForGroup); v9's member id and epoch are
    checked against a consumer group's member."""
    if _group_denied(state, request, auth_helper.DESCRIBE, group_id):
        return GROUP_DENIED, []
    if topics is None:
        code, fetched = svc.call(lambda: (Outcome(), svc.coordinator.fetch_offsets(
            group_id, None, require_stable, member_id, member_epoch)))
        hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC,
                                    [name for name, _ in fetched])
        return code, [(name, parts) for name, parts in fetched if name not in hidden]
    hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, (t.name for t in topics))
    wanted = [(t.name, list(t.partition_indexes)) for t in topics if t.name not in hidden]
    code, fetched = svc.call(lambda: (Outcome(), svc.coordinator.fetch_offsets(
        group_id, wanted, require_stable, member_id, member_epoch))) \
        if wanted or not hidden else (ErrorCode.none, [])
    if code != ErrorCode.none or not hidden:
        return code, fetched
    return code, fetched + [(t.name, [FetchedOffset(p, error=TOPIC_DENIED) for p in t.partition_indexes])
                            for t in topics if t.name in hidden]


def handle_offset_fetch(state: BrokerState, request):
    body = request.body
    svc = _service(state)
    cls = response_class(request)
    stable = getattr(body, "require_stable", False)
    if request.api_version >= 8:
        g_cls = nested(cls, "OffsetFetchResponseGroup")
        t_cls, p_cls = nested(cls, "OffsetFetchResponseTopics"), nested(cls, "OffsetFetchResponsePartitions")
        groups = []
        for g in body.groups:
            code, topics = _fetch_group(state, request, svc, g.group_id, g.topics, stable,
                                        getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            groups.append(build(g_cls, group_id=g.group_id, error_code=error_code(code),
                                topics=_fetched_topics(t_cls, p_cls, topics)))
        return build(cls, throttle_time=NO_THROTTLE, groups=tuple(groups))
    t_cls, p_cls = nested(cls, "OffsetFetchResponseTopic"), nested(cls, "OffsetFetchResponsePartition")
    code, topics = _fetch_group(state, request, svc, body.group_id, body.topics, stable)
    if code != ErrorCode.none and request.api_version < 2:
        # no top-level error before v2: every requested partition carries it
        topics = [(t.name, [FetchedOffset(p, error=code) for p in t.partition_indexes])
                  for t in (body.topics or ())]
    return build(cls, throttle_time=NO_THROTTLE, error_code=error_code(code),
                 topics=_fetched_topics(t_cls, p_cls, topics))


def _fetched_topics(t_cls, p_cls, topics):
    return tuple(build(t_cls, name=name, partitions=tuple(
        build(p_cls, partition_index=f.partition, committed_offset=f.offset,
              committed_leader_epoch=f.leader_epoch, metadata=f.metadata, error_code=error_code(f.error))
        for f in parts)) for name, parts in topics)


# -- DescribeGroups (15) / ListGroups (16) ---------------------------------------------------------

def handle_describe_groups(state: BrokerState, request):
    body = request.body
    svc = _service(state)
    denied = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.GROUP, body.groups)
    allowed = [g for g in body.groups if g not in denied]
    described = svc.call(lambda: (Outcome(), svc.coordinator.describe_groups(allowed))) if allowed else []
    by_id = iter(described)
    cls = response_class(request)
    g_cls, m_cls = nested(cls, "DescribedGroup"), nested(cls, "DescribedGroupMember")
    want_ops = getattr(body, "include_authorized_operations", False)

    def ops(d) -> int:
        if not want_ops:
            return OPERATIONS_NOT_REQUESTED
        return auth_helper.authorized_operations(state, request, auth_helper.GROUP, d.group_id, _GROUP_ACL_OPERATIONS)

    out = []
    for group_id in body.groups:
        if group_id in denied:
            out.append(_describe_groups_error_entry(g_cls, group_id, GROUP_DENIED))
            continue
        d = next(by_id)
        out.append(build(g_cls, error_code=error_code(d.error), group_id=d.group_id, group_state=d.state,
                         protocol_type=d.protocol_type, protocol_data=d.protocol_data, authorized_operations=ops(d),
                         members=tuple(build(m_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                                             client_id=m.client_id, client_host=m.client_host,
                                             member_metadata=m.metadata, member_assignment=m.assignment)
                                       for m in d.members)))
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(out))


def handle_list_groups(state: BrokerState, request):
    body = request.body
    svc = _service(state)

    def listing():
        # a partition still loading may hold groups: the list would be short, so the answer is
        # COORDINATOR_LOAD_IN_PROGRESS until every partition is loaded (Kafka's GroupCoordinator
        # and its new runtime's read-all operation answer so; clients ask again)
        if svc.coordinator.partitions.loading:
            return Outcome(), None
        return Outcome(), svc.coordinator.list_groups(
            getattr(body, "states_filter", ()) or (), getattr(body, "types_filter", ()) or ())
    listed = svc.call(listing)
    cls = response_class(request)
    if listed is None:
        return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.coordinator_load_in_progress, groups=())
    if not auth_helper.authorize_cluster(state, request, auth_helper.DESCRIBE, log_if_denied=False):
        hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.GROUP,
                                    [g.group_id for g in listed], log_if_denied=False)
        listed = [g for g in listed if g.group_id not in hidden]
    g_cls = nested(cls, "ListedGroup")
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=tuple(
        build(g_cls, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
              group_type=g.group_type) for g in listed))


# -- DeleteGroups (42) / OffsetDelete (47) ---------------------------------------------------------

def handle_delete_groups(state: BrokerState, request):
    body = request.body
    svc = _service(state)
    denied = auth_helper.denied(state, request, auth_helper.DELETE, auth_helper.GROUP, body.groups_names)
    allowed = [g for g in body.groups_names if g not in denied]
    results = svc.call(svc.coordinator.delete_groups, allowed) if allowed or not denied else []
    results = list(results) + [(g, GROUP_DENIED) for g in dict.fromkeys(body.groups_names) if g in denied]
    cls = response_class(request)
    r_cls = nested(cls, "DeletableGroupResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r_cls, group_id=gid, error_code=error_code(code)) for gid, code in results))


def handle_offset_delete(state: BrokerState, request):
    body = request.body
    if _group_denied(state, request, auth_helper.DELETE, body.group_id):
        return OFFSET_DELETE.error_body(request, GROUP_DENIED)
    svc = _service(state)
    denied = auth_helper.denied(state, request, auth_helper.READ, auth_helper.TOPIC, (t.name for t in body.topics))
    wanted, unknown = [], set()
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied or state.log(t.name, p.partition_index) is None:
                unknown.add((t.name, p.partition_index))
            else:
                parts.append(p.partition_index)
        if t.name not in denied:
            wanted.append((t.name, parts))
    if denied and not any(parts for _, parts in wanted):
        top, results = ErrorCode.none, []       # KafkaApis: nothing authorized, the coordinator is not asked
    else:
        top, results = svc.call(svc.coordinator.delete_offsets, body.group_id, wanted)
    by_key = {(t, p): e for t, parts in results for p, e in parts}
    cls = response_class(request)
    t_cls, p_cls = nested(cls, "OffsetDeleteResponseTopic"), nested(cls, "OffsetDeleteResponsePartition")
    if top != ErrorCode.none:
        return build(cls, throttle_time=NO_THROTTLE, error_code=error_code(top), topics=())

    def code(t, p):
        if (t, p) in unknown:
            return TOPIC_DENIED if t in denied else ErrorCode.unknown_topic_or_partition
        return error_code(by_key.get((t, p), ErrorCode.none))
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p.partition_index, error_code=code(t.name, p.partition_index))
            for p in t.partitions)) for t in body.topics))


# -- ConsumerGroupHeartbeat (68) / ConsumerGroupDescribe (69): KIP-848 ---------------------------------

KIP_848_REFUSED = ("this broker's group coordinator does not offer the consumer group protocol "
                   "(group.coordinator.rebalance.protocols lacks consumer): use group.protocol=classic")


def _consumer_protocol_enabled(svc) -> bool:
    return svc.config.consumer_protocol_enabled


def handle_consumer_group_heartbeat(state: BrokerState, request):
    """KafkaApis.handleConsumerGroupHeartbeatRequest and GroupCoordinatorService.consumerGroupHeartbeat:
    the gatekeeping of spec §2.2 in Kafka's order (protocol enabled, READ on the group, DESCRIBE on
    the named topics, the request's validity, the assignor), then the coordinator."""
    body = request.body
    cls = response_class(request)
    svc = _service(state)
    if not _consumer_protocol_enabled(svc):
        return _consumer_group_heartbeat_error(body, cls, ErrorCode.unsupported_version, KIP_848_REFUSED)
    if _group_denied(state, request, auth_helper.READ, body.group_id):
        return _consumer_group_heartbeat_error(body, cls, GROUP_DENIED, None)
    if body.subscribed_topic_names:
        if auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, body.subscribed_topic_names):
            return _consumer_group_heartbeat_error(body, cls, TOPIC_DENIED, None)
    req = HeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=millis(body.rebalance_timeout),
        subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None), server_assignor=body.server_assignor,
        topic_partitions=None if body.topic_partitions is None else
        [(tp.topic_id, list(tp.partitions)) for tp in body.topic_partitions],
        client_id=request.client_id or "", client_host=CLIENT_HOST.get(), api_version=request.api_version)
    if getattr(state, "authorizer", None) is not None:
        req.describable = lambda names: names - auth_helper.denied(state, request, auth_helper.DESCRIBE,
                                                                   auth_helper.TOPIC, sorted(names),
                                                                   log_if_denied=False)
    try:
        check_heartbeat(req, svc.config.consumer_assignors)
    except GroupError as e:
        return _consumer_group_heartbeat_error(body, cls, e.code, str(e))
    resp = svc.call(svc.coordinator.consumer_group_heartbeat, req)
    if resp.error != ErrorCode.none:
        return _consumer_group_heartbeat_error(body, cls, resp.error, resp.message)
    assignment = None
    if resp.assignment is not None:
        a_cls, tp_cls = nested(cls, "Assignment"), nested(cls, "TopicPartitions")
        assignment = build(a_cls, topic_partitions=tuple(
            build(tp_cls, topic_id=t, partitions=tuple(ps)) for t, ps in resp.assignment.items()))
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 member_id=resp.member_id, member_epoch=resp.member_epoch,
                 heartbeat_interval=datetime.timedelta(milliseconds=resp.heartbeat_interval_ms),
                 assignment=assignment)


# KafkaApis' text for a group hidden because of its topics (not Errors.TOPIC_AUTHORIZATION_FAILED's)
HIDDEN_TOPICS_MESSAGE = "The group has described topic(s) that the client is not authorized to describe."


def handle_consumer_group_describe(state: BrokerState, request):
    """KafkaApis.handleConsumerGroupDescribe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED),
    then the coordinator (spec §10); with an authorizer, a group whose assignments name a topic the
    caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without members (KAFKA-18813)."""
    body = request.body
    cls = response_class(request)
    svc = _service(state)
    g_cls, m_cls = nested(cls, "DescribedGroup"), nested(cls, "Member")
    a_cls, tp_cls = nested(cls, "Assignment"), nested(cls, "TopicPartitions")
    if not _consumer_protocol_enabled(svc):
        return _consumer_group_describe_error(body, cls, ErrorCode.unsupported_version, KIP_848_REFUSED)
    denied = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.GROUP, body.group_ids)
    allowed = [g for g in body.group_ids if g not in denied]
    described = svc.call(lambda: (Outcome(), svc.coordinator.consumer_group_describe(allowed))) if allowed else []
    want_ops = body.include_authorized_operations

    def assignment(tps):
        return build(a_cls, topic_partitions=tuple(build(tp_cls, topic_id=t, topic_name=n, partitions=tuple(ps))
                                                   for t, n, ps in tps))

    # KafkaApis: the refused groups first (their id and code only), then the coordinator's answer
    out = [_describe_consumer_group_error_entry(g_cls, gid, GROUP_DENIED, None)
           for gid in body.group_ids if gid in denied]
    for d in _in_coordinator_order(svc, described):
        if d.error != ErrorCode.none:
            out.append(_describe_consumer_group_error_entry(g_cls, d.group_id, d.error, d.message))
            continue
        topics = {n for m in d.members for _, n, _ in m.assignment + m.target_assignment}
        if topics and auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, sorted(topics)):
            out.append(_describe_consumer_group_error_entry(g_cls, d.group_id, TOPIC_DENIED, HIDDEN_TOPICS_MESSAGE))
            continue
        ops = auth_helper.authorized_operations(state, request, auth_helper.GROUP, d.group_id,
                                                _GROUP_ACL_OPERATIONS) if want_ops else OPERATIONS_NOT_REQUESTED
        members = tuple(build(m_cls, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                              member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=tuple(m.subscribed_topic_names),
                              subscribed_topic_regex=m.subscribed_topic_regex,
                              assignment=assignment(m.assignment), target_assignment=assignment(m.target_assignment),
                              member_type=m.member_type)
                        for m in d.members)
        out.append(build(g_cls, error_code=ErrorCode.none, error_message=None, group_id=d.group_id,
                         group_state=d.state, group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
                         assignor_name=d.assignor_name, members=members, authorized_operations=ops))
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(out))


def _topic_partition_hash(partition: int) -> int:
    """``TopicPartition.hashCode`` of a ``__consumer_offsets`` partition (Java int arithmetic)."""
    h = (31 * (31 + partition) + java_string_hash(OFFSETS_TOPIC)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _in_coordinator_order(svc, described: list) -> list:
    """GroupCoordinatorService.consumerGroupDescribe's order: the groups with an empty id first
    (INVALID_GROUP_ID, answered without a partition), then one partition's groups after another
    (each in the request's order) as its HashMap<TopicPartition, List<String>> iterates them."""
    invalid = [d for d in described if d.error == ErrorCode.invalid_group_id]
    by_hash: dict[int, list] = {}
    for d in described:
        if d.error != ErrorCode.invalid_group_id:
            by_hash.setdefault(_topic_partition_hash(svc.coordinator.partition_for(d.group_id)), []).append(d)
    return invalid + [d for h in java_order(by_hash) for d in by_hash[h]]


# -- error responses (Kafka's getErrorResponse of each API) ------------------------------------------

def _find_coordinator_error(body, cls, code, message):
    if cls.__version__ >= 4:
        c_cls = nested(cls, "Coordinator")
        return build(cls, throttle_time=NO_THROTTLE, coordinators=tuple(
            build(c_cls, key=k, node_id=-1, host="", port=-1, error_code=code, error_message=message)
            for k in body.coordinator_keys))
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message, node_id=-1,
                 host="", port=-1)


def _join_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, generation_id=-1,
                 protocol_name=None if cls.__version__ >= 7 else "", leader="", member_id=body.member_id,
                 members=())


def _sync_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, assignment=b"")


def _heartbeat_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code)


def _leave_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, members=())


def _offset_commit_error(body, cls, code, message):
    t_cls, p_cls = nested(cls, "OffsetCommitResponseTopic"), nested(cls, "OffsetCommitResponsePartition")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(build(p_cls, partition_index=p.partition_index,
                                                         error_code=code) for p in t.partitions))
        for t in body.topics))


def _txn_offset_commit_error(body, cls, code, message):
    t_cls, p_cls = nested(cls, "TxnOffsetCommitResponseTopic"), nested(cls, "TxnOffsetCommitResponsePartition")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(build(p_cls, partition_index=p.partition_index,
                                                         error_code=code) for p in t.partitions))
        for t in body.topics))


def _offset_fetch_error(body, cls, code, message):
    if cls.__version__ >= 8:
        g_cls = nested(cls, "OffsetFetchResponseGroup")
        return build(cls, throttle_time=NO_THROTTLE, groups=tuple(
            build(g_cls, group_id=g.group_id, error_code=code, topics=()) for g in body.groups))
    if cls.__version__ < 2:
        t_cls, p_cls = nested(cls, "OffsetFetchResponseTopic"), nested(cls, "OffsetFetchResponsePartition")
        return build(cls, topics=tuple(build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p, committed_offset=-1, metadata="", error_code=code)
            for p in t.partition_indexes)) for t in (body.topics or ())))
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, topics=())


def _describe_groups_error(body, cls, code, message):
    g_cls = nested(cls, "DescribedGroup")
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(_describe_groups_error_entry(g_cls, g, code)
                                                            for g in body.groups))


def _describe_groups_error_entry(g_cls, group_id: str, code):
    """DescribeGroupsResponse.groupError."""
    return build(g_cls, error_code=code, group_id=group_id, group_state="", protocol_type="", protocol_data="",
                 members=(), authorized_operations=OPERATIONS_NOT_REQUESTED)


def _list_groups_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, groups=())


def _delete_groups_error(body, cls, code, message):
    r_cls = nested(cls, "DeletableGroupResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r_cls, group_id=g, error_code=code) for g in body.groups_names))


def _offset_delete_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, topics=())


def _consumer_group_heartbeat_error(body, cls, code, message):
    """ConsumerGroupHeartbeatRequest.getErrorResponse: the code and message, epoch 0, no member id."""
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message, member_id=None,
                 member_epoch=0, heartbeat_interval=datetime.timedelta(0), assignment=None)


def _describe_consumer_group_error_entry(g_cls, group_id: str, code, message):
    return build(g_cls, error_code=code, error_message=message, group_id=group_id, group_state="",
                 group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                 authorized_operations=OPERATIONS_NOT_REQUESTED)


def _consumer_group_describe_error(body, cls, code, message):
    g_cls = nested(cls, "DescribedGroup")
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(
        _describe_consumer_group_error_entry(g_cls, g, code, message) for g in body.group_ids))


# -- declarations (key, name, versions, where it runs, handler, error response) ----------------------

# v9: member epochs of consumer groups (KIP-848, spec §9); v10 (topic ids) is not offered
OFFSET_COMMIT = ApiHandler(8, "OffsetCommit", 2, 9, mode=THREAD, handler=handle_offset_commit,
                           error_response=_offset_commit_error, coordinator=True)
# v8: batched groups; v9: member id and epoch
OFFSET_FETCH = ApiHandler(9, "OffsetFetch", 1, 9, mode=THREAD, handler=handle_offset_fetch,
                          error_response=_offset_fetch_error, coordinator=True)
# v5 is TV2 (the offsets partition added by the commit itself): phase 2 (transactions.md §0)
TXN_OFFSET_COMMIT = ApiHandler(28, "TxnOffsetCommit", 0, 4, mode=THREAD, handler=handle_txn_offset_commit,
                               error_response=_txn_offset_commit_error, coordinator=True)
# v4: batched keys
FIND_COORDINATOR = ApiHandler(10, "FindCoordinator", 0, 4, mode=THREAD, handler=handle_find_coordinator,
                              error_response=_find_coordinator_error, coordinator=True)
JOIN_GROUP = ApiHandler(11, "JoinGroup", 0, 7, mode=ASYNC, handler=handle_join_group,
                        error_response=_join_error, coordinator=True)
HEARTBEAT = ApiHandler(12, "Heartbeat", 0, 4, mode=THREAD, handler=handle_heartbeat,
                       error_response=_heartbeat_error, coordinator=True)
LEAVE_GROUP = ApiHandler(13, "LeaveGroup", 0, 4, mode=THREAD, handler=handle_leave_group,
                         error_response=_leave_error, coordinator=True)
SYNC_GROUP = ApiHandler(14, "SyncGroup", 0, 5, mode=ASYNC, handler=handle_sync_group,
                        error_response=_sync_error, coordinator=True)
DESCRIBE_GROUPS = ApiHandler(15, "DescribeGroups", 0, 5, mode=THREAD, handler=handle_describe_groups,
                             error_response=_describe_groups_error, coordinator=True)
LIST_GROUPS = ApiHandler(16, "ListGroups", 0, 5, mode=THREAD, handler=handle_list_groups,
                         error_response=_list_groups_error, coordinator=True)
DELETE_GROUPS = ApiHandler(42, "DeleteGroups", 0, 2, mode=THREAD, handler=handle_delete_groups,
                           error_response=_delete_groups_error, coordinator=True)
OFFSET_DELETE = ApiHandler(47, "OffsetDelete", 0, 0, mode=THREAD, handler=handle_offset_delete,
                           error_response=_offset_delete_error, coordinator=True)
# KIP-848: always advertised; with group.coordinator.rebalance.protocols lacking consumer both
# answer UNSUPPORTED_VERSION, as Kafka does, so that a group.protocol=consumer client stops with
# an error (librdkafka waits forever for an API that is not advertised)
CONSUMER_GROUP_HEARTBEAT = ApiHandler(68, "ConsumerGroupHeartbeat", 0, 1, mode=THREAD,
                                      handler=handle_consumer_group_heartbeat,
                                      error_response=_consumer_group_heartbeat_error, coordinator=True)
CONSUMER_GROUP_DESCRIBE = ApiHandler(69, "ConsumerGroupDescribe", 0, 1, mode=THREAD,
                                     handler=handle_consumer_group_describe,
                                     error_response=_consumer_group_describe_error, coordinator=True)

GROUP_APIS = (OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP,
              DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT,
              CONSUMER_GROUP_DESCRIBE, TXN_OFFSET_COMMIT)
"""The group APIs and FindCoordinator, as ``server/dispatch.py`` collects them."""

GROUP_HANDLERS = {a.key: (a.handler, a.mode) for a in GROUP_APIS}
"""API key -> (handler, where it runs), for running one handler directly (the tests)."""
