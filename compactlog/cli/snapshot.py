"""``compactlog snapshot``: the latest value per key of a topic, written as Parquet, Delta or JSON."""

from __future__ import annotations

import os
import time

import typer

from .common import context, fail
from .main import app


@app.command("snapshot")
def snapshot_cmd(ctx: typer.Context,
                 topic: str = typer.Option(..., "--topic"),
                 out: str = typer.Option(..., "--out", help="Output directory."),
                 fmt: str = typer.Option("parquet", "--format", help="parquet, delta or json."),
                 partitions: str = typer.Option(None, "--partitions", help="Comma list of partitions (default: all)."),
                 overwrite: bool = typer.Option(False, "--overwrite"),
                 spark_master: str = typer.Option(None, "--spark-master")):
    """Latest value per key (tombstones removed, aborted data excluded), computed on Spark."""
    from ..spark.session import session
    from ..spark.snapshot import FORMATS, latest_state, write_state
    c = context(ctx)
    data_dir = c.require_data_dir()
    # checked before the JVM starts (10 s), so that a typo fails at once
    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}", 2)
    if partitions is not None:
        items = [x.strip() for x in partitions.split(",")]
        if not all(x.isascii() and x.isdigit() for x in items):
            fail(f"--partitions {partitions!r}: expected a comma list of partition numbers (0 or more)", 2)
    if os.path.exists(out) and not overwrite:
        fail(f"{out} already exists (use --overwrite to replace it)")
    if not os.path.isdir(data_dir):
        fail(f"{data_dir}: data directory does not exist" if not os.path.exists(data_dir)
             else f"{data_dir}: not a directory (--data-dir must name a directory)")
    t0 = time.time()
    spark = session(spark_master)
    df = latest_state(spark, data_dir, topic, partitions)
    write_state(df, out, fmt, overwrite=overwrite)
    rows = spark.read.format("json" if fmt == "json" else "parquet").load(out).count()
    typer.echo(f"wrote {rows} keys of {topic} to {out} ({fmt}) in {time.time() - t0:.1f} s")
