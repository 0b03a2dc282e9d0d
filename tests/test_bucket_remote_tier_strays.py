"""A broker's remote tier read offline (``--data-dir s3://…``) with another remote tier of the same
topic name beside it: a deleted topic's leftovers (its manifest under its old topic id, when the
deletion was cut short), or a second cluster's tier under the same prefix. An offline reader has
no broker metadata to tell which topic id is the live one, so it must not pick one by key order
(it served the other tier's records, or none, with exit 0): each command fails with one error line
naming both topic ids, and a partition URL (``…/<topic>-<id>/<N>``) still reads the one named.
Real CLI runs on moto's S3; the tier is written by a real RemoteLogManager (test_bucket_data_dir)."""

from __future__ import annotations

import json

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import make_remote_tier, run

pytestmark = pytest.mark.slow       # moto and a tier written by a RemoteLogManager
BUCKET = "tier-strays"     # moto's state is one per process: not test_bucket_data_dir's bucket


@pytest.fixture(scope="module")
def remote_tier(moto, tmp_path_factory):
    return make_remote_tier(moto, tmp_path_factory, BUCKET)

OTHER_ID = "zzzzzzzzzzzzzzzzzzzzzQ"     # sorts after any id, so a last-wins listing took it


@pytest.fixture
def stray(moto, remote_tier):
    client = moto.client()
    [key] = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET)["Contents"]
             if o["Key"].endswith("/compactlog-partition.json")]
    doc = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    live_id = doc["topicId"]
    stray_key = f"tiered/t-{OTHER_ID}/0/compactlog-partition.json"
    client.put_object(Bucket=BUCKET, Key=stray_key,
                      Body=json.dumps(dict(doc, topicId=OTHER_ID, segments=[], logStartOffset=0)).encode())
    yield live_id, key
    client.delete_object(Bucket=BUCKET, Key=stray_key)


def test_two_tiers_of_one_topic_are_not_guessed_between(moto, remote_tier, stray, tmp_path):
    live_id, manifest_key = stray
    _, url = remote_tier
    for args in (("consume", "--topic", "t", "--from-beginning"), ("verify",),
                 ("snapshot", "--topic", "t", "--out", str(tmp_path / "snap"), "--format", "json",
                  "--engine", "local")):
        r = run(moto, url, *args)
        err = r.stderr.decode()
        lines = [x for x in err.splitlines() if x.startswith("error:")]
        assert r.returncode == 1 and "Traceback" not in err, (args, r.stdout.decode(), err)
        assert len(lines) == 1 and live_id in lines[0] and OTHER_ID in lines[0], (args, err)
    # the partition's own URL names one tier: read as before
    part_url = f"s3://{BUCKET}/" + manifest_key.rsplit("/", 1)[0]
    d = run(moto, url, "dump-log", "--deep-iteration", "--files", part_url)
    assert d.returncode == 0 and d.stdout.count(b"| offset: ") > 10, d.stderr.decode()
