"""``transactions``: kafka-transactions.sh (Kafka's ``TransactionsCommand``): the subcommands.

``list``; ``describe --transactional-id T``; ``describe-producers --topic T --partition P
[--broker-id N]``; ``abort --topic T --partition P --start-offset O``; ``find-hanging
[--broker-id N] [--max-transaction-timeout MIN] [--topic T [--partition P]]`` (one of --topic and
--broker-id is needed), with Kafka's tables and its messages.

With ``--bootstrap-server HOST:PORT`` (before or after the subcommand) the command asks a broker,
as Kafka's tool does. Without it, with ``--data-dir``, it reads the data dir directly: read-only,
so beside a running broker too, except ``abort``, which writes the ABORT marker under the data-dir
lock and so is refused (with a pointer to ``--bootstrap-server``) while a broker holds the dir. The
work is done by ``service`` over a backend from ``backends``; both are imported when a subcommand
runs, not when the CLI starts.
"""

from __future__ import annotations

import time

import typer

from ...errors import CompactlogError, DataDirLockedError
from ..apps import transactions_app
from ..common import context, fail

_BOOTSTRAP = "transactions.bootstrap_server"     # the group's --bootstrap-server, in the context's meta
_BOOTSTRAP_HELP = ("HOST:PORT of a broker to act through; without it, --data-dir is read (and, for abort, "
                   "written) directly.")


def _bootstrap_option():
    return typer.Option(None, "--bootstrap-server", help=_BOOTSTRAP_HELP)


@transactions_app.callback()
def _transactions(ctx: typer.Context, bootstrap: str = _bootstrap_option()):
    """Analyze transactional state and recover from hanging transactions, as kafka-transactions.sh does."""
    ctx.meta[_BOOTSTRAP] = bootstrap


def _now_ms() -> int:
    return int(time.time() * 1000)


def _run(ctx: typer.Context, bootstrap: str | None, action, *, write: bool = False) -> None:
    """``action(backend)``'s lines printed; the backend a broker or the data dir."""
    from . import backends
    bootstrap = bootstrap or ctx.meta.get(_BOOTSTRAP)
    dd = None
    if bootstrap:
        backend = backends.BrokerBackend(bootstrap)
    else:
        c = context(ctx)
        if not c.data_dir:
            fail("give --bootstrap-server HOST:PORT (through a broker) or --data-dir DIR (a data dir, offline)", 2)
        dd = _open(c, write)
        try:
            from ..tools import _node_id
            backend = backends.DataDirBackend(dd, _node_id(dd.path))
        except BaseException:
            dd.close()
            raise
    try:
        lines = action(backend)
    finally:
        try:
            backend.close()
        finally:
            if dd is not None:
                dd.close()
    for line in lines:
        typer.echo(line)


def _open(c, write: bool):
    try:
        return c.open(write=write)
    except DataDirLockedError as e:
        if "serve" in e.holder or "Kafka broker" in e.holder:
            raise CompactlogError(f"{e}; while a broker runs on it, abort through the broker: "
                                  f"compactlog transactions --bootstrap-server HOST:PORT abort ...") from None
        raise


@transactions_app.command("list")
def list_cmd(ctx: typer.Context, bootstrap: str = _bootstrap_option()):
    """List transactions: every transactional id with its coordinator, producer id and state."""
    from . import service
    _run(ctx, bootstrap, service.list_transactions)


@transactions_app.command("describe")
def describe_cmd(ctx: typer.Context,
                 transactional_id: str = typer.Option(..., "--transactional-id", help="Transactional id."),
                 bootstrap: str = _bootstrap_option()):
    """Describe the state of an active transactional-id."""
    from . import service
    _run(ctx, bootstrap, lambda b: service.describe(b, transactional_id, _now_ms()))


@transactions_app.command("describe-producers")
def describe_producers_cmd(
        ctx: typer.Context,
        topic: str = typer.Option(..., "--topic", help="Topic name."),
        partition: int = typer.Option(..., "--partition", min=0, help="Partition number."),
        broker_id: int = typer.Option(None, "--broker-id", min=0, help="Describe the producer state on this "
                                      "broker's replica (default: the leader)."),
        bootstrap: str = _bootstrap_option()):
    """Describe the states of active producers for a topic partition."""
    from . import service
    _run(ctx, bootstrap, lambda b: service.describe_producers(b, topic, partition, broker_id))


@transactions_app.command("abort")
def abort_cmd(ctx: typer.Context,
              topic: str = typer.Option(..., "--topic", help="Topic name."),
              partition: int = typer.Option(..., "--partition", min=0, help="Partition number."),
              start_offset: int = typer.Option(..., "--start-offset", min=0,
                                               help="Start offset of the transaction to abort."),
              bootstrap: str = _bootstrap_option()):
    """Abort a hanging transaction (the one starting at --start-offset) with an ABORT marker."""
    from . import service
    _run(ctx, bootstrap, lambda b: (service.abort(b, topic, partition, start_offset), [])[1], write=True)


@transactions_app.command("find-hanging")
def find_hanging_cmd(
        ctx: typer.Context,
        broker_id: int = typer.Option(None, "--broker-id", min=0, help="Broker id to search for hanging "
                                      "transactions."),
        max_transaction_timeout: int = typer.Option(15, "--max-transaction-timeout", min=0,
                                                    help="Maximum transaction timeout in minutes to limit the "
                                                         "scope of the search."),
        topic: str = typer.Option(None, "--topic", help="Topic name to limit the search to."),
        partition: int = typer.Option(None, "--partition", min=0, help="Partition number (with --topic)."),
        bootstrap: str = _bootstrap_option()):
    """Find hanging transactions: open ones that outlived any timeout and that no coordinator will end."""
    from . import service
    if topic is None and broker_id is None:
        fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search", 2)
    if partition is not None and topic is None:
        fail("The --partition argument requires --topic to be provided", 2)
    _run(ctx, bootstrap, lambda b: service.find_hanging(b, broker_id=broker_id, topic=topic, partition=partition,
                                                        max_timeout_ms=max_transaction_timeout * 60_000,
                                                        now_ms=_now_ms()))
