"""StandardAuthorizer's rules (security.md §7.1-7.3), each with LITERAL, PREFIXED and wildcard
ACLs, and the index checked against a plain scan of every ACL."""

from __future__ import annotations

import logging
import random

import pytest
from kio.schema.errors import ErrorCode

from compactlog.errors import ConfigError
from compactlog.server.authorizer.acl import (AclBinding, AclBindingFilter, AclOperation as O,
                                              AclPermissionType as P, PatternType as PT, ResourceType as R)
from compactlog.server.authorizer.standard import (AclSet, StandardAuthorizer, applies, authorizer_enabled,
                                                   parse_super_users)
from compactlog.storage.config import BrokerConfig

ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
HOST = "127.0.0.1"


def acl(name, op, perm=P.ALLOW, principal=ALICE, rtype=R.TOPIC, pattern=PT.LITERAL, host="*"):
    return AclBinding.of(rtype, name, pattern, principal, host, op, perm)


def authz(*acls, super_users=(ADMIN,), allow_if_no_acl=False):
    a = StandardAuthorizer(super_users, allow_if_no_acl)
    results = a.create_acls(list(acls))
    assert all(code == ErrorCode.none for code, _ in results), results
    return a


def may(a, op, name, principal=ALICE, rtype=R.TOPIC, host=HOST):
    return a.authorize(principal, host, op, rtype, name)


# -- §7.1 defaults and super users ---------------------------------------------------------------------

def test_no_acls_denies_everyone_but_super_users():
    a = authz()
    assert not may(a, O.WRITE, "t")
    assert not may(a, O.DESCRIBE, "t")
    assert may(a, O.WRITE, "t", ADMIN)
    assert may(a, O.ALTER, "kafka-cluster", ADMIN, R.CLUSTER)


def test_allow_everyone_if_no_acl_found_only_where_no_acl_matches():
    a = authz(allow_if_no_acl=True)
    assert may(a, O.WRITE, "t")
    a.create_acls([acl("t", O.WRITE, principal=BOB)])
    assert not may(a, O.WRITE, "t")                 # the topic has ACLs now: alice is denied
    assert may(a, O.WRITE, "t", BOB)
    assert may(a, O.WRITE, "other")                 # no ACL matches other
    a.create_acls([acl("o", O.READ, principal=BOB, pattern=PT.PREFIXED)])
    assert not may(a, O.WRITE, "other")             # a prefixed ACL of anyone counts too


def test_super_user_bypasses_a_deny():
    a = authz(acl("t", O.ALL, P.DENY, principal="User:*"), acl("*", O.ALL, P.DENY, principal=ADMIN))
    assert may(a, O.WRITE, "t", ADMIN)
    assert not may(a, O.WRITE, "t")


def test_super_users_are_compared_as_principal_strings():
    a = authz(super_users=parse_super_users(" User:admin ; User:CN=ops,O=example ;"))
    assert may(a, O.WRITE, "t", "User:CN=ops,O=example")
    assert not may(a, O.WRITE, "t", "User:Admin")        # case-sensitive
    assert not may(a, O.WRITE, "t", "Group:admin")


# -- §7.3 1: which patterns match ----------------------------------------------------------------------

def test_literal_matches_only_its_name():
    a = authz(acl("t", O.READ))
    assert may(a, O.READ, "t")
    assert not may(a, O.READ, "t2")
    assert not may(a, O.READ, "T")


def test_literal_wildcard_matches_every_name_of_its_type():
    a = authz(acl("*", O.READ))
    assert may(a, O.READ, "anything")
    assert not may(a, O.READ, "anything", rtype=R.GROUP)


def test_prefixed_matches_names_starting_with_it():
    a = authz(acl("orders.", O.WRITE, pattern=PT.PREFIXED))
    assert may(a, O.WRITE, "orders.eu")
    assert may(a, O.WRITE, "orders.")                    # a prefix of itself
    assert not may(a, O.WRITE, "orders")
    assert not may(a, O.WRITE, "Orders.eu")


def test_prefixed_star_is_a_literal_prefix_not_a_wildcard():
    a = authz(acl("*", O.WRITE, pattern=PT.PREFIXED))
    assert may(a, O.WRITE, "*x")
    assert not may(a, O.WRITE, "t")


def test_resource_types_are_apart():
    a = authz(acl("g", O.READ, rtype=R.GROUP))
    assert may(a, O.READ, "g", rtype=R.GROUP)
    assert not may(a, O.READ, "g", rtype=R.TOPIC)
    assert not may(a, O.READ, "g", rtype=R.TRANSACTIONAL_ID)


# -- §7.3 2: principal, host, operation ----------------------------------------------------------------

def test_principal_wildcard_and_exact():
    a = authz(acl("t", O.READ, principal="User:*"), acl("u", O.READ, principal=BOB))
    assert may(a, O.READ, "t") and may(a, O.READ, "t", BOB)
    assert not may(a, O.READ, "u")
    assert may(a, O.READ, "t", "Group:x")        # Kafka's matchingPrincipals always holds User:*


def test_host_is_star_or_the_exact_address():
    a = authz(acl("t", O.READ, host="127.0.0.1"), acl("t", O.WRITE, host="10.0.0.1"))
    assert may(a, O.READ, "t", host="127.0.0.1")
    assert not may(a, O.READ, "t", host="10.0.0.1")
    assert may(a, O.WRITE, "t", host="10.0.0.1")
    assert not may(a, O.WRITE, "t", host="127.0.0.1")


@pytest.mark.parametrize("granted", [O.READ, O.WRITE, O.DELETE, O.ALTER, O.DESCRIBE])
@pytest.mark.parametrize("pattern, name", [(PT.LITERAL, "t"), (PT.PREFIXED, "t"), (PT.LITERAL, "*")])
def test_allow_implies_describe(granted, pattern, name):
    a = authz(acl(name, granted, pattern=pattern))
    assert may(a, O.DESCRIBE, "t")


@pytest.mark.parametrize("granted", [O.CREATE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE])
def test_other_operations_do_not_imply_describe(granted):
    assert not may(authz(acl("t", granted)), O.DESCRIBE, "t")


@pytest.mark.parametrize("pattern, name", [(PT.LITERAL, "t"), (PT.PREFIXED, "t"), (PT.LITERAL, "*")])
def test_alter_configs_implies_describe_configs(pattern, name):
    a = authz(acl(name, O.ALTER_CONFIGS, pattern=pattern))
    assert may(a, O.DESCRIBE_CONFIGS, "t")
    assert not may(a, O.DESCRIBE, "t")
    assert not may(authz(acl("t", O.ALTER)), O.DESCRIBE_CONFIGS, "t")


def test_implication_does_not_go_the_other_way():
    a = authz(acl("t", O.DESCRIBE), acl("t", O.DESCRIBE_CONFIGS))
    assert not may(a, O.READ, "t")
    assert not may(a, O.ALTER_CONFIGS, "t")


def test_deny_read_does_not_deny_describe():
    a = authz(acl("t", O.READ, P.DENY), acl("t", O.ALL, principal="User:*"))
    assert not may(a, O.READ, "t")
    assert may(a, O.DESCRIBE, "t")
    assert may(a, O.READ, "t", BOB)


def test_all_grants_and_denies_every_operation():
    a = authz(acl("t", O.ALL))
    assert all(may(a, op, "t") for op in (O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE,
                                          O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS))
    a.create_acls([acl("t", O.ALL, P.DENY)])
    assert not may(a, O.DESCRIBE, "t")


# -- §7.3 3: DENY over ALLOW, whatever the patterns -------------------------------------------------------

@pytest.mark.parametrize("deny, allow, name", [
    (("t", PT.LITERAL), ("t", PT.LITERAL), "t"),
    (("t", PT.LITERAL), ("*", PT.LITERAL), "t"),
    (("*", PT.LITERAL), ("t", PT.LITERAL), "t"),
    (("orders.eu", PT.LITERAL), ("orders.", PT.PREFIXED), "orders.eu"),
    (("orders.", PT.PREFIXED), ("orders.eu", PT.LITERAL), "orders.eu"),
    (("o", PT.PREFIXED), ("orders.", PT.PREFIXED), "orders.eu"),
])
def test_deny_wins_over_allow(deny, allow, name):
    a = authz(acl(allow[0], O.WRITE, pattern=allow[1]), acl(deny[0], O.WRITE, P.DENY, pattern=deny[1]))
    assert not may(a, O.WRITE, name)
    assert may(authz(acl(allow[0], O.WRITE, pattern=allow[1])), O.WRITE, name)


def test_prefixed_allow_with_a_literal_deny():
    a = authz(acl("orders.", O.WRITE, pattern=PT.PREFIXED), acl("orders.secret", O.WRITE, P.DENY))
    assert may(a, O.WRITE, "orders.eu")
    assert not may(a, O.WRITE, "orders.secret")
    assert may(a, O.WRITE, "orders.secret2")


def test_a_deny_of_another_principal_or_host_does_not_apply():
    a = authz(acl("t", O.WRITE), acl("t", O.WRITE, P.DENY, principal=BOB),
              acl("t", O.WRITE, P.DENY, host="10.0.0.9"))
    assert may(a, O.WRITE, "t")
    assert not may(a, O.WRITE, "t", host="10.0.0.9")


def test_acls_of_others_on_the_resource_deny_by_default():
    a = authz(acl("t", O.READ, principal=BOB))
    assert not may(a, O.READ, "t")
    assert not may(a, O.WRITE, "t", BOB)


# -- authorizeByResourceType (InitProducerId without a transactional id) --------------------------------

def by_type(a, principal=ALICE, host=HOST):
    return a.authorize_by_resource_type(principal, host, O.WRITE, R.TOPIC)


def test_by_resource_type():
    assert not by_type(authz())
    assert by_type(authz(), ADMIN)
    assert by_type(authz(allow_if_no_acl=True))
    assert by_type(authz(acl("one", O.WRITE)))
    assert by_type(authz(acl("one", O.ALL)))
    assert by_type(authz(acl("o", O.WRITE, pattern=PT.PREFIXED)))
    assert not by_type(authz(acl("one", O.READ)))
    assert not by_type(authz(acl("one", O.WRITE, principal=BOB)))
    assert not by_type(authz(acl("one", O.WRITE, host="10.0.0.1")))
    assert not by_type(authz(acl("one", O.WRITE), acl("one", O.WRITE, P.DENY)))
    assert not by_type(authz(acl("one", O.WRITE), acl("o", O.WRITE, P.DENY, pattern=PT.PREFIXED)))
    assert not by_type(authz(acl("orders.", O.WRITE, pattern=PT.PREFIXED),
                             acl("ord", O.WRITE, P.DENY, pattern=PT.PREFIXED)))
    assert by_type(authz(acl("orders.", O.WRITE, pattern=PT.PREFIXED),
                         acl("orders.eu", O.WRITE, P.DENY, pattern=PT.PREFIXED)))
    assert not by_type(authz(acl("one", O.WRITE), acl("*", O.WRITE, P.DENY)))
    assert by_type(authz(acl("*", O.WRITE), acl("one", O.WRITE, P.DENY)))


# -- the index against a scan of every ACL -------------------------------------------------------------

def _scan(acls, principal, host, op, rtype, name, default):
    """§7.3 written as directly as it reads."""
    found, allowed = False, False
    for b in acls:
        p = b.pattern
        if p.resource_type != rtype:
            continue
        if p.pattern_type == PT.LITERAL and p.name not in (name, "*"):
            continue
        if p.pattern_type == PT.PREFIXED and not name.startswith(p.name):
            continue
        found = True
        r = applies(b, (principal, "User:*"), host, op)
        if r is False:
            return False
        allowed = allowed or bool(r)
    return allowed or (not found and default)


def test_index_agrees_with_a_scan():
    rng = random.Random(7)
    names = ["a", "ab", "abc", "abd", "b", "ba", "*", "x.y", "x."]
    principals = [ALICE, BOB, "User:*"]
    ops = [O.READ, O.WRITE, O.DESCRIBE, O.ALL, O.ALTER_CONFIGS, O.DESCRIBE_CONFIGS, O.CREATE]
    for round_ in range(60):
        acls = [acl(rng.choice(names), rng.choice(ops), rng.choice([P.ALLOW, P.DENY]), rng.choice(principals),
                    rng.choice([R.TOPIC, R.GROUP]), rng.choice([PT.LITERAL, PT.PREFIXED]),
                    rng.choice(["*", HOST, "10.0.0.1"])) for _ in range(rng.randint(0, 12))]
        default = bool(round_ % 2)
        a = authz(*acls, super_users=(), allow_if_no_acl=default)
        for name in ["a", "ab", "abc", "abz", "b", "x.y", "x.z", "zzz", "*"]:
            for principal in (ALICE, BOB):
                for op in (O.READ, O.WRITE, O.DESCRIBE, O.DESCRIBE_CONFIGS, O.CREATE, O.ALTER_CONFIGS):
                    for rtype in (R.TOPIC, R.GROUP):
                        for host in (HOST, "10.0.0.1"):
                            assert a.authorize(principal, host, op, rtype, name) == \
                                _scan(acls, principal, host, op, rtype, name, default), \
                                (acls, principal, host, op, rtype, name)


# -- audit log -----------------------------------------------------------------------------------------

def test_audit_log_lines(caplog):
    a = authz(acl("t", O.WRITE))
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")
    a.authorize(ALICE, HOST, O.READ, R.TOPIC, "t", request_name="Fetch", ref_count=2)
    a.authorize(ALICE, HOST, O.WRITE, R.TOPIC, "t", request_name="Produce")
    a.authorize(ALICE, HOST, O.READ, R.TOPIC, "u", request_name="Metadata", log_if_denied=False)
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert records[0] == (logging.INFO, "Principal = User:alice is Denied operation = READ from host = 127.0.0.1 "
                                        "on resource = Topic:LITERAL:t for request = Fetch with resourceRefCount = 2 "
                                        "based on rule DefaultDeny")
    assert records[1][0] == logging.DEBUG and "is Allowed operation = WRITE" in records[1][1] and \
        "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=t, patternType=LITERAL, " \
        "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW))" in records[1][1]
    assert len(records) == 2            # a probe's denial is TRACE only


# -- changes --------------------------------------------------------------------------------------------

def test_create_checks_each_acl_alone_and_keeps_one_copy():
    a = StandardAuthorizer()
    good = acl("t", O.READ)
    results = a.create_acls([good, acl("", O.READ), acl("t", O.ANY), good,
                             AclBinding.of(R.CLUSTER, "other", PT.LITERAL, ALICE, "*", O.ALTER, P.ALLOW),
                             AclBinding.of(R.TOPIC, "t", PT.MATCH, ALICE, "*", O.READ, P.ALLOW),
                             AclBinding.of(R.TOPIC, "t", PT.LITERAL, "alice", "*", O.READ, P.ALLOW),
                             AclBinding.of(R.TOPIC, "t", PT.LITERAL, ALICE, "*", O.READ, 99)])
    assert [code for code, _ in results] == [ErrorCode.none, ErrorCode.invalid_request, ErrorCode.invalid_request,
                                             ErrorCode.none] + [ErrorCode.invalid_request] * 4
    assert [m for _, m in results][1:3] == ["Invalid empty resource name", "Invalid operation ANY"]
    assert results[4][1] == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert len(a.acl_set) == 1
    assert a.create_acls([good]) == [(ErrorCode.none, None)]
    assert len(a.acl_set) == 1


def test_delete_by_filters_at_once():
    a = authz(acl("t", O.READ), acl("t", O.WRITE), acl("t.", O.READ, pattern=PT.PREFIXED), acl("g", O.READ, rtype=R.GROUP))
    results = a.delete_acls([AclBindingFilter.of(R.TOPIC, "t", PT.LITERAL, None, None, O.READ, P.ANY),
                             AclBindingFilter.of(R.ANY, None, PT.ANY, BOB, None, O.ANY, P.ANY),
                             AclBindingFilter.of(R.TOPIC, None, PT.UNKNOWN, None, None, O.ANY, P.ANY)])
    assert [(c, len(r)) for c, _, r in results] == [(ErrorCode.none, 1), (ErrorCode.none, 0),
                                                    (ErrorCode.invalid_request, 0)]
    assert len(a.acl_set) == 3
    results = a.delete_acls([AclBindingFilter.of(R.TOPIC, "t.x", PT.MATCH, None, None, O.ANY, P.ANY),
                             AclBindingFilter.of(R.ANY, None, PT.ANY, None, None, O.ANY, P.ANY)])
    assert len(results[0][2]) == 1 and len(results[1][2]) == 3      # each filter lists all it matched
    assert len(a.acl_set) == 0


def test_a_store_failure_leaves_the_old_acls_in_force():
    class Failing:
        def save(self, acls):
            raise OSError(28, "No space left on device")
    a = StandardAuthorizer(store=Failing())
    with pytest.raises(OSError):
        a.create_acls([acl("t", O.READ)])
    assert len(a.acl_set) == 0


def test_acl_set_is_not_changed_by_a_change():
    s = AclSet()
    s2, _ = s.with_created([acl("t", O.READ)])
    assert len(s) == 0 and len(s2) == 1


# -- configuration ----------------------------------------------------------------------------------------

def test_authorizer_settings():
    assert not authorizer_enabled(BrokerConfig({}))
    assert authorizer_enabled(BrokerConfig({"authorizer.class.name": "org.apache.kafka.metadata.authorizer."
                                                                     "StandardAuthorizer"}))
    with pytest.raises(ConfigError, match="AclAuthorizer.*left Kafka in 4.0"):
        authorizer_enabled(BrokerConfig({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}))
    with pytest.raises(ConfigError, match="super.users"):
        parse_super_users("User:admin,User:bob;admin")
    assert parse_super_users("") == frozenset()
