"""A Produce answer's bytes without kio's generic writer: the one response every produce gets,
and the only one whose bytes change from answer to answer (a new base offset each time), so the
response cache of ``protocol._body_bytes`` cannot serve it. kio's ``entity_writer`` walks the
entity's fields through a writer per field and a phantom-type check per value: ~7% of a
single-record transaction's broker CPU (issue 28). This writes the same bytes (the
ProduceResponse schema of versions 3 to 12, flexible from 9) for the answers compactlog makes:
no per-record errors and no leader hints (``current_leader``, ``node_endpoints``: one node);
any other answer returns None and goes to kio (``produce_response_test`` compares the two).
"""

from __future__ import annotations

import dataclasses
import struct

from ..record.varint import encode_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V3 = struct.Struct(">ihqq")          # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")         # ... and the log start offset
# the fields of each entity in schema order, as kio declares them (tagged ones apart)
_PARTITION_FIELDS = ("index", "error_code", "base_offset", "log_append_time", "log_start_offset",
                     "record_errors", "error_message")
_LAYOUTS: dict[type, tuple | None] = {}


def _layout(cls) -> tuple | None:
    """(flexible, partition fields written, the partition class's default current_leader or
    None) for a ProduceResponse class whose shape this module knows, else None."""
    if cls in _LAYOUTS:
        return _LAYOUTS[cls]
    layout = None
    names = [f.name for f in dataclasses.fields(cls) if "tag" not in f.metadata]
    tags = [f.name for f in dataclasses.fields(cls) if "tag" in f.metadata]
    topic_cls = _element(cls, "responses")
    partition_cls = _element(topic_cls, "partition_responses") if topic_cls is not None else None
    if names == ["responses", "throttle_time"] and tags in ([], ["node_endpoints"]) and partition_cls is not None \
            and [f.name for f in dataclasses.fields(topic_cls)] == ["name", "partition_responses"]:
        fields = [f.name for f in dataclasses.fields(partition_cls) if "tag" not in f.metadata]
        partition_tags = [f for f in dataclasses.fields(partition_cls) if "tag" in f.metadata]
        if fields == list(_PARTITION_FIELDS[:len(fields)]) and len(fields) in (4, 5, 7) \
                and [f.name for f in partition_tags] in ([], ["current_leader"]):
            leader = partition_tags[0].default if partition_tags else None
            layout = (bool(cls.__flexible__), len(fields), leader)
    _LAYOUTS[cls] = layout
    return layout


def _element(cls, name: str):
    for f in dataclasses.fields(cls):
        if f.name == name:
            args = getattr(f.type, "__args__", ())
            return args[0] if args and dataclasses.is_dataclass(args[0]) else None
    return None


def _string(s: str, flexible: bool) -> bytes:
    data = s.encode("utf-8")
    return (encode_uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    return _string(s, flexible)


def _count(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _I32.pack(n)


def _millis(t) -> int:
    return -1 if t is None else round(t.timestamp() * 1000)


def encode_produce_response(body) -> bytes | None:
    """The bytes kio would write for ``body`` (a kio ProduceResponse), or None when the answer
    holds what this writer leaves to kio (record errors, leader hints, an unknown layout)."""
    layout = _layout(type(body))
    if layout is None:
        return None
    flexible, fields, leader = layout
    if getattr(body, "node_endpoints", ()):
        return None
    out = [_count(len(body.responses), flexible)]
    for topic in body.responses:
        out.append(_string(topic.name, flexible))
        out.append(_count(len(topic.partition_responses), flexible))
        for p in topic.partition_responses:
            if fields == 4:
                out.append(_PARTITION_V3.pack(p.index, p.error_code, p.base_offset, _millis(p.log_append_time)))
                continue
            out.append(_PARTITION_V5.pack(p.index, p.error_code, p.base_offset, _millis(p.log_append_time),
                                          p.log_start_offset))
            if fields == 7:
                if p.record_errors:
                    return None
                out.append(_count(0, flexible))
                out.append(_nullable_string(p.error_message, flexible))
            if flexible:
                if leader is not None and p.current_leader != leader:
                    return None
                out.append(b"\x00")         # no tagged fields
        if flexible:
            out.append(b"\x00")
    out.append(_I32.pack(round(body.throttle_time.total_seconds() * 1000)))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)
