"""How an API is declared: key, name, versions, where it runs, handler and error response, in one
place (Redpanda's ``single_stage_handler<delete_records_api, 0, 2>`` in ``handlers/handler.h``;
Kafka spreads the same facts over ``ApiKeys``, the case of ``KafkaApis.handle`` and the request
class's ``AbstractRequest.getErrorResponse``).

A handler is ``handle(state, request) -> response body`` (a kio object, or an
``protocol.EncodedResponse`` it framed itself); an ``ASYNC`` one is a coroutine
``handle(state, request, run)``, where ``run(fn, *args)`` runs a blocking function in a worker
thread. An error response is ``error_response(request body, response class, code, message)``:
the answer with ``code`` in every place the response has an error field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kio.schema.errors import ErrorCode

from ..versions import ApiRange, response_schema

INLINE = "inline"       # on the event loop: no I/O at all
THREAD = "thread"       # in a worker thread: storage calls block on fsync and pread
ASYNC = "async"         # a coroutine on the event loop: it parks (Fetch's long poll, a rebalance)
MODES = (INLINE, THREAD, ASYNC)


@dataclass(frozen=True)
class Api:
    """One entry of the dispatch table: the handler of an API key and where it runs."""

    key: int
    handler: Callable
    mode: str
    quick: Callable | None = None


@dataclass(frozen=True, kw_only=True)
class ApiHandler(ApiRange):
    """One API as the broker serves it. Its versions (``ApiRange``: advertised min and max, and
    the accepted minimum where it differs) go into the ApiVersions answer as they are.
    ``coordinator``: the API is served by a coordinator (the group or the transaction
    coordinator), so a storage failure its handler did not catch makes the coordinator
    unavailable (COORDINATOR_NOT_AVAILABLE) rather than the partition (KAFKA_STORAGE_ERROR)."""

    mode: str
    handler: Callable
    error_response: Callable
    coordinator: bool = False
    # a THREAD handler's fast path, tried on the event loop first: ``quick(state, request)`` is
    # the answer when the work is small and touches only the page cache, else None (the request
    # then goes to a worker thread as usual)
    quick: Callable | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"{self.name}: mode {self.mode!r} is not one of {', '.join(MODES)}")

    @property
    def entry(self) -> Api:
        return Api(self.key, self.handler, self.mode, self.quick)

    def error_body(self, request, code: int, message: str | None = None):
        """Kafka's ``getErrorResponse`` for ``request``: ``code`` (an ErrorCode, or its number) in
        every error field of a response of the request's version."""
        cls = response_schema(request.api_key, request.response_version)
        return self.error_response(request.body, cls, ErrorCode(code), message)


class Refused(Exception):
    """A per-topic or per-resource failure (Kafka's ``ApiError``): the error code and the message
    clients get."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message
