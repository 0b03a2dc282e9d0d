"""Where Spark (and the sink's staged task output) keep their local files: ``spark.local.dir``.

Apart from ``session.py`` so that the sink, which runs in Spark's Python workers, can find it
without importing the session module (which imports the data source, which imports the sink).
"""

from __future__ import annotations

import os


def default_local_dir() -> str:
    d = os.environ.get("COMPACTLOG_SPARK_LOCAL_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "compactlog", "spark-local")
    os.makedirs(d, exist_ok=True)
    return d
