"""``clean`` over a bucket when the answer to its switch write is lost: the conditional PUT of
``<prefix>.compactlog-clean.json`` reaches the store and lands, the connection is cut before the
answer. The client retries the PUT; the retry's condition (the ETag read before the run, or
create-only the first time) no longer holds, because of this run's own write: 412. Reading that as
"another clean switched meanwhile" deleted this run's generation, the one the switch now names:
every reader of the bucket then failed. A lost answer must end with the switch and the objects it
names agreeing (the clean done, or not done), and the bucket readable. Real CLI on moto's S3
through the fault proxy (s3_support), one server."""

from __future__ import annotations

import json

import pytest

from s3_support import FaultProxy, moto  # noqa: F401 - fixture
from test_bucket_data_dir import T0, env_for, make_data_dir, run, sync_up

pytestmark = pytest.mark.slow       # moto and a clean, as test_bucket_data_dir

CLEAN = ("clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
CONSUME = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true")


@pytest.mark.parametrize("first", [True, False], ids=["create-only", "if-match"])
def test_a_lost_answer_to_the_switch_write_leaves_a_readable_bucket(moto, tmp_path, first):
    root = str(tmp_path / "data")
    make_data_dir(root)
    name = f"lost-answer-{int(first)}"
    moto.create_bucket(name)
    client = moto.client()
    sync_up(client, root, name, "dd")
    url = f"s3://{name}/dd"
    if not first:           # one partition cleaned first: the switch exists, the next one is an If-Match
        r = run(moto, url, *CLEAN, "--topic", "orders", "--partition", "0")
        assert r.returncode == 0, r.stderr.decode()
    proxy = FaultProxy(moto.endpoint)
    try:
        rule = proxy.lose_answer(lambda m, p, q: m == "PUT" and p.endswith("/dd.compactlog-clean.json"), times=1)
        r = run(moto, url, *CLEAN, env=env_for(moto, AWS_ENDPOINT_URL=proxy.endpoint))
        assert rule.hits == 1, r.stderr.decode()
    finally:
        proxy.close()
    switch = json.loads(client.get_object(Bucket=name, Key="dd.compactlog-clean.json")["Body"].read())
    named = client.list_objects_v2(Bucket=name, Prefix=switch["current"]).get("KeyCount", 0)
    assert named > 10, (switch, r.returncode, r.stderr.decode())     # the switch names objects that are there
    got = run(moto, url, *CONSUME)
    assert got.returncode == 0 and len(got.stdout.splitlines()) > 5, got.stderr.decode()
