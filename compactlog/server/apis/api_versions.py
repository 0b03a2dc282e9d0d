"""ApiVersions (API key 18): Kafka's ``KafkaApis.handleApiVersionsRequest``.

The answer is the advertised table the broker was started with (``state.apis``, derived from the
API declarations by ``dispatch.advertised_apis``); ``versions.SupportedApis.api_versions_response``
picks which of Kafka's three answers to send. It runs on the event loop: no I/O, and the answer
for each version is built once.
"""

from __future__ import annotations

from ..messages import NO_THROTTLE, build
from ..state import BrokerState
from .handler import INLINE, ApiHandler


def handle_api_versions(state: BrokerState, request):
    return state.apis.api_versions_response(request.api_version, request.body)


def api_versions_error(body, cls, code, message):
    return build(cls, error_code=code, api_keys=(), throttle_time=NO_THROTTLE)


API_VERSIONS = ApiHandler(18, "ApiVersions", 0, 4, mode=INLINE, handler=handle_api_versions,
                          error_response=api_versions_error)
