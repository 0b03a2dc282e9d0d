"""The data dir's ACL file: round trip, atomic replacement, and refusal of a file it cannot read
whole (dropping one entry could drop a DENY)."""

from __future__ import annotations

import json
import os

import pytest

from compactlog.errors import StorageError
from compactlog.server.authorizer.acl import ANY_ACL, AclBinding, AclOperation as O, AclPermissionType as P
from compactlog.server.authorizer.acl import PatternType as PT, ResourceType as R
from compactlog.server.authorizer.standard import AclSet, StandardAuthorizer, authorizer_for
from compactlog.server.authorizer.store import ACLS_FILE, AclStore
from compactlog.storage.config import BrokerConfig

ACLS = [AclBinding.of(R.TOPIC, "orders.", PT.PREFIXED, "User:alice", "*", O.WRITE, P.ALLOW),
        AclBinding.of(R.GROUP, "g", PT.LITERAL, "User:alice", "127.0.0.1", O.READ, P.DENY),
        AclBinding.of(R.CLUSTER, "kafka-cluster", PT.LITERAL, "User:*", "*", O.IDEMPOTENT_WRITE, P.ALLOW)]


def test_missing_file_is_no_acls(tmp_path):
    assert len(AclStore(str(tmp_path)).load()) == 0
    assert not os.path.exists(tmp_path / ACLS_FILE)


def test_round_trip_keeps_ids_and_fields(tmp_path):
    store = AclStore(str(tmp_path))
    acls, _ = AclSet().with_created(ACLS)
    store.save(acls)
    again = store.load()
    assert again.by_id == acls.by_id
    doc = json.loads((tmp_path / ACLS_FILE).read_text())
    assert doc["version"] == 1
    assert {"resource_type": "TOPIC", "resource_name": "orders.", "pattern_type": "PREFIXED",
            "principal": "User:alice", "host": "*", "operation": "WRITE",
            "permission_type": "ALLOW"}.items() <= doc["acls"][0].items()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_authorizer_changes_are_written_before_they_apply(tmp_path):
    store = AclStore(str(tmp_path))
    a = StandardAuthorizer(store=store)
    a.create_acls(ACLS)
    assert len(store.load()) == 3
    a.delete_acls([ANY_ACL])
    assert len(store.load()) == 0


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 2, "acls": []}',
                                  '{"version": 1, "acls": [{"id": "x", "resource_type": "TOPIC"}]}',
                                  '{"version": 1, "acls": [{"id": "x", "resource_type": "TOPIK", "resource_name": "t",'
                                  ' "pattern_type": "LITERAL", "principal": "User:a", "host": "*", '
                                  '"operation": "READ", "permission_type": "ALLOW"}]}',
                                  '{"version": 1, "acls": [{"id": "x", "resource_type": "TOPIC", "resource_name": "",'
                                  ' "pattern_type": "LITERAL", "principal": "User:a", "host": "*", '
                                  '"operation": "READ", "permission_type": "ALLOW"}]}'])
def test_a_file_that_cannot_be_read_whole_is_refused(tmp_path, text):
    (tmp_path / ACLS_FILE).write_text(text)
    with pytest.raises(StorageError, match=ACLS_FILE):
        AclStore(str(tmp_path)).load()


def test_authorizer_for_loads_the_file_only_when_enabled(tmp_path):
    (tmp_path / ACLS_FILE).write_text("{")
    assert authorizer_for(BrokerConfig({}), AclStore(str(tmp_path))) is None
    with pytest.raises(StorageError):
        authorizer_for(BrokerConfig({"authorizer.class.name": "StandardAuthorizer"}), AclStore(str(tmp_path)))
    (tmp_path / ACLS_FILE).unlink()
    a = authorizer_for(BrokerConfig({"authorizer.class.name": "StandardAuthorizer", "super.users": "User:admin",
                                     "allow.everyone.if.no.acl.found": "true"}), AclStore(str(tmp_path)))
    assert a.super_users == {"User:admin"} and a.allow_if_no_acl
