"""Fields of Kafka's generated message schemas, and their JSON, for the internal topics' codecs.

The records of ``__consumer_offsets`` (``consumer_offsets``) and ``__transaction_state``
(``transaction_log``) are Kafka generated messages (``Readable``/``Writable``): big-endian
integers, strings with an int16 length, bytes and arrays with an int32 count (-1: null) and, from
a schema's first flexible version, compact forms (an unsigned varint of length + 1, 0: null)
followed by a tagged-field section. ``SchemaReader`` reads them and names the field and byte of
every failure; ``put_string``/``put_bytes``/``put_count`` write them; ``to_json`` writes the JSON
kafka-dump-log prints, as Jackson's ``JsonNode.toString`` does.

Sans-IO: bytes in, values out, and the reverse.
"""

from __future__ import annotations

import base64
import struct

from .varint import encode_uvarint

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


class SchemaFormatError(ValueError):
    """Bytes that do not read as the schema says (the message names the field and byte)."""


class SchemaReader:
    """A cursor over one key or value; a failure raises ``error`` (a ``SchemaFormatError``
    subclass of the caller's) as ``<what>: field <name> at byte <position>: <detail>``."""

    __slots__ = ("buf", "pos", "what", "error")

    def __init__(self, buf: bytes, what: str, pos: int = 0, error: type[SchemaFormatError] = SchemaFormatError):
        self.buf = buf
        self.pos = pos
        self.what = what
        self.error = error

    def fail(self, name: str, detail: str):
        raise self.error(f"{self.what}: field {name} at byte {self.pos}: {detail}")

    def take(self, n: int, name: str) -> int:
        """Consume ``n`` bytes; their start."""
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            self.fail(name, f"needs {n} bytes, {len(self.buf) - p} left")
        self.pos = p + n
        return p

    def i8(self, name: str) -> int:
        return I8.unpack_from(self.buf, self.take(1, name))[0]

    def i16(self, name: str) -> int:
        return I16.unpack_from(self.buf, self.take(2, name))[0]

    def i32(self, name: str) -> int:
        return I32.unpack_from(self.buf, self.take(4, name))[0]

    def i64(self, name: str) -> int:
        return I64.unpack_from(self.buf, self.take(8, name))[0]

    def uvarint(self, name: str) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.buf):
                self.fail(name, "truncated unsigned varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                self.fail(name, "unsigned varint longer than 5 bytes")

    def _length(self, name: str, compact: bool, wide: bool, nullable: bool, what: str = "length") -> int:
        """A length or count; -1 (null) only where ``nullable``, no other negative value (the
        error names the field's first byte)."""
        start = self.pos
        if compact:
            n = self.uvarint(name) - 1
        else:
            n = self.i32(name) if wide else self.i16(name)
        if n < 0 and not (n == -1 and nullable):
            self.pos = start
            self.fail(name, "non-nullable field was serialized as null" if n == -1 else f"negative {what} {n}")
        return n

    def string(self, name: str, *, nullable: bool = False, compact: bool = False) -> str | None:
        n = self._length(name, compact, False, nullable)
        if n < 0:
            return None
        p = self.take(n, name)
        try:
            return bytes(self.buf[p:p + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            self.pos = p
            self.fail(name, f"not UTF-8 ({e.reason} at string byte {e.start})")

    def bytes_(self, name: str, *, nullable: bool = False, compact: bool = False) -> bytes | None:
        n = self._length(name, compact, True, nullable)
        if n < 0:
            return None
        p = self.take(n, name)
        return bytes(self.buf[p:p + n])

    def array_length(self, name: str, *, compact: bool = False, nullable: bool = False,
                     min_element: int = 1) -> int:
        """An array's element count (-1: null); ``min_element`` is the fewest bytes an element
        takes, so that a count the remaining bytes cannot hold is refused before any allocation."""
        n = self._length(name, compact, True, nullable, "count")
        if n < 0:
            return -1
        if n * min_element > len(self.buf) - self.pos:
            self.fail(name, f"{n} elements cannot fit in the {len(self.buf) - self.pos} bytes left")
        return n

    def tagged_fields(self, name: str) -> dict[int, bytes]:
        """A tagged-field section: tag -> raw bytes (each schema decides which tags it knows)."""
        count = self.uvarint(f"{name} tagged fields")
        if not count:
            return {}
        out = {}
        for _ in range(count):
            tag = self.uvarint(f"{name} tag")
            size = self.uvarint(f"{name} tag size")
            p = self.take(size, f"{name} tagged field")
            out[tag] = bytes(self.buf[p:p + size])
        return out


# -- writing --------------------------------------------------------------------------------------

def put_string(out: bytearray, s: str | None, compact: bool) -> None:
    if s is None:
        out += b"\x00" if compact else I16.pack(-1)
        return
    b = s.encode("utf-8")
    if len(b) > 32767:
        raise ValueError(f"string of {len(b)} bytes is longer than 32767")
    if compact:
        out += encode_uvarint(len(b) + 1)
    else:
        out += I16.pack(len(b))
    out += b


def put_bytes(out: bytearray, b: bytes | None, compact: bool) -> None:
    if b is None:
        out += b"\x00" if compact else I32.pack(-1)
        return
    put_count(out, len(b), compact)
    out += b


def put_count(out: bytearray, n: int, compact: bool) -> None:
    """An array's element count (or a bytes field's length)."""
    out += encode_uvarint(n + 1) if compact else I32.pack(n)


# -- JSON, as kafka-dump-log's decoders print it ----------------------------------------------------

def _json_string(s: str) -> str:
    # Jackson's escaping: ", \ and the control characters (\b \t \n \f \r by name, the others as
    # \u00XX with upper-case hex); everything else, non-ASCII included, as is
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(o, f"\\u{o:04X}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def to_json(v) -> str:
    """Compact JSON as Jackson's ``JsonNode.toString`` writes it (no spaces, keys in order)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, (bytes, bytearray)):
        return _json_string(base64.b64encode(v).decode("ascii"))       # Jackson's BinaryNode
    if isinstance(v, dict):
        return "{" + ",".join(f"{_json_string(k)}:{to_json(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(to_json(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as JSON")
