"""Fetch (API key 1): Kafka's ``KafkaApis.handleFetchRequest``, ``ReplicaManager.fetchMessages``
and ``DelayedFetch``, for consumers (wire-protocol.md §3.4).

Reading a partition takes what it needs under the partition's lock (``Log.lock``): the high
watermark, last stable offset and log start, the byte range of the whole batches to return
(``Log.read_span``, the walk of the segments that ``Log.read`` uses too) and either those bytes
(small reads) or a duplicate of the segment file's descriptor (large reads). A cleaner swap or
retention may rename, close and delete that segment the moment the lock is released; the
duplicate descriptor still reads the file as it was (the same inode, which the swap never writes
to), so a concurrent fetch returns bytes of the log before the swap or after it, never a mix and
never an error. Whole batches only: Kafka may cut
the last batch at the byte limit (clients drop it); returning whole batches is also correct.

Large ranges go from the segment file to the socket with ``loop.sendfile`` (``os.sendfile``), so
the record bytes never pass through Python; the response around them is encoded here by hand
(``encode_fetch_response``: checked byte for byte against kio's encoder in the unit tests), since
kio would need the records as one bytes object. The frame is the protocol's ``EncodedResponse``
(bytes and ``FileRegion`` parts), which ``Connection.send`` passes through to the transport.

A read that cannot wait is made on the event loop (``read_fetch(quick=True)``): every partition
open and local, its lock free at once, the read starting in its active segment (the tail, which
the page cache holds) and at most ``QUICK_COPY_MAX_BYTES`` copied; any other read is made in a
worker thread, as Kafka's request handler threads make them all (a hand-off costs more than a
small read: issue 28). The long poll (``max_wait_ms``/``min_bytes``) waits on the event loop for appends to any of the
requested partitions (``AppendNotifier``), re-reading after each, until enough bytes are readable
or the time is up. Fetch sessions (KIP-227) are declined: every answer carries session id 0, so
clients send full requests (epoch 0 or -1, answered whatever session id they name, as Kafka's
FetchManager does); an incremental one (any other epoch) is FETCH_SESSION_ID_NOT_FOUND. A topic the principal may not READ is answered TOPIC_AUTHORIZATION_FAILED
for each of its partitions (asked once per request, before the first read), and is never read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, OffsetOutOfRangeError
from ...record.varint import encode_uvarint
from ...storage.isolation import last_fetchable_offset
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, READ_COMMITTED, build, nested, response_class
from ..protocol import EncodedResponse, FileRegion
from ..state import BrokerState
from ..wire_errors import partition_error
from .handler import ASYNC, ApiHandler

INITIAL_EPOCH = 0          # FetchMetadata: a full request that may open a session
FINAL_EPOCH = -1           # a full request that opens none

# below this many bytes a partition's records are read into memory; from it on they are sent
# with sendfile (measured: benchmarks/broker.py, see the module's notes)
ZERO_COPY_MIN_BYTES = 64 * 1024
# a fetch read on the event loop copies at most this much (below ZERO_COPY_MIN_BYTES a partition
# is read into memory; from it on only a descriptor is duplicated for sendfile)
QUICK_COPY_MAX_BYTES = 256 * 1024

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqqq")     # index, error, high watermark, LSO, log start
_ABORTED = struct.Struct(">qq")


@dataclass(slots=True)
class PartitionRead:
    partition: int
    error: int                   # an ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: list | None = None
    records: bytes | FileRegion = b""


@dataclass(slots=True)
class FetchRead:
    topics: list                 # [(topic, [PartitionRead])]
    bytes: int = 0
    has_error: bool = False

    def close(self) -> None:
        for _, parts in self.topics:
            for p in parts:
                if isinstance(p.records, FileRegion):
                    p.records.close()


# -- reading ------------------------------------------------------------------------------------

class BelowLocalLog(Exception):
    """A tiered log's offset found below its local log start once its lock was held: its segment
    was copied to the remote tier and deleted locally since the caller chose the local log. Read
    from the local log, the offset would have been served from the first local segment, every
    record in between skipped."""


def read_partition(log, offset: int, max_bytes: int, min_one: bool, committed: bool,
                   zero_copy_min: int = ZERO_COPY_MIN_BYTES, *, quick: bool = False,
                   tiered: bool = False) -> PartitionRead | None:
    """Whole batches from the one holding ``offset``, within ``max_bytes`` (at least one batch
    when ``min_one``), up to the high watermark (read_uncommitted) or LSO (read_committed).
    ``quick`` (on the event loop): None unless the partition's lock is free at once and the read
    starts in the active segment, the tail a consumer that keeps up reads, which the page cache
    holds (appended moments ago). ``tiered``: BelowLocalLog when the offset is in the remote tier
    only (checked under the lock: local retention moves the local log start under it)."""
    pr = PartitionRead(log.partition, ErrorCode.none)
    if not log.lock.acquire(blocking=not quick):
        return None
    try:
        if tiered and log.log_start_offset <= offset < log.local_log_start_offset:
            raise BelowLocalLog(offset)
        if log.closed:
            if quick:
                return None
            pr.error = ErrorCode.unknown_topic_or_partition
            return pr
        if quick and (log.offline is not None or offset < log.active_segment.base_offset):
            return None
        hw = log.high_watermark
        lso = log.last_stable_offset
        pr.high_watermark, pr.last_stable_offset = hw, lso
        pr.log_start_offset = log.log_start_offset
        try:
            span = log.read_span(offset, max_bytes, min_one_batch=min_one,
                                 max_offset=last_fetchable_offset(log, committed))
        except OffsetOutOfRangeError:
            pr.error = ErrorCode.offset_out_of_range
            return pr
        if committed:
            pr.aborted = []
        if span.length:
            if span.length >= zero_copy_min:
                pr.records = FileRegion(span.file.dup(), span.position, span.length)
            else:
                pr.records = span.read()
            if committed:
                pr.aborted = [(t.producer_id, t.first_offset)
                              for t in log.collect_aborted_transactions(offset, span.last_offset + 1)]
    finally:
        log.lock.release()
    return pr


def _read_one(state: BrokerState, topic: str, p, max_bytes: int, min_one: bool, committed: bool,
              zero_copy_min: int, remote_slot: list | None = None, quick: bool = False) -> PartitionRead | None:
    if quick:
        # only an open log: opening one (a first read after a clean shutdown) reads its files
        log = state.datadir.logs.get((topic, p.partition))
        if log is None or log.closed:
            return None
    else:
        log = state.log(topic, p.partition)
    if log is None:
        return PartitionRead(p.partition, ErrorCode.unknown_topic_or_partition)
    current = getattr(p, "current_leader_epoch", -1)
    if current != -1 and current != log.leader_epoch:
        code = ErrorCode.fenced_leader_epoch if current < log.leader_epoch else ErrorCode.unknown_leader_epoch
        return PartitionRead(p.partition, code)
    offset = p.fetch_offset
    tiered = state.remote is not None and log.remote_log_enabled
    if not (tiered and log.log_start_offset <= offset < log.local_log_start_offset):
        try:
            return read_partition(log, offset, max_bytes, min_one, committed, zero_copy_min, quick=quick,
                                  tiered=tiered)
        except BelowLocalLog:
            pass                    # copied and trimmed meanwhile: in the remote tier now
    if quick:
        return None
    return read_remote(state.remote, log, offset, max_bytes, min_one, committed, zero_copy_min,
                       remote_slot if remote_slot is not None else [False])


def read_remote(remote, log, offset: int, max_bytes: int, min_one: bool, committed: bool, zero_copy_min: int,
                remote_slot: list) -> PartitionRead:
    """A fetch below the local log start of a tiered partition (ReplicaManager's remote path,
    tiered-storage.md §4): only the first such partition of a request reads remotely, the others
    answer empty (KAFKA-14915); a read slower than ``remote.fetch.max.wait.ms`` answers empty, no
    error (DelayedRemoteFetch); a store failure raises (UNKNOWN_SERVER_ERROR for this partition,
    the others of the request served); remote segments that run out continue in the local log."""
    from ...storage.remote.manager import RemoteFetchTimeout
    pr = PartitionRead(log.partition, ErrorCode.none, log.high_watermark, log.last_stable_offset,
                       log.log_start_offset, [] if committed else None)
    if remote_slot[0]:
        return pr
    remote_slot[0] = True
    for _ in range(3):
        try:
            got = remote.fetch(log, offset, max_bytes, min_one, committed)
        except RemoteFetchTimeout:
            return pr
        except OffsetOutOfRangeError:
            pr.error = ErrorCode.offset_out_of_range
            return pr
        if not got.continue_local:
            pr.records = got.records
            if committed:
                pr.aborted = [(t.producer_id, t.first_offset) for t in got.aborted or ()]
            return pr
        # nothing remote at or past the offset up to the remote tier's end: the local log from
        # there (not from its start as it is by now: a segment copied and trimmed since the remote
        # read would be skipped), or the remote tier again if that is where the offset went
        offset = got.next_offset
        try:
            return read_partition(log, offset, max_bytes, min_one, committed, zero_copy_min, tiered=True)
        except BelowLocalLog:
            continue
    return pr                       # still moving: empty, the client fetches the same offset again


def read_fetch(state: BrokerState, body, version: int,
               zero_copy_min: int = ZERO_COPY_MIN_BYTES, denied: frozenset = frozenset(), *,
               quick: bool = False) -> FetchRead | None:
    """One pass over the requested partitions in request order (KIP-74 limits); the topics in
    ``denied`` are not read (TOPIC_AUTHORIZATION_FAILED). ``quick``: the read on the event loop
    (``quick_read``), None as soon as a partition could wait (``read_partition``) or fail."""
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    limit = max(body.max_bytes, 0)
    min_one = True
    remote_slot = [False]           # one remote partition per request
    out = FetchRead([])
    copied = 0
    try:
        for t in body.topics:
            parts = []
            for p in t.partitions:
                if t.topic in denied:
                    pr = PartitionRead(p.partition, ErrorCode.topic_authorization_failed)
                else:
                    try:
                        pr = _read_one(state, t.topic, p, min(p.partition_max_bytes, limit), min_one,
                                       committed, zero_copy_min, remote_slot, quick)
                        if pr is None:          # quick: this one could wait, a worker reads it all
                            return _abandoned(out, parts)
                    except Exception as e:
                        if quick:               # the worker's read counts and logs the failure
                            return _abandoned(out, parts)
                        if state.metrics is not None:       # FailedFetchRequestsPerSec
                            state.metrics.topic_stats.fetch_failed(t.topic)
                        if not isinstance(e, (CompactlogError, OSError)):
                            raise
                        # this partition's files failed; the others are still read (ReplicaManager)
                        state.logger.error(f"Fetch from {t.topic}-{p.partition} failed: {e}")
                        pr = PartitionRead(p.partition, partition_error(e, state.datadir.path)[0])
                n = len(pr.records)
                if n:
                    limit = max(0, limit - n)
                    min_one = False
                    out.bytes += n
                    if quick and not isinstance(pr.records, FileRegion):
                        copied += n
                        if copied > QUICK_COPY_MAX_BYTES:
                            return _abandoned(out, parts)
                if pr.error:
                    out.has_error = True
                parts.append(pr)
            out.topics.append((t.topic, parts))
    except BaseException:
        out.close()
        raise
    return out


def _abandoned(out: FetchRead, parts: list) -> None:
    """A quick read given up: the descriptors it took so far closed (the current topic's too)."""
    out.topics.append(("", parts))
    out.close()
    return None


# -- the long poll ------------------------------------------------------------------------------

async def handle_fetch(state: BrokerState, request, run):
    """``run(fn, *args)`` runs a blocking function in a worker thread (an awaitable)."""
    body = request.body
    version = request.api_version
    if getattr(body, "session_epoch", FINAL_EPOCH) not in (INITIAL_EPOCH, FINAL_EPOCH):
        # FetchManager.newContext: an incremental request names a session, and none is ever
        # created here (every answer says 0); a full one (epoch 0 or -1) is answered whatever
        # session id it names (Kafka closes that session, and a full answer may make none)
        return fetch_session_error(body, response_class(request), ErrorCode.fetch_session_id_not_found)
    if getattr(body, "isolation_level", 0) not in (0, READ_COMMITTED):
        # IsolationLevel.forId throws IllegalArgumentException: getErrorResponse's UNKNOWN_SERVER_ERROR
        return FETCH.error_body(request, ErrorCode.unknown_server_error)
    body = fetch_data(body)
    max_wait = body.max_wait.total_seconds()
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    denied = auth_helper.denied(state, request, auth_helper.READ, auth_helper.TOPIC, (t.topic for t in body.topics))
    if max_wait <= 0 or body.min_bytes <= 0 or not keys:
        result = await _read(run, state, body, version, denied)
        return _answer(state, request, result)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait
    event = asyncio.Event()
    state.appends.register(keys, event)
    try:
        while True:
            event.clear()
            result = await _read(run, state, body, version, denied)
            remaining = deadline - loop.time()
            if result.bytes >= body.min_bytes or result.has_error or remaining <= 0 \
                    or state.closing.is_set():
                return _answer(state, request, result)
            result.close()
            if not event.is_set():
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
    finally:
        state.appends.unregister(keys, event)


def _answer(state: BrokerState, request, result: FetchRead) -> EncodedResponse:
    if state.metrics is not None:       # bytes out per topic and the error codes (BrokerTopicMetrics)
        state.metrics.fetch_answered(result)
    return encode_result(request, result)


async def _read(run, state, body, version, denied: frozenset = frozenset()) -> FetchRead:
    # on the loop when small: a hand-off to a worker thread costs more than a tail read from the
    # page cache (issue 28); anything that could wait goes to a worker as before
    result = read_fetch(state, body, version, ZERO_COPY_MIN_BYTES, denied, quick=True)
    if result is not None:
        return result
    fut = asyncio.ensure_future(run(read_fetch, state, body, version, ZERO_COPY_MIN_BYTES, denied))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        # the connection went away while a worker read: its descriptors must still be closed
        fut.add_done_callback(_close_result)
        raise


def _close_result(fut) -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().close()


# -- encoding -----------------------------------------------------------------------------------

def encode_result(request, result: FetchRead) -> EncodedResponse:
    return encode_fetch_response(request.correlation_id, request.api_version, result.topics)


def encode_fetch_response(correlation_id: int, version: int, topics: list, *, error: int = 0,
                          throttle_ms: int = 0, session_id: int = 0) -> EncodedResponse:
    """FetchResponse v4-v12 with its response header, records as bytes or file regions.

    The parts (bytearrays and file regions) start with the 4-byte size prefix.
    """
    flexible = version >= 12
    parts: list = []
    buf = bytearray(b"\0\0\0\0")
    buf += _I32.pack(correlation_id)
    if flexible:
        buf += b"\0"                                # response header v1: no tagged fields
    buf += _I32.pack(throttle_ms)
    if version >= 7:
        buf += _I16.pack(error)
        buf += _I32.pack(session_id)
    buf += encode_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    total = 0
    for name, partitions in topics:
        raw = name.encode("utf-8")
        buf += encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))
        buf += raw
        buf += encode_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            buf += _PARTITION_HEAD.pack(p.partition, p.error, p.high_watermark,
                                        p.last_stable_offset, p.log_start_offset)
            if version < 5:
                del buf[-8:]                        # no log start offset before v5
            aborted = p.aborted
            if aborted is None:
                buf += b"\0" if flexible else b"\xff\xff\xff\xff"
            else:
                buf += encode_uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for pid, first in aborted:
                    buf += _ABORTED.pack(pid, first)
                    if flexible:
                        buf += b"\0"
            if version >= 11:
                buf += b"\xff\xff\xff\xff"          # preferred_read_replica: none
            records = p.records
            n = len(records)
            buf += encode_uvarint(n + 1) if flexible else _I32.pack(n)
            if isinstance(records, FileRegion):
                total += len(buf)
                parts.append(buf)
                parts.append(records)
                total += n
                buf = bytearray()
            else:
                buf += records
            if flexible:
                buf += b"\0"                        # partition: no tagged fields
        if flexible:
            buf += b"\0"                            # topic: no tagged fields
    if flexible:
        buf += b"\0"                                # response: no tagged fields
    total += len(buf)
    parts.append(buf)
    _I32.pack_into(parts[0], 0, total - 4)
    return EncodedResponse(parts, total)


def fetch_data(body):
    """``body`` with its partitions as Kafka reads them (FetchRequest.fetchData, a LinkedHashMap
    keyed by the partition: one entry each, where the request first names it, with the values of
    its last mention) and grouped as FetchResponse.toMessage groups them (consecutive partitions
    of one topic in one topic entry). A request that names each partition once and no topic twice
    in a row, as clients send them, is returned as it is."""
    topics = body.topics
    seen = set()
    previous = None
    regular = True
    for t in topics:
        if t.topic == previous:
            regular = False
        previous = t.topic
        for p in t.partitions:
            key = (t.topic, p.partition)
            if key in seen:
                regular = False
            seen.add(key)
    if regular:
        return body
    by_key: dict = {}
    for t in topics:
        for p in t.partitions:
            by_key[(t.topic, p.partition)] = (t, p)   # a dict keeps the first position, takes the last value
    grouped: list = []                                 # [topic entry, [partitions]]
    for (name, _), (t, p) in by_key.items():
        if grouped and grouped[-1][0].topic == name:
            grouped[-1][1].append(p)
        else:
            grouped.append((t, [p]))
    return dataclasses.replace(body, topics=tuple(dataclasses.replace(t, partitions=tuple(ps))
                                                  for t, ps in grouped))


def fetch_error(body, cls, code, message):
    """FetchRequest.getErrorResponse: the code at the top (v7+) and, before v13 (every version
    served), in every partition too; the request's session id."""
    t_cls = nested(cls, "FetchableTopicResponse")
    p_cls = nested(cls, "PartitionData")
    topics = tuple(
        build(t_cls, topic=t.topic, partitions=tuple(
            build(p_cls, partition_index=p.partition, error_code=code, high_watermark=-1,
                  last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                  records=b"") for p in t.partitions))
        for t in body.topics)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code,
                 session_id=getattr(body, "session_id", 0), responses=topics)


def fetch_session_error(body, cls, code):
    """SessionErrorContext's answer: the code at the top, session id 0, no partitions."""
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, session_id=0, responses=())


FETCH = ApiHandler(1, "Fetch", 4, 12, mode=ASYNC, handler=handle_fetch, error_response=fetch_error)
