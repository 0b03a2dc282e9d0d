"""The broker's network side on asyncio: Kafka's ``SocketServer`` (acceptor and processors) and
``KafkaRequestHandlerPool`` in one event loop and a pool of worker threads.

One ``protocol.Connection`` per socket turns bytes into requests. A connection's requests are
handled strictly one at a time and answered in order (Kafka mutes a channel until its response is
sent), while other connections go on: each connection has its own task. Handlers that touch
storage run in the worker threads (``num.io.threads``), so the loop never waits on fsync or pread;
Fetch waits on the loop itself for its long poll.

Nothing a client sends can stop the broker: a frame the protocol refuses closes that connection
(logged); an exception in a handler is logged with the request and answered with Kafka's error
code for the API (the API's declared error response, ``ApiHandler.error_body``), or the
connection is closed where the API has no error field. Reading stops while a connection has a
complete request waiting and a megabyte buffered, and a connection whose client does not read its
responses is not answered further until it does (asyncio's write flow control). At shutdown such a
connection is aborted, its unread answers dropped, so that it cannot hold the broker up.

The transport depends on the protocol layer only: it is handed the dispatch table and the
advertised API table (``dispatch.py`` builds both), and what to send for an answer, or whether to
close instead (Produce with acks=0), is the protocol's output (``Connection.send``).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from typing import Callable

from .apis.handler import ASYNC, INLINE, Api, ApiHandler
from .protocol import NEED_DATA, Close, Connection, EncodedResponse, FileRegion, Request
from .state import CLIENT_HOST, BrokerState
from .wire_errors import request_error
from .versions import SupportedApis

log = logging.getLogger("kafka.network.SocketServer")
request_log = logging.getLogger("kafka.server.KafkaApis")

READ_PAUSE_BYTES = 1 << 20


class BrokerServer:
    """Listeners, connections and the worker pool of one broker."""

    def __init__(self, state: BrokerState, table: dict[int, Api], apis: SupportedApis,
                 executor, *, max_request_size: int, idle_ms: int):
        self.state = state
        self.table = table
        self.apis = apis
        self.executor = executor
        self.max_request_size = max_request_size
        self.idle_ms = idle_ms
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[BrokerConnection] = set()
        self.stopping = False
        self.bound: list[tuple[str, int]] = []
        self._idle_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, fn: Callable, *args):
        """Run ``fn(*args)`` in a worker thread; an awaitable."""
        return self._loop.run_in_executor(self.executor, fn, *args)

    async def start(self, listeners) -> list[tuple[str, int]]:
        self._loop = asyncio.get_running_loop()
        for listener in listeners:
            host = listener.host or None        # "" = every interface, as Kafka's
            server = await self._loop.create_server(lambda: BrokerConnection(self), host,
                                                    listener.port, reuse_address=True, backlog=512)
            self.servers.append(server)
            for sock in server.sockets:
                addr = sock.getsockname()
                self.bound.append((addr[0], addr[1]))
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
                if not c.busy and (now - c.last_active) * 1000 > self.idle_ms:
                    log.debug(f"Closing idle connection from {c.peer} (connections.max.idle.ms="
                              f"{self.idle_ms})")
                    c.close()

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
            if c.write_blocked:
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


class BrokerConnection(asyncio.Protocol):
    """One client connection (Kafka's KafkaChannel on a Processor)."""

    def __init__(self, server: BrokerServer):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.conn = Connection(server.apis, server.max_request_size)
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

    # -- asyncio callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        # the connection's task inherits this context: its handlers see the client's address
        CLIENT_HOST.set(f"/{peer[0]}" if peer else "")
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        self.last_active = time.monotonic()
        self._data_ready.set()
        if self.busy and not self.paused and self.conn.buffered > READ_PAUSE_BYTES:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self):
        self.eof = True
        self._data_ready.set()
        return True         # keep the socket for the answers still owed

    def connection_lost(self, exc) -> None:
        self.lost = True
        self._data_ready.set()
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        self.server.connections.discard(self)

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
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def abort(self, why: str) -> None:
        """Close now, dropping what the client has not read (asyncio's ``abort``)."""
        if self.transport is not None and not self.lost:
            log.info(f"Closing connection from {self.peer}: {why}")
            self.transport.abort()

    # -- the request loop
    async def _serve(self) -> None:
        try:
            while not self.lost:
                event = self.conn.next_event()
                if event is NEED_DATA:
                    if self.eof or self.server.stopping:
                        break
                    if self.paused:
                        self.paused = False
                        self.transport.resume_reading()
                    self._data_ready.clear()
                    await self._data_ready.wait()
                    continue
                if event.__class__ is Close:
                    log.info(f"Closing connection from {self.peer}: {event.reason}")
                    break
                self.busy = True
                try:
                    keep = await self._handle(event)
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
            self.close()

    async def _handle(self, request: Request) -> bool:
        """Handle one request and send its answer; False when the connection must close."""
        api = self.server.table.get(request.api_key)
        state = self.server.state
        body = None
        try:
            if api is None:     # the protocol admits only advertised APIs; keep the table honest
                raise RuntimeError(f"no handler for {request.api_name}")
            if api.mode == INLINE:
                body = api.handler(state, request)
            elif api.mode == ASYNC:
                body = await api.handler(state, request, self.server.run)
            else:
                body = await self.server.run(api.handler, state, request)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # Kafka's code for it (a storage failure: KAFKA_STORAGE_ERROR, or COORDINATOR_NOT_AVAILABLE
            # for a coordinator's API) and a message that names no server file
            code, message = request_error(e, request.api_key, state.datadir.path)
            request_log.error(f"Error when handling request: clientId={request.client_id}, "
                              f"correlationId={request.correlation_id}, api={request.api_name}, "
                              f"version={request.api_version}, peer={self.peer}, body={request.body!r}",
                              exc_info=True)
            declared = self.server.apis.get(request.api_key)
            if not isinstance(declared, ApiHandler):
                return False        # no error response to give: the connection closes
            body = declared.error_body(request, code, message)
        out = self.conn.send(request, body)
        if out is None:
            return True             # acks=0: nothing to send
        if out.__class__ is Close:
            # acks=0 with a partition refused: closed, so that the producer notices
            request_log.info(out.reason)
            return False
        if self.lost:
            out.close()
            return False
        try:
            await self._send_parts(out)
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


def pid_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process, from /proc (for the broker's own log line)."""
    with open(f"/proc/{pid or os.getpid()}/stat", "rb") as f:
        fields_ = f.read().rsplit(b")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields_[11]) + int(fields_[12])) / ticks
