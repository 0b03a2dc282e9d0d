"""Option values of the plain kinds (str, int, bool, float and lists of them) converted without
pydantic.

typer (0.29 on) converts every option value through a pydantic ``TypeAdapter`` built on first use:
importing pydantic and building the adapters of one command's options costs ~0.15-0.25 CPU-s, half
of a small command's whole run (``compactlog --data-dir D topics list``), and the test suite starts
thousands of commands. Every compactlog option is one of these plain kinds, so ``install`` puts a
converter in front of typer's that handles what click hands it in the usual case (a string that is
a plain decimal for an int, a str, an already-parsed value) and hands anything else to typer's own
converter, built only then, so that every error message and every unusual spelling stays typer's.
With a typer that has no such hook (before 0.29, plain click types) nothing is changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

_PLAIN = (str, int, bool, float)
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")   # what int() and pydantic read alike
_installed = False


def install() -> None:
    """Put the plain converter in front of typer's (once; nothing without typer's hook)."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        from typer import _coercion, core
    except ImportError:
        return
    original = getattr(core, "build_runtime_param", None)
    base = getattr(_coercion, "RuntimeParam", None)
    if original is None or base is None:
        return

    @dataclass(frozen=True)
    class PlainParam(base):
        """A plain option's converter; typer's (``fallback``) for anything else."""
        kind: type = str
        many: bool = False
        descriptor: Any = None

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            if self.many:
                if isinstance(value, (list, tuple)):
                    out = [self._one(v) for v in value]
                    if not any(v is _SLOW for v in out):
                        return out
            else:
                out = self._one(value)
                if out is not _SLOW:
                    return out
            return self._fallback()._coerce_value(value, param=param, ctx=ctx)

        def _one(self, value: Any) -> Any:
            kind = self.kind
            if type(value) is kind:
                return value
            if kind is int and type(value) is str and _DECIMAL.fullmatch(value):
                return int(value)
            return _SLOW

        def _fallback(self):
            built = self.__dict__.get("_typer")
            if built is None:
                built = original(self.descriptor)
                object.__setattr__(self, "_typer", built)     # frozen, as typer's are: built once
            return built

    def build_runtime_param(descriptor):
        kind, many = _plain_kind(descriptor)
        if kind is None:
            return original(descriptor)
        return PlainParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                          kind=kind, many=many, descriptor=descriptor)

    build_runtime_param.typer = original       # typer's own, for the tests' comparison
    core.build_runtime_param = build_runtime_param


class _Slow:
    """Not converted here: typer's converter decides."""


_SLOW = _Slow()


def _plain_kind(descriptor) -> tuple[type | None, bool]:
    """(the plain kind, whether a list of it) of an option typer would convert with its default
    adapter; (None, False) for anything with a parser, bounds, choices, files or paths."""
    info = descriptor.parameter_info
    if getattr(descriptor, "file_annotation", None) is not None:
        return None, False
    if getattr(info, "parser", None) is not None or getattr(info, "click_type", None) is not None:
        return None, False
    if getattr(info, "min", None) is not None or getattr(info, "max", None) is not None or getattr(info, "clamp", False):
        return None, False
    annotation = descriptor.annotation
    many = False
    if get_origin(annotation) is list:
        args = get_args(annotation)
        if len(args) != 1:
            return None, False
        annotation, many = args[0], True
    if annotation not in _PLAIN:
        return None, False
    return annotation, many
