"""compactlog on Spark: the tuned session, the kafka-log source (batch, streaming) and sink, latest-state snapshots.

``options.py`` (the options, checked as Spark's Kafka source checks them), ``planning.py`` (what a
read covers and its tasks; no PySpark), ``datasource.py`` (the PySpark classes), ``sink.py`` (the
appends under the data dir's lock), ``snapshot.py`` (latest state on Spark or in this process).
"""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401

from .session import session, stop


def register(spark) -> None:
    """Register the ``kafka-log`` data source (read, readStream, write) on any SparkSession."""
    from .datasource import register as _register
    _register(spark)


def latest_state(spark, path, topic=None, partitions=None):
    """The latest value per key of the records under ``path``, as a DataFrame."""
    from .snapshot import latest_state as _latest_state
    return _latest_state(spark, path, topic, partitions)


def latest_state_local(path, topic, partitions=None):
    """The same latest state computed in this process, without Spark, as a pyarrow Table."""
    from .snapshot import latest_state_local as _local
    return _local(path, topic, partitions)


__all__ = ["session", "stop", "register", "latest_state", "latest_state_local"]
