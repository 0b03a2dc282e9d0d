"""How ``consume`` prints a record, offline or through a broker: kafka-console-consumer's text
output (Kafka's ``DefaultMessageFormatter`` and its ``--property print.*`` switches) and
compactlog's JSON lines. Both sources hand over the same fields (partition, offset, timestamp, key,
value, headers), so the bytes printed for a record do not depend on where it was read from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .common import fail, headers_json, put_bytes

# kafka-console-consumer's DefaultMessageFormatter properties and their defaults
TEXT_PROPERTIES = {"print.timestamp": "false", "print.key": "false", "print.value": "true",
                   "print.partition": "false", "print.offset": "false", "print.headers": "false",
                   "key.separator": "\t", "line.separator": "\n", "headers.separator": ",",
                   "headers.key.separator": ":", "null.literal": "null"}
BOOL_PROPERTIES = [k for k in TEXT_PROPERTIES if k.startswith("print.")]


@dataclass(frozen=True)
class TextFormat:
    print_timestamp: bool
    print_key: bool
    print_value: bool
    print_partition: bool
    print_offset: bool
    print_headers: bool
    key_separator: bytes
    line_separator: bytes
    headers_separator: bytes
    headers_key_separator: bytes
    null_literal: bytes


def text_format(props: dict[str, str]) -> TextFormat:
    """The ``--property K=V`` settings over the formatter's defaults; an unknown name or a
    non-boolean ``print.*`` stops the command."""
    unknown = sorted(set(props) - set(TEXT_PROPERTIES))
    if unknown:
        fail(f"--property {unknown[0]}: unknown property (known: {', '.join(TEXT_PROPERTIES)})")
    p = {**TEXT_PROPERTIES, **props}
    for name in BOOL_PROPERTIES:
        if p[name].strip().lower() not in ("true", "false"):
            fail(f"--property {name}={p[name]}: expected true or false")
    flag = {name: p[name].strip().lower() == "true" for name in BOOL_PROPERTIES}
    enc = (lambda s: s.encode("utf-8"))
    return TextFormat(flag["print.timestamp"], flag["print.key"], flag["print.value"],
                      flag["print.partition"], flag["print.offset"], flag["print.headers"],
                      enc(p["key.separator"]), enc(p["line.separator"]), enc(p["headers.separator"]),
                      enc(p["headers.key.separator"]), enc(p["null.literal"]))


def formatted_line(fmt: TextFormat, partition: int, offset: int, timestamp_text: str, key: bytes | None,
                   value: bytes | None, headers) -> bytes:
    """One record as DefaultMessageFormatter prints it; ``timestamp_text`` is ``CreateTime:ms``,
    ``LogAppendTime:ms`` or ``NO_TIMESTAMP``."""
    cols = []
    if fmt.print_timestamp:
        cols.append(timestamp_text.encode("ascii"))
    if fmt.print_partition:
        cols.append(b"Partition:%d" % partition)
    if fmt.print_offset:
        cols.append(b"Offset:%d" % offset)
    if fmt.print_headers:
        cols.append(fmt.headers_separator.join(
            h[0].encode("utf-8") + fmt.headers_key_separator + (fmt.null_literal if h[1] is None else h[1])
            for h in headers) if headers else b"NO_HEADERS")
    if fmt.print_key:
        cols.append(fmt.null_literal if key is None else key)
    if fmt.print_value:
        cols.append(fmt.null_literal if value is None else value)
    if not cols:
        return b""
    return fmt.key_separator.join(cols) + fmt.line_separator


def json_record(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                headers) -> bytes:
    """One record as a JSON line, the form ``produce --input-format jsonl`` reads back."""
    d = {"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp}
    put_bytes(d, "key", key)
    put_bytes(d, "value", value)
    d["headers"] = headers_json(headers or ())
    return (json.dumps(d) + "\n").encode("utf-8")
