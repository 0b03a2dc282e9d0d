"""The failure of a SASL step (Kafka's ``SaslException`` and ``SaslAuthenticationException``)."""

from __future__ import annotations


class SaslFailure(Exception):
    """A SASL mechanism refused the client's token.

    The message is for the broker's debug log; the client gets Kafka's generic text ("...due to
    invalid credentials with SASL mechanism X") unless ``to_client`` is set, which Kafka allows
    for the few deliberate ``SaslAuthenticationException`` texts (PLAIN's "Invalid username or
    password", an authorization id that is not the user name). No message ever holds a secret.
    """

    def __init__(self, message: str, *, to_client: bool = False):
        super().__init__(message)
        self.message = message
        self.to_client = to_client
