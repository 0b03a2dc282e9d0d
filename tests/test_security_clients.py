"""Conformance (security.md §12.1-12.2): every client of the matrix (confluent-kafka, kcat,
kafka-python, aiokafka) over SSL, mutual TLS, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512: produce, consume in a group with a commit, and admin calls where the client has
them; then the refusals (wrong password, unknown user, a mechanism not enabled, a plaintext
client on a TLS port, an expired or foreign client certificate), each answered as Kafka answers it
and counted in the broker's log; the credential APIs (C1-C6) and a restart (A19). One broker with
five listeners for the module, certificates made for the run, no password ever in its log."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import time
import uuid

import pytest

from broker_support import KCAT, kcat, run_cli  # noqa: F401  (marks the module: it starts a broker)
from security_support import PASSWORDS, SecureBroker, add_scram_users, make_pki, security_overrides

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")
pytest.importorskip("cryptography")

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
LISTENERS = ("PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
             "SASL_SSL://127.0.0.1:0")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MODES = ["SSL", "MTLS"] + [f"{p}/{m}" for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHANISMS]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    data = tmp_path_factory.mktemp("security") / "data"
    add_scram_users(data)
    overrides = security_overrides(pki, LISTENERS, **{
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+).*$/$1/L,DEFAULT",
        # an authorizer that lets everyone in where no ACL names the resource: the matrix runs as
        # without one, and one topic's ACLs show which principal each listener gave its client
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";',
        "num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1", "metrics.listener": "127.0.0.1:0"})
    with SecureBroker(data, overrides) as b:
        b.pki = pki
        yield b
    log = b.log_text()
    assert "Traceback" not in log, log
    for secret in list(PASSWORDS.values()) + ["carol-secret", "wrong-password", "dave-secret", "frank-secret"]:
        assert secret not in log


def _protocol(mode):
    return "SSL" if mode in ("SSL", "MTLS") else mode.split("/")[0]


def _mechanism(mode):
    return mode.split("/")[1] if "/" in mode else None


def _listener(mode):
    return mode if mode in ("SSL", "MTLS") else mode.split("/")[0]


# -- per-client settings, as users write them (security.md §11) ---------------------------------------

def rdkafka_conf(broker, mode, user="alice", password=None) -> dict:
    conf = {"bootstrap.servers": broker.address(_listener(mode)), "security.protocol": _protocol(mode)}
    if "SSL" in _protocol(mode):
        conf["ssl.ca.location"] = os.path.join(broker.pki, "ca.pem")
    if mode == "MTLS":
        conf["ssl.certificate.location"] = os.path.join(broker.pki, "alice.crt")
        conf["ssl.key.location"] = os.path.join(broker.pki, "alice.key")
    if _mechanism(mode):
        conf.update({"sasl.mechanism": _mechanism(mode), "sasl.username": user,
                     "sasl.password": PASSWORDS.get(user, "x") if password is None else password})
    return conf


def kafka_python_conf(broker, mode, user="alice", password=None) -> dict:
    conf = {"bootstrap_servers": broker.address(_listener(mode)), "security_protocol": _protocol(mode)}
    if "SSL" in _protocol(mode):
        conf["ssl_cafile"] = os.path.join(broker.pki, "ca.pem")
    if mode == "MTLS":
        conf["ssl_certfile"] = os.path.join(broker.pki, "alice.crt")
        conf["ssl_keyfile"] = os.path.join(broker.pki, "alice.key")
    if _mechanism(mode):
        conf.update({"sasl_mechanism": _mechanism(mode), "sasl_plain_username": user,
                     "sasl_plain_password": PASSWORDS.get(user, "x") if password is None else password})
    return conf


def aiokafka_conf(broker, mode, user="alice", password=None) -> dict:
    from aiokafka.helpers import create_ssl_context
    conf = {"bootstrap_servers": broker.address(_listener(mode)), "security_protocol": _protocol(mode)}
    if "SSL" in _protocol(mode):
        extra = {"certfile": os.path.join(broker.pki, "alice.crt"),
                 "keyfile": os.path.join(broker.pki, "alice.key")} if mode == "MTLS" else {}
        conf["ssl_context"] = create_ssl_context(cafile=os.path.join(broker.pki, "ca.pem"), **extra)
    if _mechanism(mode):
        conf.update({"sasl_mechanism": _mechanism(mode), "sasl_plain_username": user,
                     "sasl_plain_password": PASSWORDS.get(user, "x") if password is None else password})
    return conf


def kcat_args(broker, mode, user="alice", password=None) -> list[str]:
    return ["-b", broker.address(_listener(mode))] + [
        x for k, v in rdkafka_conf(broker, mode, user, password).items() if k != "bootstrap.servers"
        for x in ("-X", f"{k}={v}")]


# -- the round trips -------------------------------------------------------------------------------

def _topic(client, mode):
    return f"{client}-{mode.replace('/', '-').lower()}"


def confluent_roundtrip(broker, mode):
    topic, conf = _topic("ck", mode), rdkafka_conf(broker, mode)
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    assert topic in admin.list_topics(timeout=30).topics
    p = Producer(conf)
    for i in range(3):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    committed = c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
    c.close()
    assert got == [b"v0", b"v1", b"v2"] and committed[0].offset == 3


def kcat_roundtrip(broker, mode):
    topic, args = _topic("kcat", mode), kcat_args(broker, mode)
    r = kcat("-P", "-t", topic, "-K:", *args, stdin=b"k0:v0\nk1:v1\nk2:v2\n")
    assert r.returncode == 0, r.stderr.decode()
    r = kcat("-G", f"g-{topic}", topic, "-e", "-X", "auto.offset.reset=earliest", "-f", "%s\n", *args)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split() == ["v0", "v1", "v2"]
    r = kcat("-L", "-t", topic, *args)
    assert r.returncode == 0 and f'topic "{topic}"' in r.stdout.decode()


def kafka_python_roundtrip(broker, mode):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic as KNewTopic
    topic, conf = _topic("kp", mode), kafka_python_conf(broker, mode)
    admin = KafkaAdminClient(**conf)
    admin.create_topics([KNewTopic(topic, 1, 1)])
    assert topic in admin.list_topics()
    admin.close()
    p = KafkaProducer(**conf)
    for i in range(3):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=15000, **conf)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 3:
            break
    c.commit()
    tp = kafka.TopicPartition(topic, 0)
    assert got == [b"v0", b"v1", b"v2"] and c.committed(tp) == 3
    c.close()


def aiokafka_roundtrip(broker, mode):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic as ANewTopic
    topic = _topic("aio", mode)

    async def run():
        admin = AIOKafkaAdminClient(**aiokafka_conf(broker, mode))
        await admin.start()
        try:
            await admin.create_topics([ANewTopic(topic, 1, 1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        p = AIOKafkaProducer(**aiokafka_conf(broker, mode))
        await p.start()
        try:
            for i in range(3):
                await p.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             enable_auto_commit=False, **aiokafka_conf(broker, mode))
        await c.start()
        try:
            got = []
            while len(got) < 3:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                got += [m.value for msgs in batch.values() for m in msgs]
            await c.commit()
            tp = aiokafka.TopicPartition(topic, 0)
            assert got == [b"v0", b"v1", b"v2"] and await c.committed(tp) == 3
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(run(), 90))


ROUNDTRIPS = {"confluent-kafka": confluent_roundtrip, "kcat": kcat_roundtrip,
              "kafka-python": kafka_python_roundtrip, "aiokafka": aiokafka_roundtrip}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", list(ROUNDTRIPS))
def test_client_roundtrip(broker, client, mode):
    if client == "kcat" and KCAT is None:
        pytest.skip("kcat is not installed")
    ROUNDTRIPS[client](broker, mode)


@needs_kcat
def test_concurrent_fetches_over_tls_read_their_own_bytes(broker):
    """Fetch answers over TLS are read with pread (security.md §2.3): consumers reading the same
    segments at once each get exactly the records, across segment boundaries."""
    topic = "tls-fetch"
    admin = AdminClient(rdkafka_conf(broker, "SSL"))
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "262144"})]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.address("PLAINTEXT"), "linger.ms": 20, "batch.size": 65536})
    expected = [b"%06d-" % i + b"x" * (i % 300) for i in range(12000)]
    failed = []
    for v in expected:
        p.produce(topic, v, on_delivery=lambda err, msg: err and failed.append(err))
    assert p.flush(30) == 0 and not failed, failed[:3]
    args = ["-C", "-t", topic, "-e", "-f", "%s\n", *kcat_args(broker, "SSL"), "-X", "fetch.max.bytes=4194304"]
    readers = [subprocess.Popen([KCAT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    for r in readers:
        out, err = r.communicate(timeout=60)
        assert r.returncode == 0, err.decode()
        assert out.split(b"\n")[:-1] == expected, err.decode()[-2000:]


def test_describe_configs_masks_the_secret_settings(broker):                # §12.4
    from confluent_kafka.admin import ConfigResource
    admin = AdminClient(rdkafka_conf(broker, "SASL_SSL/SCRAM-SHA-512", "admin"))
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")])
    entries = next(iter(configs.values())).result(30)
    jaas = entries["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    assert entries["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert "carol-secret" not in repr({k: v.value for k, v in entries.items()})


def test_principals_from_certificates_and_sasl_reach_the_authorizer(broker):
    """The mTLS client's certificate (``...CN=alice``, mapped by the listener's rule) and the SCRAM
    user alice are the same principal, User:alice; a TLS client without a certificate is
    User:ANONYMOUS. An ACL for User:alice on a topic lets in the first two only."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    topic = "alice-only"
    admin = AdminClient({"bootstrap.servers": broker.address("PLAINTEXT")})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
    for f in admin.create_acls([acl]).values():
        f.result(30)

    def produce(mode):
        failed = []
        p = Producer({**rdkafka_conf(broker, mode), "message.timeout.ms": 10000})
        p.produce(topic, b"from " + mode.encode(), on_delivery=lambda err, msg: err and failed.append(err))
        p.flush(20)
        return failed

    assert produce("MTLS") == [] and produce("SASL_SSL/SCRAM-SHA-256") == []
    refused = produce("SSL")
    assert refused and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    log = broker.log_text()
    assert f"Principal = User:ANONYMOUS is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = " \
           f"Topic:LITERAL:{topic}" in log                  # its Metadata does not show the topic
    assert f"Principal = User:alice is Denied" not in log


# -- refusals ------------------------------------------------------------------------------------

def _failures(broker) -> int:
    return broker.log_text().count("Failed authentication with")


FAILED = "kafka_server_socket_server_metrics_failed_authentication_total"
SUCCEEDED = "kafka_server_socket_server_metrics_successful_authentication_total"


def test_authentication_counters_and_certificate_expiry(broker):
    """After the round trips: every listener counted its authentications; the TLS listeners
    report their stores' earliest notAfter (the test certificates: 30 days from now)."""
    assert AdminClient({"bootstrap.servers": broker.address("PLAINTEXT")}).list_topics(timeout=20).topics
    for listener in ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL"):
        assert broker.metric(SUCCEEDED, listener=listener) > 0, listener
    in_30_days = time.time() + 30 * 86400
    for listener, kind in (("SSL", "keystore"), ("MTLS", "keystore"), ("MTLS", "truststore"),
                           ("SASL_SSL", "keystore")):
        when = broker.metric("compactlog_tls_certificate_expiry_timestamp_seconds", listener=listener, kind=kind)
        assert abs(when - in_30_days) < 86400, (listener, kind)


def test_wrong_password_and_unknown_user_each_client(broker):             # A7, A8
    before = _failures(broker)
    counted = broker.metric(FAILED, listener="SASL_SSL")
    mode = "SASL_SSL/SCRAM-SHA-256"
    generic = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    for user, password in (("alice", "wrong-password"), ("mallory", "wrong-password")):
        errors = []
        p = Producer({**rdkafka_conf(broker, mode, user, password), "error_cb": errors.append,
                      "reconnect.backoff.ms": 1000})
        deadline = time.monotonic() + 20
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
            p.poll(0.2)
        del p
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert auth and generic in auth[0].str()
        if KCAT:
            started = time.monotonic()
            r = kcat("-L", "-m", "1", *kcat_args(broker, mode, user, password))
            assert r.returncode == 1 and generic in r.stderr.decode()
            assert time.monotonic() - started >= 0.1       # the failure delay
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def aio():
        p = AIOKafkaProducer(**aiokafka_conf(broker, mode, "alice", "wrong-password"))
        with pytest.raises(KafkaConnectionError):
            await p.start()
        await p.stop()
    asyncio.run(asyncio.wait_for(aio(), 60))
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError
    with pytest.raises(KPError):
        KafkaProducer(**kafka_python_conf(broker, mode, "alice", "wrong-password"), bootstrap_timeout_ms=2000)
    assert _failures(broker) > before
    # each refused attempt is counted: both librdkafka producers, kcat twice, aiokafka, kafka-python
    assert broker.metric(FAILED, listener="SASL_SSL") - counted >= 4 + (2 if KCAT else 0)


def test_plain_users_from_jaas_on_their_listener_only(broker):
    ok = AdminClient(rdkafka_conf(broker, "SASL_SSL/PLAIN", "carol", "carol-secret"))
    assert ok.list_topics(timeout=20).topics is not None
    errors = []
    p = Producer({**rdkafka_conf(broker, "SASL_PLAINTEXT/PLAIN", "carol", "carol-secret"),
                  "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and "Invalid username or password" in errors[0].str()


@needs_kcat
def test_mechanism_not_enabled(broker, tmp_path):                         # A9
    r = kcat("-L", "-m", "1", "-b", broker.address("SASL_PLAINTEXT"), "-X", "security.protocol=SASL_PLAINTEXT",
             "-X", "sasl.mechanisms=OAUTHBEARER", "-X", "sasl.oauthbearer.config=principal=alice",
             "-X", "enable.sasl.oauthbearer.unsecure.jwt=true")
    assert r.returncode == 1
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in r.stderr.decode() or "PLAIN,SCRAM" in r.stderr.decode()


def test_plaintext_client_on_a_tls_port_and_bad_certificates(broker):   # A3, A4
    before = _failures(broker)
    counted = broker.metric(FAILED, listener="SSL"), broker.metric(FAILED, listener="MTLS")
    admin = AdminClient({"bootstrap.servers": broker.address("SSL"), "socket.timeout.ms": 1000})
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=1)
    ca = os.path.join(broker.pki, "ca.pem")
    for cert in (None, "expired", "stranger"):
        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(os.path.join(broker.pki, f"{cert}.pem"))
        import socket
        with socket.create_connection(("127.0.0.1", broker.ports["MTLS"]), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    s.sendall(b"\0\0\0\0")
                    if not s.recv(1):          # TLS 1.3: the refusal comes with the first read
                        raise ConnectionResetError("closed")
    deadline = time.monotonic() + 10
    while _failures(broker) < before + 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    log = broker.log_text()
    assert _failures(broker) >= before + 4
    assert "SSL handshake failed" in log and "certificate has expired" in log
    assert broker.metric(FAILED, listener="SSL") >= counted[0] + 1          # the plaintext client
    assert broker.metric(FAILED, listener="MTLS") == counted[1] + 3        # none, expired, foreign


# -- SCRAM credentials through the broker (C1-C6) and the users command ---------------------------------

def test_scram_admin_apis_and_login(broker):                              # C1-C5
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    admin = AdminClient(rdkafka_conf(broker, "SASL_SSL/SCRAM-SHA-512", "admin"))
    user = f"u{uuid.uuid4().hex[:6]}"
    up = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"pw-" + user.encode())
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(30)
    d = admin.describe_user_scram_credentials([user])[user].result(30)
    assert [(i.mechanism, i.iterations) for i in d.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    ok = AdminClient(rdkafka_conf(broker, "SASL_SSL/SCRAM-SHA-256", user, "pw-" + user))
    assert ok.list_topics(timeout=20).topics is not None
    # two alterations of one user in a request, too few/many iterations, a missing deletion
    twice = admin.alter_user_scram_credentials([up, UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(confluent_kafka.KafkaException, match="DUPLICATE_RESOURCE|twice"):
        twice[user].result(30)
    for iterations in (4095, 16385):
        bad = UserScramCredentialUpsertion("v" + user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, iterations), b"x")
        with pytest.raises(confluent_kafka.KafkaException, match="UNACCEPTABLE_CREDENTIAL|iterations"):
            admin.alter_user_scram_credentials([bad])["v" + user].result(30)
    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("ghost", ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(confluent_kafka.KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        missing["ghost"].result(30)
    # kafka-python's admin: upsert and describe
    from kafka import KafkaAdminClient
    from kafka.admin._users import UserScramCredentialUpsertion as KUpsertion
    kp = KafkaAdminClient(**kafka_python_conf(broker, "SASL_PLAINTEXT/SCRAM-SHA-256", "admin"))
    try:
        kp.alter_user_scram_credentials([KUpsertion("kp" + user, "SCRAM-SHA-512", "kp-pw", iterations=4096)])
        described = kp.describe_user_scram_credentials(["kp" + user])
        assert "4096" in str(described) and "kp-pw" not in str(described)
    finally:
        kp.close()
    ok = AdminClient(rdkafka_conf(broker, "SASL_PLAINTEXT/SCRAM-SHA-512", "kp" + user, "kp-pw"))
    assert ok.list_topics(timeout=20).topics is not None


def test_users_command_through_the_broker(broker, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                     'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                     'username="admin" password="admin-secret";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={broker.pki}/ca.pem\n")
    base = ["users", "--bootstrap-server", broker.address("SASL_SSL"), "--command-config", str(props)]
    r = run_cli(broker.data_dir, *base, "--alter", "--entity-type", "users", "--entity-name", "dave",
                "--add-config", "SCRAM-SHA-256=[iterations=8192,password=dave-secret],SCRAM-SHA-512=[password=dave-secret]")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == "Completed updating config for user dave.\n"
    r = run_cli(broker.data_dir, *base, "--describe", "--entity-name", "dave")
    assert r.stdout.decode() == ("SCRAM credential configs for user-principal 'dave' are "
                                 "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    r = run_cli(broker.data_dir, *base, "--alter", "--entity-name", "dave", "--delete-config", "SCRAM-SHA-512")
    assert r.returncode == 0, r.stderr.decode()
    r = run_cli(broker.data_dir, *base, "--describe")
    assert "'dave' are SCRAM-SHA-256=iterations=8192\n" in r.stdout.decode()
    assert "'alice' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096" in r.stdout.decode()
    # the data dir is the broker's: an offline write is refused without echoing a password
    r = run_cli(broker.data_dir, "users", "--alter", "--entity-name", "erin",
                "--add-config", "SCRAM-SHA-256=[password=erin-secret]")
    assert r.returncode == 1 and "erin-secret" not in r.stderr.decode()
    assert "--bootstrap-server" in r.stderr.decode()
    # read-only commands print no secrets
    r = run_cli(broker.data_dir, "users", "--describe")
    assert r.returncode == 0 and "dave" in r.stdout.decode()
    for secret in ("dave-secret", "salt", "stored_key"):
        assert secret not in r.stdout.decode() + r.stderr.decode()


def test_credentials_survive_a_restart(broker):                             # A19
    """Last in the module: the module's broker is stopped, a user is added offline (the password
    from standard input), and after the restart both that user and one added through the broker
    (dave, above) log in."""
    broker.stop()
    try:
        r = run_cli(broker.data_dir, "users", "--alter", "--entity-name", "frank", "--add-config",
                    "SCRAM-SHA-512=[iterations=4096]", stdin=b"frank-secret\n")
        assert r.returncode == 0, r.stderr.decode()
        assert "frank-secret" not in r.stdout.decode() + r.stderr.decode()
    finally:
        broker.start()
    for user, password, mechanism in (("frank", "frank-secret", "SCRAM-SHA-512"), ("dave", "dave-secret", "SCRAM-SHA-256")):
        conf = rdkafka_conf(broker, f"SASL_PLAINTEXT/{mechanism}", user, password)
        assert AdminClient(conf).list_topics(timeout=20).topics is not None
    assert "frank-secret" not in broker.log_text()
