"""The bucket data dir of test_bucket_data_dir on Spark, against moto's S3 server: spark.read of
the objects, ``clean --spark-master local[2]`` over the bucket, and the kafka-log sink writing a
generation to it. A module of its own: the SparkSession's start and jobs on another worker than
the bucket's commands (one module ran both, the suite's longest)."""

from __future__ import annotations

import json
import os

import pytest

from s3_support import ACCESS_KEY, REGION, SECRET_KEY, moto  # noqa: F401 - fixture
from test_bucket_data_dir import T0, copied, fetch_current, make_data_dir, run, same, sync_up  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


def test_spark_read_equals_local(moto, copied, spark):
    """spark.read.format("kafka-log").load("s3://…"): the tasks read the objects themselves (the
    store settings travel with the plan), rows equal to the same load of the local files."""
    from test_spark_datasource import spark_rows
    root, url = copied
    # the session's JVM (and its Python workers) started without the AWS environment: the store
    # settings go as options, by Aiven's names
    store = {"rsm.config.storage.s3.endpoint.url": moto.endpoint, "rsm.config.storage.s3.region": REGION,
             "rsm.config.storage.s3.path.style.access.enabled": "true",
             "rsm.config.storage.aws.access.key.id": ACCESS_KEY, "rsm.config.storage.aws.secret.access.key": SECRET_KEY}
    local = spark_rows(spark.read.format("kafka-log").load(root))
    remote = spark_rows(spark.read.format("kafka-log").options(**store).load(url))
    assert remote == local and sum(map(len, local.values())) == 200
    one = spark.read.format("kafka-log").options(**store).option("subscribe", "orders") \
        .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed").load(url)
    assert spark_rows(one) == {k: v for k, v in local.items() if k[0] == "orders"}


def test_clean_on_spark_equals_local(moto, spark, tmp_path):
    """clean --spark-master local[2] over a bucket: the generation it switches to reads as the
    local clean's result. The tasks run in the session's Python workers, which read the segments
    from their objects themselves (the shadow's sparse .log files there would read as zeros:
    only the driver's process resolves them), and write the cleaned ones to the bucket."""
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("spark-clean")
    sync_up(moto.client(), root, "spark-clean", "dd")
    url = "s3://spark-clean/dd"
    args = ("clean", "--now-ms", str(T0 + 10**9), "--roll")
    r = run(moto, url, *args, "--spark-master", "local[2]")
    assert r.returncode == 0, r.stderr.decode()
    assert run(moto, root, *args, "--engine", "local").returncode == 0
    got = fetch_current(moto, "spark-clean", "dd", str(tmp_path / "got"))
    for part in ("orders-0", "orders-1"):
        logs = sorted(n for n in os.listdir(os.path.join(root, part)) if n.endswith(".log"))
        assert logs == sorted(n for n in os.listdir(os.path.join(got, part)) if n.endswith(".log"))
        for n in logs:
            with open(os.path.join(root, part, n), "rb") as a, open(os.path.join(got, part, n), "rb") as b:
                assert a.read() == b.read(), (part, n)


# -- the kafka-log sink to a bucket -------------------------------------------------------------------

def test_spark_sink_writes_a_bucket(moto, spark, tmp_path):
    """df.write.format("kafka-log").save("s3://…") appends to a data dir copied to a bucket as a new
    generation switched to at once (the objects read left as they were, no object written in
    place): spark.read and `consume` over the bucket then read the old records and the new, as
    the same write to the local dir gives; a second write makes the next generation."""
    from test_spark_datasource import spark_rows
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("sink")
    client = moto.client()
    sync_up(client, root, "sink", "dd")
    before = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket="sink")["Contents"]}
    url = "s3://sink/dd"
    store = {"rsm.config.storage.s3.endpoint.url": moto.endpoint, "rsm.config.storage.s3.region": REGION,
             "rsm.config.storage.s3.path.style.access.enabled": "true",
             "rsm.config.storage.aws.access.key.id": ACCESS_KEY, "rsm.config.storage.aws.secret.access.key": SECRET_KEY}
    import datetime
    at = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rows = [("orders", f"k{i % 5}", f"new-{i}", at) for i in range(12)] + [("fresh", None, f"line-{i}", at)
                                                                            for i in range(3)]
    df = spark.createDataFrame(rows, "topic string, key string, value string, timestamp timestamp").coalesce(1)
    df.write.format("kafka-log").mode("append").save(root)
    df.write.format("kafka-log").mode("append").options(**store).save(url)
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket="sink")["Contents"]}
    assert all(after[k] == v for k, v in before.items())            # nothing read was written over
    doc = json.loads(client.get_object(Bucket="sink", Key="dd.compactlog-clean.json")["Body"].read())
    assert doc["generation"] == 1 and set(after) - set(before) == {
        k for k in after if k.startswith(doc["current"])} | {"dd.compactlog-clean.json"}
    sizes = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket="sink", Prefix=doc["current"])["Contents"]}
    assert sum(sizes.values()) < 2 * sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(root) for n in ns)
    local = spark_rows(spark.read.format("kafka-log").load(root))
    remote = spark_rows(spark.read.format("kafka-log").options(**store).load(url))
    assert remote == local and len(local[("orders", 0)]) + len(local[("orders", 1)]) == 192
    consume = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true",
               "--property", "print.key=true")
    same(run(moto, root, *consume), run(moto, url, *consume), root, url)
    df.write.format("kafka-log").mode("append").options(**store).save(url)
    doc = json.loads(client.get_object(Bucket="sink", Key="dd.compactlog-clean.json")["Body"].read())
    assert doc["generation"] == 2
    remote = spark_rows(spark.read.format("kafka-log").options(**store).load(url))
    assert sum(map(len, remote.values())) == sum(map(len, local.values())) + len(rows)
