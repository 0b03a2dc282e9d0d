"""compactlog on Spark: the tuned session, the kafka-log data source, latest-state snapshots."""

from .session import session, stop


def register(spark) -> None:
    """Register the ``kafka-log`` data source on any SparkSession."""
    from .datasource import register as _register
    _register(spark)


def latest_state(spark, path, topic=None, partitions=None):
    """The latest value per key of the records under ``path``, as a DataFrame."""
    from .snapshot import latest_state as _latest_state
    return _latest_state(spark, path, topic, partitions)


__all__ = ["session", "stop", "register", "latest_state"]
