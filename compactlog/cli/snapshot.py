"""``compactlog snapshot``: the latest value per key of a topic, written as Parquet, Delta or JSON."""

from __future__ import annotations

import time

import typer

from .common import context
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
    from ..spark.snapshot import latest_state, write_state
    c = context(ctx)
    data_dir = c.require_data_dir()
    t0 = time.time()
    spark = session(spark_master)
    df = latest_state(spark, data_dir, topic, partitions)
    write_state(df, out, fmt, overwrite=overwrite)
    rows = spark.read.format("json" if fmt == "json" else "parquet").load(out).count()
    typer.echo(f"wrote {rows} keys of {topic} to {out} ({fmt}) in {time.time() - t0:.1f} s")
