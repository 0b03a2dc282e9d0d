"""The shared field reader/writers of the internal topics' codecs, and Jackson's JSON."""

from __future__ import annotations

import pytest

from compactlog.record.schema_fields import (I32, SchemaFormatError, SchemaReader, put_bytes, put_count, put_string,
                                             to_json)


class _Mine(SchemaFormatError):
    pass


def test_json_escaping_is_jacksons():
    assert to_json({"a": "q\"\\\n\x01\u00e9"}) == '{"a":"q\\"\\\\\\n\\u0001\u00e9"}'
    assert to_json([None, True, False, -3, b"\x00\x01", {"k": []}]) == '[null,true,false,-3,"AAE=",{"k":[]}]'
    with pytest.raises(TypeError, match="float"):
        to_json(1.5)


@pytest.mark.parametrize("compact", [False, True])
def test_written_fields_read_back(compact):
    out = bytearray()
    put_string(out, "tópic", compact)
    put_string(out, None, compact)
    put_bytes(out, b"\x00" * 200, compact)          # a compact length past one varint byte
    put_bytes(out, None, compact)
    put_count(out, 2, compact)
    out += I32.pack(7) + I32.pack(8)
    if compact:
        out += b"\x01\x05\x02ab"                    # one tagged field: tag 5, two bytes
    r = SchemaReader(bytes(out), "value")
    assert r.string("s", compact=compact) == "tópic"
    assert r.string("n", compact=compact, nullable=True) is None
    assert r.bytes_("b", compact=compact) == b"\x00" * 200
    assert r.bytes_("nb", compact=compact, nullable=True) is None
    assert [r.i32("x") for _ in range(r.array_length("xs", compact=compact, min_element=4))] == [7, 8]
    if compact:
        assert r.tagged_fields("value") == {5: b"ab"}
    assert r.pos == len(out)


def test_failures_name_the_field_and_byte_in_the_callers_error():
    with pytest.raises(_Mine, match=r"^key: field partition at byte 2: needs 4 bytes, 1 left$"):
        r = SchemaReader(b"\x00\x00\x01", "key", error=_Mine)
        r.i16("version")
        r.i32("partition")
    with pytest.raises(SchemaFormatError, match="key: field group at byte 0: non-nullable field was serialized as null"):
        SchemaReader(b"\xff\xff", "key").string("group")
    with pytest.raises(SchemaFormatError, match="negative length -2"):
        SchemaReader(b"\xff\xfe", "key").string("group", nullable=True)
    with pytest.raises(SchemaFormatError, match=r"members at byte 4: 1000 elements cannot fit in the 0 bytes left"):
        SchemaReader(I32.pack(1000), "value").array_length("members", min_element=4)
    with pytest.raises(SchemaFormatError, match="longer than 5 bytes"):
        SchemaReader(b"\xff" * 6, "value").uvarint("count")
    with pytest.raises(SchemaFormatError, match=r"field s at byte 2: not UTF-8"):
        SchemaReader(b"\x00\x02\xff\xfe", "key").string("s")
