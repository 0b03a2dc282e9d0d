"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` and ``PlainServerCallbackHandler``.

One client token, ``[authzid] NUL authcid NUL passwd`` in UTF-8: exactly three parts, a user name
and a password that are not empty, an authorization id that is empty or the user name. Users come
from the listener's JAAS setting (``user_<name>="<password>"``, compared in constant time) and,
a compactlog extension, from the SCRAM credential store (the password salted with the stored salt
and iterations, then the stored keys compared in constant time). An unknown user costs the same
PBKDF2 as a known one. The answer is an empty token (aiokafka and kafka-python require it).
"""

from __future__ import annotations

import hmac
import re
from typing import Callable

from .errors import SaslFailure
from .scram import DEFAULT_ITERATIONS, SCRAM_SHA_256, ScramCredential, ScramMechanism, matches_password

MECHANISM = "PLAIN"

# PlainLoginModule options: user_<name>="<password>" (JAAS quoting: backslash escapes)
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:\\.|[^"\\])*)"')
_JAAS_HEAD = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b")

PlainUsers = Callable[[str], "tuple[ScramMechanism, ScramCredential] | None"]


def parse_plain_jaas(text: str) -> dict[str, str]:
    """The ``user_<name>`` options of a ``PlainLoginModule`` JAAS entry: user -> password."""
    head = _JAAS_HEAD.match(text)
    if head is None or not head.group(1).endswith("PlainLoginModule"):
        from ...errors import ConfigError
        raise ConfigError("sasl.jaas.config for PLAIN must name org.apache.kafka.common.security.plain."
                          "PlainLoginModule followed by a control flag (required) and its options")
    users = {}
    for key, value in _JAAS_OPTION.findall(text[head.end():]):
        if key.startswith("user_"):
            users[key[len("user_"):]] = re.sub(r"\\(.)", r"\1", value)
    return users


class PlainServer:
    """One PLAIN exchange on the server side. ``jaas_users``: user -> password from the JAAS
    setting; ``scram_lookup(user)``: a (mechanism, credential) of the SCRAM store, or None."""

    mechanism_name = MECHANISM

    def __init__(self, jaas_users: dict[str, str], scram_lookup: PlainUsers | None = None):
        self._jaas = jaas_users
        self._scram = scram_lookup
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("PLAIN exchange already finished")
        # Kafka reads the token as new String(bytes, UTF_8): a byte that is not UTF-8 becomes U+FFFD
        # (a user name holding one names nobody) rather than failing the exchange
        text = token.decode("utf-8", "replace")
        parts = text.split("\0")
        if len(parts) != 3:
            # a SaslAuthenticationException in PlainSaslServer, so its text reaches the client; its
            # extractTokens stops splitting at the fourth token
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}",
                              to_client=True)
        authzid, user, password = parts
        if not user:
            raise SaslFailure("Authentication failed: username not specified", to_client=True)
        if not password:
            raise SaslFailure("Authentication failed: password not specified", to_client=True)
        if not self._authenticate(user, password):
            raise SaslFailure("Authentication failed: Invalid username or password", to_client=True)
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username", to_client=True)
        self.authorization_id = user
        self.complete = True
        return b""

    def _authenticate(self, user: str, password: str) -> bool:
        expected = self._jaas.get(user)
        if expected is not None:
            return hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))
        found = self._scram(user) if self._scram is not None else None
        if found is None:
            # the cost of a known user's check, for nothing
            matches_password(SCRAM_SHA_256, _DUMMY, password)
            return False
        mechanism, credential = found
        return matches_password(mechanism, credential, password)


_DUMMY = ScramCredential(b"\0" * 32, b"\1" * 32, b"\2" * 32, DEFAULT_ITERATIONS)
