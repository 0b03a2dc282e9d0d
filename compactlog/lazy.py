"""Names a package exports without importing their modules until first used (PEP 562's module
``__getattr__``): ``compactlog.server`` and ``compactlog.coordinator`` list their public surface
this way, so that importing either loads none of what lies behind it."""

from __future__ import annotations

import importlib
from typing import Callable


def exports(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``names`` maps each exported name to the module of the
    package (relative, dotted) that defines it; the value is kept once resolved."""
    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value
    return __getattr__
