"""Building kio response entities for any version of an API from one set of keyword arguments.

kio has one frozen dataclass per (API, version, entity); fields come and go between versions
(``log_start_offset`` from Produce v5, ``is_internal`` from Metadata v1 ...). A handler names every
field it knows once; ``build`` keeps those the version has and fills the required ones it was not
given with their neutral value (-1 for numbers, "" for strings, () for arrays, None where
nullable), as Kafka's generated ``*Data`` classes start from their schema defaults.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import types
import typing
import uuid
from dataclasses import MISSING, fields

from kio.schema.errors import ErrorCode

from .versions import response_schema

NO_THROTTLE = datetime.timedelta(0)

ZERO_UUID = uuid.UUID(int=0)
# Kafka's "authorized operations not requested" marker
OPERATIONS_NOT_REQUESTED = -2147483648
# AclEntry.supportedOperations(CLUSTER) without an authorizer (all allowed): CREATE 5, ALTER 7,
# DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, as
# Utils.to32BitField packs them (Metadata and DescribeCluster)
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
# IsolationLevel.READ_COMMITTED (Fetch and ListOffsets)
READ_COMMITTED = 1


def millis(value) -> int:
    """A duration field in ms: kio gives ``timedelta`` for Kafka's timed int fields."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


@functools.lru_cache(maxsize=None)
def _plan(cls) -> tuple[frozenset, tuple]:
    """(all field names, (name, filler) of the fields without a default)."""
    names = []
    required = []
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        names.append(f.name)
        if f.default is MISSING and f.default_factory is MISSING:
            required.append((f.name, _neutral(hints.get(f.name), f)))
    return frozenset(names), tuple(required)


def _neutral(hint, f):
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        return None
    kafka_type = f.metadata.get("kafka_type")
    if origin is tuple:
        return ()
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return NO_THROTTLE
    if kafka_type == "uuid":
        return ZERO_UUID
    if kafka_type == "bool":
        return False
    if kafka_type in ("string",):
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "float64":
        return 0.0
    return -1


def build(cls, **values):
    """An instance of kio class ``cls`` from ``values``, ignoring names this version lacks."""
    names, required = _plan(cls)
    kw = {k: v for k, v in values.items() if k in names}
    for name, filler in required:
        if name not in kw:
            kw[name] = filler
    return cls(**kw)


@functools.lru_cache(maxsize=None)
def nested(cls, name: str):
    """The nested entity class ``name`` of the module that defines ``cls`` (same API/version)."""
    return getattr(importlib.import_module(cls.__module__), name)


def response_class(request):
    """The kio response class a request must be answered with."""
    return response_schema(request.api_key, request.response_version)


def response_types(request):
    """(response class, the kio module of its API and version, whose nested entities it uses)."""
    cls = response_class(request)
    return cls, importlib.import_module(cls.__module__)


def error_code(code: int) -> ErrorCode:
    """kio's member for a numeric code (the group coordinator answers in numbers)."""
    return ErrorCode(code)
