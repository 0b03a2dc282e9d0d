"""The broker's HTTP listener address (``metrics.listener``) is its own or the start is refused, and
``cleaner status --bootstrap-server`` prints only the asked broker's status.

A second broker on the host whose metrics port was taken used to start with a warning ("serving
no metrics") while still reporting ``metrics.listener`` at that port, and ``cleaner status
--bootstrap-server <second broker>`` then printed the first broker's partitions."""

from __future__ import annotations

import json

import pytest

from broker_support import Broker, free_port, run_cli
from compactlog.cli import live_status
from compactlog.cli.main import main

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def tree(path) -> list:
    return sorted((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*"))


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """A broker on a fixed metrics port (``--bootstrap-server`` reads it back), holding a topic."""
    data = tmp_path_factory.mktemp("first") / "data"
    port = free_port()
    with Broker(data, {"metrics.listener": f"127.0.0.1:{port}"}, extra_args=["--engine", "local"]) as b:
        b.metrics_address = f"127.0.0.1:{port}"
        b.admin = AdminClient({"bootstrap.servers": b.bootstrap})    # kept: a dropped client cancels its futures
        b.admin.create_topics([NewTopic("first-topic", 1, 1, config={"cleanup.policy": "compact"})])[
            "first-topic"].result(30)
        yield b


def test_a_metrics_port_taken_refuses_the_start_and_leaves_nothing_behind(first, tmp_path):
    setting = f"metrics.listener={first.metrics_address}"
    args = ["--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", setting]
    fresh = tmp_path / "fresh"
    r = run_cli(fresh, *args, "serve", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.splitlines() == [err.strip()] and "Traceback" not in err, err        # one line
    assert f"cannot listen on {setting}: Address already in use" in err, err
    assert not fresh.exists()                       # no dir, no meta.properties, no lock file
    # an existing dir: not locked, not changed
    existing = tmp_path / "existing"
    assert run_cli(existing, "topics", "create", "--topic", "t").returncode == 0
    before = tree(existing)
    r = run_cli(existing, *args, "serve", timeout=60)
    assert r.returncode == 1 and setting in r.stderr.decode()
    assert tree(existing) == before
    assert first.alive()                            # the broker holding the port is untouched
    # the same setting from the dir's server.properties: refused the same way
    (existing / "server.properties").write_text(f"listeners=PLAINTEXT://127.0.0.1:0\n{setting}\n")
    before = tree(existing)
    r = run_cli(existing, "serve", timeout=60)
    assert r.returncode == 1 and f"cannot listen on {setting}" in r.stderr.decode()
    assert tree(existing) == before


def test_a_second_serve_on_a_locked_dir_names_the_holder_before_the_port(first):
    """The lock's message (who holds the dir, how to go through it) stays the answer to a second
    ``serve`` on the same dir, though the port is checked before the lock is taken."""
    r = run_cli(first.data_dir, "--override", f"metrics.listener={first.metrics_address}", "serve", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 1 and "locked by another writer" in err and f"pid {first.pid}" in err, err
    assert "metrics.listener" not in err


def test_cleaner_status_refuses_another_brokers_status(first, tmp_path, monkeypatch, capsys):
    """The address a broker reports for its HTTP listener reaches another broker (a port mapping,
    a proxy, or the old warning's broker): ``--bootstrap-server`` fails loudly, printing none of
    the other broker's partitions; through the right address it prints the broker's own."""
    port = free_port()
    with Broker(tmp_path / "second", {"metrics.listener": f"127.0.0.1:{port}"},
                extra_args=["--engine", "local"]) as second:
        admin = AdminClient({"bootstrap.servers": second.bootstrap})
        admin.create_topics([NewTopic("second-topic", 1, 1, config={"cleanup.policy": "compact"})])[
            "second-topic"].result(30)
        assert main(["cleaner", "status", "--bootstrap-server", second.bootstrap, "--json"]) == 0
        topics = [json.loads(x).get("topic") for x in capsys.readouterr().out.splitlines()]
        assert "second-topic" in topics and "first-topic" not in topics
        # the second broker's reported metrics.listener now leads to the first broker's listener
        monkeypatch.setattr(live_status, "listener_url", lambda value, bootstrap: f"http://{first.metrics_address}")
        assert main(["cleaner", "status", "--bootstrap-server", second.bootstrap, "--json"]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"error: http://{first.metrics_address}/v1/status.json is another broker's status"), err
        assert f"not the one of {second.bootstrap}" in err and first.bootstrap in err and "--metrics-url" in err
        assert len(err.strip().splitlines()) == 1
