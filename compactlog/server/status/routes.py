"""The status page's two routes, for whatever HTTP listener serves them: ``/`` (the HTML page)
and ``/v1/status.json`` (its data). Each handler takes no argument and returns a ``Response``;
the JSON is computed on each request (``status_data``), in the listener's thread, never on the
broker's event loop."""

from __future__ import annotations

import json
from typing import Callable, NamedTuple

from .data import status_data
from .page import STATUS_JSON_PATH, render_status_page

JSON_TYPE = "application/json; charset=utf-8"
HTML_TYPE = "text/html; charset=utf-8"


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes


def status_routes(state, background=None) -> dict[str, Callable[[], Response]]:
    """path -> handler for a broker's ``state`` (a ``BrokerState``) and its cleaner threads
    (``background``, a ``server.background.Background``)."""
    page = render_status_page().encode("utf-8")

    def html() -> Response:
        return Response(200, HTML_TYPE, page)

    def data() -> Response:
        return Response(200, JSON_TYPE, json.dumps(status_data(state, background), separators=(",", ":")).encode("utf-8"))

    return {"/": html, "/" + STATUS_JSON_PATH: data}
