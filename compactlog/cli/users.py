"""``users``: SCRAM credentials, as ``kafka-configs.sh --entity-type users`` manages them
(``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'``,
``--delete-config SCRAM-SHA-512``, ``--describe``), through a broker (``--bootstrap-server``:
AlterUserScramCredentials / DescribeUserScramCredentials with confluent-kafka's AdminClient, the
client's security from ``--command-config FILE`` as Kafka's tools take it) or on a stopped broker's
data dir (the credential file, with the data-dir lock), as ``kafka-storage format --add-scram``
bootstraps users before the first start.

A password may be given as Kafka's tool takes it (``password=...`` in ``--add-config``) or, to
keep it out of the shell history and the process list, left out: it is then read from standard
input (one line) or asked for at a terminal. The password is salted on this side (a random salt,
the given iterations, 4096 by default); the broker and the file only ever see the salted form.
Output is Kafka's: ``Completed updating config for user alice.`` and, for ``--describe``,
``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192``.
No command prints a password, a salt or a key.
"""

from __future__ import annotations

import os
import sys

import typer

from ..errors import CompactlogError, ConfigError, DataDirLockedError
from .apps import app
from .common import context, fail

MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@app.command("users")
def users_cmd(ctx: typer.Context,
              describe: bool = typer.Option(False, "--describe", help="List the users' SCRAM credentials "
                                            "(mechanism and iterations)."),
              alter: bool = typer.Option(False, "--alter", help="Add or delete SCRAM credentials."),
              entity_type: str = typer.Option(None, "--entity-type", help="users (as kafka-configs.sh)."),
              entity_name: list[str] = typer.Option(None, "--entity-name", "--user",
                                                    help="The user (repeatable with --describe)."),
              add_config: list[str] = typer.Option(None, "--add-config",
                                                   help="SCRAM-SHA-256=[iterations=8192,password=SECRET] "
                                                        "(without password=: read from stdin or asked)."),
              delete_config: list[str] = typer.Option(None, "--delete-config",
                                                      help="Mechanisms to remove: SCRAM-SHA-256,SCRAM-SHA-512."),
              bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                   help="The broker to ask (HOST:PORT); default: the data dir."),
              command_config: str = typer.Option(None, "--command-config",
                                                 help="Client properties (security.protocol, sasl.mechanism, "
                                                      "sasl.jaas.config, ssl.truststore.location, ...).")):
    """Add, delete and describe SCRAM users (kafka-configs.sh --entity-type users)."""
    if describe == alter:
        fail("Command must include exactly one action: --describe, --alter", 2)
    if entity_type not in (None, "users"):
        fail(f"--entity-type {entity_type}: this command manages users only (compactlog configs manages "
             f"topics and brokers)", 2)
    names = list(entity_name or ())
    if describe:
        if add_config or delete_config:
            fail("--add-config and --delete-config go with --alter, not --describe", 2)
        if bootstrap_server:
            from .remote import describe_scram_users
            found = describe_scram_users(bootstrap_server, names or None, command_config)
        else:
            found = _describe_offline(context(ctx), names)
        for user, infos in found.items():
            if infos:
                shown = ", ".join(f"{MECHANISM_NAMES[m - 1]}=iterations={i}" for m, i in infos)
                typer.echo(f"SCRAM credential configs for user-principal '{user}' are {shown}")
        return
    if len(names) != 1:
        fail("--alter needs exactly one --entity-name", 2)
    user = names[0]
    upserts = _upsertions(add_config)
    deletions = _mechanisms([n for item in delete_config or () for n in item.split(",") if n.strip()])
    if not upserts and not deletions:
        fail("At least one of --add-config or --delete-config must be specified with --alter", 2)
    both = set(upserts) & set(deletions)
    if both:
        fail(f"{', '.join(sorted(both))} is both added and deleted", 2)
    for mechanism, options in upserts.items():
        if "password" not in options:
            options["password"] = _read_password(user, mechanism)
    if bootstrap_server:
        from .remote import alter_scram_users
        alter_scram_users(bootstrap_server, user, upserts, deletions, command_config)
    else:
        _alter_offline(context(ctx), user, upserts, deletions)
    typer.echo(f"Completed updating config for user {user}.")


def _mechanisms(names: list[str]) -> list[str]:
    out = []
    for n in (x.strip() for x in names):
        if n.upper() not in MECHANISM_NAMES:
            fail(f"unknown SCRAM mechanism {n!r}: use SCRAM-SHA-256 or SCRAM-SHA-512", 2)
        out.append(n.upper())
    return out


def _upsertions(add_config: list[str] | None) -> dict[str, dict]:
    """mechanism -> {iterations, password}: ConfigCommand's SCRAM syntax."""
    from .configs import configs_to_add
    out: dict[str, dict] = {}
    for mechanism, value in configs_to_add(add_config, None).items():
        (mechanism,) = _mechanisms([mechanism])
        options: dict = {}
        for item in (x for x in value.split(",") if x.strip()):
            key, sep, v = item.partition("=")
            key = key.strip()
            if not sep or key not in ("iterations", "password"):
                fail(f"{mechanism}: expected iterations=N and password=..., found {key!r}", 2)
            options[key] = v
        try:
            options["iterations"] = int(options.get("iterations", 4096))
        except ValueError:
            fail(f"{mechanism}: iterations must be a number", 2)
        if not 4096 <= options["iterations"] <= 16384:
            fail(f"{mechanism}: iterations must be between 4096 and 16384 (Kafka's limits), "
                 f"not {options['iterations']}", 2)
        out[mechanism] = options
    return out


def _read_password(user: str, mechanism: str) -> str:
    if sys.stdin is not None and sys.stdin.isatty():
        import getpass
        first = getpass.getpass(f"{mechanism} password for {user}: ")
        if getpass.getpass("again: ") != first:
            fail("the passwords differ", 2)
        password = first
    else:
        password = (sys.stdin.readline() if sys.stdin is not None else "").rstrip("\r\n")
    if not password:
        fail(f"no password for {user} ({mechanism}): give password=... in --add-config or one line on "
             f"standard input", 2)
    return password


def _describe_offline(c, names: list[str]) -> dict[str, list[tuple[int, int]]]:
    from ..server import CredentialCache
    path = c.require_data_dir()
    if not os.path.isdir(path):
        raise CompactlogError(f"{path}: data directory does not exist")
    users = CredentialCache(path).users()
    return users if not names else {n: users.get(n, []) for n in names}


def _alter_offline(c, user: str, upserts: dict[str, dict], deletions: list[str]) -> None:
    from ..server import MECHANISMS, CredentialCache, Deletion, Upsertion, salted_password
    import secrets
    try:
        dd = c.open(write=True, create=True)
    except DataDirLockedError as e:
        if e.bootstrap:     # the hint must not repeat a password given on the command line
            raise CompactlogError(f"{e}; for example: compactlog users --bootstrap-server {e.bootstrap} "
                                  f"--alter --entity-name {user} ...") from None
        raise
    try:
        cache = CredentialCache(dd.path)
        results = []
        # one alteration per user and request (Kafka's rule): one request per mechanism
        for name in deletions:
            results += cache.alter([Deletion(user, MECHANISMS[name].type_code)], [])
        for name, options in upserts.items():
            mech = MECHANISMS[name]
            salt = secrets.token_bytes(32)
            results += cache.alter([], [Upsertion(user, mech.type_code, options["iterations"], salt,
                                                  salted_password(mech, options["password"], salt,
                                                                  options["iterations"]))])
    finally:
        dd.close()
    failed = [r for r in results if r.error != "none"]
    if failed:
        raise ConfigError("; ".join(f"user {r.user!r}: {r.error.upper()}: {r.message}" for r in failed))
