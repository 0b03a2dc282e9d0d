"""Kafka's request framing and decoding, sans-IO: bytes in, events out, no sockets.

One ``Connection`` per TCP connection, in the manner of h11: the transport hands it whatever it
read (``receive_data``), then asks for events (``next_event``) until ``NEED_DATA``; each event is a
``Request`` or a ``Close``. ``encode_response`` turns a kio response body into the complete frame.

What is followed from Kafka:

* ``SocketServer.Processor`` / ``NetworkReceive``: every request is an int32 size and that many
  bytes; a negative size or one above ``socket.request.max.bytes`` closes the connection before
  anything more is read. ``parseRequestHeader`` closes it for an unknown API key or a version
  outside the enabled range, except for ApiVersions (``ApiKeys.isVersionEnabled``).
* ``RequestHeader.parse``: header v2 (tagged fields) for flexible versions, v1 otherwise;
  ``client_id`` is a legacy nullable string in both, and null reads as "".
* ``RequestContext.parseRequest``: an ApiVersions request of a version the broker does not know
  is not parsed; it is answered as a v0 request (``response_version`` 0). Any other body that
  fails to parse closes the connection (``InvalidRequestException``). Bytes after the body are
  ignored, as Kafka's generated readers ignore them.
* The generated ``*Data.read`` methods: an array count above the bytes left, or a null where
  the array is not nullable, fails the parse. ``precheck.scan`` makes those checks before kio
  reads the body: kio reserves memory for a count before reading any element and would abort
  the process on a forged one.
* ``RequestChannel.Request``: the event carries the parsed header and body and the frame size.
  Produce with ``acks = 0`` is never answered (``expects_response`` is false); when one of its
  partitions was refused, ``KafkaApis.handleProduceRequest`` closes the connection instead, so
  that the producer notices: ``Connection.send`` then returns a ``Close``.
* ``Processor`` mutes a connection after each request until its response is sent, so requests
  of one connection are handled one at a time, in order. The transport keeps that rule by
  asking for the next event only once the previous request is answered.

The way out mirrors the way in (h11's ``send_with_data_passthrough``): ``Connection.send`` turns a
handler's answer into what the transport does with it, an ``EncodedResponse`` (the frame as parts
to write in order: bytes, and file regions (``FileRegion``) of a segment that the transport hands to
``sendfile``, so record bytes never pass through Python), nothing, or a ``Close``. The transport
thus needs no handler's types and applies no API's rule.

Tagged fields that the schema does not list (a newer client's, in the header or the body) are
skipped, and a nullable field's legacy length below -1 is null, as Kafka's readers read them: kio
refuses both, so such a frame is read again rewritten (``precheck.as_kafka_reads``,
``header_as_kafka_reads``).

Decoding never raises for any input: a frame kio cannot read becomes a ``Close`` whose reason
says why (the transport logs it). Differences from Kafka, all ending in a closed connection
where Kafka would go on: kio refuses strings that are not valid UTF-8 (Java substitutes U+FFFD)
and 64-bit durations beyond Python's ``timedelta`` (OffsetCommit v2-4 ``retention_time_ms``); none of
the clients of wire-protocol.md §9 sends such requests.
"""

from __future__ import annotations

import functools
import io
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Iterator, Union

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from .precheck import MalformedRequest, ReadAfterRewrite, as_kafka_reads, header_as_kafka_reads, scan
from .produce_response import encode_produce_response
from .versions import API_VERSIONS_KEY, SupportedApis, request_schema

DEFAULT_MAX_REQUEST_SIZE = 104857600     # socket.request.max.bytes
# get_buffer's receive buffer: its first size, and the least room it offers for a read (less
# free room moves unparsed bytes to the front, or grows the buffer); it grows towards the size of
# a larger frame, at most doubling what it holds. It is anonymous memory
# (mmap): a page costs memory once a read writes to it, so a connection of small requests holds
# a page or two of its 64 KiB, and a dropped buffer goes back to the system at once.
RECEIVE_BUFFER_BYTES = 64 * 1024
RECEIVE_MIN_READ = 16 * 1024
PRODUCE_KEY = 0
ANONYMOUS = "User:ANONYMOUS"        # KafkaPrincipal.ANONYMOUS

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


class NeedData:
    """The buffered bytes hold no complete request: call ``receive_data`` first."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = NeedData()


@dataclass(frozen=True, slots=True)
class Close:
    """The connection must be closed, unanswered, for ``reason`` (meant for the broker's log).
    ``oversized``: a size prefix above the limit (before SASL authentication, a failed one)."""

    reason: str
    oversized: bool = False


@dataclass(frozen=True, slots=True)
class Unadmitted:
    """A request of an API that is not admitted now (``Connection.admitted_keys``), left unparsed:
    before SASL authentication only ApiVersions and SaslHandshake are parsed, as Kafka checks the
    API key before parsing the body."""

    api_key: int
    api_version: int

    @property
    def api_name(self) -> str:
        return _api_name(self.api_key)


@dataclass(frozen=True, slots=True)
class RawFrame:
    """A whole frame without a request header (``Connection.raw_frames``): a bare SASL token of
    the SaslHandshake v0 framing."""

    data: bytes


@dataclass(slots=True, eq=False, repr=False)
class Request:
    """One decoded request (Kafka's ``RequestChannel.Request``); treat it as read-only.

    ``header`` and ``body`` are kio entities. ``response_version`` is the version the answer
    must have: ``api_version``, except 0 for an ApiVersions request of an unknown version, whose
    ``body`` is then an empty v0 request. ``expects_response`` is false for Produce with
    ``acks = 0``. ``frame_size`` is the size prefix (header and body, prefix excluded).
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    header: object
    body: object
    frame_size: int
    response_version: int
    expects_response: bool
    principal: str = ANONYMOUS      # who sent it (the connection's, security.md §6)
    listener: str = "PLAINTEXT"     # the name of the listener it came on

    @property
    def api_name(self) -> str:
        return _api_name(self.api_key)

    def produce_records(self) -> Iterator[tuple[str, int, bytes | None]]:
        """(topic, partition, records) per partition of a Produce request, in request order.

        ``records`` is the bytes object kio read out of the frame (the only copy made of it
        between the socket buffer and the log), or None when the client sent null.
        """
        if self.api_key != PRODUCE_KEY:
            raise TypeError(f"{self.api_name} request has no records")
        for topic in self.body.topic_data:
            for partition in topic.partition_data:
                yield topic.name, partition.index, partition.records

    def __repr__(self) -> str:
        return (f"Request({self.api_name} v{self.api_version}, correlation_id="
                f"{self.correlation_id}, client_id={self.client_id!r}, {self.frame_size} bytes)")


Event = Union[Request, Close, NeedData, Unadmitted, RawFrame]


# -- the protocol's output ------------------------------------------------------------------------

class FileRegion:
    """``count`` bytes of a file from ``offset``, through a descriptor this object owns (a part
    of a response that the transport sends with ``sendfile``)."""

    __slots__ = ("fd", "offset", "count")

    def __init__(self, fd: int, offset: int, count: int):
        self.fd = fd
        self.offset = offset
        self.count = count

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read(self) -> bytes:
        """The bytes (the fallback when sendfile cannot be used)."""
        data = os.pread(self.fd, self.count, self.offset)
        if len(data) != self.count:
            raise OSError(f"short read: {len(data)} of {self.count} bytes")
        return data


class EncodedResponse:
    """A complete response frame as parts: bytes and file regions, to be written in order."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list, size: int):
        self.parts = parts
        self.size = size

    def close(self) -> None:
        for p in self.parts:
            if isinstance(p, FileRegion):
                p.close()


Output = Union[EncodedResponse, Close, None]


class Connection:
    """The protocol state of one client connection (Kafka's ``SocketServer.Processor`` view).

    ``apis`` decides which API versions are accepted (the advertised table, which the broker
    derives from its API declarations: ``dispatch.py``); without one, no request is accepted and
    only the framing rules apply. ``max_request_size`` is ``socket.request.max.bytes``. Once
    ``next_event`` has returned a ``Close``, it returns that same event forever and
    ``receive_data`` discards what it is given.

    Bytes land in the connection's own receive buffer, reused from read to read: written there
    by the socket (``get_buffer``/``buffer_updated``, asyncio's ``BufferedProtocol``) or copied
    there by ``receive_data``; ``release_buffer`` lets an idle connection drop it.

    What the transport sets as a connection's security changes (security.md §3): ``principal`` and
    ``listener``, stamped on every decoded request; ``admitted_keys`` (None: every advertised API),
    outside which a request is an ``Unadmitted`` event and is not parsed; ``raw_frames``, which
    makes each frame a ``RawFrame``; and ``limit_frames`` (``sasl.server.max.receive.size`` before
    authentication).
    """

    def __init__(self, apis: SupportedApis | None = None,
                 max_request_size: int = DEFAULT_MAX_REQUEST_SIZE):
        if max_request_size < 0:
            raise ValueError(f"max_request_size must be >= 0, got {max_request_size}")
        self._apis = apis
        self._max_request_size = max_request_size
        # unparsed input is self._buffer[self._pos:self._end] (no buffer until the first read)
        self._buffer: mmap.mmap | None = None
        self._pos = 0
        self._end = 0
        self._closed: Close | None = None
        self._limit_name = "socket.request.max.bytes"
        self.principal = ANONYMOUS
        self.listener = "PLAINTEXT"
        self.admitted_keys: frozenset | None = None
        self.raw_frames = False

    def limit_frames(self, max_request_size: int, setting: str) -> None:
        """Frames above ``max_request_size`` bytes close the connection (``setting`` names the
        limit in the reason)."""
        if max_request_size < 0:
            raise ValueError(f"max_request_size must be >= 0, got {max_request_size}")
        self._max_request_size = max_request_size
        self._limit_name = setting

    @property
    def closed(self) -> Close | None:
        return self._closed

    @property
    def buffered(self) -> int:
        """Bytes received and not yet consumed by a returned event."""
        return self._end - self._pos

    def receive_data(self, data: bytes) -> None:
        """Bytes read by the caller (any bytes-like object), copied into the receive buffer."""
        if self._closed is not None or not data:
            return
        view = memoryview(data).cast("B")
        while view:
            room = self.get_buffer(len(view))
            n = min(len(room), len(view))
            room[:n] = view[:n]
            room.release()
            self.buffer_updated(n)
            view = view[n:]

    def get_buffer(self, size_hint: int = -1) -> memoryview:
        """Where the next read goes (``asyncio.BufferedProtocol.get_buffer``): the free end of
        the receive buffer, at least ``size_hint`` (and ``RECEIVE_MIN_READ``) bytes. Unparsed
        bytes move to the front only when the free end is too short, and the buffer grows
        towards the frame being received (a frame above the size limit grows nothing), so a
        large request arrives in a few large reads."""
        buf, end = self._buffer, self._end
        want = size_hint if size_hint > RECEIVE_MIN_READ else RECEIVE_MIN_READ
        if buf is not None and len(buf) - end >= want:
            return memoryview(buf)[end:]
        pos = self._pos
        pending = end - pos
        capacity = max(RECEIVE_BUFFER_BYTES, pending + want)
        if pending >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if 0 <= size <= self._max_request_size:
                # towards the whole frame, but never more than twice the bytes already here
                capacity = max(capacity, min(size + 4, 2 * (pending + want)))
        if buf is not None and len(buf) >= capacity:
            if pending:
                buf.move(0, pos, pending)
        else:
            if buf is not None:
                # a buffer filled with requests not read yet (a busy connection's pipeline, up
                # to the transport's read pause) grows by doubling, not a read's worth at a time
                capacity = max(capacity, 2 * len(buf))
            fresh = mmap.mmap(-1, capacity)
            if pending:
                fresh[:pending] = memoryview(buf)[pos:end]
            self._buffer = buf = fresh
        self._pos, self._end = 0, pending
        return memoryview(buf)[pending:]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the view ``get_buffer`` returned."""
        if self._closed is None:
            self._end += nbytes

    def release_buffer(self) -> None:
        """Drop the receive buffer while nothing is pending in it (an idle connection's memory);
        the next ``get_buffer`` makes a new one."""
        if self._buffer is not None and self._pos >= self._end:
            self._buffer = None
            self._pos = self._end = 0

    def next_event(self) -> Event:
        if self._closed is not None:
            return self._closed
        data, pos, end = self._buffer, self._pos, self._end
        available = end - pos
        if available < 4:
            return NEED_DATA
        size = _SIZE.unpack_from(data, pos)[0]
        if size < 0:
            return self._close(f"invalid request size {size} (negative)")
        if size > self._max_request_size:
            self._closed = Close(f"invalid request size {size}: larger than {self._limit_name} "
                                 f"({self._max_request_size})", oversized=True)
            return self._closed
        if available - 4 < size:
            return NEED_DATA
        start = pos + 4
        self._pos = start + size
        if self._pos == end:
            self._pos = self._end = 0            # the buffer is read from the start again
        if self.raw_frames:
            return RawFrame(bytes(data[start:start + size]))
        view = memoryview(data)[start:start + size]
        if not view.readonly:                    # kio reads read-only buffers only
            writable, view = view, view.toreadonly()
            writable.release()
        try:
            event = self._decode(view, size)
        finally:
            view.release()                       # the buffer is written again by the next read
        if event.__class__ is Close:
            self._closed = event
        return event

    def encode_response(self, request: Request, body) -> bytes:
        return encode_response(request, body)

    def send(self, request: Request, answer) -> Output:
        """What the transport does with a handler's ``answer`` to ``request``: the frame's parts
        to write (``answer`` a kio response body, or an ``EncodedResponse`` passed through as
        is), None when nothing is sent (Produce with acks=0, every partition appended), or a
        ``Close`` (Produce with acks=0 and a partition refused; the connection is then closed
        for good, as Kafka closes it)."""
        if not request.expects_response:
            refused = _refused_partitions(answer)
            if not refused:
                return None
            return self._close(f"Closing connection due to error during produce request with "
                               f"correlation id {request.correlation_id} from client id "
                               f"{request.client_id} with ack=0: {refused}")
        if answer.__class__ is EncodedResponse:
            return answer
        frame = encode_response(request, answer)
        return EncodedResponse([frame], len(frame))

    def _close(self, reason: str) -> Close:
        self._closed = Close(reason)
        return self._closed

    def _decode(self, frame: memoryview, size: int) -> Request | Close:
        if size < 4:
            return Close(f"request of {size} bytes is too short for a request header")
        api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
        if self.admitted_keys is not None and api_key not in self.admitted_keys:
            return Unadmitted(api_key, api_version)
        api = self._apis.get(api_key) if self._apis is not None else None
        if api is None:
            if api_key in api_key_map:
                return Close(f"request for API key {api_key} ({_api_name(api_key)}) v{api_version}, "
                             "an API this broker does not enable")
            return Close(f"unknown API key {api_key} (version {api_version})")

        if api_key == API_VERSIONS_KEY and not api.accepts(api_version):
            # RequestContext.isUnsupportedApiVersionsRequest: header only, answered as v0.
            header_type = RequestHeaderV2 if api_version >= 3 else RequestHeaderV1
            header, _, failure = _kio_read(_reader(header_type), frame, 0)
            if failure:
                stripped = header_as_kafka_reads(frame, size, header_type is RequestHeaderV2)
                if stripped is not None:
                    header, _, failure = _kio_read(_reader(header_type), memoryview(stripped), 0)
            if failure:
                return Close(f"malformed ApiVersions v{api_version} request header: {failure}")
            body = request_schema(API_VERSIONS_KEY, 0)()
            return Request(api_key, api_version, header.correlation_id, header.client_id or "",
                           header, body, size, 0, True, self.principal, self.listener)

        if not api.accepts(api_version):
            if api_key == PRODUCE_KEY and api_version >= 0:
                return Close(f"Produce v{api_version} request: Produce is advertised from v0 for "
                             f"old librdkafka's feature detection but accepted from "
                             f"v{api.accepted_min} only (KAFKA-18659)")
            return Close(f"{api.name} v{api_version} request: enabled versions are "
                         f"{api.accepted_min} to {api.max_version}")

        body_type, header_reader, body_reader = _readers(api_key, api_version)
        header, offset, failure = _kio_read(header_reader, frame, 0)
        if failure:
            # kio refuses the tagged fields a header v2 may carry (it lists none) and a client_id
            # length below -1: Kafka skips the former and reads the latter as null
            stripped = header_as_kafka_reads(frame, size, body_type.__header_schema__.__flexible__)
            if stripped is not None:
                frame = memoryview(stripped)
                header, offset, failure = _kio_read(header_reader, frame, 0)
        if failure:
            return Close(f"malformed {api.name} v{api_version} request header: {failure}")
        end = len(frame)
        key = None
        if api_key in REPEATED_BODY_KEYS and end - offset <= REPEATED_BODY_BYTES:
            key = (body_type, frame[offset:].tobytes())
            body = _BODIES.get(key)
        else:
            body = None
        if body is None:
            try:
                scan(body_type, frame, offset, end)
            except ReadAfterRewrite:
                # tags the schema does not list (Kafka's readers keep them aside and read on), a
                # nullable field's length below -1 (Kafka's null): the body is read as Kafka
                # reads it (a copy, made only for such a body)
                try:
                    frame = memoryview(as_kafka_reads(body_type, frame, offset, end))
                except MalformedRequest as e:
                    return _malformed(api, header, e)
                offset = 0
            except MalformedRequest as e:
                return _malformed(api, header, e)
            body, _, failure = _kio_read(body_reader, frame, offset)
            if failure:
                return _malformed(api, header, failure)
            if key is not None:
                if len(_BODIES) >= REPEATED_BODIES:
                    _BODIES.clear()
                _BODIES[key] = body
        expects_response = api_key != PRODUCE_KEY or body.acks != 0
        return Request(api_key, api_version, header.correlation_id, header.client_id or "",
                       header, body, size, api_version, expects_response, self.principal, self.listener)


# Request bodies read before, by their bytes: a transactional producer sends the very same
# AddPartitionsToTxn and EndTxn body every transaction (only the header's correlation id
# changes), and reading a body is a pure function of its schema and bytes (kio entities are
# frozen), so the same bytes are answered with the entity read the first time, without the
# precheck and kio's reader again. Only those two APIs: Produce's records make every body new,
# and no body that may carry a secret (SASL tokens, SCRAM credentials) is kept; nor is a body
# above REPEATED_BODY_BYTES (the copy a key costs).
REPEATED_BODY_KEYS = frozenset({24, 26})          # AddPartitionsToTxn, EndTxn
REPEATED_BODY_BYTES = 512
REPEATED_BODIES = 512
_BODIES: dict = {}


def encode_response(request: Request, body) -> bytes:
    """The complete response frame (size prefix, response header, body) for ``request``.

    The header version is kio's for the body's schema: v1 for flexible versions, v0 otherwise,
    and v0 for every ApiVersions version. A body of another API or version than the request
    needs, or any answer to a Produce with acks=0, is a programming error (ValueError).
    """
    cls = type(body)
    if not request.expects_response:
        raise ValueError(f"{request!r} expects no response (Produce with acks=0)")
    if (getattr(cls, "__type__", None) is not EntityType.response
            or cls.__api_key__ != request.api_key or cls.__version__ != request.response_version):
        raise ValueError(f"{cls.__qualname__} ({cls.__module__}) does not answer {request!r}, "
                         f"which needs a {request.api_name} v{request.response_version} response")
    encoded = _body_bytes(cls, body)
    # ResponseHeader v0 is the correlation id; v1 adds an empty tagged-field section
    tail = b"\0" if cls.__header_schema__.__flexible__ else b""
    return b"".join((_SIZE.pack(4 + len(tail) + len(encoded)), _SIZE.pack(request.correlation_id), tail, encoded))


RESPONSE_CACHE_ENTRIES = 512
_RESPONSES: dict = {}
# id(body) -> (body, its bytes), for a handler that answers with the very same body object again
# (``apis/transactions.py``'s answers): found without hashing the nested entity. The entry holds
# the body, so its id is not reused while it is there.
_RESPONSES_BY_ID: dict[int, tuple] = {}


def _body_bytes(cls, body) -> bytes:
    """kio's encoding of a response body, from a small cache of the bodies answered before: a
    transactional producer gets the same AddPartitionsToTxn and EndTxn answer for every
    transaction (issue 28: kio's writer was ~6% of a single-record transaction's broker CPU).
    Equal bodies encode to equal bytes (kio entities are frozen dataclasses: equality is the
    class and every field); an unhashable one is encoded each time. A Produce answer (a new base
    offset every time) has a writer of its own (``produce_response``)."""
    if cls.__api_key__ == PRODUCE_KEY:
        encoded = encode_produce_response(body)
        if encoded is not None:
            return encoded
    same = _RESPONSES_BY_ID.get(id(body))
    if same is not None and same[0] is body:
        return same[1]
    try:
        encoded = _RESPONSES.get(body)
    except TypeError:           # a field kio left mutable (a list): no caching
        return _encode_body(cls, body)
    if encoded is None:
        encoded = _encode_body(cls, body)
        if len(encoded) <= 256:
            if len(_RESPONSES) >= RESPONSE_CACHE_ENTRIES:
                _RESPONSES.clear()
            _RESPONSES[body] = encoded
    if len(encoded) <= 256:
        if len(_RESPONSES_BY_ID) >= RESPONSE_CACHE_ENTRIES:
            _RESPONSES_BY_ID.clear()
        _RESPONSES_BY_ID[id(body)] = (body, encoded)
    return encoded


def _encode_body(cls, body) -> bytes:
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    return out.getvalue()


def _refused_partitions(produce_response) -> str:
    """The partitions a Produce answer refused, as Kafka logs them ("t-0 -> INVALID_RECORD")."""
    return ", ".join(f"{t.name}-{p.index} -> {p.error_code.name.upper()}"
                     for t in produce_response.responses for p in t.partition_responses
                     if p.error_code != ErrorCode.none)


def _malformed(api, header, why) -> Close:
    return Close(f"malformed {api.name} v{header.request_api_version} request (correlation id "
                 f"{header.correlation_id}, client id {header.client_id!r}): {why}")


def _kio_read(reader, frame: memoryview, offset: int):
    """(entity, offset after it, None), or (None, offset, why kio could not read it).

    Only the kio call is inside the try: kio's own errors (``kio.serial.errors``), ValueError
    and KeyError from its native reader, OverflowError/ValueError from the Python types it
    builds, and a Rust panic, which pyo3 raises as a BaseException subclass.
    """
    try:
        entity, consumed = reader(frame, offset)
    except Exception as e:
        return None, offset, f"{type(e).__name__}: {e}"
    except BaseException as e:
        if type(e).__name__ == "PanicException":
            return None, offset, f"kio panicked: {e}"
        raise
    return entity, offset + consumed, None


@functools.lru_cache(maxsize=None)
def _reader(entity_type):
    return entity_reader(entity_type)


@functools.lru_cache(maxsize=None)
def _readers(api_key: int, api_version: int):
    body_type = request_schema(api_key, api_version)
    return body_type, _reader(body_type.__header_schema__), _reader(body_type)


@functools.lru_cache(maxsize=None)
def _api_name(api_key: int) -> str:
    """Kafka's name of an API key ("AddPartitionsToTxn"); asked for every request's metrics."""
    name = api_key_map.get(api_key)
    if name is None:
        return f"API key {api_key}"
    return "".join(part.capitalize() for part in name.split("_"))
