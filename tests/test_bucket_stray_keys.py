"""Keys under a copied data dir's prefix that ``aws s3 sync`` of a Kafka data dir never writes but
users' tools do: the S3 console's "Create folder" markers (``dd/orders-0/``, zero bytes), an object
named like a partition directory, a key with an empty part (``dd//x``, a doubled slash typed into
``aws s3 cp``), a name longer than a local file name may be. ``consume`` and ``clean`` either read
the data dir as if the stray key were not there, or fail with one error line naming the key and
saying what is wrong with it, never the store's internals ("cannot reach the store") nor a path of
their temporary files; a failed clean writes nothing. Real CLI runs on moto's S3, one server."""

from __future__ import annotations

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import T0, make_data_dir, run, sync_up

pytestmark = pytest.mark.slow       # moto and a clean, as test_bucket_data_dir

CLEAN = ("clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
CONSUME = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("strays") / "data")
    make_data_dir(root)
    return root


def bucket_with(moto, root: str, name: str, strays: dict) -> str:
    moto.create_bucket(name)
    client = moto.client()
    sync_up(client, root, name, "dd")
    for k, v in strays.items():
        client.put_object(Bucket=name, Key=k, Body=v)
    return f"s3://{name}/dd"


def keys_of(moto, name: str) -> set:
    return {o["Key"] for o in moto.client().list_objects_v2(Bucket=name)["Contents"]}


def test_folder_markers_are_not_objects_of_the_data_dir(moto, data_dir):
    plain = bucket_with(moto, data_dir, "strays-plain", {})
    marked = bucket_with(moto, data_dir, "strays-marked", {"dd/": b"", "dd/orders-0/": b"", "dd/empty-folder/": b""})
    for url in (plain, marked):
        r = run(moto, url, *CLEAN)
        assert r.returncode == 0, r.stderr.decode()
    a, b = run(moto, plain, *CONSUME), run(moto, marked, *CONSUME)
    assert a.returncode == 0 and b.returncode == 0, b.stderr.decode()
    assert a.stdout == b.stdout and len(a.stdout.splitlines()) > 10


@pytest.mark.parametrize("name, stray, commands, expected", [
    ("strays-dslash", "dd//orders-0/00000000000000000000.log", (CONSUME, CLEAN), "empty path segment"),
    ("strays-long", "dd/notes/" + "n" * 300, (CLEAN,), "File name too long"),
    ("strays-file-dir", "dd/orders-0", (CLEAN,), "dd/orders-0"),
])
def test_a_stray_key_that_cannot_be_read_is_named(moto, data_dir, name, stray, commands, expected):
    url = bucket_with(moto, data_dir, name, {stray: b"someone's notes"})
    before = keys_of(moto, name)
    for args in commands:
        r = run(moto, url, *args)
        err = r.stderr.decode()
        lines = [x for x in err.splitlines() if x.startswith("error:")]
        assert r.returncode == 1 and "Traceback" not in err, (args, err)
        assert len(lines) == 1 and expected in lines[0], (args, err)
        assert "cannot reach the store" not in err and "/tmp/" not in err, (args, err)
        assert f"s3://{name}/" in lines[0], (args, err)
    assert keys_of(moto, name) == before
