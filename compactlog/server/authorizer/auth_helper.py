"""Kafka's ``AuthHelper``: the authorization questions API handlers ask about a request.

Each handler asks, in its own module, the questions security.md §7.4 lists for its API (one call
here per rule), and answers Kafka's error code where the answer is no. Without an authorizer
(``state.authorizer`` None, Kafka's default) every question is answered yes at once
(``authorizer.forall``), so the data path pays one attribute read.

Who asks: ``principal_of(request)`` is the principal the transport put on the request
(``request.principal``, ``User:ANONYMOUS`` on a listener without authentication), and
``host_of(request)`` the client's IP address as ACL hosts name it.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..state import CLIENT_HOST
from .acl import CLUSTER_NAME, AclOperation, ResourceType, operations_bitfield, supported_operations

ANONYMOUS = "User:ANONYMOUS"

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                           ResourceType.TRANSACTIONAL_ID)
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE)

# Kafka's Errors messages, for the answers that carry one
DENIED_MESSAGE = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}

# the bitfields without an authorizer: every supported operation (AuthHelper.authorizedOperations)
ALL_OPERATIONS = {t: operations_bitfield(supported_operations(t)) for t in (TOPIC, GROUP, CLUSTER)}


def principal_of(request) -> str:
    """``Type:name`` of the principal that sent ``request``."""
    principal = getattr(request, "principal", None)
    return ANONYMOUS if principal is None else str(principal)


def host_of(request) -> str:
    """The client's IP address (``InetAddress.getHostAddress``), as ACL hosts are written."""
    host = getattr(request, "client_host", None) or CLIENT_HOST.get()
    return host[1:] if host.startswith("/") else host


def enabled(state) -> bool:
    return getattr(state, "authorizer", None) is not None


def authorize(state, request, operation: AclOperation, resource_type: ResourceType, name: str, *,
              log_if_allowed: bool = True, log_if_denied: bool = True, ref_count: int = 1) -> bool:
    """``AuthHelper.authorize``: may the request's principal do ``operation`` on the resource?"""
    authorizer = getattr(state, "authorizer", None)
    if authorizer is None:
        return True
    return authorizer.authorize(principal_of(request), host_of(request), operation, resource_type, name,
                                request_name=request.api_name, log_if_allowed=log_if_allowed,
                                log_if_denied=log_if_denied, ref_count=ref_count)


def authorize_cluster(state, request, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    return authorize(state, request, operation, CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def denied(state, request, operation: AclOperation, resource_type: ResourceType, names, *,
           log_if_denied: bool = True) -> frozenset:
    """The names of ``names`` the principal may not ``operation`` (``AuthHelper.filterByAuthorized``
    seen from the other side): each distinct name is asked once, with how often the request
    names it. Empty without an authorizer."""
    authorizer = getattr(state, "authorizer", None)
    if authorizer is None:
        return frozenset()
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    principal, host, api = principal_of(request), host_of(request), request.api_name
    return frozenset(n for n, count in counts.items()
                     if not authorizer.authorize(principal, host, operation, resource_type, n, request_name=api,
                                                 log_if_denied=log_if_denied, ref_count=count))


def authorize_by_resource_type(state, request, operation: AclOperation, resource_type: ResourceType) -> bool:
    """``AuthHelper.authorizeByResourceType``."""
    authorizer = getattr(state, "authorizer", None)
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(principal_of(request), host_of(request), operation,
                                                 resource_type, request_name=request.api_name)


def authorized_operations(state, request, resource_type: ResourceType, name: str, operations=None) -> int:
    """``AuthHelper.authorizedOperations``: bit ``1 << code`` of every supported operation of the
    resource (or of ``operations``) that the principal may do (probes: logged at TRACE only)."""
    authorizer = getattr(state, "authorizer", None)
    ops = supported_operations(resource_type) if operations is None else operations
    if authorizer is None:
        return operations_bitfield(ops)
    principal, host, api = principal_of(request), host_of(request), request.api_name
    return operations_bitfield(op for op in ops
                               if authorizer.authorize(principal, host, op, resource_type, name, request_name=api,
                                                       log_if_allowed=False, log_if_denied=False))


def cluster_operations(state, request) -> int:
    """The cluster bitfield of Metadata and DescribeCluster: 0 unless DESCRIBE on the cluster."""
    if not authorize_cluster(state, request, DESCRIBE):
        return 0
    return authorized_operations(state, request, CLUSTER, CLUSTER_NAME)
