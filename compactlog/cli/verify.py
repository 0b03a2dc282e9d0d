"""``compactlog verify``: check a data dir without changing it."""

from __future__ import annotations

import json

import typer

from ..storage.datadir import DataDir
from ..storage.verify import read_checkpoints, verify_partition
from .common import context
from .main import app


@app.command("verify")
def verify_cmd(ctx: typer.Context,
               topic: str = typer.Option(None, "--topic", help="Only this topic."),
               as_json: bool = typer.Option(False, "--json", help="One JSON object per problem, then a summary.")):
    """CRCs, offsets, batch sizes, indexes against the log, checkpoints, keys unique below the cleaner
    checkpoint, producer snapshots. Exit 0 when healthy; otherwise one line per problem."""
    c = context(ctx)
    dd = DataDir(c.require_data_dir(), broker=c.broker())   # never opened for writing: nothing changes
    checkpoints, problems = read_checkpoints(dd.path)
    topics = [topic] if topic else dd.topics()
    partitions = 0
    for t in topics:
        config = dd.topic_config(t)
        for p in dd.partitions(t):
            partitions += 1
            problems.extend(verify_partition(dd.path, t, p, config, checkpoints))
    for pr in problems:
        typer.echo(json.dumps(pr.to_dict()) if as_json else str(pr))
    if as_json:
        typer.echo(json.dumps({"partitions": partitions, "problems": len(problems)}))
    elif not problems:
        typer.echo(f"ok: {partitions} partition(s) verified, no problems")
    if problems:
        raise typer.Exit(1)
