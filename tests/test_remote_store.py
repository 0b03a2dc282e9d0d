"""The remote tier's object store (storage/remote/store.py) against a real S3 API (moto's server on
loopback, through obstore) and as a local directory: every operation, both conditional writes and
their races, multipart, and the store failing under a client (refused, 403, 5xx, torn responses).

Broker-free but seconds long (one moto server per module, real HTTP): marked slow.
"""

from __future__ import annotations

import os
import json
import threading
import time
import uuid

import pytest

from compactlog.errors import ConfigError
from compactlog.storage.remote.store import (
    AccessDenied, LocalDirectoryStore, ObjectNotFound, PreconditionFailed, RangeNotSatisfiable, RemoteStorageError,
    S3ObjectStore, StoreConfig, StoreUnavailable, open_store)
from s3_support import ACCESS_KEY, SECRET_KEY, FaultProxy, bucket, moto  # noqa: F401 - the fixtures

pytestmark = pytest.mark.slow

MiB = 1 << 20


@pytest.fixture(params=["s3", "local"])
def store(request, tmp_path):
    if request.param == "s3":
        moto = request.getfixturevalue("moto")
        bucket = request.getfixturevalue("bucket")
        s = open_store(moto.properties(bucket))
        assert isinstance(s, S3ObjectStore)
    else:
        s = LocalDirectoryStore(str(tmp_path / "store"))
    yield s
    s.close()


# -- every operation, on both stores ------------------------------------------------------------------

def test_create_only_put(store):
    etag = store.put_if_absent("t-x/0/a.log", b"hello")
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("t-x/0/a.log", b"other")
    got = store.get("t-x/0/a.log")
    assert got.data == b"hello" and got.etag == etag
    assert store.head("t-x/0/a.log").etag == etag and store.head("t-x/0/a.log").size == 5


def test_compare_and_swap(store):
    e1 = store.put_if_absent("m/p.json", b"v1")
    e2 = store.put_if_match("m/p.json", b"v2", e1)
    assert e2 != e1 and store.get("m/p.json").data == b"v2"
    with pytest.raises(PreconditionFailed):
        store.put_if_match("m/p.json", b"v3", e1)            # stale ETag
    assert store.get("m/p.json").data == b"v2"
    store.delete("m/p.json")
    with pytest.raises(PreconditionFailed):
        store.put_if_match("m/p.json", b"v4", e2)            # gone
    with pytest.raises(RemoteStorageError):
        store.get("m/p.json")


def test_missing_objects(store):
    with pytest.raises(ObjectNotFound):
        store.get("no/such.key")
    with pytest.raises(ObjectNotFound):
        store.head("no/such.key")
    with pytest.raises(ObjectNotFound):
        store.get_range("no/such.key", 0, 10)


def test_ranged_reads(store):
    data = os.urandom(100_000)
    store.put_if_absent("r/seg.log", data)
    assert store.get_range("r/seg.log", 16384, 32768) == data[16384:32768]
    assert store.get_range("r/seg.log", 99_990, 200_000) == data[99_990:]        # clipped at the end
    assert store.get_range("r/seg.log", 5, 5) == b""
    with pytest.raises(RangeNotSatisfiable):
        store.get_range("r/seg.log", 100_000, 100_010)
    ranges = [(0, 10), (50, 60), (90_000, 95_000), (10, 20)]
    assert store.get_ranges("r/seg.log", ranges) == [data[s:e] for s, e in ranges]


def test_listing_is_by_string_prefix_and_sorted(store):
    for key in ("a/b/2", "a/b/1", "a/bx", "a/c/1", "z"):
        store.put_if_absent(key, key.encode())
    assert [m.key for m in store.list("a/b/")] == ["a/b/1", "a/b/2"]
    assert [m.key for m in store.list("a/b")] == ["a/b/1", "a/b/2", "a/bx"]
    assert [m.key for m in store.list("")] == ["a/b/1", "a/b/2", "a/bx", "a/c/1", "z"]
    assert [m.size for m in store.list("a/c/")] == [5]
    assert store.list("nothing/") == []


def test_deletes_are_idempotent(store):
    store.put_if_absent("d/1", b"x")
    store.put_if_absent("d/2", b"y")
    store.delete("d/1")
    store.delete("d/1")
    store.delete("never/was")
    store.delete_many(["d/2", "d/3"])
    store.delete_many([])
    assert store.list("d/") == []


def test_bad_keys_are_refused(store):
    for key in ("", "/abs", "a//b", "a/../b", "dir/"):
        with pytest.raises(ValueError):
            store.put_if_absent(key, b"x")


def test_racing_creates_have_one_winner(store):
    key = "race/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.log"
    barrier = threading.Barrier(16)
    results: list = [None] * 16

    def create(i):
        barrier.wait()
        try:
            store.put_if_absent(key, f"writer {i}".encode())
            results[i] = "won"
        except PreconditionFailed:
            results[i] = "lost"
        except Exception as e:       # anything else fails the test below
            results[i] = repr(e)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(set(results)) == ["lost", "won"] and results.count("won") == 1, results
    assert store.get(key).data == f"writer {results.index('won')}".encode()


def test_compare_and_swap_loses_no_update(store):
    """4 writers x 5 increments by compare-and-swap: none lost, none applied twice. Each increment
    appends its own token, so a writer whose request failed without an answer (a timeout on a
    loaded machine: did the write land?) re-reads and looks for it, as the partition manifest's
    writer does with a lost response, instead of guessing."""
    key = "cas/counter"
    store.put_if_absent(key, b"[]")
    per_thread, threads_n = 5, 4
    conflicts, failures = [], []

    def bump(writer):
        try:
            for i in range(per_thread):
                token = f"{writer}-{i}"
                while True:
                    got = store.get(key)
                    tokens = json.loads(got.data)
                    if token in tokens:
                        break                       # an earlier attempt landed, its answer was lost
                    try:
                        store.put_if_match(key, json.dumps(tokens + [token]).encode(), got.etag)
                        break
                    except PreconditionFailed:
                        conflicts.append(1)
                    except StoreUnavailable:
                        continue                    # unknown outcome: the re-read decides
        except Exception as e:                      # noqa: BLE001 - reported below, not lost
            failures.append(repr(e))

    threads = [threading.Thread(target=bump, args=(w,)) for w in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures
    tokens = json.loads(store.get(key).data)
    assert sorted(tokens) == sorted(f"{w}-{i}" for w in range(threads_n) for i in range(per_thread))


# -- S3 only: multipart, outages, error classes -------------------------------------------------------

def small_multipart(moto, bucket, endpoint=None) -> S3ObjectStore:
    return open_store(moto.properties(bucket, endpoint, **{
        "compactlog.remote.multipart.threshold.bytes": str(6 * MiB),
        "rsm.config.storage.s3.multipart.upload.part.size": str(5 * MiB)}))


def test_multipart_above_the_threshold(moto, bucket):
    store = small_multipart(moto, bucket)
    data = os.urandom(12 * MiB)
    etag = store.put_if_absent("mp/big.log", data)
    assert etag.endswith('-3"'), etag            # three parts: 5 + 5 + 2 MiB
    assert store.get("mp/big.log").data == data
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("mp/big.log", data)
    # from a file, as a segment is uploaded
    path = os.path.join(os.path.dirname(__file__), "..", "build")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, f"mp-{uuid.uuid4().hex}.bin"), "w+b") as f:
        f.write(data)
        f.seek(0)
        store.put_if_absent("mp/file.log", f, size=len(data))
        os.unlink(f.name)
    assert store.get_range("mp/file.log", 7 * MiB, 7 * MiB + 16384) == data[7 * MiB:7 * MiB + 16384]


def test_a_part_failing_aborts_the_upload(moto, bucket):
    proxy = FaultProxy(moto.endpoint)
    try:
        store = small_multipart(moto, bucket, proxy.endpoint)
        proxy.fail(lambda m, p, q: m == "PUT" and "partNumber=2" in q, status=503)
        with pytest.raises(StoreUnavailable, match="mp/torn.log"):
            store.put_if_absent("mp/torn.log", os.urandom(12 * MiB))
        s3 = moto.client()
        assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
        assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")
        assert any(m == "DELETE" and "uploadId=" in q for m, _, q in proxy.log)       # the abort
    finally:
        proxy.close()


def test_the_store_going_away_mid_upload(moto, bucket):
    proxy = FaultProxy(moto.endpoint)
    try:
        store = small_multipart(moto, bucket, proxy.endpoint)
        # the connection drops while the second part is sent: then nothing answers any more
        def drop_and_refuse(m, p, q):
            if m == "PUT" and "partNumber=2" in q:
                threading.Thread(target=proxy.refuse).start()
                return True
            return False
        proxy.drop(drop_and_refuse)
        t = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.put_if_absent("mp/gone.log", os.urandom(12 * MiB))
        assert time.monotonic() - t < 30
        assert "Contents" not in moto.client().list_objects_v2(Bucket=bucket)     # nothing visible
    finally:
        proxy.close()


def test_the_store_going_away_mid_read(moto, bucket):
    proxy = FaultProxy(moto.endpoint)
    try:
        store = open_store(moto.properties(bucket, proxy.endpoint))
        data = os.urandom(1 * MiB)
        store.put_if_absent("rd/seg.log", data)
        proxy.cut(lambda m, p, q: m == "GET", after=1000)       # the body stops after 1000 bytes
        with pytest.raises(StoreUnavailable, match="rd/seg.log"):
            store.get("rd/seg.log")
        with pytest.raises(StoreUnavailable):
            store.get_range("rd/seg.log", 0, 500_000)
        proxy.clear()
        assert store.get("rd/seg.log").data == data
        proxy.refuse()
        t = time.monotonic()
        with pytest.raises(StoreUnavailable, match="cannot reach the store"):
            store.get("rd/seg.log")
        assert time.monotonic() - t < 10
        proxy.accept()
        assert store.get_range("rd/seg.log", 10, 20) == data[10:20]
    finally:
        proxy.close()


def test_a_stopped_server_then_back(moto, bucket):
    store = open_store(moto.properties(bucket))
    store.put_if_absent("s/1", b"kept")
    moto.stop()
    try:
        with pytest.raises(StoreUnavailable):
            store.put_if_absent("s/2", b"lost")
        with pytest.raises(StoreUnavailable):
            store.list("s/")
    finally:
        moto.start()
    store = open_store(moto.properties(bucket))         # the same port is not promised on restart
    assert store.get("s/1").data == b"kept"
    with pytest.raises(ObjectNotFound):
        store.head("s/2")


@pytest.mark.parametrize("status, error", [(403, AccessDenied), (401, AccessDenied), (500, StoreUnavailable),
                                           (503, StoreUnavailable), (409, StoreUnavailable),
                                           (400, RemoteStorageError)])
def test_error_classes(moto, bucket, status, error):
    proxy = FaultProxy(moto.endpoint)
    try:
        store = open_store(moto.properties(bucket, proxy.endpoint))
        proxy.fail(lambda m, p, q: True, status=status)
        with pytest.raises(error) as info:
            store.get("e/key")
        assert "e/key" in str(info.value) and SECRET_KEY not in str(info.value)
        assert info.value.kafka_error.value == -1            # UNKNOWN_SERVER_ERROR, as Kafka's RemoteStorageException
    finally:
        proxy.close()


def test_other_users_objects_are_left_alone(moto, bucket):
    s3 = moto.client()
    foreign = ["other-team/data.csv", "tiered-not-ours/x", "tiered/foo-MWJ6FHTfRYy67jzwZdeqSQ.bak", "tieredfoo/1"]
    for key in foreign:
        s3.put_object(Bucket=bucket, Key=key, Body=b"theirs")
    store = open_store(moto.properties(bucket, **{"rsm.config.key.prefix": "tiered/"}))
    prefix = store.config.key_prefix
    for i in range(3):
        store.put_if_absent(f"{prefix}foo-MWJ6FHTfRYy67jzwZdeqSQ/0/{i:020d}-tqimKeZwStOEOwRzT3L5oQ.log", b"ours")
    ours = store.list(prefix + "foo-MWJ6FHTfRYy67jzwZdeqSQ/")
    assert len(ours) == 3
    store.delete_many(m.key for m in ours)
    left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert left == sorted(foreign)
    assert all(s3.get_object(Bucket=bucket, Key=k)["Body"].read() == b"theirs" for k in foreign)


# -- settings -----------------------------------------------------------------------------------------

def test_aiven_settings_and_hidden_secrets(moto, bucket):
    config = StoreConfig.from_properties(moto.properties(bucket, **{"rsm.config.key.prefix": "t/",
                                                                    "rsm.config.chunk.size": "1048576"}))
    assert (config.bucket, config.region, config.path_style, config.key_prefix, config.chunk_size) == (
        bucket, "us-east-1", True, "t/", 1 << 20)
    for text in (repr(config), str(config), repr(open_store(config))):
        assert SECRET_KEY not in text and ACCESS_KEY not in text
    assert "secret_access_key='[hidden]'" in repr(config)


@pytest.mark.parametrize("props, message", [
    ({"rsm.config.storage.s3.path.style.access.enabled": "yes"}, "expected true or false"),
    ({"rsm.config.storage.s3.bucket.name": ""}, "s3.bucket.name is required"),
    ({"rsm.config.encryption.enabled": "true"}, "encryption.enabled=true is not supported"),
    ({"rsm.config.chunk.size": "0"}, "chunk.size: 0 is outside"),
    ({"rsm.config.storage.s3.multipart.upload.part.size": "1000"}, "part.size: 1000 is outside"),
    ({"rsm.config.storage.backend.class": "com.example.Gcs"}, "is not supported"),
    ({"rsm.config.storage.aws.secret.access.key": ""}, "go together"),
])
def test_bad_settings_are_named(props, message):
    base = {"rsm.config.storage.s3.bucket.name": "bkt", "rsm.config.storage.aws.access.key.id": "k",
            "rsm.config.storage.aws.secret.access.key": "s"}
    base.update(props)
    with pytest.raises(ConfigError, match=message):
        StoreConfig.from_properties(base)


def test_the_environment_credential_chain(moto, bucket, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    props = {k: v for k, v in moto.properties(bucket).items() if ".aws." not in k}
    store = open_store(props)
    store.put_if_absent("env/1", b"x")
    assert store.get("env/1").data == b"x"


def test_the_filesystem_backend_by_aivens_class_name(tmp_path):
    store = open_store({"rsm.config.storage.backend.class":
                        "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
                        "rsm.config.storage.root": str(tmp_path)})
    assert isinstance(store, LocalDirectoryStore)
    store.put_if_absent("a/b", b"1")
    assert (tmp_path / "a" / "b").read_bytes() == b"1"


def test_a_crashed_local_write_leaves_nothing_visible(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    store.put_if_absent("p/0/x.log", b"1")
    # what a kill -9 between the temporary file and its link leaves behind
    (tmp_path / "p" / "0" / ".compactlog-tmp-0123").write_bytes(b"half")
    assert [m.key for m in store.list("p/")] == ["p/0/x.log"]
    store.put_if_absent("p/0/y.log", b"2")
    assert store.get("p/0/y.log").data == b"2"


def test_a_key_below_an_object_is_refused_by_a_directory_store(tmp_path):
    store = LocalDirectoryStore(str(tmp_path))
    store.put_if_absent("a", b"1")
    with pytest.raises(RemoteStorageError, match="is an object, not a prefix"):
        store.put_if_absent("a/b", b"2")
    with pytest.raises(ObjectNotFound):
        store.get("a/b")
