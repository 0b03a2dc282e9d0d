"""``compactlog acls`` as kafka-acls.sh: offline on a data dir (before the first start, under the
data-dir lock) and through a broker (``--bootstrap-server``, ``--command-config``), with Kafka's
output lines; refusals change nothing; the broker loads what was written offline, and a data dir
carrying ACLs stays one that ``verify``, ``log-dirs`` and ``dump-log`` read as before.

One broker for the module, with the authorizer on and ``super.users=User:ANONYMOUS`` (a PLAINTEXT
client is User:ANONYMOUS, as in Kafka), started on a data dir whose ACLs were written offline.
"""

from __future__ import annotations

import json
import os

import pytest

from broker_support import Broker
from compactlog.server.authorizer.store import ACLS_FILE

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T = "ResourcePattern(resourceType=TOPIC, name={}, patternType={})"


def entry(principal, operation, permission="ALLOW", host="*"):
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def acl_records(data_dir) -> set[tuple]:
    with open(os.path.join(data_dir, ACLS_FILE), encoding="utf-8") as f:
        doc = json.load(f)
    return {(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"], a["operation"],
             a["permission_type"]) for a in doc["acls"]}


# -- offline --------------------------------------------------------------------------------------------

def test_add_before_the_first_start_list_and_remove(tmp_path, cli):
    d = tmp_path / "data"
    r = cli("--data-dir", d, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
            "--operation", "describe", "--topic", "prices")
    assert r.code == 0, r.err
    assert r.out == (f"Adding ACLs for resource `{T.format('prices', 'LITERAL')}`: \n"
                     f" \t{entry('User:alice', 'READ')}\n\t{entry('User:alice', 'DESCRIBE')}\n\n")
    assert "authorizer.class.name" in r.err           # the note: the broker applies them only with it
    assert acl_records(d) == {("TOPIC", "prices", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                              ("TOPIC", "prices", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW")}

    # adding it again: Kafka's "already exists", nothing added
    r = cli("--data-dir", d, "acls", "--add", "--allow-principal", "User:alice", "--operation", "READ",
            "--topic", "prices")
    assert r.code == 0
    assert r.out == (f"Acl (pattern={T.format('prices', 'LITERAL')}, entry={entry('User:alice', 'READ')}) "
                     f"already exists.\n")
    assert len(acl_records(d)) == 2

    # the convenience roles, a prefixed allow with a literal deny, a host
    assert cli("--data-dir", d, "acls", "--add", "--allow-principal", "User:carol", "--producer", "--topic", "orders",
               "--transactional-id", "tx-1", "--idempotent").code == 0
    assert cli("--data-dir", d, "acls", "--add", "--allow-principal", "User:dave", "--consumer", "--topic", "orders",
               "--group", "billing").code == 0
    assert cli("--data-dir", d, "acls", "--add", "--allow-principal", "User:*", "--operation", "Write",
               "--topic", "orders.", "--resource-pattern-type", "prefixed").code == 0
    assert cli("--data-dir", d, "acls", "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.1",
               "--operation", "Write", "--topic", "orders.audit").code == 0
    assert acl_records(d) >= {
        ("TOPIC", "orders", "LITERAL", "User:carol", "*", "WRITE", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:carol", "*", "CREATE", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:carol", "*", "DESCRIBE", "ALLOW"),
        ("TRANSACTIONAL_ID", "tx-1", "LITERAL", "User:carol", "*", "WRITE", "ALLOW"),
        ("TRANSACTIONAL_ID", "tx-1", "LITERAL", "User:carol", "*", "DESCRIBE", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:carol", "*", "IDEMPOTENT_WRITE", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:dave", "*", "READ", "ALLOW"),
        ("GROUP", "billing", "LITERAL", "User:dave", "*", "READ", "ALLOW"),
        ("TOPIC", "orders.", "PREFIXED", "User:*", "*", "WRITE", "ALLOW"),
        ("TOPIC", "orders.audit", "LITERAL", "User:mallory", "10.0.0.1", "WRITE", "DENY")}

    # --list: every resource; one resource exactly; what applies to a name (match); one principal
    out = cli("--data-dir", d, "acls", "--list").out
    assert f"Current ACLs for resource `{T.format('orders.', 'PREFIXED')}`:\n\t{entry('User:*', 'WRITE')}\n\n" in out
    assert "resourceType=GROUP, name=billing" in out and "resourceType=CLUSTER, name=kafka-cluster" in out
    exact = cli("--data-dir", d, "acls", "--list", "--topic", "orders.audit").out
    assert exact == (f"Current ACLs for resource `{T.format('orders.audit', 'LITERAL')}`:\n"
                     f"\t{entry('User:mallory', 'WRITE', 'DENY', '10.0.0.1')}\n\n")
    match = cli("--data-dir", d, "acls", "--list", "--topic", "orders.audit", "--resource-pattern-type", "match").out
    assert T.format("orders.audit", "LITERAL") in match and T.format("orders.", "PREFIXED") in match
    assert T.format("orders", "LITERAL") not in match
    carol = cli("--data-dir", d, "acls", "--list", "--principal", "User:carol").out
    assert carol.startswith("ACLs for principal `User:carol`\n")
    assert "User:dave" not in carol and "IDEMPOTENT_WRITE" in carol and "name=tx-1" in carol

    # --remove asks first: "n" keeps, --force does not ask
    r = cli("--data-dir", d, "acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read",
            "--topic", "prices", stdin="n\n")
    assert r.code == 0 and "Are you sure you want to remove ACLs: \n" in r.out and r.out.rstrip().endswith("(y/n)")
    assert ("TOPIC", "prices", "LITERAL", "User:alice", "*", "READ", "ALLOW") in acl_records(d)
    assert cli("--data-dir", d, "acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read",
               "--topic", "prices", stdin="y\n").code == 0
    assert ("TOPIC", "prices", "LITERAL", "User:alice", "*", "READ", "ALLOW") not in acl_records(d)
    assert ("TOPIC", "prices", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW") in acl_records(d)
    # a resource without principals: all its ACLs
    assert cli("--data-dir", d, "acls", "--remove", "--topic", "orders", "--force").code == 0
    assert not {a for a in acl_records(d) if a[:3] == ("TOPIC", "orders", "LITERAL")}
    assert ("TOPIC", "orders.", "PREFIXED", "User:*", "*", "WRITE", "ALLOW") in acl_records(d)


@pytest.mark.parametrize("args, message", [
    (["--add", "--remove", "--topic", "t"], "exactly one action"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName but got alice"),
    (["--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
     "ResourceType TOPIC only supports operations"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "Invalid operation 'Fly'"),
    (["--add", "--topic", "t"], "--allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "at least one resource"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "not valid when adding acls"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "glob"],
     "Unknown resource-pattern-type: glob"),
    (["--add", "--allow-principal", "User:a", "--cluster", "--resource-pattern-type", "prefixed"], "kafka-cluster"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify"),
    (["--add", "--allow-principal", "User:a", "--producer", "--operation", "Read", "--topic", "t"],
     "do not go with --operation"),
    (["--list", "--allow-principal", "User:a"], "Option --list does not go with"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--principal", "User:a"], "only available if --list"),
    (["--list", "--command-config", "client.properties"], "--command-config goes with --bootstrap-server"),
])
def test_refusals_change_nothing(tmp_path, cli, args, message):
    d = tmp_path / "data"
    assert cli("--data-dir", d, "acls", "--add", "--allow-principal", "User:alice", "--topic", "t").code == 0
    before = (d / ACLS_FILE).read_bytes()
    r = cli("--data-dir", d, "acls", *args)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err and "Traceback" not in r.err
    assert (d / ACLS_FILE).read_bytes() == before


def test_an_unreadable_acl_file_is_refused_whole(tmp_path, cli):
    d = tmp_path / "data"
    d.mkdir()
    (d / ACLS_FILE).write_text('{"version": 1, "acls": [{"id": "x", "resource_type": "TOPIC"}]}\n')
    for args in (["--list"], ["--add", "--allow-principal", "User:a", "--topic", "t"]):
        r = cli("--data-dir", d, "acls", *args)
        assert r.code == 1 and "ACL #0 is not valid" in r.err and "Traceback" not in r.err
    assert "User:a" not in (d / ACLS_FILE).read_text()


# -- a data dir with ACLs, and the broker on it -----------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from compactlog.cli.main import main
    d = tmp_path_factory.mktemp("acls-cli") / "data"
    # written offline before the first start: the broker loads them
    assert main(["--data-dir", str(d), "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--topic", "seeded"]) == 0
    assert main(["--data-dir", str(d), "topics", "create", "--topic", "seeded", "--partitions", "1"]) == 0
    b = Broker(d, {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.start()
    yield b
    b.stop()


def test_the_broker_loads_the_acls_written_offline(broker, cli):
    assert "Initialized with 1 acl(s); super users: User:ANONYMOUS" in broker.log_text()
    r = cli("acls", "--bootstrap-server", broker.bootstrap, "--list", "--topic", "seeded")
    assert r.code == 0, r.err
    assert r.out == f"Current ACLs for resource `{T.format('seeded', 'LITERAL')}`:\n\t{entry('User:alice', 'READ')}\n\n"


def test_through_the_broker_with_command_config(broker, cli, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# the client's security, as kafka-acls.sh --command-config takes it\n"
                     "security.protocol=PLAINTEXT\nclient.id=acl-admin\nrequest.timeout.ms=20000\n")
    base = ["acls", "--bootstrap-server", broker.bootstrap, "--command-config", props]
    r = cli(*base, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "web.",
            "--resource-pattern-type", "prefixed")
    assert r.code == 0, r.err
    assert r.out.startswith(f"Adding ACLs for resource `{T.format('web.', 'PREFIXED')}`: \n")
    assert cli(*base, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", "web-*").code == 0
    # the broker persisted them in the data dir before answering
    assert {("TOPIC", "web.", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW"),
            ("GROUP", "web-*", "LITERAL", "User:bob", "*", "READ", "ALLOW")} <= acl_records(broker.data_dir)
    listed = cli(*base, "--list", "--topic", "web.clicks", "--resource-pattern-type", "match").out
    assert T.format("web.", "PREFIXED") in listed
    r = cli(*base, "--remove", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "web.",
            "--resource-pattern-type", "prefixed", "--force")
    assert r.code == 0, r.err
    assert not {a for a in acl_records(broker.data_dir) if a[1] == "web."}
    assert cli(*base, "--list", "--group", "web-*").out.count("User:bob") == 1


def test_offline_writers_are_refused_while_the_broker_runs_readers_are_not(broker, cli):
    before = acl_records(broker.data_dir)
    r = cli("--data-dir", broker.data_dir, "acls", "--add", "--allow-principal", "User:eve", "--topic", "seeded")
    assert r.code != 0
    assert "locked" in r.err and f"--bootstrap-server {broker.bootstrap}" in r.err
    assert acl_records(broker.data_dir) == before
    r = cli("--data-dir", broker.data_dir, "acls", "--list", "--topic", "seeded")
    assert r.code == 0 and entry("User:alice", "READ") in r.out


def test_a_data_dir_with_acls_reads_as_before(broker, cli, tmp_path):
    assert os.path.isfile(os.path.join(broker.data_dir, ACLS_FILE))
    r = cli("--data-dir", broker.data_dir, "verify")
    assert r.code == 0, r.out + r.err
    assert ACLS_FILE not in r.out + r.err
    r = cli("log-dirs", "--bootstrap-server", broker.bootstrap, "--describe")
    assert r.code == 0 and '"partition":"seeded-0"' in r.out.replace(" ", ""), r.out + r.err
    r = cli("dump-log", "--files", os.path.join(broker.data_dir, "seeded-0"))
    assert r.code == 0, r.err
