"""Reconfiguring a live listener (``listeners.py``'s ``BrokerSecurity.store_changes``): a live TLS
listener's key and trust stores changed through the config APIs (Kafka's dynamic
``listener.name.<l>.ssl.keystore.*``, SslFactory.validateReconfiguration): the new context serves
the listener's next connections, a key store that does not load or names another subject is
refused with the reason (no directory in it), a store rewritten in place is reloaded by the next
change of the broker's own configs, and a change the next start would refuse is refused now."""

from __future__ import annotations

import datetime
import os

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.server.apis.conftest import NODE, alter, errors, incremental
from compactlog.server.security.credentials import CredentialCache
from compactlog.server.security.listeners import BrokerSecurity
from compactlog.server.state import BrokerState, Listener, parse_listeners
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.dynamic_config import DynamicConfigs

SET, DELETE = 0, 1
STORE = "listener.name.ssl.ssl.keystore.location"


def self_signed(path, cn: str, *, san=("localhost",)) -> str:
    """A key and its self-signed certificate in one PEM file (a PEM key store)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=5))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(s) for s in san]), critical=False)
            .sign(key, hashes.SHA256()))
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()) + cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


@pytest.fixture
def tls_state(tmp_path):
    pytest.importorskip("cryptography")
    stores = tmp_path / "stores"
    stores.mkdir()
    first = self_signed(stores / "first.pem", "localhost")
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location": first}
    data = tmp_path / "data"
    data.mkdir()
    dd = DataDir(str(data), writable=True, broker=BrokerConfig(props))
    listeners = parse_listeners(props["listeners"], "listeners", {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"})
    state = BrokerState(dd, NODE, "c", Listener("PLAINTEXT", "127.0.0.1", 19092))
    state.security = BrokerSecurity(dd.broker.props, listeners, CredentialCache(str(data)))
    state.stores = stores
    yield state
    dd.close()


def ssl_listener(state):
    return state.security.listeners["SSL"].tls


def test_a_new_key_store_serves_the_next_connections(tls_state):
    state = tls_state
    before = ssl_listener(state)
    second = self_signed(state.stores / "second.pem", "localhost")
    assert errors(incremental(state, (4, str(NODE), [(STORE, SET, second)]), validate_only=True)) == [(E.none, None)]
    assert ssl_listener(state) is before                        # only checked
    assert errors(incremental(state, (4, str(NODE), [(STORE, SET, second)]))) == [(E.none, None)]
    after = ssl_listener(state)
    assert after is not before and after.settings.keystore_location == second
    assert after.identity == before.identity and after.context is not before.context
    assert DynamicConfigs.read(state.datadir.path).broker == {STORE: second}
    assert state.broker.props[STORE] == second                # the next start builds it the same way


def test_a_key_store_rewritten_in_place_is_reloaded_by_the_next_change(tls_state):
    state = tls_state
    path = self_signed(state.stores / "renewed.pem", "localhost")
    assert errors(incremental(state, (4, str(NODE), [(STORE, SET, path)]))) == [(E.none, None)]
    before = ssl_listener(state)
    os.replace(self_signed(state.stores / "tmp.pem", "localhost"), path)        # renewed, same name
    assert errors(incremental(state, (4, str(NODE), [("log.cleaner.backoff.ms", SET, "100")]))) == [(E.none, None)]
    assert ssl_listener(state) is not before
    # rewritten with a key store that does not load: the listener keeps what it has, the change
    # (not the cause) stands
    kept = ssl_listener(state)
    with open(path, "w") as f:
        f.write("not a key store")
    assert errors(incremental(state, (4, str(NODE), [("log.cleaner.backoff.ms", SET, "200")]))) == [(E.none, None)]
    assert ssl_listener(state) is kept and state.broker.get("log.cleaner.backoff.ms") == 200


def test_refused_stores_name_no_directory(tls_state):
    state = tls_state
    before = ssl_listener(state)
    other = self_signed(state.stores / "other.pem", "elsewhere")
    fewer_names = self_signed(state.stores / "fewer.pem", "localhost", san=("otherhost",))
    secret_dir = state.stores / "private-dir"
    results = [incremental(state, (4, str(NODE), [(STORE, SET, path)]))[0]
               for path in (other, fewer_names, str(secret_dir / "missing.pem"))]
    assert [r.error_code for r in results] == [E.invalid_request] * 3
    assert results[0].error_message == (
        "Invalid dynamic configuration: listener SSL: Keystore DistinguishedName does not match: existing "
        "DN=CN=localhost, new DN=CN=elsewhere (ssl.allow.dn.changes=true allows it)")
    assert "Keystore SubjectAltNames do not match" in results[1].error_message
    assert results[2].error_message.startswith("Invalid dynamic configuration: listener SSL: cannot read")
    assert "missing.pem" in results[2].error_message and str(state.stores) not in results[2].error_message
    assert ssl_listener(state) is before and DynamicConfigs.read(state.datadir.path).broker == {}
    # the listener's own ssl.allow.dn.changes lets the subject change
    assert errors(incremental(state, (4, str(NODE), [("listener.name.ssl.ssl.allow.dn.changes", SET, "true"),
                                                     (STORE, SET, other)]))) == [(E.none, None)]
    assert ssl_listener(state).identity[0] == "CN=elsewhere"


def test_what_the_next_start_would_refuse_is_refused_now(tls_state):
    state = tls_state
    results = [incremental(state, resource)[0] for resource in (
        (4, str(NODE), [("principal.builder.class", SET, "com.example.MyBuilder")]),
        (4, str(NODE), [("listener.name.ssl.ssl.keystore.type", SET, "JKS")]),
        (4, str(NODE), [("listeners", SET, "PLAINTEXT://127.0.0.1:0")]),
        (4, str(NODE), [("listener.name.ssl.ssl.client.auth", SET, "requested")]))]
    assert [r.error_code for r in results] == [E.invalid_request] * 4
    assert results[0].error_message.startswith("Invalid dynamic configuration: principal.builder.class: a Java "
                                               "class (com.example.MyBuilder) cannot be loaded by compactlog")
    assert "JKS key stores cannot be read by Python" in results[1].error_message
    assert results[2].error_message.startswith("Invalid dynamic configuration: listeners cannot change while "
                                               "the broker runs")
    assert results[3].error_message == ("Invalid dynamic configuration: listener SSL: ssl.client.auth=requested "
                                        "needs a trust store for client certificates: set ssl.truststore.location "
                                        "or ssl.truststore.certificates")
    # a listener's other TLS settings are kept for the next start; the live listener is unchanged
    before = ssl_listener(state)
    assert errors(alter(state, (4, str(NODE), [("listener.name.ssl.ssl.enabled.protocols", "TLSv1.3")]))) == \
        [(E.none, None)]
    assert ssl_listener(state) is before
