import numpy as np

from compactlog.cleaner import rules
from compactlog.cleaner.rules import BatchRetention


def decide(**kw):
    base = dict(is_control=False, can_discard=False, has_delete_horizon=False, delete_horizon_ms=None,
                producer_id=-1, producer_epoch=-1, last_offset=5, next_offset=6, active_producers={},
                upper_bound=100, now_ms=1000)
    base.update(kw)
    return rules.decide_batch(**base)


def test_plain_batch_goes_when_empty():
    assert decide().retention is BatchRetention.DELETE_EMPTY


def test_last_batch_of_the_round_is_kept_r2():
    assert decide(next_offset=100).retention is BatchRetention.RETAIN_EMPTY


def test_producer_last_batch_is_kept_r1():
    d = decide(producer_id=7, producer_epoch=0, active_producers={7: (5, 0)})
    assert d.retention is BatchRetention.RETAIN_EMPTY and d.reason == "producer-state"
    assert decide(producer_id=7, active_producers={7: (9, 0)}).retention is BatchRetention.DELETE_EMPTY


def test_marker_only_producer_keeps_markers_of_its_epoch():
    d = decide(is_control=True, producer_id=7, producer_epoch=3, active_producers={7: (None, 3)})
    assert d.retention is BatchRetention.RETAIN_EMPTY
    d = decide(is_control=True, producer_id=7, producer_epoch=2, active_producers={7: (None, 3)})
    assert d.retention is BatchRetention.DELETE_EMPTY


def test_aborted_data_is_deleted_without_reading():
    d = decide(can_discard=True)
    assert d.retention is BatchRetention.DELETE and d.discard_records


def test_marker_goes_only_after_its_horizon():
    assert decide(is_control=True, can_discard=True).retention is BatchRetention.DELETE_EMPTY
    d = decide(is_control=True, can_discard=True, has_delete_horizon=True, delete_horizon_ms=1000)
    assert d.retention is BatchRetention.DELETE and d.marker_for_empty_txn
    d = decide(is_control=True, can_discard=True, has_delete_horizon=True, delete_horizon_ms=1001)
    assert d.retention is BatchRetention.DELETE_EMPTY


def test_record_fates_k1_to_k4():
    offsets = np.array([1, 2, 3, 4, 5, 9])
    has_key = np.array([True, True, False, True, True, True])
    has_value = np.array([True, True, True, False, False, True])
    mapped = np.array([2, 2, -1, 4, 7, 3])
    fates = rules.record_fates(offsets, has_key, has_value, mapped, latest_offset=8, retain_deletes_=False)
    assert fates.tolist() == [rules.SUPERSEDED, rules.KEPT, rules.KEYLESS, rules.TOMBSTONE_EXPIRED,
                              rules.SUPERSEDED, rules.KEPT]
    fates = rules.record_fates(offsets, has_key, has_value, mapped, latest_offset=8, retain_deletes_=True)
    assert fates[3] == rules.KEPT


def test_retain_deletes_by_horizon():
    assert rules.retain_deletes(magic=2, has_delete_horizon=False, delete_horizon_ms=None, now_ms=5, legacy_retain=False)
    assert rules.retain_deletes(magic=2, has_delete_horizon=True, delete_horizon_ms=6, now_ms=5, legacy_retain=False)
    assert not rules.retain_deletes(magic=2, has_delete_horizon=True, delete_horizon_ms=5, now_ms=5, legacy_retain=True)
    assert rules.retain_deletes(magic=1, has_delete_horizon=False, delete_horizon_ms=None, now_ms=5, legacy_retain=True)
