"""``clean`` over a bucket where the scratch file system keeps no user extended attributes (tmpfs
before Linux 6.6, some overlay and network file systems): the shadow's marks are then kept by inode
(storage/object_body.py), and a clean that deletes and creates files must still read each new file
from disk and each marked one from its object. Kafka's cleaner corpus decides what is right."""

from __future__ import annotations

import errno
import os

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import clean_corpus_case

pytestmark = pytest.mark.slow


@pytest.fixture
def no_xattrs(monkeypatch):
    def unsupported(*_a, **_k):
        raise OSError(errno.ENOTSUP, "Operation not supported")
    monkeypatch.setattr(os, "setxattr", unsupported)
    monkeypatch.setattr(os, "getxattr", unsupported)


@pytest.mark.parametrize("name", ["kt-c10-tombstone-two-phase-staged"])
def test_clean_without_xattrs_equals_kafka_cleaner(moto, corpus_dir, tmp_path, no_xattrs, name):
    clean_corpus_case(moto, corpus_dir, tmp_path, name, f"noxattr-{abs(hash(name)) % 10**8}")
