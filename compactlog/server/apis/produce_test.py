"""Produce (``apis/produce.py``) through the handler, raw kio requests in: the checks in Kafka's
order with Kafka's codes, acks, codecs per version, idempotent producers' sequences and epochs;
transactional batches (transactions.md §2.7): the request-wide refusals, KIP-890's verification
against a fake transaction coordinator and its answer per Produce version, and the append rules of
the producer state."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import compression
from compactlog.server.conftest import FakeTransactions, batch, now_ms, produce

def test_produce_appends_and_answers_base_offsets(state):
    state.create_topic("t", 2)
    [r] = produce(state, [("t", 0, batch([b"a", b"b"]))])
    assert (r.error_code, r.base_offset, r.log_start_offset) == (ErrorCode.none, 0, 0)
    [r] = produce(state, [("t", 0, batch([b"c"]))])
    assert r.base_offset == 2
    assert [x.key for x in state.log("t", 0).records()] == [b"a", b"b", b"c"]


def test_produce_checks_in_kafkas_order(state):
    state.create_topic("t", 1)
    state.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "200"})
    good = batch([b"k"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    two = good + good
    magic1 = bytearray(good)
    magic1[16] = 1
    offset5 = batch([b"k"], base_offset=5)
    old = batch([b"k"], ts=now_ms() - 10**12)
    future = batch([b"k"], ts=now_ms() + 2 * 3600 * 1000)
    big = batch([b"k" * 300])
    # one request each: a partition named twice in a request is answered once (Kafka's maps)
    rs = [r for part in [("nope", 0, good), ("t", 5, good), ("t", 0, b""), ("t", 0, two),
                         ("t", 0, bytes(magic1)), ("t", 0, offset5), ("t", 0, bytes(corrupt)),
                         ("c", 0, batch([b"k", None, b"j", None])), ("c", 0, big)]
          for r in produce(state, [part])]
    codes = [r.error_code for r in rs]
    assert codes == [ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition,
                     ErrorCode.invalid_record, ErrorCode.invalid_record, ErrorCode.invalid_record,
                     ErrorCode.invalid_record, ErrorCode.corrupt_message, ErrorCode.invalid_record,
                     ErrorCode.record_list_too_large]
    keyless = rs[7]
    why = "Compacted topic cannot accept message without key in topic partition c-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in keyless.record_errors] == [(1, why), (3, why)]
    assert keyless.error_message == (      # Kafka's LogValidator.processRecordErrors, word for word
        f"One or more records have been rejected due to 2 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=3, message='{why}')]")
    assert state.log("t", 0).log_end_offset == 0 and state.log("c", 0).log_end_offset == 0
    # message.timestamp.after.max.ms (1 h since Kafka 4.0) is not the default here; a topic sets it
    state.datadir.alter_topic("t", {"message.timestamp.after.max.ms": "3600000",
                                    "message.timestamp.before.max.ms": "3600000"})
    rs = produce(state, [("t", 0, old)]) + produce(state, [("t", 0, future)])
    assert [r.error_code for r in rs] == [ErrorCode.invalid_timestamp] * 2
    assert rs[0].record_errors[0].batch_index == 0
    assert rs[0].record_errors[0].batch_index_error_message.startswith("Timestamp ")
    assert " of message with offset 0 is out of range. The timestamp should be within [" in \
        rs[0].record_errors[0].batch_index_error_message
    assert rs[0].error_message == "One or more records have been rejected due to invalid timestamp"


def test_produce_acks_internal_zstd_and_replicas(state):
    state.create_topic("t", 1)
    [r] = produce(state, [("t", 0, batch([b"k"]))], acks=2)
    assert r.error_code == ErrorCode.invalid_required_acks
    [r] = produce(state, [("t", 0, batch([b"k"], codec=compression.ZSTD))], version=6)
    assert r.error_code == ErrorCode.unsupported_compression_type
    [r] = produce(state, [("t", 0, batch([b"k"], codec=compression.ZSTD))], version=7)
    assert r.error_code == ErrorCode.none
    state.datadir.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    [r] = produce(state, [("__consumer_offsets", 0, batch([b"k"]))])
    assert r.error_code == ErrorCode.invalid_topic_exception
    [r] = produce(state, [("__consumer_offsets", 0, batch([b"k"]))], client_id="__admin_client")
    assert r.error_code == ErrorCode.none
    state.datadir.create_topic("isr", 1, {"min.insync.replicas": "2"})
    [r] = produce(state, [("isr", 0, batch([b"k"]))], acks=-1)
    assert r.error_code == ErrorCode.not_enough_replicas
    [r] = produce(state, [("isr", 0, batch([b"k"]))], acks=1)
    assert r.error_code == ErrorCode.none
    # a transactional batch without a transactional id (transactions.md §2.7 rule 1; before the
    # coordinator existed this was INVALID_TXN_STATE)
    [r] = produce(state, [("t", 0, batch([b"k"], pid=1, epoch=0, seq=0, transactional=True))])
    assert r.error_code == ErrorCode.transactional_id_authorization_failed


def test_idempotent_producer_sequences_epochs_and_duplicates(state):
    state.create_topic("t", 1)
    pid = state.producer_ids.allocate()
    b0, b1 = batch([b"a", b"b"], pid=pid, epoch=0, seq=0), batch([b"c"], pid=pid, epoch=0, seq=2)
    assert [r.base_offset for r in produce(state, [("t", 0, b0)])] == [0]
    assert [r.base_offset for r in produce(state, [("t", 0, b1)])] == [2]
    # a retry of either of the last 5 batches: its original offset, nothing appended
    for b, offset in ((b0, 0), (b1, 2)):
        [r] = produce(state, [("t", 0, b)])
        assert (r.error_code, r.base_offset) == (ErrorCode.none, offset)
    assert state.log("t", 0).log_end_offset == 3
    [r] = produce(state, [("t", 0, batch([b"d"], pid=pid, epoch=0, seq=7))])
    assert r.error_code == ErrorCode.out_of_order_sequence_number
    [r] = produce(state, [("t", 0, batch([b"d"], pid=pid, epoch=1, seq=3))])
    assert r.error_code == ErrorCode.out_of_order_sequence_number
    [r] = produce(state, [("t", 0, batch([b"d"], pid=pid, epoch=1, seq=0))])
    assert (r.error_code, r.base_offset) == (ErrorCode.none, 3)
    [r] = produce(state, [("t", 0, batch([b"e"], pid=pid, epoch=0, seq=3))])
    assert r.error_code == ErrorCode.invalid_producer_epoch


# -- transactional batches ------------------------------------------------------------------------

TID = "tx-1"


def txn(keys, pid=7, epoch=0, seq=0):
    return batch(keys, pid=pid, epoch=epoch, seq=seq, transactional=True)


def codes(rs):
    return [r.error_code for r in rs]


def test_a_transactional_batch_without_transactional_id_refuses_the_whole_request(state):
    state.create_topic("t", 2)
    rs = produce(state, [("t", 0, batch([b"a"])), ("t", 1, txn([b"b"])), ("nope", 0, batch([b"c"]))])
    assert codes(rs) == [ErrorCode.transactional_id_authorization_failed] * 3
    assert state.log("t", 0).log_end_offset == 0


def test_transactional_batches_of_two_producers_refuse_the_whole_request(state):
    state.create_topic("t", 2)
    state.transactions = FakeTransactions()
    rs = produce(state, [("t", 0, txn([b"a"], pid=7)), ("t", 1, txn([b"b"], pid=8))], transactional_id=TID)
    assert codes(rs) == [ErrorCode.invalid_producer_id_mapping] * 2
    # Kafka collects (producer id, epoch) pairs: one id with two epochs is refused too
    rs = produce(state, [("t", 0, txn([b"a"], epoch=0)), ("t", 1, txn([b"b"], epoch=1))], transactional_id=TID)
    assert codes(rs) == [ErrorCode.invalid_producer_id_mapping] * 2
    assert state.transactions.calls == []
    # a partition refused by KafkaApis' own checks does not count
    state.transactions.add(TID, 7, 0, ("t", 0))
    rs = produce(state, [("t", 0, txn([b"a"], pid=7)), ("nope", 0, txn([b"b"], pid=8))], transactional_id=TID)
    assert codes(rs) == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]


def test_verification_per_version(state):
    state.create_topic("t", 2)
    fake = state.transactions = FakeTransactions()
    fake.add(TID, 7, 0, ("t", 0))
    # not added: INVALID_TXN_STATE up to v10, TRANSACTION_ABORTABLE from v11 (and v12: verify only)
    for version, code in ((9, ErrorCode.invalid_txn_state), (10, ErrorCode.invalid_txn_state),
                          (11, ErrorCode.transaction_abortable), (12, ErrorCode.transaction_abortable)):
        [r] = produce(state, [("t", 1, txn([b"x"]))], version=version, transactional_id=TID)
        assert r.error_code == code, version
    assert state.log("t", 1).log_end_offset == 0
    # added: appended, the transaction is open (the LSO holds), later batches need no question
    [r] = produce(state, [("t", 0, txn([b"a", b"b"]))], transactional_id=TID)
    assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)
    asked = len(fake.calls)
    [r] = produce(state, [("t", 0, txn([b"c"], seq=2))], transactional_id=TID)
    assert r.error_code == ErrorCode.none and len(fake.calls) == asked
    lg = state.log("t", 0)
    assert lg.last_stable_offset == 0 and lg.high_watermark == 3
    # a non-transactional batch of the same producer while its transaction is open (§2.7 step 5)
    [r] = produce(state, [("t", 0, batch([b"d"], pid=7, epoch=0, seq=3))], transactional_id=TID)
    assert r.error_code == ErrorCode.invalid_txn_state
    # the marker closes the transaction; the next write is verified again
    lg.append_control(commit=True, producer_id=7, producer_epoch=0)
    fake.add(TID, 7, 0)
    [r] = produce(state, [("t", 0, txn([b"e"], seq=3))], version=11, transactional_id=TID)
    assert r.error_code == ErrorCode.transaction_abortable and len(fake.calls) == asked + 1


def test_coordinator_answers_as_each_version_sees_them(state):
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    cases = [(ErrorCode.producer_fenced, 9, ErrorCode.invalid_producer_epoch),
             (ErrorCode.producer_fenced, 11, ErrorCode.invalid_producer_epoch),
             (ErrorCode.invalid_producer_id_mapping, 9, ErrorCode.invalid_producer_id_mapping),
             (ErrorCode.concurrent_transactions, 11, ErrorCode.not_enough_replicas),
             (ErrorCode.concurrent_transactions, 12, ErrorCode.concurrent_transactions),
             (ErrorCode.coordinator_load_in_progress, 12, ErrorCode.not_enough_replicas),
             (ErrorCode.coordinator_not_available, 9, ErrorCode.not_enough_replicas),
             (ErrorCode.not_coordinator, 11, ErrorCode.not_enough_replicas)]
    for answer, version, expected in cases:
        fake.answer = answer
        [r] = produce(state, [("t", 0, txn([b"x"]))], version=version, transactional_id=TID)
        assert r.error_code == expected, (answer, version)
        if expected == ErrorCode.not_enough_replicas:
            assert answer.name.upper() in r.error_message
    # no coordinator running at all
    state.transactions = None
    [r] = produce(state, [("t", 0, txn([b"x"]))], transactional_id=TID)
    assert r.error_code == ErrorCode.not_enough_replicas
    assert state.log("t", 0).log_end_offset == 0


def test_a_stale_epoch_is_refused_before_asking(state):
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    fake.add(TID, 7, 1, ("t", 0))
    [r] = produce(state, [("t", 0, txn([b"a"], epoch=1))], transactional_id=TID)
    assert r.error_code == ErrorCode.none
    state.log("t", 0).append_control(commit=False, producer_id=7, producer_epoch=1)
    asked = len(fake.calls)
    [r] = produce(state, [("t", 0, txn([b"b"], epoch=0, seq=0))], transactional_id=TID)
    assert r.error_code == ErrorCode.invalid_producer_epoch and len(fake.calls) == asked


def test_a_marker_between_the_answer_and_the_append_refuses_the_batch(state):
    """KIP-890's guard: the coordinator said yes, then the transaction ended before the append."""
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    fake.add(TID, 7, 0, ("t", 0))
    lg = state.log("t", 0)
    fake.before_answer = lambda: lg.append_control(commit=False, producer_id=7, producer_epoch=0)
    [r] = produce(state, [("t", 0, txn([b"late"]))], transactional_id=TID)
    assert r.error_code == ErrorCode.invalid_txn_state
    assert lg.last_stable_offset == lg.log_end_offset == 1        # the marker only: nothing hangs


def test_verification_disabled_and_idempotent_batches_ask_nothing(state):
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    [r] = produce(state, [("t", 0, batch([b"a"], pid=9, epoch=0, seq=0))], transactional_id=TID)
    assert r.error_code == ErrorCode.none and fake.calls == []
    state.datadir.broker.props["transaction.partition.verification.enable"] = "false"
    [r] = produce(state, [("t", 0, txn([b"b"]))], transactional_id=TID)
    assert r.error_code == ErrorCode.none and fake.calls == []
    assert state.log("t", 0).last_stable_offset == 1          # a transaction the coordinator never saw


# -- the quick path: small produces answered on the event loop (issue 28) ---------------------------

def _produce_request(parts, version=9):
    import datetime
    from compactlog.server.conftest import request
    from compactlog.server.messages import build, nested
    from compactlog.server.versions import request_schema
    cls = request_schema(0, version)
    t_cls, p_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    topics = {}
    for topic, partition, records in parts:
        topics.setdefault(topic, []).append(build(p_cls, index=partition, records=records))
    body = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                 topic_data=tuple(build(t_cls, name=t, partition_data=tuple(ps)) for t, ps in topics.items()))
    return request(0, version, body)


@pytest.fixture
def warm(monkeypatch):
    from compactlog.record import jit
    monkeypatch.setattr(jit, "_warm", True)


def test_a_small_produce_is_answered_on_the_loop_and_appended(state, warm):
    from compactlog.server.apis.produce import quick_produce
    state.create_topic("t", 1)
    state.log("t", 0)           # opened: the quick path never opens a log
    resp = quick_produce(state, _produce_request([("t", 0, batch([b"a", b"b"]))]))
    [r] = resp.responses[0].partition_responses
    assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)
    assert [x.key for x in state.log("t", 0).records()] == [b"a", b"b"]


def test_what_may_wait_goes_to_a_worker_thread(state, warm):
    """Each case the loop must not run: the answer is None and the log is untouched."""
    import threading
    from compactlog.record import jit
    from compactlog.server.apis.produce import QUICK_PRODUCE_BYTES, quick_produce
    state.create_topic("t", 1)
    state.create_topic("small", 1, {"segment.bytes": "1024"})
    state.create_topic("flushed", 1, {"flush.messages": "1"})
    state.create_topic("closed", 1)
    for name in ("t", "small", "flushed"):
        state.log(name, 0)
    state.log("closed", 0).close()      # closed (a deleted topic's log, a shutdown): reopened in a thread
    small = batch([b"k"])
    big = batch([b"k%d" % i for i in range(QUICK_PRODUCE_BYTES // 8)])
    assert len(big) > QUICK_PRODUCE_BYTES
    cases = {"too big": [("t", 0, big)], "closed": [("closed", 0, small)],
             "unknown": [("nope", 0, small)], "would flush": [("flushed", 0, small)],
             "would roll": [("small", 0, batch([b"k" * 1100]))], "malformed": [("t", 0, b"x")]}
    for why, parts in cases.items():
        assert quick_produce(state, _produce_request(parts)) is None, why
    # the partition's lock held by another thread (a fetch, a flush, the cleaner's swap)
    held, release = threading.Event(), threading.Event()

    def hold():
        with state.log("t", 0).lock:
            held.set()
            release.wait(10)
    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        assert quick_produce(state, _produce_request([("t", 0, small)])) is None
    finally:
        release.set()
        t.join()
    # kernels not loaded yet: never on the loop (numba's import would stall it)
    jit._warm = False
    assert quick_produce(state, _produce_request([("t", 0, small)])) is None
    assert all(state.log(n, 0).log_end_offset == 0 for n in ("t", "small", "flushed"))


def _legacy_message(value: bytes, magic: int = 1) -> bytes:
    """One uncompressed message-set entry of magic 0 or 1 (offset, size, crc, magic, attributes,
    [timestamp], key -1, value), as a pre-0.11 producer wrote it."""
    import struct
    import zlib
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", now_ms()) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def test_produce_reads_the_records_as_kafkas_batch_iterator_does(state):
    """The first batch of a partition's records is found as Kafka's ByteBufferLogInputStream
    finds it, then ProduceRequest.validateRecords judges it: bytes that hold no complete batch
    (too short for a size, a batch cut short) are "no batch" (INVALID_RECORD, not the retriable
    CORRUPT_MESSAGE, which a producer would retry until its delivery timeout), a complete legacy
    message is the wrong magic (INVALID_RECORD), an impossible size or magic is CORRUPT_MESSAGE,
    and bytes after the one batch too short to be a batch are trimmed (UnifiedLog.trimInvalidBytes)
    and the batch appended."""
    import struct
    state.create_topic("t", 1)
    good = batch([b"k"])

    def with_length(records, length, at=0):
        out = bytearray(records)
        struct.pack_into(">i", out, at + 8, length)
        return bytes(out)

    magic3 = bytearray(good)
    magic3[16] = 3
    cases = [
        (good[:-3], ErrorCode.invalid_record),                      # cut short: no complete batch
        (good[:11], ErrorCode.invalid_record),                      # too short for the size field
        (good[:16], ErrorCode.invalid_record),                      # size, but no magic yet
        (_legacy_message(b"old"), ErrorCode.invalid_record),        # magic 1: only v2 batches
        (_legacy_message(b"older", magic=0), ErrorCode.invalid_record),
        (with_length(good, 13), ErrorCode.corrupt_message),         # below the least overhead (14)
        (bytes(magic3), ErrorCode.corrupt_message),                 # no such magic
        (with_length(good[:42], 30), ErrorCode.corrupt_message),    # a v2 batch below its header size
        (good + with_length(b"\0" * 12, 5), ErrorCode.corrupt_message),   # the next size is impossible
        (good + good, ErrorCode.invalid_record),                    # two batches
    ]
    for records, code in cases:
        [r] = produce(state, [("t", 0, records)])
        assert r.error_code == code, (records.hex(), r.error_code, r.error_message)
    assert state.log("t", 0).log_end_offset == 0
    # trailing bytes that hold no batch (fewer than a size's 12, or a size past the end): trimmed
    for tail in (b"\0\0", with_length(b"\0" * 20, 500)):
        [r] = produce(state, [("t", 0, good + tail)])
        assert (r.error_code, r.error_message) == (ErrorCode.none, None)
    log = state.log("t", 0)
    assert log.log_end_offset == 2
    assert [x.key for x in log.records()] == [b"k", b"k"]
    assert log.size() == 2 * len(good)


def _produce_topics(state, topic_data, version=9):
    """A Produce whose ``topic_data`` is [(topic, [(partition, records)])] as given (a topic or a
    partition may repeat); the response's [(topic, [(partition, error code)])]."""
    import datetime
    from compactlog.server.apis.produce import handle_produce
    from compactlog.server.conftest import request
    from compactlog.server.messages import build, nested
    from compactlog.server.versions import request_schema
    cls = request_schema(0, version)
    t_cls, p_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    body = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                 topic_data=tuple(build(t_cls, name=t, partition_data=tuple(
                     build(p_cls, index=i, records=r) for i, r in parts)) for t, parts in topic_data))
    resp = handle_produce(state, request(0, version, body))
    return [(t.name, [(p.index, p.error_code) for p in t.partition_responses]) for t in resp.responses]


def test_a_partition_named_twice_is_appended_once_as_kafkas_maps_keep_it(state):
    """KafkaApis.handleProduceRequest files each partition of the request in maps keyed by the
    partition: a partition named twice (in one topic entry or in two) keeps its last batch, is
    appended once, and has one answer (ProduceResponse groups the answers by topic)."""
    state.create_topic("t", 2)
    first, last = batch([b"first"]), batch([b"last"])
    assert _produce_topics(state, [("t", [(0, first), (1, first), (0, last)])]) == \
        [("t", [(0, ErrorCode.none), (1, ErrorCode.none)])]
    assert [r.key for r in state.log("t", 0).records()] == [b"last"]
    assert _produce_topics(state, [("t", [(0, first)]), ("nope", [(0, first)]), ("t", [(0, last)])]) == \
        [("t", [(0, ErrorCode.none)]), ("nope", [(0, ErrorCode.unknown_topic_or_partition)])]
    assert [r.key for r in state.log("t", 0).records()] == [b"last", b"last"]
    # a topic in two entries, each partition once: one answer entry for the topic (ProduceResponse.toData)
    assert _produce_topics(state, [("t", [(1, first)]), ("nope", [(0, first)]), ("t", [(0, last)])]) == \
        [("t", [(1, ErrorCode.none), (0, ErrorCode.none)]), ("nope", [(0, ErrorCode.unknown_topic_or_partition)])]
    assert [r.key for r in state.log("t", 0).records()] == [b"last"] * 3
    # a valid and an invalid batch for one partition: the valid one is appended (authorizedRequestInfo)
    # and the answer is the refusal (invalidRequestResponses is merged over the append's status)
    assert _produce_topics(state, [("t", [(1, last), (1, b"")])]) == [("t", [(1, ErrorCode.invalid_record)])]
    assert [r.key for r in state.log("t", 1).records()] == [b"first", b"first", b"last"]


def test_a_batch_of_no_record_is_refused_not_appended(state):
    """A v2 batch with records count 0 and last offset delta -1, its CRC right: Kafka's
    LogValidator.validateBatch refuses its offset range (INVALID_RECORD); it was appended, a batch
    ending below its own base offset, the log end unchanged, the next batch given the same base
    offset as it."""
    from compactlog.record.batch import BatchSpec, assemble_batch
    state.create_topic("t", 1)
    empty = assemble_batch(BatchSpec(), -1, now_ms(), now_ms(), 0, b"")
    [r] = produce(state, [("t", 0, empty)])
    assert r.error_code == ErrorCode.invalid_record
    log = state.log("t", 0)
    assert log.log_end_offset == 0 and log.active_segment.log.size == 0
    [r] = produce(state, [("t", 0, batch([b"k"]))])
    assert r.error_code == ErrorCode.none and r.base_offset == 0
