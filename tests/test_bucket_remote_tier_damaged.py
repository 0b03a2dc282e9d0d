"""A broker's remote tier read offline (``--data-dir s3://…``) with a segment object cut short in
the bucket: every command fails loudly naming the object, and none tells the user to run
``verify --repair``, which refuses a bucket (exit 2: "a bucket is verified read-only"): a hint that
cannot be followed. The copied-data-dir shape gets the same treatment. Real CLI runs on moto's S3;
the tier is written by a real RemoteLogManager (test_bucket_data_dir)."""

from __future__ import annotations

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import copied, make_remote_tier, run  # noqa: F401 - fixture

pytestmark = pytest.mark.slow       # moto and a tier written by a RemoteLogManager
BUCKET = "tier-damaged"     # moto's state is one per process: not test_bucket_data_dir's bucket


@pytest.fixture(scope="module")
def remote_tier(moto, tmp_path_factory):
    return make_remote_tier(moto, tmp_path_factory, BUCKET)


def cut_one(moto, bucket: str, prefix: str, suffix: str):
    s3 = moto.client()
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
                  if o["Key"].endswith(suffix))
    key = keys[1]
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=body[:len(body) // 2])
    return key, lambda: s3.put_object(Bucket=bucket, Key=key, Body=body)


@pytest.mark.parametrize("shape", ["remote-tier", "kafka-dir"])
def test_a_cut_object_is_named_without_an_impossible_repair_hint(moto, remote_tier, copied, shape):
    if shape == "remote-tier":
        url, topic = remote_tier[1], "t"
        key, restore = cut_one(moto, BUCKET, "tiered/", ".log")
    else:
        url, topic = copied[1], "orders"
        key, restore = cut_one(moto, "copied-dd", "kafka/data/orders-0/", ".log")
    try:
        for args in (("consume", "--topic", topic, "--from-beginning"), ("verify",)):
            r = run(moto, url, *args)
            out = r.stdout.decode() + r.stderr.decode()
            assert r.returncode == 1 and "Traceback" not in out, (args, out)
            assert key.rsplit("/", 1)[1] in out, (args, out)
            assert "--repair" not in out, (args, out)
        assert run(moto, url, "verify", "--repair").returncode == 2       # the hint would have led here
    finally:
        restore()
    assert run(moto, url, "verify").returncode == 0
