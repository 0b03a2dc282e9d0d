"""The console producer's input: stdin read a chunk at a time and its lines parsed into records,
as text (Kafka's ``LineMessageReader``: ``[headers<delim>][key<sep>]value`` under the
``--property`` settings) or as JSON lines (what ``consume --output-format jsonl`` prints). Shared by
the data-dir ``produce`` and the broker one, so that a line is read the same way whichever
way its record goes; nothing here knows where records go.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import select
from dataclasses import dataclass
from typing import Iterator

from ..errors import CompactlogError

READ_BLOCK = 1 << 16
MAX_CHUNK_BYTES = 4 << 20
LONG_MAX = 2**63 - 1
UTF8_BOM = b"\xef\xbb\xbf"

# kafka-console-producer's LineMessageReader properties and their defaults
TEXT_PROPERTIES = {"parse.key": "false", "key.separator": "\t", "parse.headers": "false",
                   "headers.delimiter": "\t", "headers.separator": ",", "headers.key.separator": ":",
                   "null.marker": None, "ignore.error": "false"}
JSON_FIELDS = {"key", "key_b64", "value", "value_b64", "timestamp", "headers", "partition",
               "topic", "offset"}   # topic and offset: what `consume --output-format jsonl` adds


class InputError(CompactlogError):
    """A line of input that cannot become a record (message names the line)."""


@dataclass(frozen=True)
class LineFormat:
    parse_key: bool
    key_separator: bytes
    parse_headers: bool
    headers_delimiter: bytes
    headers_separator: bytes
    headers_key_separator: bytes
    null_marker: bytes | None
    ignore_error: bool


@dataclass
class PendingRecord:
    line: int
    partition: int | None
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list | None


# -- reading stdin --------------------------------------------------------------------------------

def input_chunks(stream) -> Iterator[list[bytes]]:
    """Lines of ``stream`` (without their line ends), grouped by what was available at once."""
    raw = getattr(stream, "buffer", stream)
    try:
        fd = raw.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        fd = None
    if fd is None:          # an in-memory stream (tests, embedding): one chunk
        data = raw.read()
        data = data.encode("utf-8") if isinstance(data, str) else data
        lines = _split_lines(data)
        if lines:
            yield lines
        return
    pending = b""
    eof = False
    while not eof:
        parts = [pending]
        size = len(pending)
        block = os.read(fd, READ_BLOCK)
        eof = not block
        parts.append(block)
        size += len(block)
        while not eof and size < MAX_CHUNK_BYTES and _readable(fd):
            block = os.read(fd, READ_BLOCK)
            eof = not block
            parts.append(block)
            size += len(block)
        data = b"".join(parts)
        cut = len(data) if eof else data.rfind(b"\n") + 1
        pending = data[cut:]
        lines = _split_lines(data[:cut])
        if lines:
            yield lines


def _readable(fd: int) -> bool:
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _split_lines(data: bytes) -> list[bytes]:
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    # Java's readLine ends a line at \n or \r\n alike
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]


# -- parsing lines --------------------------------------------------------------------------------

def line_format(props: dict[str, str]) -> LineFormat:
    unknown = sorted(set(props) - set(TEXT_PROPERTIES))
    if unknown:
        raise InputError(f"--property {unknown[0]}: unknown property (known: {', '.join(TEXT_PROPERTIES)})")
    p = {**TEXT_PROPERTIES, **props}
    for name in ("parse.key", "parse.headers", "ignore.error"):
        if p[name].strip().lower() not in ("true", "false"):
            raise InputError(f"--property {name}={p[name]}: expected true or false")
    for name in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
        if p[name] == "":
            raise InputError(f"--property {name} may not be empty")
    marker = p["null.marker"]
    if marker is not None:
        for name in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
            if marker == p[name]:
                raise InputError(f"--property null.marker={marker!r} may not equal {name}")
    enc = (lambda s: s.encode("utf-8"))
    return LineFormat(p["parse.key"].strip().lower() == "true", enc(p["key.separator"]),
                      p["parse.headers"].strip().lower() == "true", enc(p["headers.delimiter"]),
                      enc(p["headers.separator"]), enc(p["headers.key.separator"]),
                      None if marker is None else enc(marker), p["ignore.error"].strip().lower() == "true")


def parse_records(lines: list[bytes], first_line: int, input_format: str, fmt: LineFormat,
                  now: int) -> Iterator[PendingRecord]:
    """The records of one chunk's lines, in order; InputError at the first line that does not parse."""
    for i, line in enumerate(lines, start=first_line + 1):
        if input_format == "jsonl":
            if line.startswith(UTF8_BOM):
                # RFC 8259 lets a parser ignore a BOM at the start of the text, and editors on
                # Windows write one; anywhere else it means files were concatenated
                if i != 1:
                    raise InputError(f"line {i}: a UTF-8 byte order mark (BOM) in the middle of the input "
                                     f"(only the first line may start with one: were files concatenated?)")
                line = line[len(UTF8_BOM):]
            if not line.strip():
                continue
            yield parse_json_line(line, i, now)
        else:
            yield parse_text_line(line, i, fmt, now)


def parse_text_line(line: bytes, line_no: int, fmt: LineFormat, now: int) -> PendingRecord:
    """kafka-console-producer's LineMessageReader: [headers<delim>][key<sep>]value."""
    headers = None
    rest = line
    if fmt.parse_headers:
        cut = rest.find(fmt.headers_delimiter)
        if cut < 0:
            if not fmt.ignore_error:
                raise InputError(f"line {line_no}: no headers delimiter {_show(fmt.headers_delimiter)} "
                                 f"found in {_show(line)}")
        else:
            headers = _text_headers(rest[:cut], line_no, fmt)
            rest = rest[cut + len(fmt.headers_delimiter):]
    key = None
    if fmt.parse_key:
        cut = rest.find(fmt.key_separator)
        if cut < 0:
            if not fmt.ignore_error:
                raise InputError(f"line {line_no}: no key separator {_show(fmt.key_separator)} found in {_show(line)}")
        else:
            key = rest[:cut]
            rest = rest[cut + len(fmt.key_separator):]
            if key == fmt.null_marker:
                key = None
    value = None if rest == fmt.null_marker else rest
    return PendingRecord(line_no, None, key, value, now, headers)


def _text_headers(text: bytes, line_no: int, fmt: LineFormat) -> list:
    headers = []
    for item in text.split(fmt.headers_separator):
        if not item:
            continue
        hkey, sep, hval = item.partition(fmt.headers_key_separator)
        if hkey == fmt.null_marker:
            raise InputError(f"line {line_no}: header key {_show(hkey)} equals null.marker: header keys cannot be null")
        try:
            name = hkey.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"line {line_no}: header key {_show(hkey)} is not UTF-8") from None
        headers.append((name, None if not sep or hval == fmt.null_marker else hval))
    return headers


def parse_json_line(line: bytes, line_no: int, now: int) -> PendingRecord:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"line {line_no}: byte 0x{line[e.start]:02x} at column {e.start + 1} is not UTF-8 "
                         f"(JSON lines are UTF-8 text; binary data goes in \"key_b64\"/\"value_b64\")") from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise InputError(f"line {line_no}: not a JSON object (nested too deeply)") from None
    except ValueError as e:     # JSONDecodeError, or an integer too long to convert
        raise InputError(f"line {line_no}: not a JSON object ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(f"line {line_no}: expected a JSON object, found {type(obj).__name__}")
    unknown = sorted(set(obj) - JSON_FIELDS)
    if unknown:
        raise InputError(f"line {line_no}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(JSON_FIELDS))})")
    if "value" not in obj and "value_b64" not in obj:
        raise InputError(f"line {line_no}: no \"value\" (use \"value\": null for a tombstone)")
    key = json_bytes(obj, "key", line_no)
    value = json_bytes(obj, "value", line_no)
    timestamp = obj.get("timestamp")
    if timestamp is None:
        timestamp = now
    elif not _is_int(timestamp) or not 0 <= timestamp <= LONG_MAX:
        raise InputError(f"line {line_no}: timestamp {timestamp!r} is not a time in ms from 0 to {LONG_MAX} "
                         f"(a record timestamp is a signed 64-bit integer)")
    partition = obj.get("partition")
    if partition is not None and (not _is_int(partition) or partition < 0):
        raise InputError(f"line {line_no}: partition {partition!r} is not a non-negative integer")
    headers = json_headers(obj.get("headers"), line_no)
    return PendingRecord(line_no, partition, key, value, timestamp, headers)


def json_bytes(obj: dict, name: str, line_no: int, what: str | None = None) -> bytes | None:
    """``name`` as UTF-8 text or ``name_b64`` as base64; absent or null is None."""
    what = what or name
    if name in obj and f"{name}_b64" in obj:
        raise InputError(f"line {line_no}: both \"{name}\" and \"{name}_b64\" given for {what}")
    if f"{name}_b64" in obj:
        raw = obj[f"{name}_b64"]
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise InputError(f"line {line_no}: {what}_b64 must be a base64 string, found {type(raw).__name__}")
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(f"line {line_no}: {what}_b64 {raw[:40]!r} is not valid base64") from None
    raw = obj.get(name)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InputError(f"line {line_no}: {what} must be a string or null, found {type(raw).__name__}"
                         f" (binary data goes in \"{name}_b64\")")
    return raw.encode("utf-8")


def json_headers(raw, line_no: int) -> list | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InputError(f"line {line_no}: headers must be a list of {{\"key\", \"value\"}} objects")
    headers = []
    for j, h in enumerate(raw):
        if not isinstance(h, dict) or not isinstance(h.get("key"), str):
            raise InputError(f"line {line_no}: header {j} must be an object with a string \"key\"")
        extra = set(h) - {"key", "value", "value_b64"}
        if extra:
            raise InputError(f"line {line_no}: header {j}: unknown field {sorted(extra)[0]!r}")
        headers.append((h["key"], json_bytes(h, "value", line_no, f"header {j} value")))
    return headers


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _show(b: bytes, limit: int = 60) -> str:
    text = b.decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")
