"""compactlog on Spark: the tuned session and (later) the kafka-log data source."""

from .session import session, stop

__all__ = ["session", "stop"]
