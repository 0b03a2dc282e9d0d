"""SaslHandshake (API key 17, v0-1) and SaslAuthenticate (API key 36, v0-2) once a connection is
past authentication, or on a listener without SASL: Kafka's ``KafkaApis.handleSaslHandshakeRequest``
and ``handleSaslAuthenticateRequest``, which answer ILLEGAL_SASL_STATE (34).

The exchange itself never reaches these handlers: on a SASL listener the connection's
authenticator (``security/sasl.py``) answers both APIs until the client is authenticated, and
SaslHandshake again when it re-authenticates (KIP-368). Both are advertised on every listener,
as Kafka does (librdkafka and kafka-python look for them in the ApiVersions answer).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..security.sasl import AFTER_SUCCESS, authenticate_response, handshake_response
from ..state import BrokerState
from .handler import INLINE, ApiHandler


def handle_sasl_handshake(state: BrokerState, request):
    return handshake_response(request.response_version, ErrorCode.illegal_sasl_state, ())


def handle_sasl_authenticate(state: BrokerState, request):
    return authenticate_response(request.response_version, ErrorCode.illegal_sasl_state, AFTER_SUCCESS)


def sasl_handshake_error(body, cls, code, message):
    return cls(error_code=code, mechanisms=())


def sasl_authenticate_error(body, cls, code, message):
    return authenticate_response(cls.__version__, code, message)


SASL_HANDSHAKE = ApiHandler(17, "SaslHandshake", 0, 1, mode=INLINE, handler=handle_sasl_handshake,
                            error_response=sasl_handshake_error)
SASL_AUTHENTICATE = ApiHandler(36, "SaslAuthenticate", 0, 2, mode=INLINE, handler=handle_sasl_authenticate,
                               error_response=sasl_authenticate_error)
