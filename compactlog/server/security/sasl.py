"""The SASL exchange of one connection, sans-IO: Kafka's ``SaslServerAuthenticator`` (states,
SaslHandshake, SaslAuthenticate, both framings of KIP-152), its ``ReauthInfo`` (KIP-368
re-authentication and session expiry) and the failure rules of ``Selector`` /
``KafkaChannel`` (security.md §3).

The transport feeds it what the protocol decoded (a ``Request``, a bare ``RawFrame`` token, a
request of an API not admitted before authentication) and gets a ``Step`` back: dispatch the
request as usual, send this answer, send this bare token, fail (wait
``connection.failed.authentication.delay.ms``, send the answer if there is one, close), or close
at once. Between steps the transport applies ``admitted_keys``, ``max_frame`` and ``raw_frames``
to the protocol connection and stamps ``principal`` on the requests it decodes. Time comes from
the ``clock`` (milliseconds), so tests drive expiry without sleeping.

Failure messages to clients are Kafka's generic one ("Authentication failed during
authentication due to invalid credentials with SASL mechanism X") unless the mechanism chose a
deliberate text; the detail goes to the broker's log, never a token or a password.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from kio.schema.errors import ErrorCode

from ..messages import build
from ..versions import API_VERSIONS_KEY, response_schema
from .errors import SaslFailure

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
ANONYMOUS = "User:ANONYMOUS"
MIN_REAUTH_INTERVAL_MS = 1000         # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
PRE_AUTH_KEYS = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY})
AFTER_SUCCESS = "SaslAuthenticate request received after successful authentication"


class State(Enum):
    INITIAL = "INITIAL_REQUEST"
    HANDSHAKE = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    REAUTH_AUTHENTICATE = "REAUTH_AUTHENTICATE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    FAILED = "FAILED"


DISPATCH = "dispatch"       # handle the request as any other
SEND = "send"               # send ``body`` (a response to the request)
SEND_RAW = "send-raw"       # send ``token`` size-prefixed, without a header (v0 framing)
FAIL = "fail"               # delayed: send ``body`` (or the API's error response for ``error_code``), close
CLOSE = "close"             # close now, unanswered


@dataclass(slots=True)
class Step:
    action: str
    body: object = None
    token: bytes | None = None
    error_code: ErrorCode | None = None
    message: str | None = None
    reason: str | None = None       # for the broker's log


_DISPATCH = Step(DISPATCH)


def generic_failure(mechanism: str) -> str:
    return ("Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism}")


def handshake_response(version: int, code: ErrorCode, mechanisms: tuple[str, ...]):
    return build(response_schema(SASL_HANDSHAKE_KEY, version), error_code=code, mechanisms=tuple(mechanisms))


def authenticate_response(version: int, code: ErrorCode, message: str | None = None, token: bytes = b"",
                          lifetime_ms: int = 0):
    return build(response_schema(SASL_AUTHENTICATE_KEY, version), error_code=code, error_message=message,
                 auth_bytes=token, session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))


class Stats:
    """What the authenticator counts (a listener's ``AuthenticationStats`` in the broker)."""

    successful_authentication = failed_authentication = 0
    successful_reauthentication = failed_reauthentication = expired_connections_killed = 0


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class SaslAuthenticator:
    """One connection's SASL state (``SaslServerAuthenticator`` + ``ReauthInfo``).

    ``mechanisms``: the listener's enabled mechanisms, in order; ``new_server(mechanism)`` makes a
    mechanism server (``evaluate(token) -> token``, ``complete``, ``authorization_id``);
    ``reauth_ms(mechanism)``: ``connections.max.reauth.ms`` for it (0: sessions never expire).
    """

    def __init__(self, mechanisms: tuple[str, ...], new_server: Callable[[str], object], *,
                 reauth_ms: Callable[[str], int] = lambda m: 0, max_receive_size: int = 524288,
                 stats=None, clock: Callable[[], int] = _monotonic_ms):
        self.mechanisms = tuple(mechanisms)
        self._new_server = new_server
        self._reauth_ms = reauth_ms
        self.max_receive_size = max_receive_size
        self.stats = stats if stats is not None else Stats()
        self._clock = clock
        self.state = State.INITIAL
        self.principal = ANONYMOUS
        self.mechanism: str | None = None
        self._server = None
        self._authenticate_headers = True       # SaslHandshake v1: tokens inside SaslAuthenticate
        self.client_supports_reauth = False
        self.session_expires_at: int | None = None
        self._auth_began_at = 0
        self._was_authenticated = False

    # -- what the protocol connection must apply ----------------------------------------------
    @property
    def authenticated(self) -> bool:
        """Authenticated once: requests are served (re-authentication keeps them served)."""
        return self._was_authenticated

    @property
    def admitted_keys(self) -> frozenset | None:
        """The API keys parsed now (None: any); others are refused unparsed."""
        return PRE_AUTH_KEYS if self.state in (State.INITIAL, State.HANDSHAKE) else None

    @property
    def max_frame(self) -> int | None:
        """The frame size limit now (``sasl.server.max.receive.size`` until authenticated), None
        for the broker's own limit."""
        return None if self._was_authenticated else self.max_receive_size

    @property
    def raw_frames(self) -> bool:
        """Frames are bare SASL tokens (SaslHandshake v0 framing)."""
        return self.state is State.AUTHENTICATE and not self._authenticate_headers

    # -- events --------------------------------------------------------------------------------
    def on_request(self, request) -> Step:
        state = self.state
        key = request.api_key
        if state is State.COMPLETE:
            if key == SASL_HANDSHAKE_KEY:
                return self._handshake(request, reauth=True)
            if self.session_expired():
                self.stats.expired_connections_killed += 1
                return Step(CLOSE, reason="Disconnecting expired channel (the session lifetime of "
                                          "connections.max.reauth.ms ended without re-authentication)")
            if key == SASL_AUTHENTICATE_KEY:
                return Step(SEND, authenticate_response(request.response_version,
                                                        ErrorCode.illegal_sasl_state, AFTER_SUCCESS))
            return _DISPATCH
        if state in (State.INITIAL, State.HANDSHAKE):
            if key == API_VERSIONS_KEY:
                if state is State.HANDSHAKE:
                    return Step(CLOSE, reason="a second ApiVersions request during the SASL handshake")
                if request.response_version == request.api_version:     # a version it knows
                    self.state = State.HANDSHAKE
                return _DISPATCH
            if key == SASL_HANDSHAKE_KEY:
                return self._handshake(request, reauth=False)
            return self._unexpected(key)
        if state in (State.AUTHENTICATE, State.REAUTH_AUTHENTICATE):
            if key == SASL_AUTHENTICATE_KEY:
                return self._authenticate_request(request)
            if state is State.REAUTH_AUTHENTICATE and not self.session_expired():
                return _DISPATCH        # answered under the current session while it lasts
            return self._fail(f"Unexpected Kafka request of type {request.api_name} during SASL "
                              f"authentication", error_code=ErrorCode.illegal_sasl_state,
                              message=f"Unexpected Kafka request of type {request.api_name} during SASL "
                                      f"authentication.")
        if state is State.REAUTH_BAD_MECHANISM:
            self.state = State.FAILED
            self.stats.failed_reauthentication += 1
            return Step(CLOSE, reason=f"SASL mechanism requested by client is not supported for "
                                      f"re-authentication of mechanism '{self.mechanism}'")
        return Step(CLOSE, reason="request after a failed authentication")

    def on_unadmitted(self, api_key: int, api_name: str) -> Step:
        """A request of an API that may not be parsed before authentication."""
        return self._unexpected(api_key, api_name)

    def on_raw_frame(self, token: bytes) -> Step:
        """A bare token (SaslHandshake v0 framing)."""
        try:
            out = self._server.evaluate(token)
        except SaslFailure as e:
            return self._fail(e.message)
        if self._server.complete:
            failed = self._complete()
            if failed is not None:
                return failed
        return Step(SEND_RAW, token=out)

    def on_oversized(self, detail: str) -> Step:
        """A size prefix above ``sasl.server.max.receive.size``: the body is never read."""
        return self._fail(f"Failing SASL authentication due to invalid receive size: {detail}")

    def session_expired(self) -> bool:
        return self.session_expires_at is not None and self._clock() > self.session_expires_at

    # -- the steps -----------------------------------------------------------------------------
    def _unexpected(self, api_key: int, api_name: str | None = None) -> Step:
        return self._fail(f"Unexpected Kafka request of type {api_name or api_key} during SASL handshake")

    def _handshake(self, request, *, reauth: bool) -> Step:
        version = request.response_version
        mechanism = request.body.mechanism
        now = self._clock()
        if reauth:
            lifetime = self._reauth_ms(self.mechanism) if self.mechanism else 0
            if (lifetime <= 0 or not self.client_supports_reauth
                    or now - self._auth_began_at < MIN_REAUTH_INTERVAL_MS):
                return Step(SEND, handshake_response(version, ErrorCode.illegal_sasl_state, ()))
        self._auth_began_at = now
        if mechanism not in self.mechanisms:
            return self._fail(f"Unsupported SASL mechanism {mechanism}",
                              body=handshake_response(version, ErrorCode.unsupported_sasl_mechanism,
                                                      self.mechanisms), reauth=reauth)
        if reauth:
            if mechanism != self.mechanism:
                # Kafka answers the handshake, then closes at the next SaslAuthenticate
                self.state = State.REAUTH_BAD_MECHANISM
                return Step(SEND, handshake_response(version, ErrorCode.none, self.mechanisms))
            self.state = State.REAUTH_AUTHENTICATE
        else:
            self.state = State.AUTHENTICATE
            self.mechanism = mechanism
            self._authenticate_headers = version >= 1
        self._server = self._new_server(mechanism)
        return Step(SEND, handshake_response(version, ErrorCode.none, self.mechanisms))

    def _authenticate_request(self, request) -> Step:
        version = request.response_version
        if version >= 1:
            self.client_supports_reauth = True
        try:
            out = self._server.evaluate(bytes(request.body.auth_bytes))
        except SaslFailure as e:
            message = e.message if e.to_client else generic_failure(self.mechanism)
            return self._fail(e.message, body=authenticate_response(
                version, ErrorCode.sasl_authentication_failed, message))
        if not self._server.complete:
            return Step(SEND, authenticate_response(version, ErrorCode.none, None, out))
        failed = self._complete(version)
        if failed is not None:
            return failed
        lifetime = self._reauth_ms(self.mechanism)
        return Step(SEND, authenticate_response(version, ErrorCode.none, None, out,
                                                lifetime if version >= 1 else 0))

    def _complete(self, version: int = 0) -> Step | None:
        principal = f"User:{self._server.authorization_id}"
        reauth = self.state is State.REAUTH_AUTHENTICATE
        if reauth and principal != self.principal:
            return self._fail(f"Cannot change principals during re-authentication from {self.principal}: "
                              f"{principal}", body=authenticate_response(
                                  version, ErrorCode.sasl_authentication_failed,
                                  f"Cannot change principals during re-authentication from "
                                  f"{self.principal}: {principal}") if self._authenticate_headers else None)
        self.principal = principal
        self.state = State.COMPLETE
        self._server = None
        self._was_authenticated = True
        lifetime = self._reauth_ms(self.mechanism)
        self.session_expires_at = self._clock() + lifetime if lifetime > 0 else None
        if reauth:
            self.stats.successful_reauthentication += 1
        else:
            self.stats.successful_authentication += 1
        return None

    def _fail(self, reason: str, *, body=None, error_code: ErrorCode | None = None,
              message: str | None = None, reauth: bool | None = None) -> Step:
        if reauth is None:
            reauth = self._was_authenticated
        if reauth:
            self.stats.failed_reauthentication += 1
        else:
            self.stats.failed_authentication += 1
        self.state = State.FAILED
        self._server = None
        return Step(FAIL, body=body, error_code=error_code, message=message, reason=reason)
