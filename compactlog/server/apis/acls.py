"""The ACL admin APIs: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's
``AclApis`` answers them over ``StandardAuthorizer`` and ``AclControlManager`` (security.md §8).

DescribeAcls needs DESCRIBE on the cluster, the other two ALTER (``CLUSTER_AUTHORIZATION_FAILED``
in every error field otherwise). Without an authorizer all three answer ``SECURITY_DISABLED``
(they are advertised anyway, as Kafka does). Each creation is checked alone and an ACL that exists
already is not added twice; each deletion filter lists what it removed, and all removals of one
request are made durable together. Versions 1-3 (v0, literal patterns only, left Kafka's schemas;
v2 is flexible, v3 adds the USER resource type).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..authorizer import auth_helper
from ..authorizer.acl import AclBinding, AclBindingFilter
from ..messages import NO_THROTTLE, build, nested, response_class
from ..state import BrokerState
from .handler import THREAD, ApiHandler

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_DENIED = auth_helper.DENIED_MESSAGE[ErrorCode.cluster_authorization_failed]


def _filter(f) -> AclBindingFilter:
    return AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                               f.principal_filter, f.host_filter, f.operation, f.permission_type)


def handle_describe_acls(state: BrokerState, request):
    body = request.body
    cls = response_class(request)
    if not auth_helper.authorize_cluster(state, request, auth_helper.DESCRIBE):
        return describe_acls_error(body, cls, ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
    authorizer = getattr(state, "authorizer", None)
    if authorizer is None:
        return describe_acls_error(body, cls, ErrorCode.security_disabled, NO_AUTHORIZER_DESCRIBE)
    acl_filter = _filter(body)
    problem = acl_filter.problem()
    if problem is not None:
        return describe_acls_error(body, cls, ErrorCode.invalid_request, problem)
    # DescribeAclsResponse.aclsResources: one entry per resource pattern, in first-seen order
    grouped: dict = {}
    for b in sorted(authorizer.acls(acl_filter), key=_order):
        grouped.setdefault(b.pattern, []).append(b.entry)
    r_cls, a_cls = nested(cls, "DescribeAclsResource"), nested(cls, "AclDescription")
    resources = tuple(build(r_cls, resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                            acls=tuple(build(a_cls, principal=e.principal, host=e.host, operation=e.operation,
                                             permission_type=e.permission_type) for e in entries))
                      for p, entries in grouped.items())
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, resources=resources)


def _order(b: AclBinding):
    p, e = b.pattern, b.entry
    return (p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission_type)


def handle_create_acls(state: BrokerState, request):
    body = request.body
    cls = response_class(request)
    if not auth_helper.authorize_cluster(state, request, auth_helper.ALTER):
        return create_acls_error(body, cls, ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
    authorizer = getattr(state, "authorizer", None)
    if authorizer is None:
        return create_acls_error(body, cls, ErrorCode.security_disabled, NO_AUTHORIZER)
    bindings = [AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                              c.operation, c.permission_type) for c in body.creations]
    results = authorizer.create_acls(bindings)
    for b, (code, _) in zip(bindings, results):
        if code == ErrorCode.none:
            state.logger.info(f"Created ACL {b} (requested by {auth_helper.principal_of(request)})")
    r_cls = nested(cls, "AclCreationResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r_cls, error_code=code, error_message=message) for code, message in results))


def handle_delete_acls(state: BrokerState, request):
    body = request.body
    cls = response_class(request)
    if not auth_helper.authorize_cluster(state, request, auth_helper.ALTER):
        return delete_acls_error(body, cls, ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
    authorizer = getattr(state, "authorizer", None)
    if authorizer is None:
        return delete_acls_error(body, cls, ErrorCode.security_disabled, NO_AUTHORIZER)
    results = authorizer.delete_acls([_filter(f) for f in body.filters])
    f_cls, m_cls = nested(cls, "DeleteAclsFilterResult"), nested(cls, "DeleteAclsMatchingAcl")
    out = []
    for code, message, removed in results:
        for b in removed:
            state.logger.info(f"Deleted ACL {b} (requested by {auth_helper.principal_of(request)})")
        out.append(build(f_cls, error_code=code, error_message=message, matching_acls=tuple(
            build(m_cls, error_code=ErrorCode.none, error_message=None, resource_type=b.pattern.resource_type,
                  resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                  host=b.entry.host, operation=b.entry.operation, permission_type=b.entry.permission_type)
            for b in sorted(removed, key=_order))))
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(out))


# -- error responses and declarations -------------------------------------------------------------

def describe_acls_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=())


def create_acls_error(body, cls, code, message):
    r_cls = nested(cls, "AclCreationResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r_cls, error_code=code, error_message=message) for _ in body.creations))


def delete_acls_error(body, cls, code, message):
    f_cls = nested(cls, "DeleteAclsFilterResult")
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(
        build(f_cls, error_code=code, error_message=message, matching_acls=()) for _ in body.filters))


# a worker thread: CreateAcls and DeleteAcls write the ACL file (fsync) before answering
DESCRIBE_ACLS = ApiHandler(29, "DescribeAcls", 1, 3, mode=THREAD, handler=handle_describe_acls,
                           error_response=describe_acls_error)
CREATE_ACLS = ApiHandler(30, "CreateAcls", 1, 3, mode=THREAD, handler=handle_create_acls,
                         error_response=create_acls_error)
DELETE_ACLS = ApiHandler(31, "DeleteAcls", 1, 3, mode=THREAD, handler=handle_delete_acls,
                         error_response=delete_acls_error)

ACL_APIS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
"""The ACL admin APIs, advertised with or without an authorizer (security.md §9)."""
