"""Bounds every array count of a request body before kio decodes it.

kio 0.6.5's native reader reserves room for an array from the count on the wire before it
reads a single element (``Vec::with_capacity(n)`` in its ``read_field``). A frame declaring
2^31 (legacy) or 2^35 (compact) elements therefore makes Rust's allocator fail, and Rust
answers an allocation failure by aborting the process: no exception, the broker is gone. Kafka's
generated readers (``MessageDataGenerator``) check every count against the bytes remaining
first ("Tried to allocate a collection of size ...") and throw, which closes the connection.

``scan`` makes the same check before kio runs. It walks a body along the schema kio will use
(built from the same introspection of kio's dataclasses that kio's native reader compiles),
moving its cursor exactly as kio does for every input kio accepts, and refuses an array whose
count times its elements' minimum size exceeds the bytes left. After a successful scan every
array kio reaches holds at most as many elements as the frame has bytes. It also refuses a null
where the schema has a non-nullable array, which kio would hand over as None and Kafka refuses
("non-nullable field ... was serialized as null"). Wherever kio itself would fail (a short
buffer, a bad length), the scan may fail first or let kio fail: either way the request is
refused, and no array count is ever trusted unchecked. Two things kio refuses and Kafka reads
raise ``ReadAfterRewrite``: a tagged field the schema does not list (Kafka skips it) and a
nullable field's legacy length below -1 (Kafka's null); ``as_kafka_reads`` then copies the body
as Kafka reads it (no such field, -1) for kio to read.
"""

from __future__ import annotations

import functools
import struct
import threading
from dataclasses import fields
from types import NoneType, UnionType
from typing import Callable, Union, get_args, get_origin

from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveField,
                                    PrimitiveTupleField, classify_field, get_field_tag,
                                    get_schema_field_type, is_optional)


class MalformedRequest(ValueError):
    """The body cannot be what its schema says (position and reason in the message)."""


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

# A compiled field: a fixed byte count, or a function (buf, pos, end) -> pos after the field.
Step = Union[int, Callable[[memoryview, int, int], int]]


def scan(entity_type: type, buf, pos: int, end: int) -> int:
    """Walk one ``entity_type`` at ``buf[pos:end]``; return the position after it.

    Raises ``MalformedRequest`` when an array count exceeds what the remaining bytes can hold,
    or when the body is visibly malformed (too short, a negative length, an unknown tag).
    """
    step, _ = _compile_entity(entity_type, False)
    after = pos + step if step.__class__ is int else step(buf, pos, end)
    if after > end:
        raise MalformedRequest(f"the body needs {after - pos} bytes, the frame has {end - pos}")
    return after


# --- helpers the generated scanners call ---------------------------------------------------

def _uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    # Mirrors kio's reader: at most 5 bytes; a 5th byte with its top bit set is an error.
    result = 0
    shift = 0
    for _ in range(5):
        if pos >= end:
            raise _past_end(pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise MalformedRequest(f"varint ending at byte {pos} is longer than 5 bytes")


def _past_end(pos: int) -> MalformedRequest:
    return MalformedRequest(f"field at byte {pos} runs past the end of the frame")


def _negative(n: int, pos: int) -> MalformedRequest:
    return MalformedRequest(f"negative length {n} at byte {pos}")


def _null(name: str, pos: int) -> MalformedRequest:
    # kio reads it as None; Kafka's generated readers throw "non-nullable field ... was
    # serialized as null", which closes the connection.
    return MalformedRequest(f"non-nullable array {name} is null (byte {pos})")


def _too_many(n: int, min_size: int, pos: int, end: int) -> MalformedRequest:
    return MalformedRequest(f"array at byte {pos} declares {n} elements of at least {min_size} "
                            f"bytes each, but {max(end - pos, 0)} bytes are left")


class ReadAfterRewrite(MalformedRequest):
    """Bytes kio refuses and Kafka's generated readers read: the body is rewritten as Kafka reads
    it (``as_kafka_reads``) and read again."""


class UnknownTaggedField(ReadAfterRewrite):
    """A tagged field the schema does not list: Kafka keeps its bytes aside and reads on
    (``readUnknownTaggedField``); the rewrite drops it."""


class NegativeNullLength(ReadAfterRewrite):
    """A nullable string, bytes or array whose legacy length is below -1: Kafka reads any
    negative length as null (``if (length < 0) this.x = null``); the rewrite makes it -1."""


class _Skipping(threading.local):
    # while ``as_kafka_reads`` walks a body: the tag sections holding unknown fields and the
    # lengths read as null (None: a plain scan, where the first of either raises)
    sections: list | None = None
    nulls: list | None = None


_skipping = _Skipping()


def _tagged(buf, pos: int, end: int, tagged: dict, name: str) -> int:
    section = pos
    count, pos = _uvarint(buf, pos, end)
    count_end = pos
    unknown = []
    for _ in range(count):
        field = pos
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)   # the size: kio reads a known field by its schema
        step = tagged.get(tag)
        if step is None:
            if pos + size > end:
                raise _past_end(pos)
            if _skipping.sections is None:
                raise UnknownTaggedField(f"{name} has no tagged field {tag} (byte {pos})")
            pos += size
            unknown.append((field, pos))
            continue
        pos = pos + step if step.__class__ is int else step(buf, pos, end)
    if unknown:
        _skipping.sections.append((section, count_end, count - len(unknown), unknown))
    return pos


def _as_null(n: int, pos: int, width: int) -> int:
    nulls = _skipping.nulls
    if nulls is None:
        raise NegativeNullLength(f"negative length {n} at byte {pos} of a nullable field")
    nulls.append((pos, pos + width, b"\xff" * width))
    return -1


def _edits_without(sections) -> list[tuple[int, int, bytes]]:
    """(start, end, replacement) edits that drop the unknown fields of ``sections`` and lower
    their sections' counts, in position order."""
    edits = []
    for section, count_end, count, unknown in sections:
        edits.append((section, count_end, _uvarint_bytes(count)))
        edits.extend((start, stop, b"") for start, stop in unknown)
    edits.sort()
    return edits


def _apply(buf, pos: int, end: int, edits) -> bytes:
    parts = []
    for start, stop, replacement in edits:
        parts += (buf[pos:start], replacement)
        pos = stop
    parts.append(buf[pos:end])
    return b"".join(bytes(p) for p in parts)


def _uvarint_bytes(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def as_kafka_reads(entity_type: type, buf, pos: int, end: int) -> bytes:
    """``buf[pos:end]`` as Kafka reads it, for kio: without the tagged fields ``entity_type``'s
    schema does not list (each section's count lowered to match), and with -1 for a nullable
    field's length below -1. A copy: only a body that has such bytes pays for it. Raises
    ``MalformedRequest`` as ``scan`` does for anything else; known tagged fields are kept."""
    _skipping.sections = sections = []
    _skipping.nulls = nulls = []
    try:
        scan(entity_type, buf, pos, end)
    finally:
        _skipping.sections = _skipping.nulls = None
    edits = _edits_without(sections) + nulls
    edits.sort()
    return _apply(buf, pos, end, edits)


def header_as_kafka_reads(buf, end: int, flexible: bool) -> bytes | None:
    """A request header (``buf[0:end]``, a body after it) as Kafka's RequestHeaderData.read reads
    it: a client_id length below -1 as -1 (null), and in a header v2 (``flexible``) no tagged
    field, all of them unknown to its schema and skipped. None when there is nothing to rewrite
    or the header is malformed. Its client_id is a legacy int16-length string in both versions
    (wire-protocol.md §1.2)."""
    if end < 10:
        return None
    edits = []
    n = _I16.unpack_from(buf, 8)[0]
    if n < -1:
        edits.append((8, 10, b"\xff\xff"))
    section = 10 + max(n, 0)
    if flexible and section < end and buf[section] != 0:
        outer, _skipping.sections = _skipping.sections, []
        sections = _skipping.sections
        try:
            _tagged(buf, section, end, {}, "the request header")     # its schema lists no tagged field
        except MalformedRequest:
            return None
        finally:
            _skipping.sections = outer
        edits += _edits_without(sections)
    if not edits:
        return None
    edits.sort()
    return _apply(buf, 0, end, edits)


_HELPERS = {"_uvarint": _uvarint, "_i16": _I16.unpack_from, "_i32": _I32.unpack_from,
            "_past_end": _past_end, "_negative": _negative, "_null": _null, "_too_many": _too_many,
            "_tagged": _tagged, "_as_null": _as_null}

# --- the scanner generator -------------------------------------------------------------------
# One Python function per kio entity class, with the reads of its fields written out in line:
# a chain of closures costs several times more per request (measured on the Produce captures).

_COMPACT_LENGTH = [          # an unsigned varint into v, one-byte fast path
    "if pos >= end: raise _past_end(pos)",
    "v = buf[pos]",
    "if v < 128: pos += 1",
    "else: v, pos = _uvarint(buf, pos, end)",
]


def _legacy_length(width: int, var: str = "n", nullable: bool = False) -> list[str]:
    """An int16/int32 length into ``var`` (-1 = null; below -1, null too where the field is
    nullable, as Kafka reads it: ``_as_null``)."""
    read = "_i16" if width == 2 else "_i32"
    code = [f"if pos + {width} > end: raise _past_end(pos)",
            f"{var} = {read}(buf, pos)[0]"]
    if nullable:
        return code + [f"if {var} < -1: {var} = _as_null({var}, pos, {width})",
                       f"pos += {width}"]
    return code + [f"pos += {width}",
                   f"if {var} < -1: raise _negative({var}, pos)"]


def _variable_primitive(kafka_type: str, flexible: bool, nullable: bool = False) -> tuple[list[str], int]:
    """(code, minimum size) of a string/bytes field; the code advances pos past it."""
    if flexible:
        return _COMPACT_LENGTH + ["if v > 1: pos += v - 1"], 1      # v = length + 1, 0 = null
    width = 2 if kafka_type == "string" else 4
    return _legacy_length(width, nullable=nullable) + ["if n > 0: pos += n"], width


def _nullable_array(field) -> bool:
    """``tuple[X, ...] | None``: the array itself may be null."""
    return get_origin(field.type) in (UnionType, Union) and NoneType in get_args(field.type)


class _Generator:
    def __init__(self):
        self.refs: dict[str, object] = {}

    def ref(self, obj) -> str:
        name = f"_r{len(self.refs)}"
        self.refs[name] = obj
        return name

    def field(self, field, flexible: bool) -> tuple[int | None, list[str], int]:
        """(fixed size or None, code when not fixed, minimum size) of one field."""
        kind = classify_field(field)
        if isinstance(kind, (PrimitiveField, PrimitiveTupleField)):
            kafka_type = get_schema_field_type(field)
            fixed = _FIXED_SIZES.get(kafka_type)
            if fixed is not None:
                element: Step = fixed
                code, min_size = [], fixed
            elif kafka_type in ("string", "bytes", "records"):
                element = None
                code, min_size = _variable_primitive(kafka_type, flexible,
                                                     not kind.is_array and is_optional(field))
            else:
                raise TypeError(f"kio kafka_type {kafka_type!r} of {field.name} is unknown here")
        elif isinstance(kind, (EntityField, EntityTupleField)):
            nullable = isinstance(kind, EntityField) and is_optional(field)
            element, min_size = _compile_entity(kind.type_, nullable)
            code = [] if isinstance(element, int) else [f"pos = {self.ref(element)}(buf, pos, end)"]
        else:
            raise TypeError(f"unexpected kio field classification {kind!r} for {field.name}")

        if not kind.is_array:
            return (element if isinstance(element, int) else None), code, min_size
        if min_size == 0:
            raise TypeError(f"array field {field.name} has elements that may take no bytes: "
                            "its count cannot be bounded by the frame size")
        if flexible:
            head = _COMPACT_LENGTH + ["count = v - 1"]
        else:
            head = _legacy_length(4, "count", _nullable_array(field))
        if not _nullable_array(field):
            head.append(f"if count < 0: raise _null({field.name!r}, pos)")
        head += ["if count > 0:",
                 f"    if count * {min_size} > end - pos: "
                 f"raise _too_many(count, {min_size}, pos, end)"]
        if isinstance(element, int):
            body = [f"    pos += count * {element}"]
        else:
            body = ["    for _ in range(count):"] + [f"        {line}" for line in code]
        return None, head + body, (1 if flexible else 4)


def _function(name: str, code: list[str], refs: dict) -> Callable:
    source = ("def scan(buf, pos, end):\n"
              + "".join(f"    {line}\n" for line in code)
              + "    return pos\n")
    namespace = dict(_HELPERS, **refs)
    exec(compile(source, f"<request scan: {name}>", "exec"), namespace)
    return namespace["scan"]


@functools.lru_cache(maxsize=None)
def _compile_entity(entity_type: type, nullable: bool) -> tuple[Step, int]:
    """(scanner or fixed size, minimum size) of one kio entity class."""
    flexible = entity_type.__flexible__
    name = entity_type.__qualname__
    gen = _Generator()
    code: list[str] = []
    tagged: dict[int, Step] = {}
    fixed_run = 0                                 # consecutive fixed fields: one skip
    all_fixed = True
    min_size = 1 if flexible else 0
    for f in fields(entity_type):
        fixed, field_code, field_min = gen.field(f, flexible)
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = fixed if fixed is not None else _function(
                f"{name}.{f.name}", field_code, gen.refs)
            continue
        min_size += field_min
        if fixed is not None:
            fixed_run += fixed
            continue
        all_fixed = False
        if fixed_run:
            code.append(f"pos += {fixed_run}")
            fixed_run = 0
        code += field_code

    if all_fixed and not nullable and not flexible:
        return fixed_run, min_size
    if fixed_run:
        code.append(f"pos += {fixed_run}")
    if nullable:
        code = ["if pos >= end: raise _past_end(pos)",
                "pos += 1",
                "if buf[pos - 1] == 255: return pos"] + code       # int8 -1 marker: null
        min_size = 1
    if flexible:
        code += ["if pos >= end: raise _past_end(pos)",
                 "if buf[pos] == 0: pos += 1",                     # no tagged fields
                 f"else: pos = _tagged(buf, pos, end, {gen.ref(tagged)}, {name!r})"]
    return _function(name, code, gen.refs), min_size
