"""The array-count scan agrees with kio's reader: same end on every frame kio accepts, a refusal
only where kio would fail too (or, for a null non-nullable array, read None where Kafka fails),
and a bound on every count kio would trust."""

# No ``from __future__ import annotations``: the test dataclasses below need real type objects,
# as kio's generated classes have.
import random
import struct
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader

from compactlog.server.conftest import CAPTURE_NAMES, capture
from compactlog.server.precheck import MalformedRequest, _compile_entity, scan


def header_end(payload: bytes, cls) -> int:
    _, used = entity_reader(cls.__header_schema__)(payload, 0)
    return used


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_scan_ends_where_kio_ends(name):
    payload = capture(name)
    cls = load_request_schema(*struct.unpack_from(">hh", payload, 0))
    start = header_end(payload, cls)
    _, used = entity_reader(cls)(payload, start)
    assert scan(cls, payload, start, len(payload)) == start + used == len(payload)


def test_every_request_schema_kio_has_compiles():
    count = 0
    for key, name in api_key_map.items():
        for version in schema_name_map[name]:
            _compile_entity(load_request_schema(key, version), False)
            count += 1
    assert count == 302                  # kio 0.6.5: every API key, every version


def _mutations(rng: random.Random, payload: bytes, start: int) -> bytes:
    b = bytearray(payload)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        p = rng.randrange(start, len(b)) if len(b) > start else start
        if op == 0 and len(b) > start:
            b[p] = rng.randrange(256)
        elif op == 1:
            del b[rng.randrange(start, len(b) + 1):]
        elif op == 2:
            b[p:p] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:
            b[p:p + 4] = struct.pack(">i", rng.choice([-1, -2, 0, 1, 2, 127, 128, 1000, 2**31 - 1]))
        else:
            b[p:p + 1] = rng.choice([b"\x00", b"\x01", b"\x80\x01", b"\xff\xff\xff\xff\x7f"])
    return bytes(b)


def test_scan_and_kio_agree_on_mutated_bodies():
    rng = random.Random(20261124)
    payloads = [capture(n) for n in CAPTURE_NAMES]
    outcomes = {"both read": 0, "kio fails": 0, "count refused": 0}
    for _ in range(6000):
        original = rng.choice(payloads)
        cls = load_request_schema(*struct.unpack_from(">hh", original, 0))
        start = header_end(original, cls)
        body = _mutations(rng, original, start)
        try:
            end = scan(cls, body, start, len(body))
            refusal = None
        except MalformedRequest as e:
            end, refusal = None, str(e)
        if refusal and ("declares" in refusal or "non-nullable" in refusal):
            # kio would reserve memory for that count, or read that null as None and go on
            # to counts the scan has not checked: never hand it over.
            outcomes["count refused"] += 1
            continue
        try:
            _, used = entity_reader(cls)(body, start)
        except Exception:
            outcomes["kio fails"] += 1
            continue
        assert refusal is None, (refusal, body.hex())
        assert end == start + used, body.hex()
        outcomes["both read"] += 1
    assert min(outcomes.values()) > 300, outcomes


@dataclass(frozen=True, slots=True, kw_only=True)
class _Empty:
    __flexible__: ClassVar[bool] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class _HoldsEmpties:
    __flexible__: ClassVar[bool] = False
    items: tuple[_Empty, ...] = field(metadata={})


def test_a_null_non_nullable_array_is_refused():
    payload = capture("19_3")                                  # CreateTopics v3: topics
    cls = load_request_schema(19, 3)
    start = header_end(payload, cls)
    forged = payload[:start] + struct.pack(">i", -1) + b"\x00\x00\x9c\x40\x00"
    with pytest.raises(MalformedRequest, match="non-nullable array topics is null"):
        scan(cls, forged, start, len(forged))
    metadata = capture("3_5")                                  # Metadata v5: topics may be null
    cls = load_request_schema(3, 5)
    start = header_end(metadata, cls)
    forged = metadata[:start] + struct.pack(">i", -1) + metadata[start + 4:]
    assert scan(cls, forged, start, len(forged)) == len(forged)
    assert entity_reader(cls)(forged, start)[0].topics is None


def test_an_array_of_elements_that_may_be_empty_cannot_be_bounded():
    with pytest.raises(TypeError, match="may take no bytes"):
        _compile_entity(_HoldsEmpties, False)
