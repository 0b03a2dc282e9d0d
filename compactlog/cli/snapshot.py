"""``compactlog snapshot``: the latest value per key of a topic, written as Parquet, Delta or JSON."""

from __future__ import annotations

import json
import os
import time

import typer

from .common import context, fail
from .apps import app
from .progress import progress


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def choose_engine(engine: str, master: str | None, part_bytes: list[int]):
    """Where the snapshot runs: the cost model of ``cleaner/executor.py`` for ``auto``."""
    from ..cleaner.executor import MODEL, EngineChoice, spark_running
    from ..spark.executor import without_java
    if engine == "spark":
        return EngineChoice("spark", "--engine spark")
    if engine in ("local", "in-process"):
        return EngineChoice("in-process", "--engine local")
    if master:
        return EngineChoice("spark", f"a Spark master was given ({master})")
    memory = _available_memory()
    biggest = max(part_bytes, default=0)
    if memory is not None and biggest > memory // 2:
        return without_java(EngineChoice("spark", f"the biggest partition ({biggest / 1e6:.0f} MB of log) would "
                                                  f"not fit in half of this machine's available memory "
                                                  f"({memory / 1e6:.0f} MB)"))
    return without_java(MODEL.choose("snapshot", part_bytes, warm=spark_running(), what="of log to read"))


@app.command("snapshot")
def snapshot_cmd(ctx: typer.Context,
                 topic: str = typer.Option(..., "--topic"),
                 out: str = typer.Option(..., "--out", help="Output directory."),
                 fmt: str = typer.Option("parquet", "--format", help="parquet, delta or json."),
                 partitions: str = typer.Option(None, "--partitions", help="Comma list of partitions (default: all)."),
                 overwrite: bool = typer.Option(False, "--overwrite"),
                 engine: str = typer.Option("auto", "--engine", help="auto (the default: this process unless a "
                                            "local Spark would finish sooner, by a measured cost model), spark, "
                                            "or local (this process)."),
                 spark_master: str = typer.Option(None, "--spark-master", help="A Spark master URL; implies "
                                                  "--engine spark."),
                 as_json: bool = typer.Option(False, "--json", help="One JSON object: keys, seconds, engine and why.")):
    """Latest value per key (tombstones removed, aborted data excluded), in this process or on Spark."""
    from ..errors import CompactlogError
    from ..spark.options import Strategy, _partition_list
    from ..spark.planning import select_partitions
    from ..spark.snapshot import FORMATS
    c = context(ctx)
    data_dir = c.require_data_dir()
    # checked before any JVM starts (10 s), so that a typo fails at once
    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}", 2)
    if engine not in ("auto", "spark", "local", "in-process"):
        fail(f"--engine {engine!r}: expected auto, spark or local", 2)
    if engine == "spark" or spark_master:
        from ..spark.java import require_java
        require_java()
    if partitions is not None:
        items = [x.strip() for x in partitions.split(",")]
        if not all(x.isascii() and x.isdigit() for x in items):
            fail(f"--partitions {partitions!r}: expected a comma list of partition numbers (0 or more)", 2)
    if os.path.exists(out) and not overwrite:
        fail(f"{out} already exists (use --overwrite to replace it)")
    from ..storage.remote.bucket import is_bucket_url
    bucket = is_bucket_url(data_dir)
    if bucket:
        from .bucket_dir import check_bucket
        check_bucket(c)
    elif not os.path.isdir(data_dir):
        fail(f"{data_dir}: data directory does not exist" if not os.path.exists(data_dir)
             else f"{data_dir}: not a directory (--data-dir must name a directory)")
    t0 = time.time()
    try:
        chosen = select_partitions(data_dir, Strategy("subscribe", topics=(topic,),
                                                      partitions=_partition_list(partitions)), streaming=False)
    except CompactlogError as e:
        fail(str(e))
    part_bytes = [sum(s.size for s in _segments(tp)) for tp in chosen]
    from ..spark.snapshot import topic_strategy
    # which record of a key is its latest
    strategy = topic_strategy(data_dir, topic, None if bucket else c.broker())
    choice = choose_engine(engine, spark_master, part_bytes)
    if choice.engine == "spark":
        rows = _on_spark(data_dir, topic, partitions, out, fmt, overwrite, spark_master, strategy)
    else:
        from ..spark.snapshot import latest_state_local, write_table
        sizes = {tp.dir: b for tp, b in zip(chosen, part_bytes)}
        with progress("snapshot", sum(part_bytes), unit="bytes", min_total=256 << 20) as bar:
            table = latest_state_local(data_dir, topic, partitions, strategy=strategy,
                                       on_partition=lambda tp: bar.advance(sizes.get(tp.dir, 0)))
        write_table(table, out, fmt, overwrite=overwrite)
        rows = table.num_rows
    secs = time.time() - t0
    if as_json:
        typer.echo(json.dumps({"topic": topic, "out": out, "format": fmt, "keys": rows, "seconds": round(secs, 3),
                               "engine": choice.engine, "engineReason": choice.reason}))
    else:
        typer.echo(f"wrote {rows} keys of {topic} to {out} ({fmt}) in {secs:.1f} s "
                   f"({choice.engine}: {choice.reason})")


def _segments(tp):
    from ..storage.reader import PartitionReader
    return PartitionReader(tp.source).segments()


def _on_spark(data_dir, topic, partitions, out, fmt, overwrite, master, strategy=None) -> int:
    from ..spark.session import session
    from ..spark.snapshot import count_rows, latest_state, write_state
    spark = session(master)
    try:
        write_state(latest_state(spark, data_dir, topic, partitions, strategy), out, fmt, overwrite=overwrite)
    except Exception as e:   # noqa: BLE001 - Spark wraps the source's one-line errors in its own
        text = str(e)
        for marker in ("KafkaLogError: ", "StorageError: ", "CorruptRecordError: "):
            if marker in text:
                fail(text.split(marker, 1)[1].splitlines()[0].strip())
        raise
    return count_rows(out, fmt)
