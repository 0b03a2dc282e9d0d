"""The broker's HTTP listener (``metrics.listener``): one routing table for /metrics, the health
endpoints and any page that plugs in.

Routing: ``HttpListener.routes`` maps an exact path to a handler, ``handler(request) ->
HttpResponse``, where ``request`` is an ``HttpRequest`` (method, path, query, lower-cased
headers, and ``context``: the broker's ``BrokerMetrics``, which gives ``state`` (the
``BrokerState``: data dir, logs, groups), ``background`` (cleaner threads, ``activity``),
``manager`` (the ``CleanerManager``), ``lifecycle`` and the registry). Add a page with
``listener.register_route("/", handler)`` (before or after ``start``); a path nobody registered
answers 404. The status page plugs in this way::

    from compactlog.server.metrics.listener import HttpResponse, json_response
    def page(request):
        return HttpResponse(200, render_status_page(request.context).encode(), "text/html; charset=utf-8")
    listener.register_route("/", page)
    listener.register_route("/v1/status/data", lambda r: json_response(200, status_data(r.context)))

``BrokerMetrics.http`` is the broker's listener (None when ``metrics.listener`` is empty).
Handlers run in the listener's own threads, never on the Kafka listener's event loop: they read
the broker's state under the locks the broker uses (as the metrics collectors do) and must not
block for long. Only GET and HEAD are served.

Serving: the standard library's WSGI server with a thread per request (``ThreadingMixIn``, as
prometheus_client's own ``start_http_server``), in a daemon thread; the address is loopback unless
``metrics.listener.allow.non.loopback`` is set (the endpoint has no TLS or authentication, and its
output names topics: metrics.md §6).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Callable
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ...errors import ConfigError

log = logging.getLogger("kafka.server.MetricsListener")

SETTING = "metrics.listener"
ALLOW_SETTING = "metrics.listener.allow.non.loopback"


@dataclass
class HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]                 # lower-cased names
    context: object = None


@dataclass
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def json_response(status: int, obj) -> HttpResponse:
    return HttpResponse(status, (json.dumps(obj, sort_keys=True) + "\n").encode("utf-8"), "application/json")


_REASONS = {200: "OK", 204: "No Content", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}


def parse_listener(value: str, allow_non_loopback: bool = False) -> tuple[str, int] | None:
    """``host:port`` (``http://`` allowed before it, ``[v6]:port`` for IPv6; port 0: any free
    port) as (host, port); None for an empty value (no listener). A host that is not a loopback
    address is refused unless ``allow_non_loopback``."""
    text = (value or "").strip()
    if not text:
        return None
    if text.startswith("http://"):
        text = text[len("http://"):].rstrip("/")
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(f"invalid value {value!r} for configuration {SETTING}: expected host:port "
                          f"(such as 127.0.0.1:9644), or nothing for no listener")
    if not allow_non_loopback and not _is_loopback(host):
        raise ConfigError(f"invalid value {value!r} for configuration {SETTING}: {host} is not a loopback "
                          f"address; the endpoint has no TLS or authentication and names every topic, so "
                          f"binding another address needs {ALLOW_SETTING}=true")
    return host, int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr (the broker's log is Kafka's format, and scrapes are frequent)."""

    def log_message(self, format, *args):   # noqa: A002 - the standard library's signature
        pass


class HttpListener:
    def __init__(self, host: str, port: int, context=None):
        self.host = host
        self.port = port
        self.context = context
        self.routes: dict[str, Callable[[HttpRequest], HttpResponse]] = {}
        self._server = None
        self._thread: threading.Thread | None = None

    def register_route(self, path: str, handler: Callable[[HttpRequest], HttpResponse]) -> None:
        """Serve ``path`` (exact match, query string aside) with ``handler``; replaces an earlier one."""
        self.routes[path] = handler

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def bind(self) -> tuple[str, int]:
        """Bind the address (an ``OSError`` when it cannot be), without serving yet; the bound
        (host, port). The broker binds before it creates or locks its data dir, so that a port it
        cannot have refuses the start with nothing left behind."""
        if self._server is None:
            cls = _Server6 if ":" in self.host else _Server
            self._server = make_server(self.host, self.port, self.app, server_class=cls,
                                       handler_class=_QuietHandler)
            self.port = self._server.server_address[1]
        return self.host, self.port

    def start(self) -> tuple[str, int]:
        """Bind (unless bound already) and serve in a daemon thread; the bound (host, port)."""
        self.bind()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True, name="metrics-listener")
        self._thread.start()
        return self.host, self.port

    def stop(self) -> None:
        """Stop serving and close the socket (a listener bound but never started is closed)."""
        if self._server is not None:
            if self._thread is not None:        # shutdown() waits for serve_forever: only once it runs
                self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    # -- WSGI
    def app(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/") or "/"
        handler = self.routes.get(path)
        if method not in ("GET", "HEAD"):
            response = HttpResponse(405, b"only GET and HEAD are served\n", headers=[("Allow", "GET, HEAD")])
        elif handler is None:
            response = HttpResponse(404, f"no page at {path}; try /metrics\n".encode())
        else:
            headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
            request = HttpRequest(method, path, parse_qs(environ.get("QUERY_STRING", "")), headers, self.context)
            try:
                response = handler(request)
            except Exception:           # a page's bug answers 500 (the broker's log has why); the listener goes on
                log.exception(f"Error while answering GET {path}")
                response = HttpResponse(500, f"error while answering {path}; the broker's log says why\n".encode())
        body = b"" if method == "HEAD" else response.body
        headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body))),
                   ("Cache-Control", "no-store"), *response.headers]
        start_response(f"{response.status} {_REASONS.get(response.status, '')}".rstrip(), headers)
        return [body]
