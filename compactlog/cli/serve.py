"""``serve``: a single-node Kafka broker on the data dir (``compactlog.server``).

The broker holds the data-dir lock for its whole life: another ``serve`` or a CLI command that
writes is refused with the lock's message (naming ``compactlog serve`` and its pid), while
read-only commands (consume, dump-log, verify, explain, cleaner status) keep working on its files.
"""

from __future__ import annotations

import typer

from .common import context, fail
from .apps import app


@app.command("serve")
def serve_cmd(ctx: typer.Context,
              engine: str = typer.Option("auto", "--engine", help="Where the log cleaner rewrites "
                                         "segments: auto (this process for small rounds, Spark for "
                                         "large ones), spark, or local."),
              spark_master: str = typer.Option(None, "--spark-master", help="A Spark master URL for "
                                               "the cleaner (default: compactlog.spark.master); "
                                               "implies --engine spark."),
              log_file: str = typer.Option(None, "--log-file", help="Also append the broker's log "
                                           "lines to this file (they always go to stderr).")):
    """Run a Kafka broker on the data dir until SIGINT/SIGTERM (listeners, advertised.listeners,
    node.id, ... from DIR/server.properties and --override, with Kafka's names)."""
    from ..spark.executor import spark_master_for
    from ..server import Broker, bind_listener, check_settings, configure_logging
    from ..storage.lock import refuse_if_held
    from .common import dump_stacks_on_sigquit
    c = context(ctx)
    dump_stacks_on_sigquit()
    if engine not in ("auto", "spark", "local", "in-process"):
        fail(f"unknown --engine {engine!r}: use auto, spark or local", 2)
    broker = c.broker()
    check_settings(broker, c.require_data_dir())    # bad settings: refused before the dir is made or locked
    master = spark_master_for(spark_master, broker)
    refuse_if_held(c.require_data_dir())            # a second broker on the dir: the lock's holder named first
    http = bind_listener(broker)                    # a port it cannot have: refused before the dir is made or locked
    try:
        configure_logging(log_file)
        dd = c.open(write=True, create=True)
    except BaseException:
        if http is not None:
            http.stop()
        raise
    try:
        b = Broker(dd, engine=engine, spark_master=master,
                   node_id_explicit="node.id" in broker.props, http=http)
        code = b.run()
    except KeyboardInterrupt:
        # Ctrl-C while the logs were still loading: what was opened is closed cleanly
        dd.close()
        raise typer.Exit(130)
    except BaseException:
        dd.close()
        raise
    finally:
        if http is not None:
            http.stop()                             # run() stopped it already, unless it never ran
    raise typer.Exit(code)
