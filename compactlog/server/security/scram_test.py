"""The SCRAM server against RFC 7677's vector, kafka-python's SCRAM client (an independent
implementation), librdkafka's doubled nonce, and every refusal of security.md §5.1 (A15)."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from compactlog.server.security.errors import SaslFailure
from compactlog.server.security.scram import (SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential, ScramServer,
                                              credential_from_salted, new_credential, salted_password,
                                              sasl_name_to_user, user_to_sasl_name)

SECRET = b"k" * 32


def server(creds: dict, mechanism=SCRAM_SHA_256, nonce=None):
    kw = {"nonce": nonce} if nonce else {}
    return ScramServer(mechanism, creds.get, SECRET, **kw)


def test_rfc7677_vector():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_salted(SCRAM_SHA_256, salted_password(SCRAM_SHA_256, "pencil", salt, 4096), salt, 4096)
    s = server({"user": cred}, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = s.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = s.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert s.complete and s.authorization_id == "user"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_kafka_python_client_logs_in(mechanism):
    cred = new_credential(mechanism, "alice-secret", 8192)
    client = ScramClient("alice", "alice-secret", mechanism.name)
    s = server({"alice": cred}, mechanism)
    client.process_server_first_message(s.evaluate(client.first_message()))
    client.process_server_final_message(s.evaluate(client.final_message()))
    assert s.complete and s.authorization_id == "alice"
    assert "hidden" in repr(cred) and "alice-secret" not in repr(cred)


def _exchange(s, first: bytes, password: str, mechanism=SCRAM_SHA_256, double_nonce=False, proof=None):
    sf = s.evaluate(first).decode()
    params = dict(p.split("=", 1) for p in sf.split(","))
    cnonce = first.decode().split("r=", 1)[1].split(",")[0]
    nonce = cnonce + params["r"] if double_nonce else params["r"]
    bare = first.decode()[first.decode().index("n=", 2):]
    without = f"c=biws,r={nonce}"
    auth = ",".join((bare, sf, without)).encode()
    salted = salted_password(mechanism, password, base64.b64decode(params["s"]), int(params["i"]))
    cred = credential_from_salted(mechanism, salted, b"", 0)
    import hashlib
    import hmac
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    sig = hmac.new(cred.stored_key, auth, mechanism.hash_name).digest()
    p = proof if proof is not None else bytes(a ^ b for a, b in zip(client_key, sig))
    assert hashlib.new(mechanism.hash_name, client_key).digest() == cred.stored_key
    return s.evaluate(f"{without},p={base64.b64encode(p).decode()}".encode())


def test_librdkafka_doubled_nonce_is_accepted():
    # librdkafka < 2.6.1 sends r=<cnonce><cnonce><snonce>: Kafka accepts a nonce that ends with the
    # combined one (kcat 1.7.1 fails against exact equality)
    s = server({"alice": new_credential(SCRAM_SHA_256, "pw")})
    out = _exchange(s, b"n,,n=alice,r=abc", "pw", double_nonce=True)
    assert out.startswith(b"v=") and s.complete


def test_wrong_password_and_unknown_user_fail_at_the_second_step():
    s = server({"alice": new_credential(SCRAM_SHA_256, "pw")})
    with pytest.raises(SaslFailure) as e:
        _exchange(s, b"n,,n=alice,r=abc", "wrong")
    assert not e.value.to_client
    # an unknown user gets a server-first message too (same shape, stable salt) and fails later
    u1, u2 = server({}), server({})
    f1, f2 = u1.evaluate(b"n,,n=mallory,r=abc"), u2.evaluate(b"n,,n=mallory,r=xyz")
    assert f1.split(b",", 1)[1] == f2.split(b",", 1)[1] and b",i=4096" in f1
    with pytest.raises(SaslFailure):
        _exchange(server({}), b"n,,n=mallory,r=abc", "anything")


def test_user_names_with_escapes():
    assert user_to_sasl_name("a,b=c") == "a=2Cb=3Dc" and sasl_name_to_user("a=2Cb=3Dc") == "a,b=c"
    s = server({"a,b=c": new_credential(SCRAM_SHA_256, "pw")})
    assert _exchange(s, b"n,,n=a=2Cb=3Dc,r=abc", "pw").startswith(b"v=")
    with pytest.raises(SaslFailure):
        server({}).evaluate(b"n,,n=a=2Db,r=abc")


@pytest.mark.parametrize("message", [
    b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n,,n=,r=abc", b"n,,n=alice", b"garbage",
    b"n,,n=alice,r=a,bc", "n,,n=al\u00efce,r=abc".encode(), b"n,,n=alice,r=abc,tokenauth=true",
])
def test_malformed_or_refused_client_first(message):
    with pytest.raises(SaslFailure):
        server({"alice": new_credential(SCRAM_SHA_256, "pw")}).evaluate(message)


def test_authorization_id_must_be_the_user():
    s = server({"alice": new_credential(SCRAM_SHA_256, "pw")})
    assert _exchange(s, b"n,a=alice,n=alice,r=abc", "pw").startswith(b"v=")
    with pytest.raises(SaslFailure) as e:
        server({"alice": new_credential(SCRAM_SHA_256, "pw")}).evaluate(b"n,a=bob,n=alice,r=abc")
    assert e.value.to_client and "authorization id" in e.value.message


def test_proof_of_the_wrong_length_and_too_few_iterations():
    s = server({"alice": new_credential(SCRAM_SHA_256, "pw")})
    with pytest.raises(SaslFailure, match="length"):
        _exchange(s, b"n,,n=alice,r=abc", "pw", proof=b"short")
    weak = ScramCredential(b"salt", b"k" * 32, b"s" * 32, 4095)
    with pytest.raises(SaslFailure, match="minimum"):
        server({"alice": weak}).evaluate(b"n,,n=alice,r=abc")


def test_final_message_checks():
    s = server({"alice": new_credential(SCRAM_SHA_256, "pw")})
    s.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslFailure, match="nonce"):
        s.evaluate(b"c=biws,r=abcWRONG,p=" + base64.b64encode(b"x" * 32))
    s = server({"alice": new_credential(SCRAM_SHA_256, "pw")})
    sf = s.evaluate(b"n,,n=alice,r=abc").decode()
    nonce = sf.split(",")[0][2:]
    with pytest.raises(SaslFailure, match="channel"):
        s.evaluate(f"c=eSws,r={nonce},p={base64.b64encode(b'x' * 32).decode()}".encode())
