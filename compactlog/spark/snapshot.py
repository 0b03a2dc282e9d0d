"""The latest state of a topic: the last value of every key, tombstones and aborted data excluded.

Computed on Spark from the kafka-log data source (read_committed): per (partition, key) the record
with the highest offset, dropped when it is a tombstone. Kafka sends a key to one partition, so
the state of a key lives in its partition; keyless records have no state and are left out.
"""

from __future__ import annotations

import os
import shutil

from ..errors import CompactlogError

FORMATS = ("parquet", "delta", "json")


def latest_state(spark, path: str, topic: str | None = None, partitions: str | None = None):
    """A DataFrame (key, value, partition, offset, timestamp): the latest value per key."""
    from pyspark.sql import functions as F
    reader = spark.read.format("kafka-log")
    if topic:
        reader = reader.option("topic", topic)
    if partitions:
        reader = reader.option("partitions", partitions)
    records = reader.load(path).where(F.col("key").isNotNull())
    latest = (records.groupBy("partition", "key")
              .agg(F.max_by(F.struct("value", "offset", "timestamp"), "offset").alias("r")))
    return (latest.where(F.col("r.value").isNotNull())
            .select("key", F.col("r.value").alias("value"), "partition", F.col("r.offset").alias("offset"),
                    F.col("r.timestamp").alias("timestamp")))


def write_state(df, out: str, fmt: str = "parquet", *, overwrite: bool = False) -> None:
    """Write a state DataFrame as Parquet, a Delta table (Parquet + _delta_log) or JSON lines."""
    if fmt not in FORMATS:
        raise CompactlogError(f"unknown snapshot format {fmt!r}: use {', '.join(FORMATS)}")
    if os.path.exists(out):
        if not overwrite:
            raise CompactlogError(f"{out} already exists (use --overwrite to replace it)")
        shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
    if fmt == "json":
        df.write.json(out)
        return
    df.write.parquet(out)
    if fmt == "delta":
        # Spark's Delta Lake writer needs jars from Maven; delta-rs turns the Parquet files Spark
        # wrote into a Delta table (a _delta_log commit listing them) without copying data.
        from deltalake import convert_to_deltalake
        for name in os.listdir(out):
            if name.startswith(("_SUCCESS", ".")) or name.endswith(".crc"):
                os.remove(os.path.join(out, name))
        convert_to_deltalake(out)
