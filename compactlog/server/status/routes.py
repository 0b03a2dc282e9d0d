"""The status page on the broker's HTTP listener (``metrics.listener``): ``/`` serves the page,
``/v1/status.json`` its data. ``register_status_page`` adds both to a ``metrics.HttpListener``,
whose ``context`` (the broker's ``BrokerMetrics``) gives the ``state`` and ``background`` to read.

Handlers run in the listener's threads, never on the Kafka listener's event loop; the data is
computed per request (``status_data``: in memory, no directory scan). Until the broker has
loaded its logs (no ``state`` yet) the data answers 503, which the page shows as "starting".
"""

from __future__ import annotations

from ..metrics.listener import HttpResponse, json_response
from .data import status_data
from .page import STATUS_JSON_PATH, render_status_page

HTML_TYPE = "text/html; charset=utf-8"
PAGE_PATH = "/"
DATA_PATH = "/" + STATUS_JSON_PATH

_page: bytes | None = None


def page_route(request) -> HttpResponse:
    global _page
    if _page is None:
        _page = render_status_page().encode("utf-8")
    return HttpResponse(200, _page, HTML_TYPE)


def data_route(request) -> HttpResponse:
    context = request.context
    state = getattr(context, "state", None)
    if state is None:
        return json_response(503, {"status": "booting", "message": "the broker is loading its logs"})
    return json_response(200, status_data(state, getattr(context, "background", None)))


def register_status_page(listener) -> None:
    """Serve the page and its data on ``listener`` (a ``metrics.HttpListener``)."""
    listener.register_route(PAGE_PATH, page_route)
    listener.register_route(DATA_PATH, data_route)
