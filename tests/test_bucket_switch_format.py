"""The switch object of a cleaned bucket data dir (``<prefix>.compactlog-clean.json``) as something
other than this version wrote it: from a newer format, naming a prefix that is not one of this
prefix's generations, or torn. A reader must not guess (a newer writer may mean something else by
its fields): consume/verify fail with one error line naming the switch, and ``clean`` changes
nothing (the switch byte for byte, no new objects). Real CLI runs on moto's S3, one server."""

from __future__ import annotations

import json

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import T0, make_data_dir, run, sync_up

pytestmark = pytest.mark.slow       # moto and a clean, as test_bucket_data_dir

CLEAN = ("clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
CONSUME = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true")


@pytest.fixture(scope="module")
def cleaned(moto, tmp_path_factory):
    """A copied data dir cleaned once: a real switch (version 1) naming generation 1."""
    root = str(tmp_path_factory.mktemp("switch") / "data")
    make_data_dir(root)
    moto.create_bucket("switch-format")
    sync_up(moto.client(), root, "switch-format", "dd")
    r = run(moto, "s3://switch-format/dd", *CLEAN)
    assert r.returncode == 0, r.stderr.decode()
    switch = moto.client().get_object(Bucket="switch-format", Key="dd.compactlog-clean.json")["Body"].read()
    assert json.loads(switch)["version"] == 1
    return switch


def objects(moto) -> dict:
    got = moto.client().list_objects_v2(Bucket="switch-format")["Contents"]
    return {o["Key"]: o["ETag"] for o in got}


@pytest.fixture
def switch_as(moto, cleaned):
    """Put a switch document in place of the real one; the real one back after the test."""
    client = moto.client()

    def put(body: bytes) -> None:
        client.put_object(Bucket="switch-format", Key="dd.compactlog-clean.json", Body=body)
    yield put
    put(cleaned)


def newer(doc: bytes) -> bytes:
    d = json.loads(doc)
    d["version"] = 2
    return json.dumps(d).encode()


def elsewhere(doc: bytes) -> bytes:
    d = json.loads(doc)
    d["current"] = "dd/"            # a prefix, but not a generation of this one (the input itself)
    return json.dumps(d).encode()


@pytest.mark.parametrize("shape, body, expected", [
    ("newer", newer, "version 2"),
    ("elsewhere", elsewhere, "not a generation"),
    ("torn", lambda d: d[: len(d) // 2], "not a compactlog clean switch"),
])
def test_a_switch_this_version_cannot_read_is_refused(moto, cleaned, switch_as, shape, body, expected):
    switch_as(body(cleaned))
    before = objects(moto)
    url = "s3://switch-format/dd"
    for args in (CONSUME, ("verify",), CLEAN):
        r = run(moto, url, *args)
        err = r.stderr.decode()
        lines = [x for x in err.splitlines() if x.startswith("error:")]
        assert r.returncode == 1 and "Traceback" not in err, (args, err)
        assert len(lines) == 1 and "dd.compactlog-clean.json" in lines[0] and expected in lines[0], (args, err)
    assert objects(moto) == before        # clean wrote nothing, the switch is as it was
