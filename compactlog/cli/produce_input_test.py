"""The console producer's input, shared by the data-dir and the broker ``produce``: stdin in
chunks of whole lines, LineMessageReader's text lines and JSON lines parsed into records."""

from __future__ import annotations

import io
import os

import pytest

from .produce_input import InputError, PendingRecord, input_chunks, line_format, parse_records


def test_in_memory_stream_is_one_chunk_and_crlf_ends_a_line():
    assert list(input_chunks(io.BytesIO(b"a\r\nb\n\nc"))) == [[b"a", b"b", b"", b"c"]]
    assert list(input_chunks(io.StringIO(""))) == []


def test_a_pipe_yields_whole_lines_only():
    r, w = os.pipe()
    os.write(w, b"one\ntwo\nthr")
    os.write(w, b"ee")
    os.close(w)
    with os.fdopen(r, "rb") as stream:
        lines = [ln for chunk in input_chunks(stream) for ln in chunk]
    assert lines == [b"one", b"two", b"three"]


def test_text_lines_with_headers_key_and_null_marker():
    fmt = line_format({"parse.key": "true", "key.separator": ":", "parse.headers": "true",
                       "headers.delimiter": "|", "null.marker": "NULL"})
    recs = list(parse_records([b"h1:x,h2|k:v", b"|NULL:NULL"], 10, "text", fmt, 99))
    assert recs == [PendingRecord(11, None, b"k", b"v", 99, [("h1", b"x"), ("h2", None)]),
                    PendingRecord(12, None, None, None, 99, [])]


def test_text_line_without_its_key_separator_names_the_line():
    fmt = line_format({"parse.key": "true"})
    with pytest.raises(InputError, match=r"^line 3: no key separator '\\t' found in 'novalue'$"):
        list(parse_records([b"k\tv", b"k2\tv2", b"novalue"], 0, "text", fmt, 0))
    assert list(parse_records([b"novalue"], 0, "text", line_format({"parse.key": "true", "ignore.error": "true"}),
                              0)) == [PendingRecord(1, None, None, b"novalue", 0, None)]


@pytest.mark.parametrize("props, words", [({"parse.keys": "true"}, "unknown property"),
                                          ({"parse.key": "yes"}, "expected true or false"),
                                          ({"key.separator": ""}, "may not be empty"),
                                          ({"null.marker": "\t"}, "may not equal key.separator")])
def test_line_format_refusals(props, words):
    with pytest.raises(InputError, match=words):
        line_format(props)


def test_json_lines():
    lines = [b'\xef\xbb\xbf{"key": "k", "value_b64": "/w==", "timestamp": 5, "partition": 1,'
             b' "headers": [{"key": "h", "value": null}]}', b"", b'{"value": null}']
    assert list(parse_records(lines, 0, "jsonl", line_format({}), 7)) == \
        [PendingRecord(1, 1, b"k", b"\xff", 5, [("h", None)]), PendingRecord(3, None, None, None, 7, None)]


@pytest.mark.parametrize("line, words", [(b'\xef\xbb\xbf{"value": "v"}', "line 2: a UTF-8 byte order mark"),
                                         (b'{"key": "k"}', 'line 2: no "value"'),
                                         (b'{"value": "v", "extra": 1}', "line 2: unknown field 'extra'"),
                                         (b'{"value": "v", "timestamp": -1}', "line 2: timestamp -1"),
                                         (b"[1]", "line 2: expected a JSON object, found list")])
def test_json_line_refusals_name_the_line(line, words):
    with pytest.raises(InputError, match=words):
        list(parse_records([b'{"value": "ok"}', line], 0, "jsonl", line_format({}), 0))
