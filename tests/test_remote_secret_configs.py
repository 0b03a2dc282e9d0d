"""The remote store's secrets over DescribeConfigs: Kafka answers a PASSWORD-type setting with no
value and ``is_sensitive`` (KafkaConfig.maybeSensitive). compactlog declared
``rsm.config.storage.aws.session.token`` (temporary credentials' token) as a password, but showed a
known setting's value unless its name said "password" or "secret": the token went to any client
allowed to describe the broker. One broker, confluent-kafka's AdminClient; the store is never
reached (nothing is uploaded), so no S3 server is needed."""

from __future__ import annotations

import pytest

from broker_support import Broker

pytestmark = pytest.mark.slow

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402

TOKEN = "IQoJb3JpZ2luX2VjEXAMPLETOKEN"
SECRET = "wJalrXUtnFEMI-EXAMPLESECRET"


def test_the_stores_secrets_are_not_described(tmp_path):
    props = {"remote.log.storage.system.enable": "true", "rsm.config.storage.s3.bucket.name": "some-bucket",
             "rsm.config.storage.s3.endpoint.url": "http://127.0.0.1:1",
             "rsm.config.storage.aws.access.key.id": "AKIAEXAMPLE",
             "rsm.config.storage.aws.secret.access.key": SECRET, "rsm.config.storage.aws.session.token": TOKEN,
             "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
    with Broker(tmp_path / "data", props) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        res = ConfigResource("BROKER", "0")
        got = admin.describe_configs([res])[res].result(30)
        for name in ("rsm.config.storage.aws.secret.access.key", "rsm.config.storage.aws.session.token"):
            assert got[name].is_sensitive and got[name].value is None, (name, got[name].value)
        assert all(TOKEN not in str(e.value) and SECRET not in str(e.value) for e in got.values())
        del admin
        assert TOKEN not in broker.log_text() and SECRET not in broker.log_text()
