"""Producer state: idempotence, epochs, transactions, snapshots (Kafka's binary format), expiry."""

from __future__ import annotations

import os
import struct

import crc32c
import pytest

from kio.schema.errors import ErrorCode

from compactlog.errors import (InvalidProducerEpochError, InvalidRecordError, InvalidTxnStateError,
                               OutOfOrderSequenceError, StorageError, TransactionCoordinatorFencedError)
from compactlog.storage.conftest import T0, batch, config, flip_bit, vector
from compactlog.storage.log import Log
from compactlog.storage.producer_state import (COORDINATOR, SENTINEL, ActiveProducer, ProducerStateEntry,
                                               ProducerStateManager, VerificationGuard, decode_snapshot,
                                               read_snapshot, write_snapshot)
from compactlog.storage.txn_index import AbortedTxn


def send(log, pid, seq, n=1, *, epoch=0, txn=False, ts=None, key=b"k"):
    keys = [key + b"%d" % (seq + i) for i in range(n)]
    stamps = None if ts is None else [ts] * n
    return log.append_records(keys, [b"v"] * n, timestamps=stamps, producer_id=pid,
                              producer_epoch=epoch, base_sequence=seq, transactional=txn)


def snapshot_entries(path):
    return {e.producer_id: e for e in read_snapshot(path)}


# --- snapshot file format ---------------------------------------------------------------------

def test_snapshot_binary_format(tmp_path):
    from collections import deque
    from compactlog.storage.producer_state import BatchMetadata
    entries = [
        ProducerStateEntry(7, 2, 5, T0 + 9, None, deque([BatchMetadata(14, 120, 4, T0 + 9)])),
        ProducerStateEntry(3, 0, -1, T0, 100, deque([BatchMetadata(0, 100, 0, T0)])),
    ]
    path = tmp_path / "00000000000000000121.snapshot"
    write_snapshot(str(path), entries)
    raw = path.read_bytes()
    body = struct.pack(">i", 2) \
        + struct.pack(">qhiqiqiq", 3, 0, 0, 100, 0, T0, -1, 100) \
        + struct.pack(">qhiqiqiq", 7, 2, 14, 120, 4, T0 + 9, 5, -1)
    assert len(raw) == 10 + 2 * 46
    assert raw[:2] == b"\x00\x01"                                 # version 1
    assert struct.unpack(">I", raw[2:6])[0] == crc32c.crc32c(raw[6:])
    assert raw[6:] == body
    back = {e.producer_id: e for e in decode_snapshot(raw)}
    assert back[3].current_txn_first_offset == 100 and back[7].current_txn_first_offset is None
    assert (back[7].producer_epoch, back[7].last_seq, back[7].first_seq, back[7].last_data_offset,
            back[7].coordinator_epoch, back[7].last_timestamp) == (2, 14, 10, 120, 5, T0 + 9)


def test_snapshot_of_a_producer_without_batches(tmp_path):
    p = str(tmp_path / "00000000000000000001.snapshot")
    write_snapshot(p, [ProducerStateEntry(9, 1, 3, T0)])
    raw = open(p, "rb").read()
    # no batch: lastSequence -1, lastOffset -1, offsetDelta 0
    assert struct.unpack_from(">qhiqiqiq", raw, 10) == (9, 1, -1, -1, 0, T0, 3, -1)
    back = decode_snapshot(raw)[0]
    assert back.is_empty and back.producer_epoch == 1 and back.coordinator_epoch == 3


def test_kafka_written_snapshot_decodes():
    raw = vector("Niloufar1171+LDI-POC/__consumer_offsets-6/00000000000000000013.snapshot")
    assert raw[:2] == b"\x00\x01" and len(raw) == 10
    assert decode_snapshot(raw) == []


@pytest.mark.parametrize("damage", ["crc", "version", "length", "short"])
def test_corrupt_snapshot_is_detected(tmp_path, damage):
    path = tmp_path / "00000000000000000005.snapshot"
    write_snapshot(str(path), [ProducerStateEntry(1, 0, -1, T0)])
    raw = bytearray(path.read_bytes())
    if damage == "crc":
        raw[20] ^= 0x10
    elif damage == "version":
        raw[1] = 2
    elif damage == "length":
        raw += b"\0"
    else:
        raw = raw[:8]
    path.write_bytes(bytes(raw))
    with pytest.raises(StorageError, match=str(path)):
        read_snapshot(str(path))


# --- idempotent producers ---------------------------------------------------------------------

def test_duplicate_batch_returns_original_offsets_and_appends_nothing(open_log):
    log = open_log()
    a = send(log, 1000, 0, 3)
    b = send(log, 1000, 3, 2)
    size, leo = log.size(), log.log_end_offset
    dup = send(log, 1000, 0, 3)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (a.first_offset, a.last_offset)
    dup = send(log, 1000, 3, 2)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (b.first_offset, b.last_offset)
    assert (log.size(), log.log_end_offset) == (size, leo)
    # a different range with the same start is not a duplicate: it is out of order
    with pytest.raises(InvalidRecordError, match="out of order"):
        send(log, 1000, 3, 1)
    assert (log.size(), log.log_end_offset) == (size, leo)


def test_only_the_last_five_batches_are_remembered(open_log):
    log = open_log()
    infos = [send(log, 5, i) for i in range(6)]
    for i in range(1, 6):
        d = send(log, 5, i)
        assert d.duplicate and d.first_offset == infos[i].first_offset
    with pytest.raises(InvalidRecordError, match="out of order"):
        send(log, 5, 0)


def test_out_of_order_sequence_is_refused(open_log):
    log = open_log()
    send(log, 1, 0, 2)
    with pytest.raises(InvalidRecordError, match="out of order sequence 3"):
        send(log, 1, 3)
    assert log.log_end_offset == 2
    send(log, 1, 2)
    # an unknown producer may start at any sequence (its state may have been removed)
    send(log, 2, 42)
    send(log, 2, 43)
    assert log.log_end_offset == 5


def test_epoch_fencing(open_log):
    log = open_log()
    send(log, 1, 0, epoch=2)
    with pytest.raises(InvalidRecordError, match="epoch 1"):
        send(log, 1, 1, epoch=1)
    with pytest.raises(InvalidRecordError, match="new epoch"):
        send(log, 1, 5, epoch=3)                  # a new epoch must restart at sequence 0
    send(log, 1, 0, epoch=3)
    assert log.producer_state.producers[1].producer_epoch == 3
    with pytest.raises(InvalidRecordError):
        send(log, 1, 1, epoch=2)
    assert log.log_end_offset == 2


def test_sequence_wraps_after_int_max(open_log):
    log = open_log()
    send(log, 1, 2**31 - 2, 1)
    send(log, 1, 2**31 - 1, 1)
    send(log, 1, 0, 1)
    assert log.log_end_offset == 3


# --- transactions -----------------------------------------------------------------------------

def test_open_transaction_holds_the_last_stable_offset(open_log):
    log = open_log()
    send(log, 1, 0, 3)                               # idempotent, not transactional
    assert log.last_stable_offset == 3
    t = send(log, 2, 0, 2, txn=True)
    assert t.first_offset == 3
    send(log, 1, 3, 4)
    assert log.high_watermark == 9 and log.last_stable_offset == 3
    log.append_control(commit=True, producer_id=2, producer_epoch=0)
    assert log.last_stable_offset == log.log_end_offset == 10
    assert log.active_segment.txn_index.entries() == []
    assert not os.path.exists(log.active_segment.txn_index.path)    # created lazily


def test_abort_writes_the_txn_index_with_the_lso(open_log):
    log = open_log()
    send(log, 9, 0, 1)
    a = send(log, 1, 0, 2, txn=True)                 # offsets 1-2
    b = send(log, 2, 0, 1, txn=True)                 # offset 3
    send(log, 1, 2, 1, txn=True)                     # offset 4 (same txn as a)
    assert log.last_stable_offset == a.first_offset
    abort_a = log.append_control(commit=False, producer_id=1, producer_epoch=0)
    assert abort_a.first_offset == 5
    # b is still open: the LSO after the abort is b's first offset
    entry_a = AbortedTxn(1, a.first_offset, 5, b.first_offset)
    assert log.active_segment.txn_index.entries() == [entry_a]
    assert log.last_stable_offset == b.first_offset
    abort_b = log.append_control(commit=False, producer_id=2, producer_epoch=0)
    entry_b = AbortedTxn(2, b.first_offset, abort_b.first_offset, abort_b.first_offset + 1)
    assert log.active_segment.txn_index.entries() == [entry_a, entry_b]
    with open(log.active_segment.txn_index.path, "rb") as f:
        raw = f.read()
    assert raw == b"".join(struct.pack(">hqqqq", 0, *e) for e in (entry_a, entry_b))
    # a marker for a producer without an open transaction writes nothing
    log.append_control(commit=False, producer_id=2, producer_epoch=0)
    assert len(log.active_segment.txn_index.entries()) == 2
    assert log.last_stable_offset == log.log_end_offset


def test_non_transactional_write_inside_a_transaction_is_refused(open_log):
    log = open_log()
    send(log, 1, 0, txn=True)
    with pytest.raises(InvalidRecordError, match="transactional"):
        send(log, 1, 1, txn=False)


def test_a_marker_from_a_fenced_coordinator_is_refused_with_52(open_log):
    log = open_log()
    send(log, 1, 0, txn=True)
    log.append_control(commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=5)
    send(log, 1, 1, txn=True)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4") as e:
        log.append_control(commit=False, producer_id=1, producer_epoch=0, coordinator_epoch=4)
    assert e.value.kafka_error == ErrorCode.transaction_coordinator_fenced
    assert log.log_end_offset == end and log.last_stable_offset == 2      # nothing written
    log.append_control(commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=5)
    assert log.last_stable_offset == log.log_end_offset


def test_markers_epochs_tv1_and_tv2(open_log):
    log = open_log()
    send(log, 1, 0, txn=True, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        log.append_control(commit=False, producer_id=1, producer_epoch=2)
    # a TV2 marker must carry a bumped epoch (KIP-1228); TV1 accepts the same epoch (and a retry)
    with pytest.raises(InvalidProducerEpochError, match="not above"):
        log.append_control(commit=True, producer_id=1, producer_epoch=3, transaction_version=2)
    log.append_control(commit=True, producer_id=1, producer_epoch=4, transaction_version=2)
    assert log.producer_state.producers[1].producer_epoch == 4 and log.last_stable_offset == log.log_end_offset
    log.append_control(commit=True, producer_id=1, producer_epoch=4)       # a TV1 duplicate


def test_describe_producers_data(open_log):
    log = open_log()
    send(log, 1, 0, 3, ts=T0 + 1)
    send(log, 2, 0, 2, txn=True, epoch=4, ts=T0 + 2)
    log.append_control(commit=True, producer_id=3, producer_epoch=1, coordinator_epoch=7, timestamp=T0 + 3)
    assert sorted(log.active_producers()) == [ActiveProducer(1, 0, 2, T0 + 1, -1, -1),
                                              ActiveProducer(2, 4, 1, T0 + 2, -1, 3),
                                              ActiveProducer(3, 1, -1, T0 + 3, 7, -1)]


# --- KIP-890 verification ---------------------------------------------------------------------

def txn_batch(pid, seq, *, epoch=0, n=1):
    return batch(0, n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def test_a_first_transactional_write_needs_its_verification_guard(open_log):
    log = open_log()
    guard = log.maybe_start_transaction_verification(1, 0, 0)
    assert guard is not SENTINEL
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        log.append_as_leader(txn_batch(1, 0), verification_guard=SENTINEL)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(1, 0), verification_guard=VerificationGuard())
    assert log.log_end_offset == 0
    log.append_as_leader(txn_batch(1, 0), verification_guard=guard)
    # the transaction is open: no coordinator question, and the guard is used up
    assert log.maybe_start_transaction_verification(1, 1, 0) is SENTINEL
    assert log.producer_state.verification_entry(1) is None
    log.append_as_leader(txn_batch(1, 1), verification_guard=SENTINEL)
    # a marker ends it: the next write needs a new verification
    log.append_control(commit=True, producer_id=1, producer_epoch=0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(1, 2), verification_guard=SENTINEL)
    # no guard at all: nothing required (verification disabled, tools)
    log.append_as_leader(txn_batch(1, 2))


def test_a_marker_between_verification_and_append_voids_the_guard(open_log):
    """The ABA case of KIP-890: verified, then the transaction ended, then the late append."""
    log = open_log()
    log.append_as_leader(txn_batch(1, 0), verification_guard=log.maybe_start_transaction_verification(1, 0, 0))
    log.append_control(commit=False, producer_id=1, producer_epoch=0)
    guard = log.maybe_start_transaction_verification(1, 1, 0)
    log.append_control(commit=False, producer_id=1, producer_epoch=0)       # e.g. a timeout abort
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(1, 1), verification_guard=guard)
    assert log.log_end_offset == end and log.last_stable_offset == end


def test_verification_refuses_a_stale_epoch_first(open_log):
    log = open_log()
    send(log, 1, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        log.maybe_start_transaction_verification(1, 0, 2)
    with pytest.raises(InvalidProducerEpochError):       # 47 before the missing verification's 48
        log.append_as_leader(txn_batch(1, 0, epoch=2), verification_guard=SENTINEL)


def test_verification_keeps_the_lowest_sequence(open_log):
    """VerificationStateEntry: while verifying, a higher sequence may not overtake the lower one."""
    log = open_log()
    log.maybe_start_transaction_verification(1, 5, 0)
    guard = log.maybe_start_transaction_verification(1, 3, 0)
    assert log.producer_state.verification_entry(1).lowest_sequence == 3
    with pytest.raises(OutOfOrderSequenceError, match="started at sequence 3"):
        log.append_as_leader(txn_batch(1, 5), verification_guard=guard)
    log.append_as_leader(txn_batch(1, 3, n=2), verification_guard=guard)
    log.append_as_leader(txn_batch(1, 5), verification_guard=SENTINEL)
    # a newer epoch restarts the lowest sequence
    entry = log.producer_state.maybe_create_verification_entry(2, 9, 0, T0)
    entry.maybe_update_lowest_sequence_and_epoch(0, 1)
    assert (entry.epoch, entry.lowest_sequence) == (1, 0)


def test_unused_verifications_expire_with_idle_producers(open_log):
    log = open_log()
    log.maybe_start_transaction_verification(1, 0, 0)
    state = log.producer_state
    state.remove_expired(T0 + state.expiration_ms - 1)
    assert state.verification_entry(1) is not None
    state.remove_expired(T0 + state.expiration_ms)
    assert state.verification_entry(1) is None


def test_coordinator_writes_skip_sequences_and_duplicates(open_log):
    """The group coordinator's transactional offsets: every batch at sequence 0, epoch-checked only."""
    log = open_log()
    for _ in range(2):
        info = log.append_records([b"k"], [b"v"], producer_id=5, producer_epoch=1, base_sequence=0,
                                  transactional=True, origin=COORDINATOR)
        assert not info.duplicate
    assert log.log_end_offset == 2
    with pytest.raises(InvalidProducerEpochError):
        log.append_records([b"k"], [b"v"], producer_id=5, producer_epoch=0, base_sequence=0,
                           transactional=True, origin=COORDINATOR)


# --- snapshots at roll / close, reload --------------------------------------------------------

def test_snapshots_at_roll_and_close_reload_the_state(open_log, clock):
    log = open_log(config(segment_bytes=400))
    send(log, 1, 0, 2, ts=T0)
    send(log, 2, 0, 1, txn=True, ts=T0 + 5)
    while len(log.segments) < 2:
        send(log, 3, log.producer_state.producers.get(3).last_seq + 1 if 3 in log.producer_state.producers
             else 0, ts=T0 + 7)
    roll_base = log.segments[1].base_offset
    snap = os.path.join(log.dir, f"{roll_base:020d}.snapshot")
    entries = snapshot_entries(snap)
    assert set(entries) == {1, 2, 3}
    assert (entries[1].last_seq, entries[1].last_data_offset, entries[1].last_offset_delta,
            entries[1].last_timestamp) == (1, 1, 1, T0)
    assert entries[2].current_txn_first_offset == 2
    last3 = log.producer_state.producers[3]
    last_batch = (last3.batches[-1].first_seq, last3.last_seq)
    log.close()
    leo = log.log_end_offset
    final = snapshot_entries(os.path.join(log.dir, f"{leo:020d}.snapshot"))
    assert final[3].last_seq == last_batch[1] and final[3].last_data_offset == leo - 1

    again = Log(log.dir, log.config, clock=clock, had_clean_shutdown=True)
    assert again.last_stable_offset == 2                   # the open transaction survived
    dup = send(again, 3, last_batch[0], ts=T0 + 7)
    assert dup.duplicate and dup.last_offset == leo - 1
    with pytest.raises(InvalidRecordError, match="out of order"):
        send(again, 1, 5)
    again.append_control(commit=False, producer_id=2, producer_epoch=0)
    assert again.active_segment.txn_index.entries()[-1].first_offset == 2
    again.close()


def test_state_rebuilt_from_the_log_without_snapshots(open_log, clock):
    log = open_log(config(segment_bytes=300))
    for i in range(8):
        send(log, 1, i)
    send(log, 2, 0, txn=True)
    log.close()
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(log.dir, name))
    # after an unclean shutdown, state is rebuilt by scanning the log
    again = Log(log.dir, log.config, clock=clock)
    assert again.producer_state.producers[1].last_seq == 7
    assert again.last_stable_offset == 8
    with pytest.raises(InvalidRecordError):
        send(again, 1, 9)
    send(again, 1, 8)
    again.close()


def test_corrupt_snapshot_is_deleted_and_state_rebuilt(open_log, clock):
    log = open_log(config(segment_bytes=300))
    for i in range(10):
        send(log, 1, i)
    t = send(log, 2, 0, txn=True)
    log.close()
    leo = log.log_end_offset
    latest = os.path.join(log.dir, f"{leo:020d}.snapshot")
    flip_bit(latest, 12)
    with pytest.raises(StorageError):
        read_snapshot(latest)
    again = Log(log.dir, log.config, clock=clock, had_clean_shutdown=True)
    # the corrupt file was replaced by a valid snapshot of the rebuilt state
    rebuilt = snapshot_entries(latest)
    assert rebuilt[1].last_seq == 9 and rebuilt[2].current_txn_first_offset == t.first_offset
    assert again.last_stable_offset == t.first_offset
    assert again.producer_state.producers[1].last_seq == 9
    dup = send(again, 1, 9)
    assert dup.duplicate
    again.close()


# --- expiry -----------------------------------------------------------------------------------

def test_expiry_by_producer_id_expiration_ms(open_log, clock):
    log = open_log(producer_id_expiration_ms=1000)
    send(log, 1, 0, ts=T0)                    # expiry is measured from the batch timestamp
    send(log, 2, 0, ts=T0 + 500, txn=True)    # open transaction: never expires
    send(log, 3, 0, ts=T0 + 500)
    state = log.producer_state
    state.remove_expired(T0 + 999)
    assert set(state.producers) == {1, 2, 3}
    state.remove_expired(T0 + 1000)
    assert set(state.producers) == {2, 3}
    state.remove_expired(T0 + 10**9)
    assert set(state.producers) == {2}
    # an expired producer is unknown again: any sequence is accepted
    send(log, 1, 77, ts=T0 + 10**9)
    log.append_control(commit=True, producer_id=2, producer_epoch=0, timestamp=T0 + 10**9)
    state.remove_expired(T0 + 10**9 + 999)
    assert set(state.producers) == {1, 2}
    state.remove_expired(T0 + 10**9 + 1000)
    assert state.producers == {}


def test_expired_producers_are_dropped_when_a_snapshot_is_loaded(open_log, clock):
    log = open_log(producer_id_expiration_ms=1000)
    send(log, 1, 0, ts=T0)
    send(log, 2, 0, ts=T0 + 800)
    log.close()
    clock.now = T0 + 1500
    again = Log(log.dir, log.config, clock=clock, had_clean_shutdown=True, producer_id_expiration_ms=1000)
    assert set(again.producer_state.producers) == {2}
    again.close()


def test_manager_snapshot_offsets_and_stray_removal(tmp_path):
    psm = ProducerStateManager(str(tmp_path), "t-0")
    for off in (0, 10, 15, 20, 27):
        write_snapshot(psm.snapshot_path(off), [])
    (tmp_path / "00000000000000000030.snapshot.deleted").write_bytes(b"")
    assert psm.snapshot_offsets() == [0, 10, 15, 20, 27]
    assert psm.latest_snapshot_offset() == 27
    psm.remove_stray_snapshots([0, 10, 20, 30])
    # snapshots that are not at a segment base are removed, except the latest one above every base
    assert psm.snapshot_offsets() == [0, 10, 20]
    psm.remove_stray_snapshots([0, 10])
    assert psm.snapshot_offsets() == [0, 10, 20]
