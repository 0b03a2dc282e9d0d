"""compactlog: Apache Kafka's log storage, log compaction and broker in Python.

The Python API (``compactlog.open``, ``compactlog.DataDirectory``, ...) lives in ``compactlog.api``
and is imported on first use, so that ``compactlog --help`` stays fast.
"""

from __future__ import annotations

__version__ = "0.2.0"

_API = ("open", "DataDirectory", "ConsumerRecord", "RecordMetadata", "READ_COMMITTED", "READ_UNCOMMITTED")
__all__ = list(_API) + ["__version__"]


def __getattr__(name: str):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'compactlog' has no attribute {name!r}")
