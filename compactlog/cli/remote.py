"""Talking to a broker (``--bootstrap-server``) with a real Kafka client library, as Kafka's own
tools do: confluent-kafka's AdminClient (librdkafka), and kafka-python for the one request
librdkafka's Python binding does not expose (DescribeLogDirs). Client errors become one line."""

from __future__ import annotations

import logging

from ..errors import CompactlogError

TIMEOUT_S = 30


class BrokerError(CompactlogError):
    """A request to the broker failed (Kafka's error name and message)."""


class ClientLog(logging.Handler):
    """librdkafka's log and error callbacks for a client of this command: nothing printed (its
    retries would flood stderr), the last connection problem kept for the error message."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self.logger = logging.getLogger(f"compactlog.client.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.handlers[:] = [self]

    def config(self) -> dict:
        """The client settings that route its log and errors here."""
        return {"logger": self.logger, "error_cb": self._on_error}

    def emit(self, record) -> None:
        # "[thrd:...]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused ..."
        self.last = record.getMessage().split("]: ", 1)[-1]

    def _on_error(self, err) -> None:
        self.last = f"{err.name()}: {err.str()}"

    def why(self) -> str:
        return f" (last connection problem: {self.last})" if self.last else ""


def admin_client(bootstrap: str, security: dict | None = None):
    """confluent-kafka's AdminClient; ``security``: client settings (``client_config``)."""
    from confluent_kafka.admin import AdminClient
    # a Metadata request naming a topic must not create it (kafka-topics.sh and kcat -L ask about
    # topics that may not exist)
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": TIMEOUT_S * 1000,
                        "allow.auto.create.topics": False, **(security or {}), **ClientLog().config()})


# -- SCRAM users (DescribeUserScramCredentials, AlterUserScramCredentials) ----------------------------

def describe_scram_users(bootstrap: str, users: list[str] | None,
                         command_config: str | None) -> dict[str, list[tuple[int, int]]]:
    """user -> [(mechanism type, iterations)]; a named user without credentials maps to [].
    Asked through kafka-python: librdkafka 2.16 crashes the process on the top-level error
    (CLUSTER_AUTHORIZATION_FAILED) Kafka answers this request with."""
    from kafka.errors import KafkaError, for_code
    from kafka.protocol.admin import DescribeUserScramCredentialsRequest
    from .client_config import kafka_python_settings, read_command_config
    client = _kafka_python_admin(bootstrap, kafka_python_settings(read_command_config(command_config)))
    try:
        request = DescribeUserScramCredentialsRequest(users=None if not users else [(u,) for u in dict.fromkeys(users)])
        response = client._manager.run(client._manager.send, request)
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: {type(e).__name__}: {e}") from None
    finally:
        client.close()
    if response.error_code:
        raise BrokerError(f"{for_code(response.error_code).__name__}: {response.error_message or ''}".rstrip(": "))
    out: dict[str, list[tuple[int, int]]] = {}
    for r in response.results:
        if r.error_code == RESOURCE_NOT_FOUND:
            out[r.user] = []
        elif r.error_code:
            raise BrokerError(f"user {r.user!r}: {for_code(r.error_code).__name__}: {r.error_message or ''}")
        else:
            out[r.user] = sorted((int(i.mechanism), int(i.iterations)) for i in r.credential_infos)
    return dict(sorted(out.items())) if not users else {u: out.get(u, []) for u in users}


RESOURCE_NOT_FOUND = 91


def alter_scram_users(bootstrap: str, user: str, upserts: dict[str, dict], deletions: list[str],
                      command_config: str | None) -> None:
    """One request per mechanism (Kafka accepts one alteration per user and request); the client
    salts the password, so only the salted form travels."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    from .client_config import read_command_config
    admin = admin_client(bootstrap, read_command_config(command_config))
    mechanism = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    alterations = [UserScramCredentialDeletion(user, mechanism[m]) for m in deletions]
    alterations += [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism[m], o["iterations"]),
                                                 o["password"].encode("utf-8"))
                    for m, o in upserts.items()]
    for alteration in alterations:
        futures = admin.alter_user_scram_credentials([alteration])
        for name, future in futures.items():
            result(future, f"user {name!r}")


def result(future, what: str):
    """A future's result, a Kafka error turned into one BrokerError line."""
    from confluent_kafka import KafkaException
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        name = err.name() if hasattr(err, "name") else type(err).__name__
        text = err.str() if hasattr(err, "str") else str(err)
        raise BrokerError(f"{what}: {name}: {text}") from None
    except TimeoutError:
        raise BrokerError(f"{what}: no answer within {TIMEOUT_S} s") from None


def topic_partitions(admin, bootstrap: str, topic: str | None) -> dict[str, list[int]]:
    """topic -> partitions, from the broker's metadata."""
    from confluent_kafka import KafkaException
    try:
        md = admin.list_topics(topic=topic, timeout=TIMEOUT_S)
    except KafkaException as e:
        raise BrokerError(f"{bootstrap}: cannot read metadata: {e.args[0].str() if e.args else e}") from None
    out = {}
    for name, t in md.topics.items():
        if t.error is not None:
            if topic is not None:
                raise BrokerError(f"topic {name!r}: {t.error.name()}: {t.error.str()}")
            continue
        out[name] = sorted(t.partitions)
    return out


def describe_log_dirs(bootstrap: str, topics: list[str] | None) -> list:
    """DescribeLogDirs through kafka-python's admin client: [(log dir, error, [(topic, partition,
    size, offset lag, is future)])]."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError
    try:
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: cannot connect: {e}") from None
    try:
        response = client.describe_log_dirs()
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: DescribeLogDirs: {e}") from None
    finally:
        client.close()
    # kafka-python 3: [{"broker": id, "log_dirs": [{"error_code", "log_dir", "topics": [{"name",
    # "partitions": [{"partition_index", "partition_size", "offset_lag", "is_future_key"}]}]}]}]
    out = []
    for broker in response if isinstance(response, list) else [response]:
        for r in _get(broker, "log_dirs", 1) or ():
            parts = []
            for t in _get(r, "topics", 2) or ():
                name = _get(t, "name", 0)
                for p in _get(t, "partitions", 1) or ():
                    parts.append((name, _get(p, "partition_index", 0), _get(p, "partition_size", 1),
                                  _get(p, "offset_lag", 2), bool(_get(p, "is_future_key", 3))))
            if topics is not None:
                parts = [x for x in parts if x[0] in topics]
            out.append((_get(r, "log_dir", 1), _get(r, "error_code", 0), parts))
    return out


def _get(obj, name: str, index: int):
    """A field of kafka-python's response structs, which are objects, dicts or tuples by version."""
    if isinstance(obj, dict):
        return obj.get(name)
    if hasattr(obj, name):
        return getattr(obj, name)
    return obj[index]


# -- configs and topic descriptions (DescribeConfigs, IncrementalAlterConfigs, Metadata) --------------

def kafka_uuid(uuid) -> str:
    """A confluent-kafka Uuid as Kafka prints one (Uuid.toString: URL-safe base64, no padding)."""
    import base64
    raw = b"".join((bits & (2**64 - 1)).to_bytes(8, "big")
                   for bits in (uuid.get_most_significant_bits(), uuid.get_least_significant_bits()))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def describe_topics(admin, names: list[str]) -> dict:
    """topic -> confluent-kafka's TopicDescription (partitions with leader, replicas, isr)."""
    from confluent_kafka import TopicCollection
    futures = admin.describe_topics(TopicCollection(names))
    return {name: result(futures[name], f"topic {name!r}") for name in names}


def config_entries(admin, resource_type: str, name: str) -> list:
    """The DescribeConfigs entries of one resource (``topic`` or ``broker``), with synonyms, in the
    broker's order: confluent-kafka ConfigEntry objects."""
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource(resource_type, name)
    futures = admin.describe_configs([resource])
    what = f"{resource_type} {name!r}" if name else "the brokers' default configs"
    return list(result(next(iter(futures.values())), what).values())


def source_name(source) -> str:
    """A ConfigSource as Kafka's tools print it (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...)."""
    from confluent_kafka.admin import ConfigSource
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def alter_configs(admin, resource_type: str, name: str, changes: dict[str, str], removals: list[str]) -> None:
    """IncrementalAlterConfigs: DELETE each of ``removals``, then SET each of ``changes``, in one
    request (as kafka-configs.sh sends them)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    ops = [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in removals]
    ops += [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()]
    resource = ConfigResource(resource_type, name, incremental_configs=ops)
    futures = admin.incremental_alter_configs([resource])
    what = f"{resource_type} {name!r}" if name else "the brokers' default configs"
    try:
        result(next(iter(futures.values())), what)
    except BrokerError as e:
        raise BrokerError(f"{e}{unknown_name_hint(str(e), list(changes) + list(removals), resource_type)}") from None


def unknown_name_hint(message: str, names: list[str], resource_type: str) -> str:
    """" (did you mean ...?)" for a name the broker called unknown, from compactlog's names."""
    from ..storage.config import TOPIC_CONFIGS, broker_setting_names, did_you_mean
    known = list(TOPIC_CONFIGS) if resource_type == "topic" else broker_setting_names()
    for n in names:
        if n in message and n not in known:
            return did_you_mean(n, known)
    return ""


# -- the brokers' cluster-wide default (resource name ""), which confluent-kafka's binding refuses --

def _kafka_python_admin(bootstrap: str, security: dict | None = None):
    """kafka-python's admin client; ``security``: its settings (``client_config.kafka_python_settings``)."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000, **(security or {}))
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: cannot connect: {e}") from None


def default_broker_entries(bootstrap: str) -> list[tuple[str, str | None, str, bool, list]]:
    """DescribeConfigs of the brokers' default resource through kafka-python: (name, value, source,
    sensitive, [(source, name, value)]) per entry. kafka-python's public describe_configs refuses
    the empty broker name too, so its request builder is called directly."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    from kafka.errors import KafkaError
    client = _kafka_python_admin(bootstrap)
    try:
        request = KafkaAdminClient._describe_configs_request([ConfigResource(ConfigResourceType.BROKER, "")],
                                                             include_synonyms=True)
        response = client._manager.run(client._manager.send, request)
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: DescribeConfigs: {e}") from None
    finally:
        client.close()
    out = []
    for r in response.results:
        if r.error_code:
            raise BrokerError(f"the brokers' default configs: error {r.error_code}: {r.error_message}")
        for c in r.configs:
            d = c.to_dict()
            synonyms = [(source_name(s["source"]), s["name"], s["value"]) for s in d.get("synonyms") or ()]
            out.append((d["name"], d["value"], source_name(d.get("config_source", 0)),
                        bool(d.get("is_sensitive")), synonyms))
    return out


def alter_default_broker_configs(bootstrap: str, changes: dict[str, str], removals: list[str]) -> None:
    """IncrementalAlterConfigs of the brokers' default resource through kafka-python."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    from kafka.errors import KafkaError
    configs = {k: ("DELETE", None) for k in removals}
    configs.update({k: ("SET", v) for k, v in changes.items()})
    client = _kafka_python_admin(bootstrap)
    try:
        request = KafkaAdminClient._alter_configs_request([ConfigResource(ConfigResourceType.BROKER, "", configs)],
                                                          incremental=True)
        response = client._manager.run(client._manager.send, request)
    except KafkaError as e:
        raise BrokerError(f"{bootstrap}: IncrementalAlterConfigs: {e}") from None
    finally:
        client.close()
    for r in response.responses:
        if r.error_code:
            from kafka.errors import for_code
            name = getattr(for_code(r.error_code), "message", None) or for_code(r.error_code).__name__
            raise BrokerError(f"the brokers' default configs: {name}: {r.error_message}"
                              f"{unknown_name_hint(r.error_message or '', list(changes) + removals, 'broker')}")
