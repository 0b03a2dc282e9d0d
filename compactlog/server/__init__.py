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


from ..lazy import exports
from .protocol import (NEED_DATA, Close, Connection, EncodedResponse, FileRegion, NeedData, Request,
                       encode_response)
from .versions import ApiRange, SupportedApis

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
    # configs as DescribeConfigs describes them (values, sources, synonyms)
    "broker_config_entries": "apis.config_entries", "topic_config_entries": "apis.config_entries",
}
"""The public surface: name -> the module of this package that defines it."""

__getattr__ = exports(__name__, PUBLIC)


__all__ = ["NEED_DATA", "Close", "Connection", "EncodedResponse", "FileRegion", "NeedData", "Request",
           "encode_response", "ApiRange", "SupportedApis", *PUBLIC]
