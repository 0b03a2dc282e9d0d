"""The broker's network side on asyncio: Kafka's ``SocketServer`` (acceptor and processors) and
``KafkaRequestHandlerPool`` in one event loop and a pool of worker threads.

One ``protocol.Connection`` per socket turns bytes into requests. A connection's requests are
handled strictly one at a time and answered in order (Kafka mutes a channel until its response is
sent), while other connections go on: each connection has its own task. Handlers that touch
storage run in the worker threads (``num.io.threads``), so the loop never waits on fsync or pread;
Fetch waits on the loop itself for its long poll. While a connection's task waits for bytes, the
requests whose answer needs no wait (an INLINE handler's; a quick handler's: a small produce, a
transaction's AddPartitionsToTxn and EndTxn) are answered in the callback of the read that
completed them, one turn of the loop each; the first one that needs more goes to the task, with
those behind it.

Nothing a client sends can stop the broker: a frame the protocol refuses closes that connection
(logged); an exception in a handler is logged with the request and answered with Kafka's error
code for the API (the API's declared error response, ``ApiHandler.error_body``), or the
connection is closed where the API has no error field. Reading stops while a connection has a
complete request waiting and a megabyte buffered, and a connection whose client does not read its
responses is not answered further until it does (asyncio's write flow control). At shutdown such a
connection is aborted, its unread answers dropped (under TLS, whatever the socket beneath still
holds counts: a graceful TLS close would wait behind it), and so is a connection still in its TLS
handshake, so that none can hold the broker up.

The transport depends on the protocol layer only: it is handed the dispatch table and the
advertised API table (``dispatch.py`` builds both), and what to send for an answer, or whether to
close instead (Produce with acks=0), is the protocol's output (``Connection.send``).

Security (security.md §2-3), per listener: a TLS listener accepts plain TCP and upgrades it with
``loop.start_tls`` from the connection's task, so that a failed handshake is logged and counted
(under ``create_server(ssl=...)`` it would vanish); a verified client certificate gives the
principal. A SASL listener runs the connection's ``SaslAuthenticator`` (sans-IO) ahead of the
dispatch table and applies its steps: answers, the failure delay
(``connection.failed.authentication.delay.ms``) before the answer and the close, the pre-auth
frame limit, session expiry. Every request carries the connection's principal and listener name.
On a TLS connection a Fetch's file regions are read with ``pread`` in a worker thread and written
through the TLS transport: ``sendfile`` cannot encrypt, and asyncio's fallback for it seeks a
descriptor that shares its file position with every other fetch of the segment. Every connection is an
``asyncio.BufferedProtocol``: a PLAINTEXT read is a ``recv_into`` and a TLS read is decrypted,
both straight into the protocol connection's receive buffer, reused from read to read (no bytes
object per read, no join, no copy behind a partial frame); a quiet connection drops it.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import logging
import os
import ssl
import struct
import time
from typing import Callable

from .apis.handler import ASYNC, INLINE, Api, ApiHandler
from .protocol import NEED_DATA, Close, Connection, EncodedResponse, FileRegion, RawFrame, Request, Unadmitted
from .security import sasl as sasl_steps
from .security.redaction import redacted_body
from .state import CLIENT_HOST, BrokerState
from .wire_errors import request_error
from .versions import SupportedApis

log = logging.getLogger("kafka.network.SocketServer")
request_log = logging.getLogger("kafka.server.KafkaApis")
auth_log = logging.getLogger("kafka.network.Selector")

READ_PAUSE_BYTES = 1 << 20
TLS_READ_BYTES = 256 * 1024      # asyncio SSLProtocol's own read size
TLS_WRITE_CHUNK = 1 << 20                 # a region is encrypted and written this much at a time
TLS_HANDSHAKE_TIMEOUT_S = 60.0            # asyncio's default, capped by connections.max.idle.ms
# the most requests one read's callback answers; a client pipelining more (librdkafka allows a
# million in flight) has the rest answered by its task, one turn of the loop each, so that the
# other connections are not kept waiting behind its burst
ANSWERS_PER_READ = 16
_SIZE = struct.Struct(">i")


class BrokerServer:
    """Listeners, connections and the worker pool of one broker."""

    def __init__(self, state: BrokerState, table: dict[int, Api], apis: SupportedApis,
                 executor, *, max_request_size: int, idle_ms: int, security=None, observer=None):
        self.state = state
        self.security = security          # security.listeners.BrokerSecurity, or None: all PLAINTEXT
        # the RequestObserver (server/metrics/requests.py): told of each request's start, its
        # answer and its end, and of each connection; None: nothing is measured
        self.observer = observer
        self.table = table
        self.apis = apis
        self.executor = executor
        self.max_request_size = max_request_size
        self.idle_ms = idle_ms
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[BrokerConnection] = set()
        self.stopping = False
        self.bound: list[tuple[str, int]] = []
        self.bound_by_listener: list[tuple[str, int]] = []     # each listener's first socket
        self._idle_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, fn: Callable, *args):
        """Run ``fn(*args)`` in a worker thread, in the calling task's context (the connection's
        client address: ``state.CLIENT_HOST``); an awaitable."""
        return self._loop.run_in_executor(self.executor, contextvars.copy_context().run, fn, *args)

    async def start(self, listeners) -> list[tuple[str, int]]:
        self._loop = asyncio.get_running_loop()
        for listener in listeners:
            host = listener.host or None        # "" = every interface, as Kafka's
            sec = self.security.listener(listener.name) if self.security is not None else None
            server = await self._loop.create_server(lambda sec=sec: BrokerConnection(self, sec), host,
                                                    listener.port, reuse_address=True, backlog=512)
            self.servers.append(server)
            for i, sock in enumerate(server.sockets):
                addr = sock.getsockname()
                self.bound.append((addr[0], addr[1]))
                if i == 0:
                    self.bound_by_listener.append((addr[0], addr[1]))
                if sec is not None and sec.protocol != "PLAINTEXT":
                    log.info(f"Listener {listener.name} ({sec.protocol}) on {addr[0]}:{addr[1]}")
                log.info(f"Awaiting socket connections on {addr[0]}:{addr[1]}.")
        if self.idle_ms > 0:
            self._idle_task = self._loop.create_task(self._close_idle())
        return self.bound

    async def _close_idle(self) -> None:
        interval = max(min(self.idle_ms / 1000 / 4, 30.0), 0.05)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for c in list(self.connections):
                if c.busy:
                    continue
                quiet_s = now - c.last_active
                if quiet_s * 1000 > self.idle_ms:
                    log.debug(f"Closing idle connection from {c.peer} (connections.max.idle.ms="
                              f"{self.idle_ms})")
                    c.close()
                elif quiet_s > interval:
                    c.conn.release_buffer()     # a quiet connection holds no receive buffer

    async def stop(self, grace_s: float = 5.0) -> None:
        """Kafka's SocketServer shutdown, bounded: stop accepting, let the requests in flight
        finish for at most ``grace_s`` seconds (long polls and parked joins answer at once), drop
        the answers of clients that stopped reading, then close every connection. A client that
        reads nothing never holds the broker up: its connection is aborted as soon as the broker
        would wait to write to it."""
        self.stopping = True
        for server in self.servers:
            server.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        self.state.closing.set()
        self.state.appends.wake_all()           # long polls answer now
        for c in list(self.connections):
            c.wake()
            if c.handshaking:
                # nothing is owed to a client still in the TLS handshake (one that sent nothing,
                # or stopped reading the server's hello): it would hold the grace period up
                c.task.cancel()
                c.abort("the broker is shutting down; a TLS handshake in progress is dropped")
            elif c.write_blocked:
                c.abort("the broker is shutting down and the client does not read its answers")
            elif c.sending_file and c.task is not None:
                c.task.cancel()         # a sendfile waits for the socket, not for the transport
                c.abort("the broker is shutting down; an answer being sent is dropped")
        tasks = [c.task for c in self.connections if c.task is not None and not c.task.done()]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                log.info(f"Shutting down with {len(pending)} request(s) still in flight after "
                         f"{grace_s:g} s; their connections are closed unanswered")
                await asyncio.wait(pending, timeout=1)
        for c in list(self.connections):
            if c.unsent_bytes:
                c.abort("the broker is shutting down; unread answers dropped")
            else:
                c.close()
        for server in self.servers:
            await server.wait_closed()


class BrokerConnection(asyncio.BufferedProtocol):
    """One client connection (Kafka's KafkaChannel on a Processor).

    Each read goes straight into the protocol connection's receive buffer (``get_buffer``):
    asyncio's socket transport calls ``recv_into`` on it, its SSL layer decrypts into it. Nothing
    is read on a TLS connection before ``start_tls`` takes the socket (``connection_made`` pauses
    reading)."""

    def __init__(self, server: BrokerServer, security=None):
        self.server = server
        self.security = security          # the listener's ListenerSecurity, or None (PLAINTEXT)
        self.transport: asyncio.Transport | None = None
        # the socket's own transport; under TLS ``transport`` is asyncio's SSL layer above it
        self.raw_transport: asyncio.Transport | None = None
        self.handshaking = False        # in the TLS handshake (``_start_tls``)
        self.conn = Connection(server.apis, server.max_request_size)
        if security is not None:
            self.conn.listener = security.name
        self.tls = security is not None and security.uses_tls
        self.sasl: sasl_steps.SaslAuthenticator | None = None
        self.peer = "?"
        self.task: asyncio.Task | None = None
        self.busy = False
        self.lost = False
        self.eof = False
        self.paused = False
        self.last_active = time.monotonic()
        self.sending_file = False       # in loop.sendfile, which waits for the client to read
        self._data_ready = asyncio.Event()
        self._can_write: asyncio.Future | None = None
        # the task is parked waiting for bytes: a read's callback may answer quick requests itself
        self.idle = False
        # what a read's callback took and left to the task, in order: a coroutine that answers it
        self._pending = None
        self._context: contextvars.Context | None = None     # the client's (CLIENT_HOST), for handlers

    # -- asyncio callbacks
    def connection_made(self, transport) -> None:
        self.transport = self.raw_transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        if self.server.observer is not None:
            self.server.observer.connection_opened(self)
        # the connection's task inherits this context: its handlers see the client's address
        CLIENT_HOST.set(f"/{peer[0]}" if peer else "")
        self._context = contextvars.copy_context()
        if self.tls:
            transport.pause_reading()       # nothing is read before start_tls takes the socket
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        # TLS: room for asyncio's whole decrypting read (its SSL layer hints only the encrypted
        # bytes pending), as when the TLS figures of benchmarks/broker.py --security were taken
        return self.conn.get_buffer(TLS_READ_BYTES if self.tls and sizehint < TLS_READ_BYTES else sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.conn.buffer_updated(nbytes)
        self.last_active = time.monotonic()
        if self.idle:
            self._answer_here()
        else:
            self._data_ready.set()
        if self.busy and not self.paused and self.conn.buffered > READ_PAUSE_BYTES:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self):
        self.eof = True
        self._data_ready.set()
        # keep the socket for the answers still owed (TLS cannot: a TLS close ends both ways)
        return not self.tls

    def connection_lost(self, exc) -> None:
        self.lost = True
        self._data_ready.set()
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        self.server.connections.discard(self)
        if self.server.observer is not None:
            self.server.observer.connection_closed(self)

    def pause_writing(self) -> None:
        if self._can_write is None or self._can_write.done():
            self._can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)

    # -- helpers
    def wake(self) -> None:
        self._data_ready.set()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    @property
    def write_blocked(self) -> bool:
        """Waiting for the client to read (asyncio's write flow control paused us)."""
        return self._can_write is not None and not self._can_write.done()

    @property
    def unsent_bytes(self) -> int:
        """Bytes written and not yet taken by the client's socket: under TLS, the SSL layer's
        and the socket transport's beneath it (a client that stopped reading leaves them there,
        and a graceful TLS close would wait behind them)."""
        if self.transport is None:
            return 0
        n = self.transport.get_write_buffer_size()
        if self.raw_transport is not None and self.raw_transport is not self.transport:
            n += self.raw_transport.get_write_buffer_size()
        return n

    def abort(self, why: str) -> None:
        """Close now, dropping what the client has not read (asyncio's ``abort``; under TLS it
        aborts the socket's transport too: no close_notify is waited for)."""
        if self.transport is not None and not self.lost:
            log.info(f"Closing connection from {self.peer}: {why}")
            self.transport.abort()

    # -- the request loop
    async def _serve(self) -> None:
        try:
            if self.tls and not await self._start_tls():
                return
            if self.security is not None and self.security.protocol == "PLAINTEXT":
                self.security.stats.successful_authentication += 1      # as Kafka's Selector counts it
            if self.security is not None and self.security.uses_sasl:
                self._start_sasl()
            while not self.lost:
                pending = self._pending
                if pending is not None:     # taken by a read's callback, answered here in its turn
                    self._pending = None
                    self.busy = True
                    try:
                        keep = await pending
                    finally:
                        self.busy = False
                        self.last_active = time.monotonic()
                    if not keep or self.server.stopping:
                        break
                    continue
                event = self.conn.next_event()
                if event is NEED_DATA:
                    if self.eof or self.server.stopping:
                        break
                    if self.paused:
                        self.paused = False
                        self.transport.resume_reading()
                    self._data_ready.clear()
                    self.idle = True
                    try:
                        await self._data_ready.wait()
                    finally:
                        self.idle = False
                    continue
                if event.__class__ is Close:
                    if event.oversized and self.sasl is not None and not self.sasl.authenticated:
                        await self._apply(None, self.sasl.on_oversized(event.reason))
                        break
                    log.info(f"Closing connection from {self.peer}: {event.reason}")
                    break
                self.busy = True
                try:
                    if self.sasl is None:
                        keep = await self._handle(event)
                    else:
                        keep = await self._authenticate(event)
                finally:
                    self.busy = False
                    self.last_active = time.monotonic()
                if not keep:
                    break
                if self.server.stopping:
                    break
        except asyncio.CancelledError:
            pass
        except Exception:       # a bug in this loop: this connection ends, the broker goes on
            log.exception(f"Unexpected error on the connection from {self.peer}; closing it")
        finally:
            if self._pending is not None:       # cancelled at shutdown before its turn
                self._pending.close()
                self._pending = None
            self.close()

    # -- answered in the read's callback (issue 28)
    def _answer_here(self) -> None:
        """Answer, in the callback of the read that completed them, the requests whose answer
        needs no wait (an INLINE handler's, or a quick one's), while the connection's task is
        parked waiting for bytes: the same handlers and answers as the task's, without waking the
        task, its coroutines and a second turn of the loop for each request (issue 28: one turn
        of the loop a request instead of two). The first request that needs more (a worker
        thread, a long poll, a file region, a client that does not read, SASL, a frame the
        protocol refuses) is left with the rest to the task, in order, and so are those behind
        the first ``ANSWERS_PER_READ``."""
        try:
            if self.sasl is None and self._pending is None and not self.server.stopping:
                if self._context.run(self._answer_quick_requests):
                    return
        except Exception:       # a bug here: this connection ends, the broker goes on
            log.exception(f"Unexpected error on the connection from {self.peer}; closing it")
            if self._pending is not None:
                self._pending.close()
            self._pending = self._closing(None)
        # the task's turn: later reads wait for it (and for what it was left) until it waits again
        self.idle = False
        self._data_ready.set()

    def _answer_quick_requests(self) -> bool:
        """True when every complete request was answered (the task may go on waiting)."""
        conn, table, observer = self.conn, self.server.table, self.server.observer
        for _ in range(ANSWERS_PER_READ):
            if self.write_blocked or self.transport.is_closing():
                return False
            event = conn.next_event()
            if event is NEED_DATA:
                return True
            if event.__class__ is Close:
                self._pending = self._closing(event.reason)
                return False
            if event.__class__ is not Request:      # RawFrame, Unadmitted: SASL's, not taken here
                raise RuntimeError(f"unexpected {type(event).__name__} on a connection without SASL")
            api = table.get(event.api_key)
            if api is None or (api.mode != INLINE and api.quick is None):
                self._pending = self._handle(event)
                return False
            timer = observer.request_started(event) if observer is not None else None
            state = self.server.state
            try:
                if api.mode == INLINE:
                    body = api.handler(state, event)
                else:
                    body = self._quick(api, state, event, timer)
                    if body is None:        # more than quick work: the task hands it to a worker
                        self._pending = self._handle(event, timer, quick_tried=True)
                        return False
            except Exception as e:
                body = self._error_body(event, e)
                if body is None:
                    if timer is not None:
                        observer.request_sent(timer)
                    self._pending = self._closing(None)
                    return False
            if timer is not None:
                observer.request_answered(timer, body)
            sent = self._send_now(event, body)
            if sent is not True and sent is not False:      # it has to wait: the task sends it
                self._pending = self._send_rest(sent, timer)
                return False
            if timer is not None:
                observer.request_sent(timer)
            if not sent:
                self._pending = self._closing(None)
                return False
        return False

    async def _closing(self, reason: str | None) -> bool:
        if reason:
            log.info(f"Closing connection from {self.peer}: {reason}")
        return False

    async def _send_rest(self, response: EncodedResponse, timer) -> bool:
        try:
            return await self._send_encoded(response)
        finally:
            if timer is not None:
                self.server.observer.request_sent(timer)

    # -- the task's requests
    async def _handle(self, request: Request, timer=None, quick_tried: bool = False) -> bool:
        """Handle one request and send its answer; False when the connection must close.
        ``timer``: the request's, started where its quick handler was tried (``quick_tried``)."""
        observer = self.server.observer
        if observer is None:
            return await self._respond(request, None, quick_tried)
        if timer is None:
            timer = observer.request_started(request)
        try:
            return await self._respond(request, timer, quick_tried)
        finally:
            observer.request_sent(timer)

    async def _respond(self, request: Request, timer, quick_tried: bool = False) -> bool:
        api = self.server.table.get(request.api_key)
        state = self.server.state
        body = None
        try:
            if api is None:     # the protocol admits only advertised APIs; keep the table honest
                raise RuntimeError(f"no handler for {request.api_name}")
            if api.mode == INLINE:
                body = api.handler(state, request)
            elif api.mode == ASYNC:
                body = await api.handler(state, request, self.server.run if timer is None
                                         else timer.run(self.server.run))
            else:
                if api.quick is not None and not quick_tried:     # small work: answered here, no hand-off
                    body = self._quick(api, state, request, timer)
                if body is not None:
                    pass
                elif timer is None:
                    body = await self.server.run(api.handler, state, request)
                else:
                    body = await self.server.run(timer.in_worker, api.handler, state, request)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            body = self._error_body(request, e)
            if body is None:
                return False        # no error response to give: the connection closes
        if timer is not None:
            self.server.observer.request_answered(timer, body)
        return await self._answer(request, body)

    def _error_body(self, request: Request, e: Exception):
        """A handler's exception, logged with its request, as the API's error answer: Kafka's
        code for it (a storage failure: KAFKA_STORAGE_ERROR, or COORDINATOR_NOT_AVAILABLE for a
        coordinator's API) and a message that names no server file; None for an API without an
        error response (the connection closes)."""
        declared = self.server.apis.get(request.api_key)
        coordinator = isinstance(declared, ApiHandler) and declared.coordinator
        code, message = request_error(e, coordinator, self.server.state.datadir.path)
        request_log.error(f"Error when handling request: clientId={request.client_id}, "
                          f"correlationId={request.correlation_id}, api={request.api_name}, "
                          f"version={request.api_version}, peer={self.peer}, body={redacted_body(request)}",
                          exc_info=(type(e), e, e.__traceback__))
        if not isinstance(declared, ApiHandler):
            return None
        return declared.error_body(request, code, message)

    @staticmethod
    def _quick(api: Api, state, request: Request, timer):
        """A THREAD handler's fast path on the loop (``ApiHandler.quick``): the answer, or None.
        A hand-off to a worker thread costs more than a small append (issue 28: 25% of produce
        samples were ``ThreadPoolExecutor.submit``); the handler's own check keeps fsync, rolls
        and big batches off the loop."""
        if timer is None:
            return api.quick(state, request)
        begun = time.perf_counter()
        body = api.quick(state, request)
        if body is not None:
            timer.local += time.perf_counter() - begun
        return body

    async def _answer_observed(self, request: Request, body) -> bool:
        """Send an answer made here (SASL steps), measured as a handled request is."""
        observer = self.server.observer
        if observer is None:
            return await self._answer(request, body)
        timer = observer.request_started(request)
        try:
            observer.request_answered(timer, body)
            return await self._answer(request, body)
        finally:
            observer.request_sent(timer)

    async def _answer(self, request: Request, body) -> bool:
        """Send an answer; False when the connection must close."""
        sent = self._send_now(request, body)
        if sent is True or sent is False:
            return sent
        return await self._send_encoded(sent)

    def _send_now(self, request: Request, body):
        """Encode an answer and write it if nothing has to wait: True (written, or nothing to
        send), False (the connection must close), or the encoded answer when it has to wait (a
        file region, or a client that does not read its answers)."""
        out = self.conn.send(request, body)
        if out is None:
            return True             # acks=0: nothing to send
        if out.__class__ is Close:
            # acks=0 with a partition refused: closed, so that the producer notices
            request_log.info(out.reason)
            return False
        if self.lost or self.transport.is_closing():
            out.close()
            return False
        parts = out.parts
        if self.write_blocked:
            return out
        for part in parts:
            if part.__class__ is FileRegion:
                return out
        write = self.transport.write
        for part in parts:
            write(part)
        return True

    async def _send_encoded(self, response: EncodedResponse) -> bool:
        try:
            await self._send_parts(response)
        except (ConnectionError, OSError) as e:
            log.debug(f"Connection from {self.peer} failed while answering: {e}")
            return False
        return True

    async def _send_parts(self, response: EncodedResponse) -> None:
        loop = asyncio.get_running_loop()
        try:
            for part in response.parts:
                if self.lost or self.transport.is_closing():
                    raise ConnectionResetError("connection closed")
                if self.write_blocked:
                    if self.server.stopping:
                        self.abort("the broker is shutting down and the client does not read its answers")
                        raise ConnectionResetError("shutting down: the client does not read")
                    await self._can_write
                if isinstance(part, FileRegion):
                    if self.tls:
                        await self._write_region(part)
                        continue
                    self.sending_file = True
                    try:
                        with io.FileIO(part.fd, "rb", closefd=False) as f:
                            sent = await loop.sendfile(self.transport, f, part.offset, part.count)
                    finally:
                        self.sending_file = False
                    if sent != part.count:
                        # the frame promised count bytes: the stream is unusable now
                        raise ConnectionResetError(f"sendfile sent {sent} of {part.count} bytes")
                else:
                    self.transport.write(part)
        finally:
            response.close()

    async def _write_region(self, region: FileRegion) -> None:
        """A file region through TLS: read with pread (no shared file position) in a worker
        thread, encrypted and written a chunk at a time, waiting whenever the client is slow."""
        data = await self.server.run(region.read)
        view = memoryview(data)
        for start in range(0, len(view), TLS_WRITE_CHUNK):
            if self.lost or self.transport.is_closing():
                raise ConnectionResetError("connection closed")
            if self.write_blocked:
                if self.server.stopping:
                    self.abort("the broker is shutting down and the client does not read its answers")
                    raise ConnectionResetError("shutting down: the client does not read")
                await self._can_write
            self.transport.write(view[start:start + TLS_WRITE_CHUNK])

    # -- security --------------------------------------------------------------------------------
    async def _start_tls(self) -> bool:
        """The TLS handshake (``SslTransportLayer.handshake``); a failure is logged and counted as a
        failed authentication, and the connection closed at once, as Kafka's ``Selector`` does."""
        sec = self.security
        timeout = TLS_HANDSHAKE_TIMEOUT_S
        if self.server.idle_ms > 0:
            timeout = min(timeout, self.server.idle_ms / 1000)
        loop = asyncio.get_running_loop()
        self.handshaking = True
        try:
            self.transport = await loop.start_tls(self.transport, self, sec.tls.context, server_side=True,
                                                  ssl_handshake_timeout=timeout)
        except asyncio.CancelledError:
            raise
        except ssl.SSLError as e:
            sec.stats.failed_authentication += 1
            why = getattr(e, "verify_message", None) or e.reason or type(e).__name__
            auth_log.info(f"Failed authentication with /{self.peer} (SSL handshake failed: {why})")
            return False
        except (OSError, asyncio.TimeoutError, ConnectionError) as e:
            auth_log.info(f"Connection from /{self.peer} ended during the SSL handshake "
                          f"({type(e).__name__}{': ' + str(e) if str(e) else ''})")
            return False
        finally:
            self.handshaking = False
        if self.lost:
            return False
        # a bigger buffer than asyncio's 64 KiB keeps large fetch answers flowing
        self.transport.set_write_buffer_limits(high=4 * TLS_WRITE_CHUNK)
        ssl_object = self.transport.get_extra_info("ssl_object")
        if sec.tls.context.verify_mode != ssl.CERT_NONE and not sec.uses_sasl:
            from .security.tls import subject_dn
            principal = self.server.security.principal_from_certificate(sec, subject_dn(ssl_object))
            if principal is None:
                sec.stats.failed_authentication += 1
                auth_log.info(f"Failed authentication with /{self.peer} (no ssl.principal.mapping.rules "
                              f"rule applies to the certificate's subject)")
                return False
            self.conn.principal = principal
        if not sec.uses_sasl:
            sec.stats.successful_authentication += 1
        return True

    def _start_sasl(self) -> None:
        sec = self.security
        security = self.server.security
        self.sasl = sasl_steps.SaslAuthenticator(
            sec.mechanisms, sec.new_server, reauth_ms=lambda m: sec.reauth_ms.get(m, 0),
            max_receive_size=security.max_receive_size, stats=sec.stats)
        self._sync_sasl()

    def _sync_sasl(self) -> None:
        """Apply the authenticator's state to the protocol connection."""
        sasl, conn = self.sasl, self.conn
        conn.admitted_keys = sasl.admitted_keys
        conn.raw_frames = sasl.raw_frames
        conn.principal = sasl.principal
        limit = sasl.max_frame
        if limit is None:
            conn.limit_frames(self.server.max_request_size, "socket.request.max.bytes")
        else:
            conn.limit_frames(limit, "sasl.server.max.receive.size")

    async def _authenticate(self, event) -> bool:
        """One event through the SASL authenticator; False when the connection must close."""
        sasl = self.sasl
        cls = event.__class__
        if cls is RawFrame:
            step = await self.server.run(sasl.on_raw_frame, event.data)
        elif cls is Unadmitted:
            step = sasl.on_unadmitted(event.api_key, event.api_name)
        elif event.api_key == sasl_steps.SASL_AUTHENTICATE_KEY and sasl.state is not sasl_steps.State.COMPLETE:
            step = await self.server.run(sasl.on_request, event)      # PLAIN may cost a PBKDF2
        else:
            step = sasl.on_request(event)
        self._sync_sasl()
        return await self._apply(event if cls is Request else None, step)

    async def _apply(self, request: Request | None, step) -> bool:
        action = step.action
        if action is sasl_steps.DISPATCH:
            return await self._handle(request)
        if action is sasl_steps.SEND:
            return await self._answer_observed(request, step.body)
        if action is sasl_steps.SEND_RAW:
            self.transport.write(_SIZE.pack(len(step.token)) + step.token)
            return True
        if action is sasl_steps.CLOSE:
            log.info(f"Closing connection from {self.peer}: {step.reason}")
            return False
        # FAIL: Selector.maybeDelayCloseOnAuthenticationFailure: the answer and the close wait
        auth_log.info(f"Failed authentication with /{self.peer} ({step.reason})")
        self.transport.pause_reading()
        delay = self.server.security.failed_authentication_delay_ms if self.server.security else 0
        if delay:
            await asyncio.sleep(delay / 1000)
        body = step.body
        if body is None and step.error_code is not None and request is not None:
            declared = self.server.apis.get(request.api_key)
            if isinstance(declared, ApiHandler):
                body = declared.error_body(request, step.error_code, step.message)
        if body is not None and request is not None and not self.lost:
            await self._answer_observed(request, body)
        return False


def pid_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process, from /proc (for the broker's own log line)."""
    with open(f"/proc/{pid or os.getpid()}/stat", "rb") as f:
        fields_ = f.read().rsplit(b")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields_[11]) + int(fields_[12])) / ticks
