"""``--command-config FILE``: the client properties Kafka's tools take (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.location`` ...), turned into
confluent-kafka (librdkafka) settings, so that the file a user already has for
``kafka-configs.sh --command-config`` works here too. librdkafka's own names
(``sasl.username``, ``ssl.ca.location`` ...) pass through as they are.

Java-only settings are translated where librdkafka has an equivalent: the JAAS line's
``username``/``password`` become ``sasl.username``/``sasl.password``; a PEM trust store becomes
``ssl.ca.location``; a PKCS12 key store ``ssl.keystore.location``/``ssl.keystore.password``;
a PEM key store (key and chain in one file) ``ssl.key.location`` + ``ssl.certificate.location``.
A JKS store is refused with the command that converts it. Values are never printed.
"""

from __future__ import annotations

import os
import re

from ..errors import ConfigError

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:\\.|[^"\\])*)"')
# Java client settings with no librdkafka counterpart that can be dropped without changing security
_DROPPED = {"ssl.truststore.type", "ssl.keystore.type", "ssl.protocol", "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm", "sasl.login.callback.handler.class", "request.timeout.ms",
            "default.api.timeout.ms", "retries", "retry.backoff.ms"}
_PASS_THROUGH = {"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                 "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                 "ssl.keystore.location", "ssl.keystore.password", "ssl.endpoint.identification.algorithm",
                 "ssl.cipher.suites", "client.id", "socket.timeout.ms", "enable.ssl.certificate.verification"}


def read_command_config(path: str | None) -> dict[str, str]:
    """librdkafka settings from a client properties file (empty without a file)."""
    if not path:
        return {}
    from ..storage.config import read_properties
    if not os.path.isfile(path):
        raise ConfigError(f"--command-config {path}: no such file")
    return client_settings(read_properties(path), path)


def client_settings(props: dict[str, str], where: str = "--command-config") -> dict[str, str]:
    out: dict[str, str] = {}
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}
        if "username" in options:
            out["sasl.username"] = options["username"]
        if "password" in options:
            out["sasl.password"] = options["password"]
    trust_type = props.get("ssl.truststore.type", "PEM" if props.get("ssl.truststore.location", "").endswith(
        (".pem", ".crt")) else "").upper()
    if "ssl.truststore.location" in props:
        if trust_type == "JKS" or props["ssl.truststore.location"].endswith(".jks"):
            raise ConfigError(f"{where}: ssl.truststore.location is a JKS store, which librdkafka cannot read; "
                              f"export the CA as PEM (keytool -exportcert -rfc) and set ssl.ca.location")
        out["ssl.ca.location"] = props["ssl.truststore.location"]
    if "ssl.truststore.certificates" in props:
        out["ssl.ca.pem"] = props["ssl.truststore.certificates"]
    if "ssl.keystore.location" in props:
        key_type = props.get("ssl.keystore.type", "PKCS12" if props["ssl.keystore.location"].endswith(
            (".p12", ".pfx")) else "PEM").upper()
        if key_type == "JKS":
            raise ConfigError(f"{where}: ssl.keystore.location is a JKS store, which librdkafka cannot read; "
                              f"convert it with keytool -importkeystore -deststoretype PKCS12")
        if key_type == "PKCS12":
            out["ssl.keystore.location"] = props["ssl.keystore.location"]
            if "ssl.keystore.password" in props:
                out["ssl.keystore.password"] = props["ssl.keystore.password"]
        else:
            out["ssl.key.location"] = out["ssl.certificate.location"] = props["ssl.keystore.location"]
            if "ssl.key.password" in props:
                out["ssl.key.password"] = props["ssl.key.password"]
    if props.get("ssl.endpoint.identification.algorithm", None) == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    translated = {"ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.location"}
    for k, v in props.items():
        if k in translated:
            continue            # handled above, by the store's type
        if k in _PASS_THROUGH and k not in out and not (k == "ssl.endpoint.identification.algorithm" and v == ""):
            out[k] = v
        elif k not in _PASS_THROUGH and k not in _DROPPED and not k.startswith(("ssl.", "sasl.")):
            out[k] = v
    return out


# librdkafka's settings -> kafka-python's, for the requests only kafka-python sends
_KAFKA_PYTHON = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
                 "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_plain_username",
                 "sasl.password": "sasl_plain_password", "ssl.ca.location": "ssl_cafile",
                 "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
                 "ssl.key.password": "ssl_password", "client.id": "client_id"}


def kafka_python_settings(conf: dict[str, str]) -> dict:
    """kafka-python's admin client settings for the librdkafka settings ``client_settings`` made."""
    out: dict = {}
    for k, v in conf.items():
        if k in _KAFKA_PYTHON:
            out[_KAFKA_PYTHON[k]] = v.upper() if k in ("security.protocol",) else v
        elif k == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = v.lower() not in ("none", "")
        elif k in ("ssl.keystore.location", "ssl.ca.pem"):
            raise ConfigError(f"--command-config: {'a PKCS12 key store' if k == 'ssl.keystore.location' else 'an inline trust store'} "
                              f"cannot be used for this request (kafka-python); use PEM files (ssl.keystore.type=PEM, "
                              f"ssl.truststore.location)")
    return out
