"""compactlog: Apache Kafka's log storage, log compaction and broker in Python.

The Python API (``compactlog.open``, ``compactlog.DataDirectory``, ...) lives in ``compactlog.api``
and is imported on first use, so that ``compactlog --help`` stays fast.
"""

from __future__ import annotations

import sys as _sys

__version__ = "0.2.0"

_API = ("open", "DataDirectory", "ConsumerRecord", "RecordMetadata", "READ_COMMITTED", "READ_UNCOMMITTED")
__all__ = list(_API) + ["__version__"]


def _kio_without_hypothesis() -> None:
    """kio (the Kafka message schemas) registers a Hypothesis strategy for each of its types at
    import whenever ``hypothesis`` can be imported: in an environment that has it (every test
    run's), each process that loads the server's schemas paid ~0.2-0.35 CPU-s for strategies
    nothing uses (a broker start: 2.5 CPU-s). kio's hook module is loaded here first with
    ``hypothesis.strategies`` hidden, so it never registers; a process that imported kio before
    compactlog keeps what kio did."""
    if "kio" in _sys.modules:
        return
    # a None entry makes the import fail at once (the package itself not loaded when not yet loaded)
    names = ("hypothesis.strategies",) if "hypothesis" in _sys.modules else ("hypothesis", "hypothesis.strategies")
    hidden = {name: _sys.modules.get(name) for name in names}
    for name in names:
        _sys.modules[name] = None
    try:
        import kio.static._phantom  # noqa: F401
    except ImportError:
        pass
    finally:
        for name, module in hidden.items():
            if module is None:
                _sys.modules.pop(name, None)
            else:
                _sys.modules[name] = module


_kio_without_hypothesis()


def __getattr__(name: str):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'compactlog' has no attribute {name!r}")
