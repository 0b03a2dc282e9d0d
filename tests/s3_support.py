"""A real S3 API on loopback for the remote-tier tests: moto's server mode, and a fault proxy.

``MotoS3`` starts moto's ``ThreadedMotoServer`` on 127.0.0.1 with port 0 (the kernel picks a free
one) in the test process, so it outlives anything the test kills; ``stop()`` ends it and is
called by the module fixture at the end. moto accepts any access key and secret; buckets need
three characters or more. Its state lives in this process's memory: it survives ``stop()`` and
``start()`` (the test server is the same object), and ``reset()`` clears it.

``FaultProxy`` stands between a client and moto, at the HTTP level: requests pass through unless
a rule answers them with a status (403, 503, ...), cuts a response body short, or the proxy
refuses connections altogether (``refuse()``: the listening socket is closed, so a connect gets
ECONNREFUSED, as from a store that went away; ``accept()`` listens again on the same port).
Every request it sees is logged (method, path, query), so a test can count what a client sent.

The fixtures ``moto`` (one server a test module) and ``bucket`` (a fresh bucket a test) are
imported by the modules that use them.
"""

from __future__ import annotations

import http.client
import logging
import socket
import sys
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

import pytest

ACCESS_KEY = "testing-key-id"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"


def _writes_one_at_a_time(app):
    """moto's WSGI app with its writes serialized. moto checks a PUT's If-Match / If-None-Match and
    stores the object in two steps, and its server runs requests on threads: two racing
    conditional writes could both pass the check (a lost update a loaded machine showed, 1 of 20
    increments). S3 makes a conditional write atomic; with one write at a time, so does moto.
    Reads stay concurrent."""
    lock = threading.Lock()

    def serve(environ, start_response):
        if environ.get("REQUEST_METHOD") not in ("PUT", "POST", "DELETE"):
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))      # the whole write inside the lock
    return serve


def _patch_moto_server() -> None:
    from moto.moto_server import threaded_moto_server as tms
    if getattr(tms.make_server, "compactlog_serialized", False):
        return
    make_server = tms.make_server

    def serialized(host, port, app, *args, **kwargs):
        return make_server(host, port, _writes_one_at_a_time(app), *args, **kwargs)
    serialized.compactlog_serialized = True
    tms.make_server = serialized


class MotoS3:
    """moto's S3 on 127.0.0.1:<free port>, its writes atomic as S3's (``_writes_one_at_a_time``)."""

    def __init__(self):
        from moto.server import ThreadedMotoServer
        _patch_moto_server()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)     # one line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""
        self.running = False

    def start(self) -> "MotoS3":
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.running = True
        return self

    def stop(self) -> None:
        if self.running:
            self._server.stop()
            self.running = False

    def reset(self) -> None:
        """Forget every bucket and object (moto's ``POST /moto-api/reset``)."""
        u = urlsplit(self.endpoint)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request("POST", "/moto-api/reset")
            conn.getresponse().read()
        finally:
            conn.close()

    def client(self, endpoint: str | None = None):
        """A boto3 S3 client on the server (or on ``endpoint``, e.g. a proxy in front of it)."""
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def properties(self, bucket: str, endpoint: str | None = None, **extra: str) -> dict[str, str]:
        """The broker settings (Aiven's names) that point a store at this server."""
        props = {
            "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
            "rsm.config.storage.s3.bucket.name": bucket,
            "rsm.config.storage.s3.region": REGION,
            "rsm.config.storage.s3.endpoint.url": endpoint or self.endpoint,
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": ACCESS_KEY,
            "rsm.config.storage.aws.secret.access.key": SECRET_KEY,
            # a dead store must fail a test in well under a second, not after the default retries
            "rsm.config.storage.s3.api.call.timeout": "3000",
            "rsm.config.storage.s3.api.call.attempt.timeout": "2000",
            "compactlog.remote.store.max.retries": "1",
        }
        props.update(extra)
        return props


@pytest.fixture(scope="module")
def moto():
    server = MotoS3().start()
    yield server
    server.stop()


@pytest.fixture
def bucket(moto):
    name = f"b-{uuid.uuid4().hex[:12]}"
    moto.create_bucket(name)
    return name


@dataclass
class Rule:
    """Answer matching requests with ``status`` (or cut the body after ``cut_after`` bytes)
    ``times`` times (None: always)."""

    match: Callable[[str, str, str], bool]          # (method, path, query) -> bool
    status: int | None = None
    cut_after: int | None = None
    drop: bool = False                               # hang up without an answer
    lose_answer: bool = False                        # pass the request on, then hang up: done, unanswered
    times: int | None = None
    hits: int = 0


@dataclass
class FaultProxy:
    """An HTTP proxy on 127.0.0.1:<free port> in front of ``upstream`` (see the module docstring)."""

    upstream: str
    rules: list[Rule] = field(default_factory=list)
    log: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._connections: set = set()
        self._server = None
        self._thread = None
        self.port = 0
        self.accept()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def accept(self) -> None:
        """Listen (again, on the same port once one was picked)."""
        if self._server is not None:
            return
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):       # quiet
                pass

            def setup(self):
                super().setup()
                with proxy._lock:
                    proxy._connections.add(self.connection)

            def finish(self):
                with proxy._lock:
                    proxy._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _handle(self):
                proxy._forward(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

            def handle_error(self, request, client_address):
                # a client that hangs up (the store refused, a command that gave up) is expected:
                # socketserver's traceback would land in the stderr an in-process command's
                # test reads (tests that assert "no traceback" failed on it)
                if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    return
                super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()

    def refuse(self) -> None:
        """Stop listening and hang up every open connection: new connections are refused
        (ECONNREFUSED), kept-alive ones are gone, as when a store goes away."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self._thread.join(timeout=10)
        with self._lock:
            connections = list(self._connections)
        for c in connections:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    close = refuse

    def fail(self, match: Callable[[str, str, str], bool], status: int = 503, times: int | None = None) -> Rule:
        rule = Rule(match, status=status, times=times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def cut(self, match: Callable[[str, str, str], bool], after: int, times: int | None = None) -> Rule:
        rule = Rule(match, cut_after=after, times=times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def drop(self, match: Callable[[str, str, str], bool], times: int | None = None) -> Rule:
        rule = Rule(match, drop=True, times=times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def lose_answer(self, match: Callable[[str, str, str], bool], times: int | None = None) -> Rule:
        """Requests that reach the store (a write lands) whose answer never comes back: the
        connection is hung up instead, as by a network cut after the server acted."""
        rule = Rule(match, lose_answer=True, times=times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _rule_for(self, method: str, path: str, query: str) -> Rule | None:
        with self._lock:
            self.log.append((method, path, query))
            for rule in self.rules:
                if (rule.times is None or rule.hits < rule.times) and rule.match(method, path, query):
                    rule.hits += 1
                    return rule
        return None

    def _forward(self, h: BaseHTTPRequestHandler) -> None:
        try:
            self._forward1(h)
        except OSError:          # the client hung up first: nothing to answer
            h.close_connection = True

    @staticmethod
    def _hang_up(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _forward1(self, h: BaseHTTPRequestHandler) -> None:
        path, _, query = h.path.partition("?")
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        rule = self._rule_for(h.command, path, query)
        if rule is not None and rule.drop:
            self._hang_up(h)
            return
        if rule is not None and rule.status is not None:
            payload = f"<Error><Code>Injected{rule.status}</Code></Error>".encode()
            h.send_response(rule.status)
            h.send_header("Content-Type", "application/xml")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        u = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in ("connection", "keep-alive")}
            conn.request(h.command, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError:
            self._hang_up(h)        # the store behind is gone: so is the answer
            return
        finally:
            conn.close()
        if rule is not None and rule.lose_answer:
            self._hang_up(h)
            return
        h.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"):
                h.send_header(k, v)
        if h.command == "HEAD":       # no body: the upstream length describes the object
            h.send_header("Content-Length", resp.getheader("Content-Length") or "0")
            h.end_headers()
            return
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if rule is not None and rule.cut_after is not None:
            # promise the whole body, send part of it, hang up: a torn response
            h.wfile.write(data[:rule.cut_after])
            h.wfile.flush()
            self._hang_up(h)
            return
        h.wfile.write(data)
