"""The transaction APIs: kio requests in, ``TransactionCoordinatorService`` calls, kio responses out.

Kafka's ``KafkaApis.handle{InitProducerId,AddPartitionsToTxn,AddOffsetsToTxn,EndTxn,WriteTxnMarkers,
DescribeTransactions,ListTransactions}Request`` (and ``getCoordinator`` for FindCoordinator's key
type 1) on one node: this broker coordinates every transactional id and leads every partition.
Each answer keeps Kafka's version mapping: PRODUCER_FENCED (90) goes to InitProducerId below v4
and to AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below v2 as INVALID_PRODUCER_EPOCH (47),
which is all those clients know (transactions.md §2.0). Every handler runs in a worker thread
(the coordinator's appends touch storage). Versions advertised: spec §0 item 4 (the TV1 protocol;
AddPartitionsToTxn v4+ is broker-to-broker, EndTxn v5 is TV2, both left out), minimums 0.

Authorization (``KafkaApis``): AddPartitionsToTxn, AddOffsetsToTxn and EndTxn need WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), AddPartitionsToTxn also WRITE on each
topic and AddOffsetsToTxn READ on the group; WriteTxnMarkers needs ALTER or CLUSTER_ACTION on the
cluster; DescribeTransactions DESCRIBE on each transactional id (and lists only the topics the
principal may DESCRIBE), ListTransactions lists only the ids the principal may DESCRIBE.
InitProducerId's checks are in ``apis/init_producer_id.py``, TxnOffsetCommit's in
``apis/groups.py``.
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from ...record import jit
from ...record.consumer_offsets import OFFSETS_TOPIC
from ...record.consumer_offsets import partition_for as offsets_partition_for
from .handler import THREAD, ApiHandler
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, millis, nested, response_class
from ..state import INTERNAL_TOPICS, BrokerState
from ...coordinator.txn.markers import GROUP_NOT_READY, write_marker

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
NOT_AVAILABLE = "The coordinator is not available."
TXN_ID_DENIED = ErrorCode.transactional_id_authorization_failed


def _txn_id_denied(state: BrokerState, request, operation, transactional_id: str) -> bool:
    return not auth_helper.authorize(state, request, operation, auth_helper.TRANSACTIONAL_ID, transactional_id)


def _service(state: BrokerState):
    """The running coordinator, or None (its absence is COORDINATOR_NOT_AVAILABLE)."""
    return getattr(state, "transactions", None)


def fenced_for(code: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """KafkaApis' ``finalError``: PRODUCER_FENCED to a version that predates it is
    INVALID_PRODUCER_EPOCH."""
    if code == ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return code


# -- FindCoordinator (10), key type 1 -----------------------------------------------------------------

def transaction_coordinator(state: BrokerState, transactional_id: str) -> tuple[ErrorCode, str]:
    """KafkaApis.getCoordinator for a transactional id: this node, once the coordinator runs and
    ``__transaction_state`` exists (created on this first lookup); a partition still loading
    answers the requests on its ids, not the lookup."""
    svc = _service(state)
    if svc is None or not svc.is_available() or not svc.ensure_topic():
        return ErrorCode.coordinator_not_available, NOT_AVAILABLE
    return ErrorCode.none, "NONE"


# -- InitProducerId (22) with a transactional id -------------------------------------------------------

def init_transactional_producer(state: BrokerState, request, answer):
    """The transactional branch of InitProducerId (the idempotent one stays in
    ``apis/init_producer_id.py``, which checked the id/epoch pair and the null id already);
    ``answer(code, pid, epoch)`` builds the response."""
    body = request.body
    if body.transactional_id == "":
        return answer(ErrorCode.invalid_request)      # TC.handleInitProducerId, before anything else
    svc = _service(state)
    if svc is None:
        return answer(ErrorCode.coordinator_not_available)
    pid = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    expected = None if pid == -1 else (pid, epoch)
    r = svc.init_producer_id(body.transactional_id, millis(body.transaction_timeout), expected)
    if r.error != ErrorCode.none:
        return answer(fenced_for(r.error, request.api_version, 4))
    return answer(ErrorCode.none, r.producer_id, r.producer_epoch)


# -- AddPartitionsToTxn (24) v0-3 --------------------------------------------------------------------

def handle_add_partitions_to_txn(state: BrokerState, request):
    body = request.body
    requested: dict[str, list[int]] = {}
    for t in body.v3_and_below_topics:
        seen = requested.setdefault(t.name, [])
        seen.extend(p for p in t.partitions if p not in seen)
    if _txn_id_denied(state, request, auth_helper.WRITE, body.v3_and_below_transactional_id):
        return _add_partitions_response(response_class(request), requested, lambda tp: TXN_ID_DENIED)
    # before the coordinator: internal topics are not the client's to add (use AddOffsetsToTxn),
    # topics the principal may not WRITE neither, unknown partitions are not created; one of these
    # and nothing is added
    denied = auth_helper.denied(state, request, auth_helper.WRITE, auth_helper.TOPIC,
                                [t for t in requested if t not in INTERNAL_TOPICS])
    refused = {}
    for topic, parts in requested.items():
        for p in parts:
            if topic in INTERNAL_TOPICS or topic in denied:
                refused[(topic, p)] = ErrorCode.topic_authorization_failed
            elif state.log(topic, p) is None:
                refused[(topic, p)] = ErrorCode.unknown_topic_or_partition
    if refused:
        def code_of(tp):
            return refused.get(tp, ErrorCode.operation_not_attempted)
    else:
        svc = _service(state)
        if svc is None:
            code = ErrorCode.coordinator_not_available
        else:
            code = svc.add_partitions(body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                      body.v3_and_below_producer_epoch,
                                      {(t, p) for t, parts in requested.items() for p in parts})
        code = fenced_for(code, request.api_version, 2)
        return _same_answer(response_class(request), requested, code)
    return _add_partitions_response(response_class(request), requested, code_of)


_ANSWERS: dict = {}         # (response class, what was asked, the code) -> the answer built before
ANSWERS_KEPT = 512


def _same_answer(cls, requested: dict[str, list[int]], code: ErrorCode):
    """The AddPartitionsToTxn answer with ``code`` for every partition, the same object each time
    the same partitions are asked (a producer asks the same ones every transaction): built once,
    and its bytes found by identity (``protocol._body_bytes``)."""
    key = (cls, tuple((t, tuple(ps)) for t, ps in requested.items()), code)
    body = _ANSWERS.get(key)
    if body is None:
        body = _add_partitions_response(cls, requested, lambda tp: code)
        if len(_ANSWERS) >= ANSWERS_KEPT:
            _ANSWERS.clear()
        _ANSWERS[key] = body
    return body


def quick_add_partitions_to_txn(state: BrokerState, request):
    """AddPartitionsToTxn on the event loop when nothing in it can wait (``ApiHandler.quick``):
    every requested partition's log open, and the coordinator's lock and its append at hand
    (``TransactionCoordinatorService.quick``); else None (a worker thread handles it)."""
    svc = _service(state)
    if svc is None or not jit.warm():
        return None
    body = request.body
    logs = state.datadir.logs
    for t in body.v3_and_below_topics:
        for p in t.partitions:
            lg = logs.get((t.name, p))
            if lg is None or lg.closed:
                return None
    return svc.quick(body.v3_and_below_transactional_id, lambda: handle_add_partitions_to_txn(state, request),
                     markers=False)


def _add_partitions_response(cls, requested: dict[str, list[int]], code_of):
    t_cls = nested(cls, "AddPartitionsToTxnTopicResult")
    p_cls = nested(cls, "AddPartitionsToTxnPartitionResult")
    return build(cls, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(
        build(t_cls, name=topic, results_by_partition=tuple(
            build(p_cls, partition_index=p, partition_error_code=code_of((topic, p))) for p in parts))
        for topic, parts in requested.items()))


def _add_partitions_error(body, cls, code, message):
    requested: dict[str, list[int]] = {}
    for t in body.v3_and_below_topics:
        seen = requested.setdefault(t.name, [])
        seen.extend(p for p in t.partitions if p not in seen)
    return _add_partitions_response(cls, requested, lambda tp: code)


# -- AddOffsetsToTxn (25) -----------------------------------------------------------------------------

def offsets_partition(state: BrokerState, group_id: str) -> int:
    """The group's ``__consumer_offsets`` partition (the group coordinator's count of them)."""
    groups = getattr(state, "groups", None)
    config = getattr(groups, "config", None)
    n = config.num_partitions if config is not None else state.broker.get("offsets.topic.num.partitions")
    return offsets_partition_for(group_id, n)


def handle_add_offsets_to_txn(state: BrokerState, request):
    """KafkaApis.handleAddOffsetsToTxnRequest: the group's offsets partition joins the
    transaction (the offsets themselves come with TxnOffsetCommit, to the group coordinator)."""
    body = request.body
    svc = _service(state)
    if _txn_id_denied(state, request, auth_helper.WRITE, body.transactional_id):
        code = TXN_ID_DENIED
    elif not auth_helper.authorize(state, request, auth_helper.READ, auth_helper.GROUP, body.group_id):
        code = ErrorCode.group_authorization_failed
    elif svc is None:
        code = ErrorCode.coordinator_not_available
    else:
        tp = (OFFSETS_TOPIC, offsets_partition(state, body.group_id))
        code = svc.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch, {tp})
    return build(response_class(request), throttle_time=NO_THROTTLE,
                 error_code=fenced_for(code, request.api_version, 2))


def _error_code_only(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code)


# -- EndTxn (26) v0-4 ------------------------------------------------------------------------------------

def handle_end_txn(state: BrokerState, request):
    body = request.body
    svc = _service(state)
    if _txn_id_denied(state, request, auth_helper.WRITE, body.transactional_id):
        code, pid, epoch = TXN_ID_DENIED, -1, -1
    elif svc is None:
        code, pid, epoch = ErrorCode.coordinator_not_available, -1, -1
    else:
        code, pid, epoch = svc.end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                       body.committed, 2 if request.api_version >= 5 else 0)
    code = fenced_for(code, request.api_version, 2)
    if code != ErrorCode.none:
        pid, epoch = -1, -1
    cls = response_class(request)
    key = (cls, code, pid, epoch)
    body = _ANSWERS.get(key)            # a producer's commits get the same answer each time
    if body is None:
        body = build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=pid, producer_epoch=epoch)
        if len(_ANSWERS) >= ANSWERS_KEPT:
            _ANSWERS.clear()
        _ANSWERS[key] = body
    return body


def quick_end_txn(state: BrokerState, request):
    """EndTxn on the event loop when its records and markers only write to the page cache
    (``TransactionCoordinatorService.quick``); else None (a worker thread handles it)."""
    svc = _service(state)
    if svc is None or not jit.warm():
        return None
    return svc.quick(request.body.transactional_id, lambda: handle_end_txn(state, request), markers=True)


def _end_txn_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=-1, producer_epoch=-1)


# -- WriteTxnMarkers (27) v1: the admin's abort of a hanging transaction ---------------------------------

def handle_write_txn_markers(state: BrokerState, request):
    """KafkaApis.handleWriteTxnMarkersRequest: each marker to each partition, through the same
    append as the coordinator's own markers, without the coordinator (KIP-664's abort)."""
    body = request.body
    cls = response_class(request)
    if not (auth_helper.authorize_cluster(state, request, auth_helper.ALTER, log_if_denied=False)
            or auth_helper.authorize_cluster(state, request, auth_helper.CLUSTER_ACTION)):
        return _write_txn_markers_error(body, cls, ErrorCode.cluster_authorization_failed, None)
    m_cls, t_cls = nested(cls, "WritableTxnMarkerResult"), nested(cls, "WritableTxnMarkerTopicResult")
    p_cls = nested(cls, "WritableTxnMarkerPartitionResult")
    out = []
    for m in body.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                code = write_marker(state, t.name, p, m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                    m.transaction_result)
                if t.name == OFFSETS_TOPIC and code in GROUP_NOT_READY:
                    code = ErrorCode.not_leader_or_follower
                parts.append(build(p_cls, partition_index=p, error_code=code))
            topics.append(build(t_cls, name=t.name, partitions=tuple(parts)))
        out.append(build(m_cls, producer_id=m.producer_id, topics=tuple(topics)))
    return build(cls, markers=tuple(out))


def _write_txn_markers_error(body, cls, code, message):
    m_cls, t_cls = nested(cls, "WritableTxnMarkerResult"), nested(cls, "WritableTxnMarkerTopicResult")
    p_cls = nested(cls, "WritableTxnMarkerPartitionResult")
    return build(cls, markers=tuple(
        build(m_cls, producer_id=m.producer_id, topics=tuple(
            build(t_cls, name=t.name, partitions=tuple(build(p_cls, partition_index=p, error_code=code)
                                                       for p in t.partition_indexes)) for t in m.topics))
        for m in body.markers))


# -- DescribeTransactions (65) / ListTransactions (66) ----------------------------------------------------

def _time(ms: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=ms)


def handle_describe_transactions(state: BrokerState, request):
    body = request.body
    cls = response_class(request)
    s_cls, t_cls = nested(cls, "TransactionState"), nested(cls, "TopicData")
    svc = _service(state)
    out = []
    for tid in body.transactional_ids:
        if _txn_id_denied(state, request, auth_helper.DESCRIBE, tid):
            out.append(_undescribed(s_cls, tid, TXN_ID_DENIED))
            continue
        code, md = (ErrorCode.coordinator_not_available, None) if svc is None else svc.describe(tid)
        if md is None:
            out.append(_undescribed(s_cls, tid, code))
            continue
        topics = md.topics()
        hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, [t for t, _ in topics])
        out.append(build(s_cls, error_code=ErrorCode.none, transactional_id=tid, transaction_state=md.state.display,
                         transaction_timeout=datetime.timedelta(milliseconds=md.txn_timeout_ms),
                         transaction_start_time=_time(md.txn_start_ms), producer_id=md.producer_id,
                         producer_epoch=md.producer_epoch,
                         topics=tuple(build(t_cls, topic=t, partitions=tuple(ps)) for t, ps in topics
                                      if t not in hidden)))
    return build(cls, throttle_time=NO_THROTTLE, transaction_states=tuple(out))


def _undescribed(s_cls, tid: str, code: ErrorCode):
    # DescribeTransactionsResponseData.TransactionState as Kafka leaves it beside an error: only
    # the id and the code set, the rest at the schema's defaults (none given: 0, "", no topics)
    return build(s_cls, error_code=code, transactional_id=tid, transaction_state="",
                 transaction_timeout=datetime.timedelta(0), transaction_start_time=_time(0), producer_id=0,
                 producer_epoch=0, topics=())


def _describe_transactions_error(body, cls, code, message):
    s_cls = nested(cls, "TransactionState")
    return build(cls, throttle_time=NO_THROTTLE,
                 transaction_states=tuple(_undescribed(s_cls, tid, code) for tid in body.transactional_ids))


def handle_list_transactions(state: BrokerState, request):
    body = request.body
    cls = response_class(request)
    s_cls = nested(cls, "TransactionState")
    svc = _service(state)
    if svc is None:
        return _list_transactions_error(body, cls, ErrorCode.coordinator_not_available, None)
    code, unknown, listed = svc.list_transactions(
        tuple(body.state_filters), tuple(body.producer_id_filters), getattr(body, "duration_filter", -1),
        getattr(body, "transactional_id_pattern", None))
    hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TRANSACTIONAL_ID,
                                [md.transactional_id for md in listed])
    listed = [md for md in listed if md.transactional_id not in hidden]
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, unknown_state_filters=tuple(unknown),
                 transaction_states=tuple(build(s_cls, transactional_id=md.transactional_id,
                                                producer_id=md.producer_id, transaction_state=md.state.display)
                                          for md in listed))


def _list_transactions_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, unknown_state_filters=(), transaction_states=())


# -- declarations ---------------------------------------------------------------------------------------

ADD_PARTITIONS_TO_TXN = ApiHandler(24, "AddPartitionsToTxn", 0, 3, mode=THREAD, handler=handle_add_partitions_to_txn,
                                   quick=quick_add_partitions_to_txn,
                                   error_response=_add_partitions_error, coordinator=True)
ADD_OFFSETS_TO_TXN = ApiHandler(25, "AddOffsetsToTxn", 0, 4, mode=THREAD, handler=handle_add_offsets_to_txn,
                                error_response=_error_code_only, coordinator=True)
END_TXN = ApiHandler(26, "EndTxn", 0, 4, mode=THREAD, handler=handle_end_txn, error_response=_end_txn_error,
                     quick=quick_end_txn, coordinator=True)
# v0 was removed in Kafka 4.0; v1 only is what admin clients send (v2 is KIP-1228's)
WRITE_TXN_MARKERS = ApiHandler(27, "WriteTxnMarkers", 1, 1, mode=THREAD, handler=handle_write_txn_markers,
                               error_response=_write_txn_markers_error)
DESCRIBE_TRANSACTIONS = ApiHandler(65, "DescribeTransactions", 0, 0, mode=THREAD,
                                   handler=handle_describe_transactions,
                                   error_response=_describe_transactions_error, coordinator=True)
LIST_TRANSACTIONS = ApiHandler(66, "ListTransactions", 0, 2, mode=THREAD, handler=handle_list_transactions,
                               error_response=_list_transactions_error, coordinator=True)

TXN_APIS = (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, DESCRIBE_TRANSACTIONS,
            LIST_TRANSACTIONS)
"""The transaction coordinator's APIs (InitProducerId stays declared in ``apis/init_producer_id.py``)."""
