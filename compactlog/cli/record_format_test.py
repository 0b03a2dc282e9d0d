"""The console consumer's record output shared by the data-dir and the broker ``consume``:
DefaultMessageFormatter's columns and the JSON lines ``produce --input-format jsonl`` reads back."""

from __future__ import annotations

import json

import pytest
import typer

from .record_format import formatted_line, json_record, text_format


def test_defaults_print_the_value_only():
    fmt = text_format({})
    assert formatted_line(fmt, 3, 7, "CreateTime:5", b"k", b"v", [("h", b"1")]) == b"v\n"
    assert formatted_line(fmt, 3, 7, "CreateTime:5", b"k", None, None) == b"null\n"


def test_every_column_in_the_formatter_order():
    fmt = text_format({"print.timestamp": "true", "print.key": "true", "print.partition": "TRUE",
                       "print.offset": "true", "print.headers": "true", "key.separator": "|",
                       "null.literal": "-"})
    line = formatted_line(fmt, 3, 7, "LogAppendTime:5", None, b"v", [("a", b"1"), ("b", None)])
    assert line == b"LogAppendTime:5|Partition:3|Offset:7|a:1,b:-|-|v\n"
    assert formatted_line(fmt, 0, 0, "NO_TIMESTAMP", b"k", b"v", []) == \
        b"NO_TIMESTAMP|Partition:0|Offset:0|NO_HEADERS|k|v\n"


def test_no_column_prints_nothing():
    assert formatted_line(text_format({"print.value": "false"}), 0, 0, "", b"k", b"v", None) == b""


@pytest.mark.parametrize("props", [{"print.keys": "true"}, {"print.key": "yes"}])
def test_unknown_or_non_boolean_property_stops(props):
    with pytest.raises(typer.Exit):
        text_format(props)


def test_json_record_keeps_non_utf8_bytes_as_base64():
    line = json_record("t", 1, 9, 42, b"\xff", "é".encode(), [("h", None)])
    assert line.endswith(b"\n")
    assert json.loads(line) == {"topic": "t", "partition": 1, "offset": 9, "timestamp": 42, "key_b64": "/w==",
                                "value": "é", "headers": [{"key": "h", "value": None}]}
