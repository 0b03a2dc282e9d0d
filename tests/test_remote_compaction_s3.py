"""Compaction of the remote tier against a real S3 API (moto's server on loopback, through obstore
as the broker uses it): a round's new segment objects created with If-None-Match, the manifest
switched by If-Match, the old objects deleted after the grace period; the result equal to the
all-local clean; a crash after the CAS finished by a restart; another user's objects untouched."""

from __future__ import annotations

import pytest

from compactlog.cleaner.cleaner import Cleaner
from compactlog.record import remote_log_metadata as rlm
from compactlog.storage.remote.compaction_test import DELAY, T0, Crash, Tier, produce
from s3_support import MotoS3

pytestmark = pytest.mark.slow

BUCKET = "compaction-bucket"
FOREIGN = {"tiered/notes.txt": b"a neighbour's file", "elsewhere/x.bin": b"x" * 100}


@pytest.fixture(scope="module")
def moto():
    m = MotoS3().start()
    m.create_bucket(BUCKET)
    s3 = m.client()
    for k, v in FOREIGN.items():
        s3.put_object(Bucket=BUCKET, Key=k, Body=v)
    yield m
    m.stop()


def s3_tier(path, moto, **kw) -> Tier:
    return Tier(path, store_props=moto.properties(BUCKET), **kw)


def test_round_grace_and_restart_on_s3(tmp_path, moto, monkeypatch):
    from compactlog.storage.remote import faults
    tier = s3_tier(tmp_path, moto)
    try:
        log, clock = tier.log, tier.clock
        produce(log, 40, clock, keys_mod=5)
        tier.tier()
        produce(log, 10, clock, start=40, keys_mod=5)
        expected = {k: v for _, k, v in tier.records()}
        old = {s.id for s in tier.rp.manifest.segments}
        old_bytes = sum(s.size_in_bytes for s in tier.rp.manifest.segments)

        def die(at):
            if at == "compaction-manifest":
                raise Crash(at)
        monkeypatch.setattr(faults, "maybe_die", die)
        with pytest.raises(Crash):
            Cleaner(tier.dd).run(clock.now, topic="c", force=True)
        monkeypatch.setattr(faults, "maybe_die", lambda at: None)
        tier.rm.close()
        tier.rm = tier.build()                     # the restart rolls the committed round forward
        m = tier.rp.manifest
        assert {p.id for p in m.pending_deletion} == old
        assert sum(s.size_in_bytes for s in m.segments) < old_bytes
        states = tier.journal_states()
        for s in m.segments:
            assert states[s.id][-1] == rlm.SegmentState.COPY_SEGMENT_FINISHED
        for i in old:
            assert states[i][-1] == rlm.SegmentState.DELETE_SEGMENT_STARTED
        assert {k: v for _, k, v in tier.records()} == expected
        assert tier.objects() == {s.id for s in m.segments} | old       # still readable during the grace
        clock.now += DELAY
        tier.rm.run_expiration(clock.now)
        assert tier.objects() == {s.id for s in tier.rp.manifest.segments}
        s3 = moto.client()
        for k, v in FOREIGN.items():
            assert s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() == v
    finally:
        tier.close()


@pytest.mark.parametrize("split", [1, 4])
def test_s3_remote_and_local_clean_equals_the_all_local_clean(tmp_path, moto, split):
    def append(log, lo, hi):
        for i in range(lo, hi):
            v = None if i % 11 == 3 else b"value-%05d" % i + b"." * 30
            log.append_records([b"k%d" % (i % 7)], [v], timestamps=[T0 + i])
    local = Tier(tmp_path / "local", tiered=False)
    remote = s3_tier(tmp_path / "remote", moto)
    try:
        for t in (local, remote):
            append(t.log, 0, 60)
        remote.tier(upto=[s.base_offset for s in remote.log.segments][split])
        for t in (local, remote):
            for step in range(2):
                append(t.log, 60 + 10 * step, 70 + 10 * step)
                t.clock.now = T0 + 10_000 * (step + 1)
                [out] = Cleaner(t.dd).run(t.clock.now, topic="c", force=True)
                assert out.cleaned and not out.error, out.error
        assert remote.batches() == local.batches()
    finally:
        local.close()
        remote.close()
