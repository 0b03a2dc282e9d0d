"""compactlog: Apache Kafka's log storage, log compaction and broker in Python.

The Python API (``compactlog.open``, ``compactlog.DataDirectory``, ...) lives in ``compactlog.api``
and is imported on first use, so that ``compactlog --help`` stays fast.
"""

from __future__ import annotations

import sys as _sys

__version__ = "0.2.0"

_API = ("open", "DataDirectory", "ConsumerRecord", "RecordMetadata", "READ_COMMITTED", "READ_UNCOMMITTED")
__all__ = list(_API) + ["__version__"]


class _KioWithoutHypothesis:
    """kio (the Kafka message schemas) registers a Hypothesis strategy for each of its types at
    import whenever ``hypothesis`` can be imported: in an environment that has it (every test
    run's), each process that loads the server's schemas paid ~0.25 CPU-s for strategies nothing
    uses (a broker start: 2.5 CPU-s). This finder sees kio's hook module imported (when something
    first imports kio: ``import compactlog`` alone imports none of it) and runs it with
    ``hypothesis.strategies`` hidden, so it never registers; a process that imported kio before
    compactlog keeps what kio did."""

    HOOK = "kio.static._phantom"

    def find_spec(self, name, path, target=None):
        if name != self.HOOK:
            return None
        _sys.meta_path.remove(self)
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _HiddenHypothesisLoader(spec.loader)
        return spec


class _HiddenHypothesisLoader:
    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):            # get_source, get_code, ...: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        # a None entry makes the import fail at once (the package itself not loaded if not yet)
        names = (("hypothesis.strategies",) if "hypothesis" in _sys.modules
                 else ("hypothesis", "hypothesis.strategies"))
        hidden = {name: _sys.modules.get(name) for name in names}
        for name in names:
            _sys.modules[name] = None
        try:
            self.loader.exec_module(module)
        finally:
            for name, was in hidden.items():
                if was is None:
                    _sys.modules.pop(name, None)
                else:
                    _sys.modules[name] = was


if "kio" not in _sys.modules:
    _sys.meta_path.insert(0, _KioWithoutHypothesis())


def __getattr__(name: str):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'compactlog' has no attribute {name!r}")
