"""Bad store settings and bucket URLs, as a user types them, against the real CLI and broker: one
``error:`` line naming what is wrong, exit 1, no traceback (nor a Rust panic from obstore), and
never a secret echoed back, wherever the secret was put (a URL's user-info is a classic place
for keys: ``s3://KEY:SECRET@bucket``, ``http://KEY:SECRET@minio:9000``). The store is never
reached here (the settings are refused before any request), so no S3 server is needed."""

from __future__ import annotations

import os

import pytest

from broker_support import run_cli
from cli_support import run_in_process

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
CONSUME = ("consume", "--topic", "orders", "--from-beginning")


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="id",
               AWS_SECRET_ACCESS_KEY="secret", **extra)
    return env


def one_error_line(r, *expected: str) -> str:
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert r.returncode == 1, out
    assert "Traceback" not in out and "panicked" not in out and "PanicException" not in out, out
    assert SECRET not in out, out
    lines = [x for x in out.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, out
    for e in expected:
        assert e in lines[0], out
    return lines[0]


@pytest.mark.parametrize("url, expected", [
    (f"s3://AKIAEXAMPLE:{SECRET}@some-bucket/data", "credentials"),
    (f"s3://{SECRET}@some-bucket/data", "credentials"),
    (f"file://me:{SECRET}@host/tmp", "file:///DIR"),
])
def test_credentials_in_a_bucket_url_are_refused_unechoed(url, expected):
    one_error_line(run_in_process(["--data-dir", url, *CONSUME], env=clean_env()), expected)


@pytest.mark.parametrize("endpoint, expected", [
    ("not a url", "rsm.config.storage.s3.endpoint.url"),
    ("127.0.0.1:9000", "rsm.config.storage.s3.endpoint.url"),
    ("ftp://127.0.0.1:9000", "rsm.config.storage.s3.endpoint.url"),
    ("http://", "rsm.config.storage.s3.endpoint.url"),
    (f"http://AKIAEXAMPLE:{SECRET}@127.0.0.1:1", "credentials"),
])
def test_a_bad_endpoint_setting_is_named(endpoint, expected):
    r = run_in_process(["--data-dir", "s3://some-bucket/data", "--override",
                        f"rsm.config.storage.s3.endpoint.url={endpoint}", *CONSUME], env=clean_env())
    one_error_line(r, expected)


def test_a_bad_endpoint_from_the_environment_is_named():
    r = run_in_process(["--data-dir", "s3://some-bucket/data", *CONSUME],
                       env=clean_env(AWS_ENDPOINT_URL=f"http://key:{SECRET}@127.0.0.1:1"))
    one_error_line(r, "credentials")
    r = run_in_process(["--data-dir", "s3://some-bucket/data", *CONSUME],
                       env=clean_env(AWS_ENDPOINT_URL_S3="localhost 9000"))
    one_error_line(r, "endpoint")


@pytest.mark.parametrize("endpoint", ["not a url", f"https://k:{SECRET}@s3.example.com"])
def test_a_broker_with_a_bad_endpoint_does_not_start(tmp_path, endpoint):
    r = run_cli(tmp_path / "data", "--override", "remote.log.storage.system.enable=true",
                "--override", "rsm.config.storage.s3.bucket.name=some-bucket",
                "--override", f"rsm.config.storage.s3.endpoint.url={endpoint}",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "metrics.listener=127.0.0.1:0",
                "serve", timeout=60)
    one_error_line(r, "rsm.config.storage.s3.endpoint.url")


@pytest.mark.parametrize("name, expected", [("Bad_Bucket!", "not a valid bucket name"),
                                            ("bucket/tiered", "rsm.config.key.prefix")])
def test_a_broker_with_a_bad_bucket_name_does_not_start(tmp_path, name, expected):
    """Before: the broker started, and every upload of every tiered topic failed after it."""
    r = run_cli(tmp_path / "data", "--override", "remote.log.storage.system.enable=true",
                "--override", f"rsm.config.storage.s3.bucket.name={name}",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "metrics.listener=127.0.0.1:0",
                "serve", timeout=60)
    one_error_line(r, "rsm.config.storage.s3.bucket.name", expected)


@pytest.mark.parametrize("prefix", ["/tiered/", "tiered//", "a/../b/", "./x"])
def test_a_broker_with_a_key_prefix_no_key_can_have_does_not_start(tmp_path, prefix):
    """Before: the broker started, and every upload raised "invalid object key" (a traceback in its
    log at every copy run) until it was stopped."""
    r = run_cli(tmp_path / "data", "--override", "remote.log.storage.system.enable=true",
                "--override", "rsm.config.storage.s3.bucket.name=some-bucket",
                "--override", f"rsm.config.key.prefix={prefix}",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "metrics.listener=127.0.0.1:0",
                "serve", timeout=60)
    one_error_line(r, "rsm.config.key.prefix")
