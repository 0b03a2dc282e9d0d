"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's broker speaks them: Kafka's
``ScramMechanism`` (names, type codes 1 and 2, 4096-16384 iterations), ``ScramFormatter`` (the
formulas, user names with ``=2C``/``=3D`` escapes, no SASLprep), ``ScramMessages`` (the grammar of
the two client messages) and ``ScramSaslServer`` (the exchange), security.md §5.1.

Written to Kafka's rules rather than taken from a SCRAM library, because those rules differ from
the RFC where Kafka's clients depend on it: the client-final nonce is accepted when it *ends with*
the combined nonce (librdkafka before 2.6.1 sends the client nonce twice; kcat 1.7.1 does), any
salt length is accepted, and a failure is an error code of the SaslAuthenticate answer, not an
``e=`` message. Secrets are compared with ``hmac.compare_digest``. An unknown user gets a
server-first message like anyone's (a salt derived from a per-process secret and the user name),
and fails at the client-final step, so that a client cannot tell it from a wrong password.

Sans-IO: ``ScramServer.evaluate`` takes the client's token and returns the server's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Callable

from .errors import SaslFailure


@dataclass(frozen=True)
class ScramMechanism:
    """Kafka's ``ScramMechanism``: the SASL name, the type code of the admin APIs and records
    (``UserScramCredentialRecord.mechanism``, "must not change") and the hash."""

    name: str
    type_code: int
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: dict[int, ScramMechanism] = {m.type_code: m for m in MECHANISMS.values()}
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps per user and mechanism (``ScramCredential``; the fields of
    ``UserScramCredentialRecord``): never the password. Its repr hides the keys, as Kafka's
    ``ScramCredentialValue.toString`` prints ``[hidden]``."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, salt/keys=[hidden])"

    __str__ = __repr__


# -- ScramFormatter -----------------------------------------------------------------------------

def hmac_digest(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 over the password's UTF-8 (no SASLprep, as
    ``ScramFormatter.normalize``)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted, "Server Key")."""
    client_key = hmac_digest(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac_digest(mechanism, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def new_credential(mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
    """A credential for ``password`` with a fresh random salt (Kafka's ``ScramFormatter`` uses a
    random salt; 32 bytes here)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations),
                                  salt, iterations)


def matches_password(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` gives ``credential`` (PLAIN verified against the SCRAM store: one
    PBKDF2, then a constant-time comparison of the stored keys)."""
    again = credential_from_salted(mechanism, salted_password(mechanism, password, credential.salt,
                                                              credential.iterations),
                                   credential.salt, credential.iterations)
    return hmac.compare_digest(again.stored_key, credential.stored_key)


def sasl_name_to_user(sasl_name: str) -> str:
    """``ScramFormatter.username``: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is an
    error."""
    user = sasl_name.replace("=2C", ",")
    if "=" in user.replace("=3D", ""):
        raise SaslFailure(f"invalid user name escape in {sasl_name!r}")
    return user.replace("=3D", "=")


def user_to_sasl_name(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


# -- ScramMessages ------------------------------------------------------------------------------

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?:{_EXTENSIONS})),"
    rf"p=(?P<proof>{_BASE64})")
GS2_HEADER = b"n,,"


def _extensions(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(",")[1:]:
        key, _, value = item.partition("=")
        out[key] = value
    return out


def _decode_ascii(token: bytes, what: str) -> str:
    try:
        return token.decode("ascii")
    except UnicodeDecodeError:
        raise SaslFailure(f"{what} is not ASCII") from None


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SaslFailure(f"{what} is not base64") from None


def server_nonce() -> str:
    """Kafka's: 130 random bits written in base 36 (printable, never a comma, never empty)."""
    n = secrets.randbits(130) | (1 << 129)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(digits[r])
    return "".join(reversed(out))


# -- ScramSaslServer ----------------------------------------------------------------------------

class ScramServer:
    """One SCRAM exchange on the server side (``ScramSaslServer``): two client messages.

    ``lookup(user)`` gives the user's credential for this mechanism, or None. ``secret`` keys the
    made-up credential of unknown users (one per broker process). ``evaluate`` raises
    ``SaslFailure`` on any failure; its message is for the broker's debug log only.
    """

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 secret: bytes, *, nonce: Callable[[], str] = server_nonce):
        self.mechanism = mechanism
        self.mechanism_name = mechanism.name
        self._lookup = lookup
        self._secret = secret
        self._nonce = nonce
        self._step = 0
        self.complete = False
        self.authorization_id: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        if self._step == 0:
            self._step = 1
            return self._client_first(token)
        if self._step == 1:
            self._step = 2
            return self._client_final(token)
        raise SaslFailure("SCRAM exchange already finished")

    def _client_first(self, token: bytes) -> bytes:
        text = _decode_ascii(token, "client-first message")
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            if text.startswith(("y,", "p=")):
                raise SaslFailure("channel binding is not supported")
            raise SaslFailure("invalid SCRAM client-first message")
        if "tokenauth" in _extensions(m.group("extensions")):
            raise SaslFailure("delegation tokens (tokenauth) are not supported")
        user = sasl_name_to_user(m.group("saslname"))
        authzid = m.group("authzid")
        if authzid and sasl_name_to_user(authzid) != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username", to_client=True)
        credential = self._lookup(user)
        self._known = credential is not None
        if credential is None:
            credential = self._unknown_user(user)
        elif credential.iterations < self.mechanism.min_iterations:
            raise SaslFailure(f"Iterations {credential.iterations} is less than the minimum "
                              f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        self._credential = credential
        self.authorization_id = user
        self._client_first_bare = m.group("bare")
        self._combined_nonce = m.group("nonce") + self._nonce()
        self._server_first = (f"r={self._combined_nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode("ascii")

    def _unknown_user(self, user: str) -> ScramCredential:
        """A credential nobody can match, the same for every attempt on one user (a changing salt
        would tell an unknown user apart)."""
        seed = hmac.new(self._secret, user.encode("utf-8"), "sha256").digest()
        size = self.mechanism.digest_size
        return ScramCredential(seed[:20], hashlib.new(self.mechanism.hash_name, seed + b"k").digest()[:size],
                               hashlib.new(self.mechanism.hash_name, seed + b"s").digest()[:size],
                               DEFAULT_ITERATIONS)

    def _client_final(self, token: bytes) -> bytes:
        text = _decode_ascii(token, "client-final message")
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslFailure("invalid SCRAM client-final message")
        if not m.group("nonce").endswith(self._combined_nonce):
            raise SaslFailure("Invalid client nonce in the final client message.")
        if _b64(m.group("channel"), "channel binding") != GS2_HEADER:
            raise SaslFailure("invalid channel binding in the final client message")
        proof = _b64(m.group("proof"), "client proof")
        credential = self._credential
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 m.group("without_proof"))).encode("ascii")
        signature = hmac_digest(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslFailure("Invalid client credentials (proof of the wrong length)")
        client_key = bytes(a ^ b for a, b in zip(signature, proof))
        computed = hashlib.new(self.mechanism.hash_name, client_key).digest()
        # the comparison runs for unknown users too: the same work, the same answer
        if not hmac.compare_digest(computed, credential.stored_key) or not self._known:
            raise SaslFailure("Invalid client credentials")
        server_signature = hmac_digest(self.mechanism, credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
