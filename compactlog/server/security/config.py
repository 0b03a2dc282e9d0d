"""The broker's security settings: TLS (Kafka's SslConfigs, BrokerSecurityConfigs) and SASL
(SaslConfigs), each with its type, default, validator, documentation, importance and update mode,
registered with every owner's (storage/config_registry.py). Each may also be set per listener
(``listener.name.<l>.<name>``: listeners.py); security.md §1.2.
"""

from __future__ import annotations

from ...storage.config_def import PER_BROKER, ConfigDef, at_least, one_of
from ...storage.config_registry import register

SECURITY_SETTINGS = (
    ConfigDef("listener.security.protocol.map", "string",
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", dynamic=PER_BROKER, importance="low",
              doc="Security protocol of each listener name, as NAME:PROTOCOL pairs."),
    ConfigDef("sasl.enabled.mechanisms", "list", [], dynamic=PER_BROKER, importance="medium",
              doc="SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
    ConfigDef("sasl.server.max.receive.size", "int", 524288, check=at_least(1), importance="medium",
              doc="Largest frame accepted before a client is authenticated."),
    ConfigDef("connections.max.reauth.ms", "long", 0, importance="medium",
              doc="Session lifetime of a SASL connection; 0 means sessions never expire."),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100, check=at_least(0), importance="low",
              doc="Delay of the answer and close after a failed authentication."),
    ConfigDef("ssl.client.auth", "string", "none", check=one_of("required", "requested", "none"), dynamic=PER_BROKER, importance="medium",
              doc="Whether TLS clients must (required), may (requested) or need not (none) present a "
                  "certificate."),
    ConfigDef("ssl.keystore.type", "string", "PEM", dynamic=PER_BROKER, importance="medium",
              doc="Format of the key store: PEM or PKCS12 (JKS is not readable here)."),
    ConfigDef("ssl.keystore.location", "string", "", dynamic=PER_BROKER, importance="high",
              doc="File holding the broker's private key and certificate chain."),
    ConfigDef("ssl.truststore.type", "string", "PEM", dynamic=PER_BROKER, importance="medium",
              doc="Format of the trust store: PEM or PKCS12."),
    ConfigDef("ssl.truststore.location", "string", "", dynamic=PER_BROKER, importance="high",
              doc="File of the CA certificates client certificates are checked against."),
    ConfigDef("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], dynamic=PER_BROKER, importance="medium",
              doc="TLS versions accepted: TLSv1.2, TLSv1.3."),
    ConfigDef("ssl.cipher.suites", "list", [], dynamic=PER_BROKER, importance="low",
              doc="TLS 1.2 cipher suites allowed, by their Java names; empty allows the defaults."),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT", importance="low",
              doc="How a client certificate's subject becomes a user name (DEFAULT or "
                  "RULE:pattern/replacement/[LU])."),
)

register("security", __name__, SECURITY_SETTINGS)
