"""The ACL model: filters as Kafka's ResourcePatternFilter / AccessControlEntryFilter match
(security.md §8.2), names as SecurityUtils reads and prints them, Kafka's toString forms."""

from __future__ import annotations

import pytest

from compactlog.server.authorizer.acl import (ANY_ACL, AclBinding, AclBindingFilter, AclOperation as O,
                                              AclPermissionType as P, PatternType as PT, ResourcePattern,
                                              ResourcePatternFilter, ResourceType as R, operations_bitfield,
                                              parse_name, parse_principal, pascal_name, supported_operations)

LIT_T = ResourcePattern(R.TOPIC, "t", PT.LITERAL)
LIT_STAR = ResourcePattern(R.TOPIC, "*", PT.LITERAL)
PRE_T = ResourcePattern(R.TOPIC, "t", PT.PREFIXED)
PRE_TX = ResourcePattern(R.TOPIC, "tx", PT.PREFIXED)
GROUP_T = ResourcePattern(R.GROUP, "t", PT.LITERAL)
ALL_PATTERNS = [LIT_T, LIT_STAR, PRE_T, PRE_TX, GROUP_T]


@pytest.mark.parametrize("flt, matched", [
    (ResourcePatternFilter(R.ANY, None, PT.ANY), ALL_PATTERNS),
    (ResourcePatternFilter(R.TOPIC, None, PT.ANY), [LIT_T, LIT_STAR, PRE_T, PRE_TX]),
    (ResourcePatternFilter(R.TOPIC, "t", PT.ANY), [LIT_T, PRE_T]),
    (ResourcePatternFilter(R.ANY, "t", PT.ANY), [LIT_T, PRE_T, GROUP_T]),
    (ResourcePatternFilter(R.TOPIC, "t", PT.LITERAL), [LIT_T]),
    (ResourcePatternFilter(R.TOPIC, "t", PT.PREFIXED), [PRE_T]),
    (ResourcePatternFilter(R.TOPIC, "txy", PT.MATCH), [LIT_STAR, PRE_T, PRE_TX]),
    (ResourcePatternFilter(R.TOPIC, "t", PT.MATCH), [LIT_T, LIT_STAR, PRE_T]),
    (ResourcePatternFilter(R.TOPIC, None, PT.MATCH), [LIT_T, LIT_STAR, PRE_T, PRE_TX]),
    (ResourcePatternFilter(R.TOPIC, None, PT.PREFIXED), [PRE_T, PRE_TX]),
])
def test_resource_pattern_filter(flt, matched):
    assert [p for p in ALL_PATTERNS if flt.matches(p)] == matched


def test_entry_filter_and_unknown_fields():
    b = AclBinding.of(R.TOPIC, "t", PT.LITERAL, "User:alice", "*", O.READ, P.ALLOW)
    assert ANY_ACL.matches(b)
    assert AclBindingFilter.of(R.TOPIC, "t", PT.LITERAL, "User:alice", "*", O.READ, P.ALLOW).matches(b)
    assert not AclBindingFilter.of(R.ANY, None, PT.ANY, "User:bob", None, O.ANY, P.ANY).matches(b)
    assert not AclBindingFilter.of(R.ANY, None, PT.ANY, None, "10.0.0.1", O.ANY, P.ANY).matches(b)
    assert not AclBindingFilter.of(R.ANY, None, PT.ANY, None, None, O.WRITE, P.ANY).matches(b)
    assert not AclBindingFilter.of(R.ANY, None, PT.ANY, None, None, O.ANY, P.DENY).matches(b)
    # a code Kafka does not know is UNKNOWN, and a filter holding one cannot be used
    assert AclBindingFilter.of(77, None, PT.ANY, None, None, O.ANY, P.ANY).problem() == "Unknown patternFilter."
    assert AclBindingFilter.of(R.ANY, None, PT.ANY, None, None, 99, P.ANY).problem() == "Unknown entryFilter."
    assert ANY_ACL.problem() is None


def test_names_as_kafka_tools_read_and_print_them():
    assert pascal_name(O.IDEMPOTENT_WRITE) == "IdempotentWrite"
    assert pascal_name(R.TRANSACTIONAL_ID) == "TransactionalId"
    for text in ("Read", "READ", "read", " Read "):
        assert parse_name(O, text) == O.READ
    for text in ("IdempotentWrite", "IDEMPOTENT_WRITE", "idempotentwrite"):
        assert parse_name(O, text) == O.IDEMPOTENT_WRITE
    assert parse_name(O, "Reed") == O.UNKNOWN
    assert parse_name(PT, "prefixed") == PT.PREFIXED


def test_principals():
    assert parse_principal("User:alice") == ("User", "alice")
    assert parse_principal("User:CN=a,O=b:c") == ("User", "CN=a,O=b:c")
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_principal("alice")


def test_to_string_forms():
    b = AclBinding.of(R.TOPIC, "t", PT.PREFIXED, "User:alice", "*", O.READ, P.ALLOW)
    assert str(b.pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)"
    assert str(b.entry) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert str(ResourcePatternFilter(R.ANY, None, PT.ANY)) == "ResourcePattern(resourceType=ANY, name=<any>, " \
                                                              "patternType=ANY)"


def test_supported_operations_bitfields():
    assert operations_bitfield(supported_operations(R.CLUSTER)) == 0b1111110100000
    assert operations_bitfield(supported_operations(R.TOPIC)) == sum(1 << c for c in (3, 4, 5, 6, 7, 8, 10, 11))
    assert supported_operations(R.TRANSACTIONAL_ID) == {O.DESCRIBE, O.WRITE}
