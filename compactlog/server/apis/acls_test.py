"""DescribeAcls, CreateAcls and DeleteAcls (security.md §8, scenario Z17) on raw requests of
every advertised version, each answer encoded as the wire carries it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.server.apis.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from compactlog.server.authorizer.standard import StandardAuthorizer
from compactlog.server.authorizer.store import AclStore
from compactlog.server.messages import build, nested
from compactlog.server.protocol import Request, encode_response
from compactlog.server.state import BrokerState, Listener
from compactlog.server.versions import request_schema
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

VERSIONS = (1, 2, 3)
TOPIC, GROUP, CLUSTER, USER = 2, 3, 4, 7
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, ALTER, DESCRIBE = 2, 3, 4, 7, 8
DENY, ALLOW = 2, 3


class AuthRequest(Request):
    pass


@pytest.fixture
def state(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({}), writable=True, command="test")
    st = BrokerState(dd, 1, "cluster", Listener("PLAINTEXT", "127.0.0.1", 9092))
    st.authorizer = StandardAuthorizer({"User:admin"}, store=AclStore(dd.path))
    yield st
    dd.close()


def call(handler, state, api_key, version, principal="User:admin", **fields):
    r = AuthRequest(api_key, version, 7, "test", None, build(request_schema(api_key, version), **fields), 0,
                    version, True)
    r.principal = principal
    resp = handler(state, r)
    encode_response(r, resp)
    return resp


def creation(version, rtype, name, pattern, principal, op, perm, host="*"):
    return build(nested(request_schema(30, version), "AclCreation"), resource_type=rtype, resource_name=name,
                 resource_pattern_type=pattern, principal=principal, host=host, operation=op, permission_type=perm)


def create(state, version, *creations, principal="User:admin"):
    return [(r.error_code, r.error_message) for r in call(
        handle_create_acls, state, 30, version, principal,
        creations=tuple(creation(version, *c) for c in creations)).results]


def describe(state, version, rtype=ANY, name=None, pattern=ANY, principal=None, host=None, op=ANY, perm=ANY,
             caller="User:admin"):
    return call(handle_describe_acls, state, 29, version, caller, resource_type_filter=rtype,
                resource_name_filter=name, pattern_type_filter=pattern, principal_filter=principal,
                host_filter=host, operation=op, permission_type=perm)


def flat(resp):
    return sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                   a.permission_type) for r in resp.resources for a in r.acls)


def delete(state, version, *filters, principal="User:admin"):
    f_cls = nested(request_schema(31, version), "DeleteAclsFilter")
    resp = call(handle_delete_acls, state, 31, version, principal, filters=tuple(
        build(f_cls, resource_type_filter=f[0], resource_name_filter=f[1], pattern_type_filter=f[2],
              principal_filter=f[3], host_filter=None, operation=f[4], permission_type=f[5]) for f in filters))
    return [(r.error_code, sorted((m.resource_name, m.pattern_type, m.principal, m.operation)
                                  for m in r.matching_acls)) for r in resp.filter_results]


@pytest.mark.parametrize("version", VERSIONS)
def test_without_an_authorizer_security_is_disabled(state, version):
    state.authorizer = None
    d = describe(state, version)
    assert (d.error_code, d.error_message) == (E.security_disabled, "No Authorizer is configured on the broker")
    assert create(state, version, (TOPIC, "t", LITERAL, "User:a", READ, ALLOW)) == \
        [(E.security_disabled, "No Authorizer is configured.")]
    assert delete(state, version, (ANY, None, ANY, None, ANY, ANY)) == [(E.security_disabled, [])]


@pytest.mark.parametrize("version", VERSIONS)
def test_cluster_authorization(state, version):
    assert describe(state, version, caller="User:alice").error_code == E.cluster_authorization_failed
    assert create(state, version, (TOPIC, "t", LITERAL, "User:alice", ALL, ALLOW), principal="User:alice") == \
        [(E.cluster_authorization_failed, "Cluster authorization failed.")]
    assert delete(state, version, (ANY, None, ANY, None, ANY, ANY), principal="User:alice") == \
        [(E.cluster_authorization_failed, [])]
    assert create(state, version, (CLUSTER, "kafka-cluster", LITERAL, "User:alice", ALTER, ALLOW)) == [(E.none, None)]
    # ALTER on the cluster implies DESCRIBE: alice may now read and change ACLs herself
    assert describe(state, version, caller="User:alice").error_code == E.none
    assert create(state, version, (GROUP, "g", LITERAL, "User:bob", READ, ALLOW), principal="User:alice") == \
        [(E.none, None)]


@pytest.mark.parametrize("version", VERSIONS)
def test_create_describe_delete(state, version):
    assert create(state, version,
                  (TOPIC, "t", LITERAL, "User:alice", READ, ALLOW),
                  (TOPIC, "t", LITERAL, "User:alice", READ, ALLOW),          # a duplicate: one copy
                  (TOPIC, "orders.", PREFIXED, "User:alice", WRITE, ALLOW),
                  (TOPIC, "orders.secret", LITERAL, "User:alice", WRITE, DENY),
                  (TOPIC, "*", LITERAL, "User:*", DESCRIBE, ALLOW),
                  (GROUP, "g", LITERAL, "User:alice", READ, ALLOW),
                  (TOPIC, "", LITERAL, "User:alice", READ, ALLOW),
                  (CLUSTER, "my-cluster", LITERAL, "User:alice", ALTER, ALLOW),
                  (TOPIC, "t", MATCH, "User:alice", READ, ALLOW),
                  (TOPIC, "t", LITERAL, "alice", READ, ALLOW),
                  (TOPIC, "t", LITERAL, "User:alice", 1, ALLOW)) == \
        [(E.none, None)] * 6 + [(E.invalid_request, "Invalid empty resource name"),
                                (E.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
                                (E.invalid_request, "Invalid patternType MATCH"),
                                (E.invalid_request, "expected a string in format principalType:principalName but "
                                                    "got alice"),
                                (E.invalid_request, "Invalid operation ANY")]
    assert len(flat(describe(state, version))) == 5
    resp = describe(state, version, TOPIC, "t", LITERAL)
    assert [(r.resource_name, len(r.acls)) for r in resp.resources] == [("t", 1)]     # grouped by pattern
    # MATCH: every pattern that applies to the name
    assert [x[1] for x in flat(describe(state, version, TOPIC, "orders.secret", MATCH))] == \
        ["*", "orders.", "orders.secret"]
    assert [x[1] for x in flat(describe(state, version, ANY, None, PREFIXED))] == ["orders."]
    assert [x[1] for x in flat(describe(state, version, principal="User:*"))] == ["*"]
    assert describe(state, version, 0).error_code == E.invalid_request            # UNKNOWN resource type
    assert delete(state, version, (TOPIC, "orders.eu", MATCH, None, ANY, ANY), (GROUP, None, ANY, None, ANY, ANY),
                  (TOPIC, None, 0, None, ANY, ANY)) == [
        (E.none, [("*", LITERAL, "User:*", DESCRIBE), ("orders.", PREFIXED, "User:alice", WRITE)]),
        (E.none, [("g", LITERAL, "User:alice", READ)]),
        (E.invalid_request, [])]
    assert [x[1] for x in flat(describe(state, version))] == ["orders.secret", "t"]
    # kept in the data dir
    assert len(AclStore(state.datadir.path).load()) == 2


def test_user_resources_from_v3(state):
    assert create(state, 3, (USER, "User:bob", LITERAL, "User:alice", 13, ALLOW)) == [(E.none, None)]
    assert flat(describe(state, 3, USER)) == [(USER, "User:bob", LITERAL, "User:alice", "*", 13, ALLOW)]
