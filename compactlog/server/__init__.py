"""compactlog's Kafka broker: the wire protocol (sans-IO) and, above it, the server.

``protocol`` turns bytes into request events and answers into the parts to write (Kafka's
SocketServer, RequestHeader, RequestChannel); ``versions`` holds the API table type and the
ApiVersions answer (ApiVersionsRequest, KafkaApis.handleApiVersionsRequest). Each API is declared
in its own module of ``apis/``; ``dispatch`` derives the dispatch
table and the advertised APIs from those declarations; ``transport`` runs it all on asyncio.

The CLI uses the broker through the names of ``PUBLIC`` only (``from compactlog.server import
Broker``), never a module inside: the broker itself for ``serve``, the ACL model and the ACL store
for ``acls``, the SCRAM credential store for ``users``, the config entries DescribeConfigs answers
for ``configs --describe``. They resolve on first use, so that importing this package loads none
of them (``dispatch_test`` checks that the CLI imports nothing deeper).
"""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
from ..lazy import exports

# the protocol's names, imported on first use like every other: importing a module of this package
# (its settings, read by every command that checks server.properties) does not load the wire
# protocol's schemas (~0.75 s)
_PROTOCOL = {"NEED_DATA": "protocol", "Close": "protocol", "Connection": "protocol",
             "EncodedResponse": "protocol", "FileRegion": "protocol", "NeedData": "protocol",
             "Request": "protocol", "encode_response": "protocol", "ApiRange": "versions",
             "SupportedApis": "versions"}

_ACL_MODEL = ("ANY_ENTRY", "CLUSTER_NAME", "WILDCARD", "AccessControlEntry", "AccessControlEntryFilter", "AclBinding",
              "AclBindingFilter", "AclOperation", "AclPermissionType", "PatternType", "ResourcePattern",
              "ResourcePatternFilter", "ResourceType", "parse_name", "parse_principal", "pascal_name",
              "supported_operations")

PUBLIC = {
    # the broker (``compactlog serve``)
    "Broker": "app", "check_settings": "app", "configure_logging": "app",
    "bind_listener": "metrics.broker_metrics",
    # ACLs: Kafka's model (AclBinding, ResourcePattern, ...), the data dir's store, the authorizer setting
    **dict.fromkeys(_ACL_MODEL, "authorizer.acl"),
    "AclStore": "authorizer.store", "authorizer_enabled": "authorizer.standard",
    # SCRAM users: the data dir's credential store and the salting
    "CredentialCache": "security.credentials", "Deletion": "security.credentials", "Upsertion": "security.credentials",
    "MECHANISMS": "security.scram", "salted_password": "security.scram",
}
"""The public surface: name -> the module of this package that defines it."""

__getattr__ = exports(__name__, {**_PROTOCOL, **PUBLIC})

__all__ = [*_PROTOCOL, *PUBLIC]
