"""Bucket URLs and the two shapes of what a bucket holds, on the local-directory store (no S3
server: tests/test_bucket_data_dir.py runs the commands against moto)."""

from __future__ import annotations

import os
import pickle

import pytest

from compactlog.errors import ConfigError, StorageError
from compactlog.storage.reader import PartitionReader
from compactlog.storage.remote.bucket import (KafkaDirObjects, is_bucket_url, list_bucket, parse_bucket_url,
                                              partition_url_source, sources, switch_key)


def test_parse_s3_url_with_environment():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "id",
           "AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}
    b = parse_bucket_url("s3://my-bucket/a/b/", {}, env)
    c = b.config
    assert (c.backend, c.bucket, c.key_prefix, c.endpoint_url, c.region, c.path_style) == \
        ("s3", "my-bucket", "a/b/", "http://127.0.0.1:9000", "eu-west-1", True)
    assert c.access_key_id == "id" and "s3cr3t-value" not in repr(c)
    assert parse_bucket_url("s3://my-bucket", {}, {}).config.key_prefix == ""
    # Aiven's names win over the environment
    b = parse_bucket_url("s3://my-bucket/p", {"rsm.config.storage.s3.endpoint.url": "http://h:1"}, env)
    assert b.config.endpoint_url == "http://h:1"


@pytest.mark.parametrize("url, why", [
    ("s3://", "no bucket name"), ("s3://UPPER/x", "not a valid bucket name"), ("s3://b-1/a//c", "empty"),
    ("s3://b-1/a/../c", "'..'"), ("gs://b/x", "unsupported scheme"), ("file://host/x", "not host"),
    ("s3://b-1/x?versionId=1", "no query"),
])
def test_bad_urls(url, why):
    with pytest.raises(ConfigError, match=why.replace("?", r"\?").replace(".", r"\.")):
        parse_bucket_url(url, {}, {})


def test_is_bucket_url():
    assert is_bucket_url("s3://b/p") and is_bucket_url("FILE:///x") and not is_bucket_url("/data")
    assert switch_key("a/b/") == "a/b.compactlog-clean.json" and switch_key("") == "compactlog-clean.json"


def _kafka_dir(root: str) -> None:
    import compactlog.settings  # noqa: F401
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    dd = DataDir(root, broker=BrokerConfig({}), create=True, writable=True)
    dd.create_topic("t", 1, {"segment.bytes": "300"})
    log = dd.open_log("t", 0)
    for i in range(30):
        log.append_records([b"k%d" % (i % 4)], [b"v%d" % i])
    dd.checkpoint_logs()
    dd.close()


def test_copied_data_dir_on_the_directory_store(tmp_path):
    root = tmp_path / "store" / "dd"
    _kafka_dir(str(root))
    (tmp_path / "store" / "other.txt").write_text("someone else's")
    bucket = parse_bucket_url(f"file://{root}")
    listing = list_bucket(bucket)
    [(part, src)] = sources(listing)
    assert (part.topic, part.partition, part.shape) == ("t", 0, "kafka-dir")
    assert isinstance(src, KafkaDirObjects) and src.clean_shutdown()
    got = [(r.offset, r.value) for r in PartitionReader(src).records()]
    assert got == [(r.offset, r.value) for r in PartitionReader(str(root / "t-0")).records()] and len(got) == 30
    assert len(src.list_segments()) > 3
    again = pickle.loads(pickle.dumps(src))
    assert again == src and again.read_index(0, ".index") == (root / "t-0" / "00000000000000000000.index").read_bytes()
    assert partition_url_source(part.url) == src


def test_no_partitions_is_named(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(StorageError, match=r"no partitions found \(1 object\(s\), none a segment"):
        list_bucket(parse_bucket_url(f"file://{tmp_path}"))
    os.remove(tmp_path / "x.txt")
    with pytest.raises(StorageError, match=r"no partitions found \(no objects\)"):
        list_bucket(parse_bucket_url(f"file://{tmp_path}"))


class _Killed(BaseException):
    pass


def test_a_copy_taken_after_a_topic_deletion_was_recorded_lists_the_topic_no_more(tmp_path, monkeypatch):
    """A deletion killed after its record, before its renames (or a copy taken in between): the
    topic's directories are still there, and the listing leaves them out, as a DataDir would."""
    import compactlog.settings  # noqa: F401
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    root = tmp_path / "store" / "dd"
    dd = DataDir(str(root), broker=BrokerConfig({}), create=True, writable=True)
    for topic in ("t", "u"):
        dd.create_topic(topic, 1)
        dd.open_log(topic, 0).append_records([b"k"], [b"v"])
    dd.checkpoint_logs()
    assert list_bucket(parse_bucket_url(f"file://{root}")).topics() == ["t", "u"]
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(src).startswith("t-"):
            raise _Killed()
        real_replace(src, dst)
    with monkeypatch.context() as m:
        m.setattr("compactlog.storage.datadir.os.replace", replace)
        m.setattr(DataDir, "_undo_deletion", lambda *args: None)
        with pytest.raises(_Killed):
            dd.delete_topic("t")
    dd.abandon()
    assert (root / "t-0").is_dir()
    assert list_bucket(parse_bucket_url(f"file://{root}")).topics() == ["u"]
