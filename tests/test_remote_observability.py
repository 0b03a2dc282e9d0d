"""The remote tier seen from outside: Kafka's remote-storage metrics on the broker's Prometheus
endpoint, the status page and ``cleaner status`` naming both tiers, and the offline commands and
the ``kafka-log`` Spark source reading a tiered data dir after its broker stopped — with moto's S3
behind a logging proxy, so the test sees every request the readers send.

One broker and one moto server for the module: confluent-kafka produces 1,500 records to a
compacted tiered topic with 16 KiB segments and ``local.retention.bytes=0``; the copy task uploads
every rolled segment and local retention trims them. Then:

* the metrics match the bucket: ``remotecopybytes`` = the bytes of the uploaded segments,
  ``remotecopyrequests`` = their count, ``remotelogsizebytes`` and ``remotelogmetadatacount`` too,
  no copy lag left; a consumer from offset 0 makes ``remotefetchbytes`` the bytes of the
  remote-only segments (each served once) and ``remotefetchrequests`` count its remote reads;
* ``/v1/status.json`` and ``cleaner status --bootstrap-server`` give the tiers, the page (headless
  Chromium) draws the remote-only segments;
* the store away: the copy lag grows in the metrics while rolled segments wait, then drains;
* with the broker stopped: ``verify`` exits 0 having checked the remote segments, ``consume`` from
  the beginning prints every record, ``cleaner status``/``explain`` name the tiers, ``dump-log``
  dumps a remote segment by its object URL, Spark reads all 1,500 rows — and not one request that
  writes (PUT, POST, DELETE) reached the bucket, nor a file the data dir.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from broker_support import Broker, wait_until
from s3_support import FaultProxy, MotoS3

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BUCKET = "obs-bucket"
PREFIX = "obs/"
TOPIC = "tiered"
N = 1500
T0 = int(time.time() * 1000) - 600_000


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """(name, sorted label pairs) -> value of every sample on /metrics."""
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def status(url: str) -> dict:
    with urllib.request.urlopen(url + "/v1/status.json", timeout=30) as r:
        return json.loads(r.read())


def partition_row(doc: dict, topic: str = TOPIC) -> dict:
    return next(p for t in doc["topics"] if t["name"] == topic for p in t["partitions"])


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    moto = MotoS3().start()
    moto.create_bucket(BUCKET)
    s3 = moto.client()
    s3.put_object(Bucket=BUCKET, Key="someone-else/file.bin", Body=b"not ours")
    proxy = FaultProxy(moto.endpoint)
    data = tmp_path_factory.mktemp("obs") / "data"
    data.mkdir()
    # the remote tier's settings in the data dir's own server.properties: what the offline
    # commands read once the broker is gone
    settings = {
        "remote.log.storage.system.enable": "true",
        **moto.properties(BUCKET, endpoint=proxy.endpoint, **{"rsm.config.key.prefix": PREFIX,
                                                               "rsm.config.chunk.size": "8192"}),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "300",
        "remote.fetch.max.wait.ms": "10000",
        "log.cleaner.enable": "false",
    }
    (data / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    broker = Broker(data).start()
    box = {"broker": broker, "moto": moto, "s3": s3, "proxy": proxy, "data": data}
    try:
        a = AdminClient({"bootstrap.servers": broker.bootstrap})
        a.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "cleanup.policy": "compact", "segment.bytes": "16384",
            "local.retention.bytes": "0"})])[TOPIC].result(30)
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True, "batch.size": 8000})
        box["produced"] = []
        for i in range(N):
            k, v = b"key-%06d" % i, (b"value-%06d-" % i) * 12
            p.produce(TOPIC, key=k, value=v, timestamp=T0 + i)
            box["produced"].append((k, v))
            if i % 200 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        # every rolled segment copied and trimmed: no copy lag, the local log starts near the end
        wait_until(lambda: (lambda r: r is not None and r["copyLagSegments"] == 0 and r["remoteSegmentCount"] >= 5
                            and r["localLogStartOffset"] > r["highestRemoteOffset"])(
                       partition_row(status(broker.metrics_url))["remote"]),
                   timeout=90, interval=0.2, what="every rolled segment copied and trimmed")
        yield box
    finally:
        box["broker"].stop()
        proxy.refuse()
        moto.stop()


def bucket_manifest(env) -> dict:
    s3 = env["s3"]
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}{TOPIC}-")
    key = next(o["Key"] for o in page["Contents"] if o["Key"].endswith("/compactlog-partition.json"))
    return json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def bucket_state(env) -> dict:
    return {o["Key"]: (o["ETag"], o["Size"], o["LastModified"])
            for o in env["s3"].list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_copy_metrics_match_the_bucket(env):
    url = env["broker"].metrics_url
    segs = bucket_manifest(env)["segments"]
    size = sum(s["sizeInBytes"] for s in segs)
    m = scrape(url)
    t = (("topic", TOPIC),)
    name = "kafka_server_brokertopicmetrics_"
    assert m[(name + "remotecopybytes_total", t)] == size
    assert m[(name + "remotecopyrequests_total", t)] == len(segs)
    assert m[(name + "remotecopyerrors_total", t)] == 0
    assert m[(name + "remotelogsizebytes", t)] == size
    assert m[(name + "remotelogmetadatacount", t)] == len(segs)
    assert m[(name + "remotecopylagbytes", t)] == 0 and m[(name + "remotecopylagsegments", t)] == 0
    assert m[(name + "remotedeleterequests_total", t)] == 0
    # the all-topics series (no label) beside the topic's: one tiered topic, the same values
    assert m[(name + "remotecopybytes_total", ())] == size
    assert m[(name + "remotelogsizebytes", ())] == size
    for always_zero in ("buildremotelogauxstaterequests_total", "buildremotelogauxstateerrors_total"):
        assert m[(name + always_zero, ())] == 0
    assert ("kafka_server_delayedremotefetchmetrics_expires_total", ()) in m
    # compactlog's: the store's requests (3 creates per segment: .log, .indexes, .rsm-manifest)
    creates = m[("compactlog_remote_store_requests_total", (("op", "put_if_absent"), ("result", "ok")))]
    assert creates >= 3 * len(segs)
    assert m[("compactlog_remote_store_request_seconds_count", (("op", "put_if_absent"),))] >= creates
    assert m[("compactlog_remote_store_requests_total", (("op", "put_if_match"), ("result", "ok")))] >= len(segs)


def test_fetch_metrics_count_what_a_consumer_read(env):
    url = env["broker"].metrics_url
    row = partition_row(status(url))
    local_start = row["remote"]["localLogStartOffset"]
    remote_only = [s for s in bucket_manifest(env)["segments"] if s["startOffset"] < local_start]
    before = scrape(url)
    c = ck.Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": "obs", "enable.auto.commit": False,
                     "max.partition.fetch.bytes": 16384})
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got.append((msg.key(), msg.value()))
    c.close()
    assert got == env["produced"]
    after = scrape(url)
    t = (("topic", TOPIC),)
    name = "kafka_server_brokertopicmetrics_"
    # every remote-only segment was served once, whole batches: its bytes exactly
    fetched = after[(name + "remotefetchbytes_total", t)] - before.get((name + "remotefetchbytes_total", t), 0)
    assert fetched == sum(s["sizeInBytes"] for s in remote_only)
    requests = after[(name + "remotefetchrequests_total", t)] - before.get((name + "remotefetchrequests_total", t), 0)
    assert requests >= len(remote_only)
    assert after[(name + "remotefetcherrors_total", t)] == 0
    assert after[(name + "remotefetchbytes_total", ())] == after[(name + "remotefetchbytes_total", t)]
    assert after[("compactlog_remote_cache_misses_total", (("cache", "chunk"),))] > 0
    # the reader's timer and pool (RemoteStorageMetrics' RemoteLogReader* names)
    timer = "kafka_log_remote_remotelogmanager_remotelogreaderfetchrateandtimems"
    assert after[(timer + "_count", ())] - before.get((timer + "_count", ()), 0) == requests
    assert after[(timer, (("quantile", "0.99"),))] > 0
    pool = "org_apache_kafka_storage_internals_log_remotestoragethreadpool_remotelogreader"
    assert after[(pool + "taskqueuesize", ())] == 0
    assert 0 <= after[(pool + "avgidlepercent", ())] <= 1
    assert 0 <= after[("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent", ())] <= 1


def test_status_names_both_tiers(env, cli):
    url = env["broker"].metrics_url
    segs = bucket_manifest(env)["segments"]
    row = partition_row(status(url))
    r = row["remote"]
    assert r["remoteSegmentCount"] == len(segs)
    assert r["remoteSizeBytes"] == sum(s["sizeInBytes"] for s in segs)
    assert r["highestRemoteOffset"] == segs[-1]["endOffset"]
    assert r["localLogStartOffset"] == row["segments"][0]["baseOffset"]
    assert r["logStartOffset"] == 0 and r["remoteStartOffset"] == 0
    assert [s["baseOffset"] for s in row["remoteSegments"]] == [s["startOffset"] for s in segs
                                                               if s["startOffset"] < r["localLogStartOffset"]]
    assert row["segments"][-1]["tier"] == "local"
    with urllib.request.urlopen(url + "/", timeout=30) as resp:
        assert "tierView" in resp.read().decode()
    # cleaner status through the broker's listener: the same tiers
    res = cli("cleaner", "status", "--metrics-url", url, "--json")
    assert res.code == 0, res.err
    rows = [json.loads(line) for line in res.out.splitlines()]
    mine = next(x for x in rows if x.get("topic") == TOPIC)
    assert mine["tiers"]["remoteSegmentCount"] == len(segs)
    assert {s["tier"] for s in mine["tiers"]["segments"]} >= {"remote", "local"}


def test_the_page_draws_the_remote_tier(env):
    from browser_support import CHROMIUM, SKIP_REASON, Browser, parse
    if CHROMIUM is None:
        pytest.skip(SKIP_REASON)
    url = env["broker"].metrics_url
    row = partition_row(status(url))
    with Browser() as browser:
        page = browser.open(f"{url}/?refresh=0")
        page.wait_for(f"document.querySelector('[data-tiers=\"{TOPIC}-0\"]') && true", what="the tiers drawn")
        dom = parse(page.html())
        assert page.errors() == []
    part = dom.find(cls="partition", data_partition=f"{TOPIC}-0")
    remote = part.find_all("li", cls="seg-remote")
    assert [(int(s.attrs["data-base-offset"]), int(s.attrs["data-size"])) for s in remote] == \
        [(s["baseOffset"], s["size"]) for s in row["remoteSegments"]]
    text = part.find(data_tiers=f"{TOPIC}-0").text()
    r = row["remote"]
    assert f"Remote tier: {r['remoteSegmentCount']} segments" in text
    assert f"local log from offset {r['localLogStartOffset']:,}" in text and "copy lag 0 segments" in text


def produce(env, start: int, n: int) -> None:
    p = ck.Producer({"bootstrap.servers": env["broker"].bootstrap, "acks": "all", "linger.ms": 5,
                     "enable.idempotence": True, "batch.size": 8000})
    for i in range(start, start + n):
        k, v = b"key-%06d" % i, (b"value-%06d-" % i) * 12
        p.produce(TOPIC, key=k, value=v, timestamp=T0 + i)
        env["produced"].append((k, v))
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def test_store_down_the_copy_lag_grows_then_drains(env):
    """Scenario 5 of tiered-storage.md §8: uploads stall while the store is away, the copy lag the
    metrics show grows with the rolled segments waiting, errors are counted, nothing un-uploaded
    is deleted; back, the copies catch up and the lag drains to 0."""
    url = env["broker"].metrics_url
    name = "kafka_server_brokertopicmetrics_"
    t = (("topic", TOPIC),)
    errors_before = scrape(url)[(name + "remotecopyerrors_total", t)]
    env["proxy"].refuse()
    try:
        produce(env, len(env["produced"]), 400)
        m = wait_until(lambda: (lambda m: m if m[(name + "remotecopylagsegments", t)] >= 2
                                and m[(name + "remotecopyerrors_total", t)] > errors_before else None)(scrape(url)),
                       timeout=60, interval=0.3, what="the copy lag to grow and a failed copy counted, the store away")
        row = partition_row(status(url))
        assert m[(name + "remotecopylagbytes", t)] == sum(s["size"] for s in row["segments"][:-1]
                                                          if s["tier"] == "local")
        assert row["segments"][0]["baseOffset"] <= row["remote"]["highestRemoteOffset"] + 1   # nothing lost
    finally:
        env["proxy"].accept()
    wait_until(lambda: (lambda r: r["copyLagSegments"] == 0 and r["localLogStartOffset"] > r["highestRemoteOffset"])(
                   partition_row(status(url))["remote"]), timeout=90, interval=0.3, what="the copy lag to drain")
    assert scrape(url)[(name + "remotecopylagbytes", t)] == 0


def test_offline_commands_read_the_bucket_and_write_nothing(env, cli, tmp_path):
    broker = env["broker"]
    broker.stop()
    data = str(env["data"])
    pdir = os.path.join(data, f"{TOPIC}-0")
    files_before = {n: os.stat(os.path.join(pdir, n)).st_mtime_ns for n in os.listdir(pdir)}
    bucket_before = bucket_state(env)
    env["proxy"].log.clear()
    segs = bucket_manifest(env)["segments"]

    res = cli("--data-dir", data, "verify")
    assert res.code == 0, res.out + res.err
    summary = res.out.strip().splitlines()[-1]
    assert summary.startswith("ok:"), summary
    # the remote segments were checked too: their segments and records counted beside the local
    # ones (the local log alone holds the last ~200 records)
    checked = int(summary.split(" segment(s)")[0].rsplit(" ", 1)[1])
    records = int(summary.split(" records checked")[0].rsplit(" ", 1)[1])
    assert checked >= len(segs) + 1 and records >= N

    res = cli("--data-dir", data, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl")
    assert res.code == 0, res.err
    lines = [json.loads(x) for x in res.out.splitlines()]
    assert [x["offset"] for x in lines] == list(range(len(env["produced"])))
    assert [(x["key"].encode(), x["value"].encode()) for x in lines] == env["produced"]

    res = cli("--data-dir", data, "cleaner", "status", "--json")
    assert res.code == 0, res.err
    mine = next(json.loads(x) for x in res.out.splitlines() if json.loads(x).get("topic") == TOPIC)
    assert mine["tiers"]["remoteSegmentCount"] == len(segs)
    assert mine["tiers"]["highestRemoteOffset"] == segs[-1]["endOffset"]
    assert mine["tiers"]["segments"][0]["tier"] == "remote"
    res = cli("--data-dir", data, "cleaner", "status")
    assert res.code == 0, res.err
    assert f"{TOPIC}-0 tiers: remote {len(segs)} segment(s)" in res.out
    assert f"offsets 0-{segs[-1]['endOffset']}; local from offset {mine['tiers']['localLogStartOffset']}" in res.out
    res = cli("--data-dir", data, "explain", "--topic", TOPIC, "--partition", "0")
    assert res.code == 0, res.err
    assert f"tiers: remote {len(segs)} segment(s)" in res.out

    res = cli("dump-log", "--files", pdir, "--json")
    assert res.code == 0, res.err
    dumped = [json.loads(x) for x in res.out.splitlines()]
    names = [d["file"] for d in dumped if d.get("type") == "file"]
    remote = [n for n in names if n.startswith(f"s3://{BUCKET}/{PREFIX}{TOPIC}-")]
    assert len(remote) == len([s for s in segs if s["startOffset"] < mine["tiers"]["localLogStartOffset"]])
    assert sum(1 for d in dumped if d.get("type") == "batch") > len(remote)

    # read-only: not one write reached the bucket, nothing changed in the data dir
    writes = [r for r in env["proxy"].log if r[0] in ("PUT", "POST", "DELETE")]
    assert not writes, writes[:3]
    assert any(r[0] == "GET" for r in env["proxy"].log)
    assert bucket_state(env) == bucket_before
    assert {n: os.stat(os.path.join(pdir, n)).st_mtime_ns for n in os.listdir(pdir)} == files_before

    # the store gone: one clear line naming it, no traceback, for a reader and for verify
    env["proxy"].refuse()
    try:
        for args in (("consume", "--topic", TOPIC, "--from-beginning"), ("verify",)):
            res = cli("--data-dir", data, *args)
            assert res.code == 1, (args, res.code, res.out[-300:], res.err)
            lines = [x for x in res.err.splitlines() if x.startswith("error:")]
            assert len(lines) == 1 and "Traceback" not in res.err, res.err
    finally:
        env["proxy"].accept()


def test_spark_reads_both_tiers(env, spark):
    if env["broker"].alive():
        env["broker"].stop()
    data = str(env["data"])
    pdir = os.path.join(data, f"{TOPIC}-0")
    files_before = sorted(os.listdir(pdir))
    env["proxy"].log.clear()
    rows = (spark.read.format("kafka-log").option("subscribe", TOPIC).load(data)
            .select("offset", "key", "value").orderBy("offset").collect())
    assert [r.offset for r in rows] == list(range(len(env["produced"])))
    assert [(bytes(r.key), bytes(r.value)) for r in rows] == env["produced"]
    # the remote segments came from the bucket, nothing was copied to the partition directory
    assert sorted(os.listdir(pdir)) == files_before
    assert any(r[0] == "GET" and r[1].endswith(".log") for r in env["proxy"].log)
    assert not [r for r in env["proxy"].log if r[0] in ("PUT", "POST", "DELETE")]
