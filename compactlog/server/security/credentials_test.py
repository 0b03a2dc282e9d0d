"""The SCRAM credential file: AlterUserScramCredentials' rules (C2-C5), a private file with no
password in it (C7), describe as ScramImage does."""

from __future__ import annotations

import json
import os
import stat

from compactlog.server.security.credentials import CREDENTIALS_FILE, CredentialCache, Deletion, Upsertion
from compactlog.server.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, salted_password


def up(name, mech=1, iterations=4096, password="pw"):
    m = SCRAM_SHA_256 if mech == 1 else SCRAM_SHA_512
    salt = b"s" * 24
    return Upsertion(name, mech, iterations, salt,
                     salted_password(m, password, salt, iterations) if mech in (1, 2) else b"x")


def test_alter_describe_and_reload(tmp_path):
    cache = CredentialCache(str(tmp_path))
    assert [r.error for r in cache.alter([], [up("alice"), up("bob", 2, 8192)])] == ["none", "none"]
    assert cache.users() == {"alice": [(1, 4096)], "bob": [(2, 8192)]}
    path = tmp_path / CREDENTIALS_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert "pw" not in json.loads(text)["credentials"][0].values() and "salted" not in text
    again = CredentialCache(str(tmp_path))
    assert again.lookup("alice", SCRAM_SHA_256) == cache.lookup("alice", SCRAM_SHA_256)
    assert again.lookup("alice", SCRAM_SHA_512) is None
    assert [(r.user, r.credentials) for r in again.describe(None)] == [("alice", ((1, 4096),)), ("bob", ((2, 8192),))]
    assert [(r.user, r.error) for r in again.describe(["bob", "bob", "carol"])] == [
        ("bob", "duplicate_resource"), ("carol", "resource_not_found")]


def test_alter_refusals(tmp_path):
    cache = CredentialCache(str(tmp_path))
    results = cache.alter([Deletion("ghost", 1), Deletion("", 1)],
                          [up("alice"), up("alice", 2), up("few", iterations=4095), up("many", iterations=16385),
                           up("mech", mech=3)])
    assert {r.user: (r.error, r.message) for r in results} == {
        "ghost": ("resource_not_found", "Attempt to delete a user credential that does not exist"),
        "": ("unacceptable_credential", "Username must not be empty"),
        "alice": ("duplicate_resource", "A user credential cannot be altered twice in the same request"),
        "few": ("unacceptable_credential", "Too few iterations"),
        "many": ("unacceptable_credential", "Too many iterations"),
        "mech": ("unsupported_sasl_mechanism", "Unknown SCRAM mechanism")}
    assert len(cache) == 0 and not (tmp_path / CREDENTIALS_FILE).exists()
    cache.alter([], [up("alice")])
    assert [r.error for r in cache.alter([Deletion("alice", 1)], [])] == ["none"]
    assert len(CredentialCache(str(tmp_path))) == 0
