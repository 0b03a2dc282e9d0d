"""The partition manifest on the local-directory store: its JSON and invariants, CAS updates, a
lost answer taken as success, re-basing, fencing of a stale owner, and the capability probe
(tiered-storage.md §3.3, §3.4 rules 3 and 8)."""

from __future__ import annotations

import pytest

from compactlog.storage.remote import keys
from compactlog.storage.remote.partition_manifest import (
    Fenced, ManifestError, ManifestSegment, Owner, PartitionManifest, PartitionManifestWriter, probe_conditional_writes)
from compactlog.storage.remote.store import LocalDirectoryStore, PreconditionFailed, StoreUnavailable

TOPIC_ID = "MWJ6FHTfRYy67jzwZdeqSQ"


def seg(start: int, end: int, sid: str | None = None) -> ManifestSegment:
    return ManifestSegment(sid or keys.new_uuid(), start, end, 1700000000000 + end, 1000, ((0, start),),
                           1700000000123, 1)


def writer(store, owner_broker=1) -> PartitionManifestWriter:
    return PartitionManifestWriter(store, "t/", "foo", TOPIC_ID, 0, Owner("cluster", owner_broker, keys.new_uuid()))


def test_json_round_trip_and_order():
    m = PartitionManifest("foo", TOPIC_ID, 0, 3, Owner("c", 1, "tqimKeZwStOEOwRzT3L5oQ"), 0, 50,
                          (seg(0, 99, "a" * 22), seg(100, 199, "b" * 22)))
    text = m.to_json().decode()
    assert text.startswith('{"version":1,"topic":"foo","topicId":"MWJ6FHTfRYy67jzwZdeqSQ","partition":0,'
                           '"generation":3,"owner":{"clusterId":"c","brokerId":1,"incarnation":"tqimKeZwStOEOwRzT3L5oQ"},'
                           '"logStartOffset":0,"cleanerCheckpoint":50,"segments":[{"id":"aaaaaaaaaaaaaaaaaaaaaa",'
                           '"startOffset":0,"endOffset":99,')
    assert PartitionManifest.parse(m.to_json()) == m
    assert m.highest_offset == 199


def test_segments_must_be_contiguous():
    with pytest.raises(ManifestError, match="must be contiguous"):
        PartitionManifest("foo", TOPIC_ID, 0, segments=(seg(0, 99), seg(101, 200)))
    with pytest.raises(ManifestError, match="listed twice"):
        PartitionManifest("foo", TOPIC_ID, 0, segments=(seg(0, 99, "x" * 22), seg(100, 200, "x" * 22)))
    with pytest.raises(ManifestError, match="not a compactlog partition manifest"):
        PartitionManifest.parse(b'{"version":1}')


def test_updates_by_compare_and_swap(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    w = writer(store)
    m0 = w.take_ownership()
    assert m0.generation == 0 and m0.owner == w.owner
    s1, s2 = seg(0, 99), seg(100, 199)
    w.update(lambda m: m.with_segment(s1))
    m2 = w.update(lambda m: m.with_segment(s2))
    assert m2.generation == 2 and [s.id for s in m2.segments] == [s1.id, s2.id]
    m3 = w.update(lambda m: m.without_segments([s1.id], delete_after_ms=5000))
    assert [s.id for s in m3.segments] == [s2.id] and m3.pending_deletion[0].id == s1.id
    assert w.read()[0] == m3
    with pytest.raises(ManifestError, match="contiguous"):
        w.update(lambda m: m.with_segment(seg(300, 399)))
    assert w.read()[0] == m3                    # nothing written


class LosingAnswers(LocalDirectoryStore):
    """Writes the CAS, then answers as if the store had gone away (a lost response)."""

    lose_next = False

    def put_if_match(self, key, data, etag):
        result = super().put_if_match(key, data, etag)
        if self.lose_next:
            self.lose_next = False
            raise StoreUnavailable(f"put {key!r}: injected timeout", key=key)
        return result


def test_a_lost_answer_is_found_to_be_a_success(tmp_path):
    store = LosingAnswers(str(tmp_path))
    w = writer(store)
    w.take_ownership()
    s1 = seg(0, 99)
    store.lose_next = True
    with pytest.raises(StoreUnavailable):
        w.update(lambda m: m.with_segment(s1))
    # the caller retries the same change: the 412 it gets is its own write
    m = w.update(lambda m: m.with_segment(s1))
    assert m.generation == 1 and [s.id for s in m.segments] == [s1.id]
    assert w.read()[0] == m


def test_a_stale_owner_is_fenced(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    old = writer(store, 1)
    old.take_ownership()
    old.update(lambda m: m.with_segment(seg(0, 99)))
    new = writer(store, 2)
    taken = new.take_ownership()
    assert taken.owner.broker_id == 2 and taken.generation == 2
    with pytest.raises(Fenced, match="fenced by broker 2"):
        old.update(lambda m: m.with_segment(seg(100, 199)))
    with pytest.raises(Fenced):
        old.update(lambda m: m)                 # stays fenced
    assert [s.start_offset for s in new.read()[0].segments] == [0]
    new.update(lambda m: m.with_segment(seg(100, 199)))


def test_racing_owners_one_generation_wins(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    a, b = writer(store, 1), writer(store, 2)
    a.take_ownership()
    b.take_ownership()           # b took it from a
    results = []
    for w, start in ((a, 0), (b, 0)):
        try:
            results.append(w.update(lambda m, s=seg(start, start + 99): m.with_segment(s)).owner.broker_id)
        except Fenced:
            results.append("fenced")
    assert results == ["fenced", 2]


def test_an_update_rebases_on_its_own_earlier_write(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    w = writer(store)
    w.take_ownership()
    # a second writer object of the same incarnation (e.g. a restart of the component) moved on
    twin = PartitionManifestWriter(store, "t/", "foo", TOPIC_ID, 0, w.owner)
    twin.take_ownership()
    twin.update(lambda m: m.with_segment(seg(0, 99)))
    m = w.update(lambda m: m.with_segment(seg(m.highest_offset + 1, m.highest_offset + 100)))
    assert [s.start_offset for s in m.segments] == [0, 100] and m.generation == 2


class IgnoresConditions(LocalDirectoryStore):
    """A store that overwrites whatever the condition (as s3rver does)."""

    def put_if_absent(self, key, data, size=None):
        self.delete(key)
        return super().put_if_absent(key, data, size)

    def put_if_match(self, key, data, etag):
        current = self.head(key).etag
        return super().put_if_match(key, data, current)


def test_the_capability_probe(tmp_path):
    good = probe_conditional_writes(LocalDirectoryStore(str(tmp_path / "a")), "t/")
    assert good.create_only and good.compare_and_swap and good.remote_compaction
    bad = probe_conditional_writes(IgnoresConditions(str(tmp_path / "b")), "t/")
    assert not bad.create_only and not bad.compare_and_swap and not bad.remote_compaction
    assert LocalDirectoryStore(str(tmp_path / "a")).list("") == []         # the probe key is gone


def test_ownership_of_a_manifest_of_another_partition_is_refused(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    key = keys.partition_manifest_key("t/", "foo", TOPIC_ID, 0)
    store.put_if_absent(key, PartitionManifest("bar", TOPIC_ID, 0).to_json())
    with pytest.raises(ManifestError, match="holds bar-0"):
        writer(store).take_ownership()
    with pytest.raises(PreconditionFailed):
        store.put_if_absent(key, b"{}")
