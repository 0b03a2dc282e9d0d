"""The SASL state machine without sockets (security.md §3, A10-A13, A16-A18): states, framings,
failures with their counters, re-authentication and session expiry on an injected clock."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from compactlog.server.protocol import Request
from compactlog.server.security import sasl as S
from compactlog.server.security.plain import PlainServer
from compactlog.server.security.scram import SCRAM_SHA_256, ScramServer, new_credential
from compactlog.server.versions import request_schema

CREDS = {"alice": new_credential(SCRAM_SHA_256, "alice-secret"), "bob": new_credential(SCRAM_SHA_256, "bob")}
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob"}


def new_server(mechanism):
    if mechanism == "PLAIN":
        return PlainServer(PLAIN_USERS)
    return ScramServer(SCRAM_SHA_256, CREDS.get, b"s" * 32)


class Clock:
    now = 1_000_000

    def __call__(self):
        return self.now


def auth(mechanisms=("PLAIN", "SCRAM-SHA-256"), reauth_ms=0, clock=None):
    return S.SaslAuthenticator(mechanisms, new_server, reauth_ms=lambda m: reauth_ms, clock=clock or Clock())


def req(key, version, **fields):
    body = request_schema(key, version)(**fields)
    return Request(key, version, 1, "c", None, body, 10, version, True)


def handshake(mech, version=1):
    return req(17, version, mechanism=mech)


def authenticate(token, version=1):
    return req(36, version, auth_bytes=token)


def test_plain_login_then_dispatch():
    a = auth()
    assert a.admitted_keys == S.PRE_AUTH_KEYS and a.max_frame == 524288
    assert a.on_request(req(18, 3, client_software_name="x", client_software_version="1")).action == S.DISPATCH
    step = a.on_request(handshake("PLAIN"))
    assert step.action == S.SEND and step.body.error_code == ErrorCode.none
    assert step.body.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert a.admitted_keys is None and not a.authenticated
    step = a.on_request(authenticate(b"\0alice\0alice-secret"))
    assert step.action == S.SEND and step.body.error_code == ErrorCode.none and step.body.auth_bytes == b""
    assert a.authenticated and a.principal == "User:alice" and a.max_frame is None
    assert a.stats.successful_authentication == 1
    assert a.on_request(req(3, 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)).action == S.DISPATCH
    again = a.on_request(authenticate(b"\0alice\0alice-secret"))
    assert again.action == S.SEND and again.body.error_code == ErrorCode.illegal_sasl_state      # A13


def test_wrong_password_unknown_mechanism_and_requests_before_authentication():
    a = auth()
    a.on_request(handshake("PLAIN"))
    step = a.on_request(authenticate(b"\0alice\0wrong"))
    assert step.action == S.FAIL and step.body.error_code == ErrorCode.sasl_authentication_failed
    assert step.body.error_message == "Authentication failed: Invalid username or password"
    assert a.stats.failed_authentication == 1
    a = auth()
    step = a.on_request(handshake("GSSAPI"))
    assert step.action == S.FAIL and step.body.error_code == ErrorCode.unsupported_sasl_mechanism
    assert step.body.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    # A10: a request before the handshake is not answered; the connection fails after the delay
    step = auth().on_unadmitted(3, "Metadata")
    assert step.action == S.FAIL and step.body is None
    # during AUTHENTICATE another API gets its own error response with ILLEGAL_SASL_STATE
    a = auth()
    a.on_request(handshake("PLAIN"))
    step = a.on_request(req(3, 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False))
    assert step.action == S.FAIL and step.error_code == ErrorCode.illegal_sasl_state
    # a second ApiVersions closes at once
    a = auth()
    a.on_request(req(18, 0))
    assert a.on_request(req(18, 0)).action == S.CLOSE


def test_scram_failure_text_is_generic():
    a = auth()
    a.on_request(handshake("SCRAM-SHA-256"))
    a.on_request(authenticate(b"n,,n=alice,r=abc"))
    step = a.on_request(authenticate(b"c=biws,r=nope,p=AAAA"))
    assert step.action == S.FAIL
    assert step.body.error_message == ("Authentication failed during authentication due to invalid "
                                       "credentials with SASL mechanism SCRAM-SHA-256")


def test_v0_framing_bare_tokens():                                            # A12
    a = auth()
    a.on_request(handshake("PLAIN", version=0))
    assert a.raw_frames
    step = a.on_raw_frame(b"\0alice\0alice-secret")
    assert step.action == S.SEND_RAW and step.token == b"" and a.authenticated and not a.raw_frames


def test_oversized_frame_fails_authentication():
    step = auth().on_oversized("600000 bytes")
    assert step.action == S.FAIL and "invalid receive size" in step.reason


def test_reauthentication_and_expiry():                                         # A16-A18
    clock = Clock()
    a = auth(reauth_ms=2000, clock=clock)
    a.on_request(handshake("PLAIN"))
    step = a.on_request(authenticate(b"\0alice\0alice-secret"))
    assert step.body.session_lifetime.total_seconds() == 2.0
    # a handshake sooner than 1 s after the last one is refused, the connection stays
    clock.now += 500
    assert a.on_request(handshake("PLAIN")).body.error_code == ErrorCode.illegal_sasl_state
    clock.now += 1000
    assert a.on_request(handshake("PLAIN")).body.error_code == ErrorCode.none
    assert a.on_request(req(18, 0)).action == S.DISPATCH      # requests go on meanwhile
    step = a.on_request(authenticate(b"\0alice\0alice-secret"))
    assert step.body.error_code == ErrorCode.none and a.stats.successful_reauthentication == 1
    # another user on the same connection fails
    clock.now += 1500
    a.on_request(handshake("PLAIN"))
    step = a.on_request(authenticate(b"\0bob\0bob"))
    assert step.action == S.FAIL and "Cannot change principals" in step.body.error_message
    assert a.stats.failed_reauthentication == 1
    # a client that never re-authenticates is disconnected at its first request after expiry
    b = auth(reauth_ms=2000, clock=clock)
    b.on_request(handshake("PLAIN"))
    b.on_request(authenticate(b"\0alice\0alice-secret"))
    clock.now += 2001
    assert b.on_request(req(18, 0)).action == S.CLOSE and b.stats.expired_connections_killed == 1


def test_reauthentication_with_another_mechanism_closes_at_the_next_step():
    clock = Clock()
    a = auth(reauth_ms=2000, clock=clock)
    a.on_request(handshake("PLAIN"))
    a.on_request(authenticate(b"\0alice\0alice-secret"))
    clock.now += 1500
    assert a.on_request(handshake("SCRAM-SHA-256")).body.error_code == ErrorCode.none
    assert a.on_request(authenticate(b"n,,n=alice,r=abc")).action == S.CLOSE


def test_no_reauthentication_without_a_lifetime():
    a = auth()
    a.on_request(handshake("PLAIN"))
    a.on_request(authenticate(b"\0alice\0alice-secret"))
    assert a.on_request(handshake("PLAIN")).body.error_code == ErrorCode.illegal_sasl_state
    assert a.session_expires_at is None
