"""Builds the tests' class-data-sharing archive of Spark's classes (``spark/cds.py`` says why and
where): ``python -m compactlog.spark.cds_build``, run in the background by the tests' ``spark``
fixture when the archive is missing; and, with ``COMPACTLOG_SPARK_CDS_DUMP``
set, the process whose JVM writes it."""

from __future__ import annotations

import os
import sys
import time

from . import cds


def _record() -> None:
    """The building process: a session and small jobs like the tests' (the kafka-log source, an
    aggregation, Python tasks), then the JVM ends normally, writing the classes it loaded."""
    import tempfile

    from ..storage.datadir import DataDir
    from .session import session
    spark = session("local[2]")
    with tempfile.TemporaryDirectory(prefix="compactlog-cds-") as d:
        with DataDir(d, create=True, writable=True) as dd:
            dd.create_topic("t", 2, {"cleanup.policy": "compact"})
            for p in range(2):
                dd.open_log("t", p).append_records([b"k%d" % (i % 7) for i in range(50)], [b"v"] * 50)
        df = spark.read.format("kafka-log").option("subscribe", "t").load(d)
        df.groupBy("partition").count().collect()
        df.select("key", "value").where("offset > 5").orderBy("key").collect()
        spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).collect()
    gateway = spark.sparkContext._gateway
    proc = gateway.proc
    spark.stop()
    try:
        gateway.jvm.System.exit(0)      # the archive is written as the JVM exits
    except Exception:   # noqa: BLE001 - the gateway's connection ends with the JVM
        pass
    sys.exit(proc.wait(timeout=300))


def main() -> int:
    """Build the tests' archive in the Spark local dir unless it is there (no Java: nothing to
    do); always exit 0, a failure noted beside the archive's path."""
    if os.environ.get(cds.DUMP_ENV):
        _record()
    os.environ["COMPACTLOG_SPARK_QUICK_START"] = "1"      # the tests' JVM options, which the archive must match
    from .java import java_problem
    from .local_dir import default_local_dir
    if java_problem() is None:
        began = time.monotonic()
        path = cds.ensure(default_local_dir())
        if path is not None and time.monotonic() - began > 1:
            print(f"compactlog: Spark's classes archived for the tests' JVMs ({path}, "
                  f"{time.monotonic() - began:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
