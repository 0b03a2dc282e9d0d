"""The security of each listener, built once at start-up from Kafka's settings: Kafka's
``ChannelBuilders`` (which protocol, which ``ssl.*`` and ``sasl.*`` settings a listener gets),
``ListenerName.configPrefix`` (``listener.name.<name>.`` and ``listener.name.<name>.<mechanism>.``
overrides), ``JaasContext.loadServerContext`` (PLAIN users) and the start-up checks of
security.md §1.3.

A listener's setting is looked up as Kafka's: the listener and mechanism prefix, the listener
prefix, the bare name, the default. Every check that can fail does so here, before a port opens.
The counters of ``AuthenticationStats`` are plain integers per listener (Kafka's
``successful-authentication-total`` and friends) that a metrics reader can sample.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from dataclasses import dataclass, field
from typing import Callable

from ...errors import ConfigError
from .credentials import CredentialCache
from .plain import MECHANISM as PLAIN, PlainServer, parse_plain_jaas
from .scram import MECHANISMS as SCRAM_MECHANISMS, ScramServer
from .tls import STORE_FIELDS, PrincipalMapper, ServerTls, TlsSettings, check_compatible, server_context

log = logging.getLogger("kafka.network.SocketServer")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
REFUSED_MECHANISMS = {"GSSAPI": "Kerberos", "OAUTHBEARER": "OAuth bearer tokens"}
ANONYMOUS = "User:ANONYMOUS"

DEFAULTS = {
    "sasl.enabled.mechanisms": "",
    "connections.max.reauth.ms": "0",
    "connection.failed.authentication.delay.ms": "100",
    "sasl.server.max.receive.size": "524288",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.keystore.type": "PEM",
    "ssl.truststore.type": "PEM",
    "ssl.cipher.suites": "",
}


def parse_protocol_map(value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (names upper-cased)."""
    out = {}
    for item in (x.strip() for x in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"invalid value {value!r} for configuration listener.security.protocol.map: "
                              f"{item!r} is not NAME:PROTOCOL")
        if protocol not in PROTOCOLS:
            raise ConfigError(f"invalid value {value!r} for configuration listener.security.protocol.map: "
                              f"{protocol!r} is not a security protocol ({', '.join(PROTOCOLS)})")
        if name in out:
            raise ConfigError(f"invalid value {value!r} for configuration listener.security.protocol.map: "
                              f"listener name {name} is mapped twice")
        out[name] = protocol
    return out


class ListenerSettings:
    """A listener's view of the broker's properties (``ListenerName.configPrefix`` lookups)."""

    def __init__(self, props: dict[str, str], listener: str):
        self.props = props
        self.prefix = f"listener.name.{listener.lower()}."

    def get(self, name: str, mechanism: str | None = None) -> str | None:
        if mechanism is not None:
            value = self.props.get(f"{self.prefix}{mechanism.lower()}.{name}")
            if value is not None:
                return value
        value = self.props.get(self.prefix + name)
        if value is not None:
            return value
        value = self.props.get(name)
        return value if value is not None else DEFAULTS.get(name)

    def prefixed(self, name: str) -> bool:
        return self.prefix + name in self.props

    def integer(self, name: str, mechanism: str | None = None) -> int:
        raw = self.get(name, mechanism)
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"invalid value {raw!r} for configuration {name}: not a number") from None


# Java classes that decide how Kafka authenticates clients: compactlog cannot load them, and
# running without them would let in clients they were meant to refuse (or name principals
# differently). The inter-broker login classes are left to the unused-setting warning.
JAVA_CLASS_SETTINGS = ("principal.builder.class", "sasl.server.callback.handler.class", "ssl.engine.factory.class")
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"


def _true(value) -> bool:
    return str(value).strip().lower() == "true"


def _refuse_java_classes(props: dict[str, str]) -> None:
    for name, value in props.items():
        # the bare name or a listener-prefixed one (listener.name.<l>.[<mechanism>.]<setting>)
        matched = next((s for s in JAVA_CLASS_SETTINGS if name == s or name.endswith("." + s)), None)
        if matched is None or not str(value).strip():
            continue
        if matched == "principal.builder.class" and value.strip() == DEFAULT_PRINCIPAL_BUILDER:
            continue
        raise ConfigError(f"{name}: a Java class ({value.strip()}) cannot be loaded by compactlog; remove the "
                          f"setting (principals come from ssl.principal.mapping.rules and the SASL user name)")


class AuthenticationStats:
    """Kafka's per-listener socket-server counters for authentication (``Selector.SelectorMetrics``):
    failed TLS handshakes count as failed authentications."""

    __slots__ = ("successful_authentication", "failed_authentication", "successful_reauthentication",
                 "failed_reauthentication", "expired_connections_killed")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass
class ListenerSecurity:
    """One listener: its protocol, TLS context, SASL mechanisms and principal rules."""

    name: str
    protocol: str
    tls: ServerTls | None = None
    mechanisms: tuple[str, ...] = ()
    reauth_ms: dict[str, int] = field(default_factory=dict)
    plain_users: dict[str, str] = field(default_factory=dict)
    principal_mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    stats: AuthenticationStats = field(default_factory=AuthenticationStats)
    new_server: Callable[[str], object] | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __repr__(self) -> str:
        return f"ListenerSecurity({self.name}, {self.protocol}, mechanisms={list(self.mechanisms)})"


class BrokerSecurity:
    """Every listener's security, the SCRAM credentials and the authentication limits.

    Built once at start. At run time only the key and trust stores of a TLS listener change
    (``store_changes`` then ``apply_stores``: Kafka's dynamic ``listener.name.<l>.ssl.keystore.*``
    and ``ssl.truststore.*``, for the listener's next connections); the rest of a listener's
    settings take effect at the next start. ``quiet``: no warnings (a check of settings not yet
    in use)."""

    def __init__(self, props: dict[str, str], listeners, credentials: CredentialCache, *, quiet: bool = False):
        self.credentials = credentials
        self.props = props
        self._warn = (lambda message: None) if quiet else log.warning
        top = ListenerSettings(props, "")
        self.failed_authentication_delay_ms = max(0, top.integer("connection.failed.authentication.delay.ms"))
        self.max_receive_size = top.integer("sasl.server.max.receive.size")
        if self.max_receive_size < 1:
            raise ConfigError("sasl.server.max.receive.size must be at least 1")
        # keys the made-up credential of unknown SCRAM users (stable for this process only)
        self._unknown_user_secret = secrets.token_bytes(32)
        _refuse_java_classes(props)
        if props.get("sasl.jaas.config") is not None:
            self._warn("sasl.jaas.config without a listener prefix is ignored on a broker, as Kafka ignores "
                        "it; use listener.name.<listener>.<mechanism>.sasl.jaas.config")
        self.listeners: dict[str, ListenerSecurity] = {}
        for listener in listeners:
            self.listeners[listener.name] = self._listener(listener.name, listener.protocol)

    def listener(self, name: str) -> ListenerSecurity:
        return self.listeners[name]

    def stats(self) -> dict[str, dict[str, int]]:
        """listener -> its authentication counters (for the metrics endpoint)."""
        return {name: sec.stats.as_dict() for name, sec in self.listeners.items()}

    def _listener(self, name: str, protocol: str) -> ListenerSecurity:
        settings = ListenerSettings(self.props, name)
        sec = ListenerSecurity(name, protocol,
                               principal_mapper=PrincipalMapper(settings.get("ssl.principal.mapping.rules")))
        if sec.uses_tls:
            sec.tls = server_context(self._tls_settings(settings, name, protocol))
        if sec.uses_sasl:
            self._sasl(settings, sec)
        return sec

    def _tls_settings(self, settings: ListenerSettings, name: str, protocol: str, *, quiet: bool = False) -> TlsSettings:
        client_auth = settings.get("ssl.client.auth")
        if protocol == "SASL_SSL" and not settings.prefixed("ssl.client.auth"):
            # ChannelBuilders (KIP-684): on SASL_SSL only a listener-prefixed ssl.client.auth applies
            if client_auth.strip().lower() != "none" and "ssl.client.auth" in self.props and not quiet:
                self._warn(f"ssl.client.auth={client_auth} is ignored on the SASL_SSL listener {name}: "
                            f"set listener.name.{name.lower()}.ssl.client.auth to ask for client certificates there")
            client_auth = "none"
        return TlsSettings(
            listener=name, keystore_type=settings.get("ssl.keystore.type"),
            keystore_location=settings.get("ssl.keystore.location"),
            keystore_password=settings.get("ssl.keystore.password"),
            key_password=settings.get("ssl.key.password"),
            keystore_key=settings.get("ssl.keystore.key"),
            keystore_chain=settings.get("ssl.keystore.certificate.chain"),
            truststore_type=settings.get("ssl.truststore.type"),
            truststore_location=settings.get("ssl.truststore.location"),
            truststore_password=settings.get("ssl.truststore.password"),
            truststore_certificates=settings.get("ssl.truststore.certificates"),
            client_auth=client_auth, enabled_protocols=settings.get("ssl.enabled.protocols"),
            cipher_suites=settings.get("ssl.cipher.suites"))

    def _sasl(self, settings: ListenerSettings, sec: ListenerSecurity) -> None:
        where = f"listener {sec.name} ({sec.protocol})"
        raw = settings.get("sasl.enabled.mechanisms") or ""
        mechanisms = tuple(m.strip() for m in raw.split(",") if m.strip())
        if not mechanisms:
            raise ConfigError(f"{where}: No SASL mechanisms are enabled: set sasl.enabled.mechanisms "
                              f"(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
        for m in mechanisms:
            if m in REFUSED_MECHANISMS:
                raise ConfigError(f"{where}: SASL mechanism {m} ({REFUSED_MECHANISMS[m]}) is not offered; "
                                  f"use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
            if m not in SUPPORTED_MECHANISMS:
                raise ConfigError(f"{where}: unknown SASL mechanism {m!r} in sasl.enabled.mechanisms "
                                  f"(PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are offered; names are case-sensitive)")
        sec.mechanisms = mechanisms
        for m in mechanisms:
            sec.reauth_ms[m] = max(0, settings.integer("connections.max.reauth.ms", m))
        if PLAIN in mechanisms:
            setting = f"{settings.prefix}plain.sasl.jaas.config"
            jaas = settings.props.get(setting)
            try:
                sec.plain_users = parse_plain_jaas(jaas) if jaas is not None else {}
            except ConfigError as e:        # the message names no value: it may hold passwords
                raise ConfigError(f"{where}: {setting}: {e}") from None
            if sec.protocol == "SASL_PLAINTEXT":
                self._warn(f"{where}: PLAIN sends passwords in clear on this listener; enable it on "
                            f"SASL_SSL listeners only")
        credentials = self.credentials
        users = sec.plain_users
        secret = self._unknown_user_secret

        def new_server(mechanism: str):
            if mechanism == PLAIN:
                return PlainServer(users, credentials.lookup_any)
            scram = SCRAM_MECHANISMS[mechanism]
            return ScramServer(scram, lambda user: credentials.lookup(user, scram), secret)

        sec.new_server = new_server

    def store_changes(self, props: dict[str, str], *, reload_files: bool) -> dict[str, ServerTls]:
        """The TLS listeners whose key or trust store ``props`` change, each with its new context,
        built and checked against the one it replaces (Kafka's ``SslFactory.validateReconfiguration``:
        the stores load, the certificate keeps its subject and names unless
        ``ssl.allow.dn.changes`` / ``ssl.allow.san.changes``); a ConfigError for the first that
        cannot be. Only the store settings count (SslConfigs.RECONFIGURABLE_CONFIGS): a change of
        ``ssl.client.auth``, protocols or suites waits for the next start, as on Kafka.
        ``reload_files``: a listener whose store files were rewritten in place is rebuilt too
        (a change of this broker's own configs reloads them, as Kafka's DynamicConfigPublisher
        does); one that fails then keeps its context, and a warning says why."""
        changes = {}
        for name, sec in self.listeners.items():
            old = sec.tls
            if old is None or old.settings is None:
                continue
            settings = ListenerSettings(props, name)
            wanted = self._tls_settings(settings, name, sec.protocol, quiet=True)
            new_settings = dataclasses.replace(old.settings, **{f: getattr(wanted, f) for f in STORE_FIELDS})
            changed = new_settings != old.settings
            if not changed and not (reload_files and old.files_changed()):
                continue
            try:
                tls = server_context(new_settings)
                check_compatible(old, tls, allow_dn_changes=_true(settings.get("ssl.allow.dn.changes")),
                                 allow_san_changes=_true(settings.get("ssl.allow.san.changes")))
            except ConfigError as e:
                if changed:
                    raise
                self._warn(f"listener {name}: its rewritten key or trust store is not used ({e}); the "
                           f"listener keeps the stores it had")
                continue
            changes[name] = tls
        return changes

    def apply_stores(self, changes: dict[str, ServerTls]) -> None:
        """Make ``store_changes``' contexts the listeners' own: each new connection's handshake uses
        its listener's context of that moment, connections already open keep their session."""
        for name, tls in changes.items():
            self.listeners[name].tls = tls
            log.info(f"Listener {name}: new SSL key and trust stores for new connections "
                     f"(key store {tls.settings.keystore_type}:{tls.settings.keystore_location or 'inline'})")

    def principal_from_certificate(self, sec: ListenerSecurity, dn: str | None) -> str | None:
        """``User:<mapped DN>`` of a verified client certificate, ANONYMOUS without one; None when
        no mapping rule applies (an authentication failure)."""
        if dn is None:
            return ANONYMOUS
        name = sec.principal_mapper.name(dn)
        return None if name is None else f"User:{name}"

