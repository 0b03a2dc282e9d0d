"""Real Kafka bytes (tests/data/kafka-vectors, see its README) decode to what they hold.

Cross-cutting, so named after what it reads: files written by Kafka and its clients (consumer
offsets, Connect's topics, kafka-go, Sarama, kafka-python), each through the whole record codec
(batches, legacy entries, control records, codecs) rather than one module of it."""

from __future__ import annotations

import json
import os
import struct

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.record import compression
from compactlog.record.batch import CREATE_TIME, Header, Record, RecordBatch, iter_batches
from compactlog.record.control import ABORT
from compactlog.record.legacy import LegacyEntry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(REPO, "tests", "data", "kafka-vectors")


def read(rel: str) -> bytes:
    with open(os.path.join(VECTORS, rel), "rb") as f:
        return f.read()


def decode_log(rel: str):
    data = read(rel)
    batches = list(iter_batches(data))
    assert sum(b.size for b in batches) == len(data), "the file is whole batches end to end"
    return batches


def latest_per_key(records) -> dict:
    latest = {}
    for r in records:
        if r.key is not None:
            latest[r.key] = r
    return latest


def all_records(batches):
    return [r for b in batches for r in b.records()]


# --- __consumer_offsets keys (group coordinator schemas) ---------------------------------------

def parse_offsets_key(key: bytes):
    (version,) = struct.unpack_from(">h", key, 0)
    (glen,) = struct.unpack_from(">h", key, 2)
    group = key[4:4 + glen].decode()
    if version in (0, 1):
        p = 4 + glen
        (tlen,) = struct.unpack_from(">h", key, p)
        topic = key[p + 2:p + 2 + tlen].decode()
        (partition,) = struct.unpack_from(">i", key, p + 2 + tlen)
        assert p + 2 + tlen + 4 == len(key)
        return ("offset", group, topic, partition)
    assert version == 2 and 4 + glen == len(key)
    return ("group", group)


# --- Niloufar1171/LDI-POC: a Kafka 3.7 broker's __consumer_offsets-6 --------------------------

LDI = "Niloufar1171+LDI-POC/__consumer_offsets-6/"


def test_ldi_consumer_offsets_segment():
    batches = decode_log(LDI + "00000000000000000000.log")
    assert len(batches) == 13
    for i, b in enumerate(batches):
        assert isinstance(b, RecordBatch)
        h = b.header
        assert (h.magic, h.base_offset, h.last_offset, h.records_count) == (2, i, i, 1)
        assert h.partition_leader_epoch == 0
        assert h.timestamp_type == CREATE_TIME and h.compression == compression.NONE
        assert (h.producer_id, h.producer_epoch) == (-1, -1) and not h.has_producer_id
        # as written by the 3.7 coordinator: offset commits carry base sequence 0, group metadata -1
        assert h.base_sequence == (0 if i in (1, 3, 8, 9, 10, 11, 12) else -1)
        assert not h.is_control and not h.is_transactional and not h.has_delete_horizon
        assert b.is_valid()
        b.ensure_valid()
        assert b.control_type() is None
    recs = all_records(batches)
    assert [r.offset for r in recs] == list(range(13))
    kinds = [parse_offsets_key(r.key) for r in recs]
    assert [i for i, k in enumerate(kinds) if k[0] == "group"] == [0, 2, 4, 5, 6, 7]
    assert [i for i, k in enumerate(kinds) if k[0] == "offset"] == [1, 3, 8, 9, 10, 11, 12]
    assert {k[1] for k in kinds} == {"DEVSmileCDR"}
    assert all(r.value is not None for r in recs)
    latest = latest_per_key(recs)
    assert len(latest) == 5
    assert sorted(r.offset for r in latest.values()) == [1, 3, 7, 9, 12]
    # batch timestamps agree with the segment's time index, positions with the offset index
    idx = read(LDI + "00000000000000000000.index")
    entries = [struct.unpack_from(">ii", idx, p) for p in range(0, len(idx), 8)]
    entries = [e for e in entries if e != (0, 0)]
    assert entries == [(3, 4730), (7, 9571)]
    pos = {b.base_offset: b.position for b in batches}
    assert all(pos[rel] == p for rel, p in entries)
    tidx = read(LDI + "00000000000000000000.timeindex")
    tentries = [struct.unpack_from(">qi", tidx, p) for p in range(0, len(tidx), 12)]
    tentries = [e for e in tentries if e != (0, 0)]
    assert tentries == [(1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
    max_ts = {b.base_offset: b.header.max_timestamp for b in batches}
    assert all(max_ts[rel] == ts for ts, rel in tentries)


# --- Bheem6005/kafka ---------------------------------------------------------------------------

def test_bheem_consumer_offsets_same_key_twice():
    batches = decode_log("Bheem6005+kafka/kafka-logs/__consumer_offsets-0/00000000000000000000.log")
    assert len(batches) == 2
    assert all(b.is_valid() and b.header.magic == 2 for b in batches)
    recs = all_records(batches)
    assert [r.offset for r in recs] == [0, 1]
    assert recs[0].key == recs[1].key
    assert parse_offsets_key(recs[0].key) == ("group", "console-consumer-14897")
    latest = latest_per_key(recs)
    assert [r.offset for r in latest.values()] == [1]


CITIES = ["New York", "Berlin", "Paris", "London", "Sydney", "Delhi", "Dubai", "Amsterdam",
          "Barcelona", "Mardid", "Toronto"]


def test_bheem_cities_null_keys():
    batches = decode_log("Bheem6005+kafka/kafka-logs/cities-0/00000000000000000000.log")
    assert len(batches) == 11
    assert all(b.is_valid() and b.header.records_count == 1 for b in batches)
    recs = all_records(batches)
    assert [r.offset for r in recs] == list(range(11))
    assert all(r.key is None for r in recs)
    assert [r.value.decode() for r in recs] == CITIES
    assert latest_per_key(recs) == {}


# --- mscaldas2012/kafka-connect-spooldir: Connect's compacted topics ---------------------------

CONNECT = "mscaldas2012+kafka-connect-spooldir/kafka-data/"


def test_connect_configs():
    batches = decode_log(CONNECT + "docker-connect-configs-0/00000000000000000000.log")
    assert len(batches) == 45
    assert all(b.is_valid() and b.header.magic == 2 for b in batches)
    recs = all_records(batches)
    assert len(recs) == 54
    assert [r.offset for r in recs] == list(range(54))
    assert len({r.key for r in recs}) == 39 and None not in {r.key for r in recs}
    tombstones = [r for r in recs if r.value is None]
    assert len(tombstones) == 18
    # tombstones come in 2-record batches (connector-X and target-state-X)
    tomb_batches = [b for b in batches if any(r.value is None for r in b.records())]
    assert len(tomb_batches) == 9
    assert all(b.header.records_count == 2 and all(r.value is None for r in b.records())
               for b in tomb_batches)
    latest = latest_per_key(recs)
    assert len(latest) == 39
    assert sum(r.value is None for r in latest.values()) == 18
    assert sum(r.value is not None for r in latest.values()) == 21
    # values are Connect's JSON
    for r in recs:
        if r.value is not None:
            json.loads(r.value)


def test_connect_status():
    batches = decode_log(CONNECT + "docker-connect-status-0/00000000000000000000.log")
    assert len(batches) == 127
    assert all(b.is_valid() for b in batches)
    recs = all_records(batches)
    assert len(recs) == 135
    assert [r.offset for r in recs] == list(range(135))
    assert len({r.key for r in recs}) == 20
    assert sum(r.value is None for r in recs) == 18
    latest = latest_per_key(recs)
    assert len(latest) == 20
    assert sum(r.value is not None for r in latest.values()) == 2
    assert all(json.loads(r.value)["state"] for r in recs if r.value is not None)


# --- segmentio/kafka-go: FetchResponse v10 captures --------------------------------------------

def parse_fetch_response_v10(raw: bytes):
    """(correlation id, throttle, error, session id, [(topic, partition, error, high watermark,
    last stable offset, log start offset, aborted txns, record set bytes)])."""
    size, correlation = struct.unpack_from(">ii", raw, 0)
    assert size == len(raw) - 4
    p = 8
    throttle, error, session = struct.unpack_from(">ihi", raw, p)
    p += 10
    (ntopics,) = struct.unpack_from(">i", raw, p)
    p += 4
    parts = []
    for _ in range(ntopics):
        (tlen,) = struct.unpack_from(">h", raw, p)
        topic = raw[p + 2:p + 2 + tlen].decode()
        p += 2 + tlen
        (nparts,) = struct.unpack_from(">i", raw, p)
        p += 4
        for _ in range(nparts):
            partition, perr, hwm, lso, log_start = struct.unpack_from(">ihqqq", raw, p)
            p += 30
            (naborted,) = struct.unpack_from(">i", raw, p)
            p += 4
            aborted = []
            for _ in range(max(naborted, 0)):
                aborted.append(struct.unpack_from(">qq", raw, p))
                p += 16
            (rlen,) = struct.unpack_from(">i", raw, p)
            p += 4
            records = raw[p:p + rlen] if rlen >= 0 else None
            p += max(rlen, 0)
            parts.append((topic, partition, perr, hwm, lso, log_start,
                          aborted if naborted >= 0 else None, records))
    assert p == len(raw)
    return correlation, throttle, error, session, parts


def fetch_records(name: str):
    with open(os.path.join(VECTORS, "segmentio+kafka-go", "fixtures", name)) as f:
        raw = bytes.fromhex(f.read().strip())
    corr, throttle, error, _session, parts = parse_fetch_response_v10(raw)
    assert (corr, throttle, error) == (10, 0, 0)
    assert len(parts) == 1
    return parts[0]


def filler(key: str) -> bytes:
    letter = "abcdefgh"[["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
                        .index(key)]
    return json.dumps({"count": 0, "filler": letter * 10}, separators=(",", ":")).encode()


def test_kafka_go_v2_v2():
    topic, partition, err, hwm, lso, log_start, aborted, records = fetch_records("v2-v2.hex")
    assert (topic, partition, err, hwm, lso, log_start, aborted) == ("test-lucid", 0, 0, 4, 4, 0, None)
    batches = list(iter_batches(records))
    assert len(batches) == 2
    assert all(isinstance(b, RecordBatch) and b.is_valid() for b in batches)
    assert all(b.header.compression == 0 and b.header.records_count == 2 for b in batches)
    recs = all_records(batches)
    keys = ["alpha", "beta", "gamma", "delta"]
    assert [(r.offset, r.key, r.value) for r in recs] == \
        [(i, k.encode(), filler(k)) for i, k in enumerate(keys)]


def test_kafka_go_v2c_v2_v2c():
    topic, _, _, hwm, _, _, _, records = fetch_records("v2c-v2-v2c.hex")
    assert topic == "test-natty" and hwm == 6
    batches = list(iter_batches(records))
    assert [b.header.compression for b in batches] == [compression.GZIP, 0, compression.GZIP]
    assert all(b.is_valid() for b in batches)
    recs = all_records(batches)
    keys = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    assert [(r.offset, r.key, r.value) for r in recs] == \
        [(i, k.encode(), filler(k)) for i, k in enumerate(keys)]


def test_kafka_go_mixed_magic_v1_v2():
    topic, _, _, hwm, lso, _, _, records = fetch_records("v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex")
    assert topic == "test-88" and hwm == lso == 20
    entries = list(iter_batches(records))
    kinds = [(e.magic, e.compression, e.records_count) for e in entries]
    assert kinds == [(1, 0, 1), (1, 0, 1), (1, 1, 1), (1, 1, 1),     # v1, v1c
                     (2, 0, 1), (2, 0, 1), (2, 1, 1), (2, 1, 1),     # v2, v2c
                     (2, 0, 2), (2, 1, 2), (2, 0, 2), (2, 1, 2),     # v2b, v2bc
                     (1, 0, 1), (1, 0, 1), (1, 1, 2)]                # v1b, v1bc
    assert all(e.is_valid() for e in entries)
    assert all(isinstance(e, LegacyEntry) == (e.magic == 1) for e in entries)
    recs = all_records(entries)
    assert [r.offset for r in recs] == list(range(20))
    keys = ["alpha", "beta"] * 2 + ["gamma", "delta"] * 2 + ["epsilon", "zeta"] * 2 \
        + ["eta", "theta"] * 4
    assert [r.key.decode() for r in recs] == keys
    assert [r.value for r in recs] == [filler(k) for k in keys]
    ts = [r.timestamp for r in recs]
    assert all(1633286700000 < t < 1633374100000 for t in ts)
    # the last v1 gzip wrapper: inner relative offsets 0, 1 under wrapper offset 19
    last = entries[-1]
    assert (last.offset, last.base_offset, last.last_offset) == (19, 18, 19)
    assert [m.offset for m in last.inner()] == [18, 19]
    assert last.max_timestamp == max(ts[18:20])


# --- IBM/sarama --------------------------------------------------------------------------------

SARAMA_RECORD = Record(0, 1479847795005, bytes.fromhex("01020304"), bytes.fromhex("050607"),
                       (Header("\x08\x09\x0a", bytes.fromhex("0b0c")),))


@pytest.mark.parametrize("name,codec", [("uncompressed_record.bin", 0), ("gzipped_record.bin", 1),
                                        ("snappy_compressed_record.bin", 2),
                                        ("lz4_compressed_record.bin", 3)])
def test_sarama_records(name, codec):
    raw = read("IBM+sarama/" + name)
    (b,) = iter_batches(raw)
    assert b.size == len(raw)
    if codec == 0:
        assert len(raw) == 82
    assert b.header.compression == codec and b.header.magic == 2
    assert b.is_valid()
    b.ensure_valid()
    assert b.records() == [SARAMA_RECORD]
    if codec == 2:
        # (the README calls it a raw snappy block, but sarama's bytes use xerial framing)
        assert raw[61:77] == compression.XERIAL_HEADER
    if codec == 3:
        assert raw[61:65] == compression.LZ4_MAGIC


def test_sarama_snappy_as_raw_block():
    # the same batch with its records section as one raw snappy block (what some non-Java
    # clients write; Kafka's reader accepts both): still the same record, CRC recomputed
    import cramjam
    import crc32c
    raw = read("IBM+sarama/snappy_compressed_record.bin")
    (b,) = iter_batches(raw)
    section = compression.decompress(compression.SNAPPY, raw[61:])
    block = bytes(cramjam.snappy.compress_raw(section))
    assert not block.startswith(compression.XERIAL_MAGIC)
    after_crc = raw[21:61] + block
    rebuilt = (struct.pack(">qii", 0, 9 + len(after_crc), b.header.partition_leader_epoch) + b"\x02"
               + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc)
    (b2,) = iter_batches(rebuilt)
    assert b2.is_valid() and b2.records() == [SARAMA_RECORD]


def test_sarama_empty_control_batch():
    raw = read("IBM+sarama/control_batch.bin")
    (b,) = iter_batches(raw)
    assert len(raw) == 61 and b.header.length == 49
    assert b.header.attributes == 0x20 and b.header.is_control
    assert b.header.records_count == 0
    assert b.is_valid()
    assert b.records() == [] and b.control_type() is None


# --- dpkp/kafka-python -------------------------------------------------------------------------

def test_dpkp_record_batch_v2():
    batches = decode_log("dpkp+kafka-python/record_batch_data_v2.bin")
    assert len(batches) == 4
    assert all(b.is_valid() and b.header.magic == 2 for b in batches)
    assert [b.base_offset for b in batches] == [0, 1, 3, 0]       # the 4th restarts at 0
    recs = [b.records() for b in batches]
    assert [[r.value for r in rs] for rs in recs] == [[b"123"], [b"", b""], [b"123"], [b"hdr"]]
    assert all(r.key is None for rs in recs for r in rs)
    assert [r.offset for rs in recs for r in rs] == [0, 1, 2, 3, 0]
    assert recs[3][0].headers == (Header("hkey", b"hval"),)
    assert all(r.headers == () for rs in recs[:3] for r in rs)


def test_dpkp_record_batch_v1():
    entries = decode_log("dpkp+kafka-python/record_batch_data_v1.bin")
    assert len(entries) == 4
    assert all(isinstance(e, LegacyEntry) and e.magic == 1 and e.compression == 0 for e in entries)
    assert all(e.is_valid() for e in entries)
    for e in entries:
        e.ensure_valid()
    recs = all_records(entries)
    assert [r.offset for r in recs] == [0, 1, 2, 3]
    assert [r.value for r in recs] == [b"123", b"", b"", b"123"]
    assert all(r.key is None for r in recs)
    assert [r.timestamp for r in recs] == sorted(r.timestamp for r in recs)


def test_dpkp_abort_marker_with_bad_crc():
    raw = read("dpkp+kafka-python/control_batch_data_v2.bin")
    (b,) = iter_batches(raw)
    assert b.header.is_control and b.header.records_count == 1
    assert b.stored_crc() != b.computed_crc()
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError) as e:
        b.ensure_valid()
    assert e.value.field == "crc" and e.value.offset == b.base_offset
    assert "crc" in str(e.value).lower()
    # the structure still decodes: an ABORT control record (key version 0, type 0)
    assert b.control_type() == ABORT
    (r,) = b.records()
    assert r.key == b"\x00\x00\x00\x00"


def test_fixture_readme_is_present():
    with open(os.path.join(VECTORS, "README.md")) as f:
        assert "What each should decode to" in f.read()
