"""The Spark engine's settings (compactlog's own: where large cleaning rounds run and Spark's scratch
directory), registered with every owner's (storage/config_registry.py).
"""

from __future__ import annotations

from ..storage.config_def import ConfigDef
from ..storage.config_registry import register

SPARK_SETTINGS = (
    ConfigDef("compactlog.spark.master", "string", "local[*]", importance="medium",
              doc="Spark master for large cleaning rounds."),
    ConfigDef("compactlog.spark.local.dir", "string", "", importance="low",
              doc="Spark's scratch directory."),
)

register("spark", __name__, SPARK_SETTINGS)
