"""``clean`` over a bucket where the scratch file system keeps no user extended attributes (tmpfs
before Linux 6.6, some overlay and network file systems): the shadow's marks are then kept by inode
(storage/object_body.py), and a clean that deletes and creates files must still read each new file
from disk and each marked one from its object. Kafka's cleaner corpus decides what is right."""

from __future__ import annotations

import errno
import os

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import fetch_current, run, sync_up

pytestmark = pytest.mark.slow


@pytest.fixture
def no_xattrs(monkeypatch):
    def unsupported(*_a, **_k):
        raise OSError(errno.ENOTSUP, "Operation not supported")
    monkeypatch.setattr(os, "setxattr", unsupported)
    monkeypatch.setattr(os, "getxattr", unsupported)


@pytest.mark.parametrize("name", ["kt-c10-tombstone-two-phase-staged"])
def test_clean_without_xattrs_equals_kafka_cleaner(moto, corpus_dir, tmp_path, no_xattrs, name):
    from corpus_support import broker_overrides, compare_round, prepare
    root = str(tmp_path / "input")
    case = prepare(corpus_dir, name, root)
    r = run(moto, root, "topics", "alter", "--topic", case["topic"],
            *[a for k, v in case["topic_configs"].items() for a in ("--config", f"{k}={v}")])
    assert r.returncode == 0, r.stderr.decode()
    bucket = f"noxattr-{abs(hash(name)) % 10**8}"
    moto.create_bucket(bucket)
    sync_up(moto.client(), root, bucket, "dd")
    url = f"s3://{bucket}/dd"
    for k, now in enumerate(case["rounds"], start=1):
        overrides = [a for key, v in broker_overrides(case).items() for a in ("--override", f"{key}={v}")]
        r = run(moto, url, *overrides, "clean", "--now-ms", str(now), "--engine", "local")
        assert r.returncode == 0, r.stderr.decode()
        got = fetch_current(moto, bucket, "dd", str(tmp_path / f"round-{k}"))
        assert compare_round(corpus_dir, name, case, got, k) == [], (name, k)
