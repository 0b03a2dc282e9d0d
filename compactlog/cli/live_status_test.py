"""``cleaner status --metrics-url`` / ``--bootstrap-server``: a live broker's rows, printed as the
offline command prints a data dir's."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from compactlog.cli.live_status import listener_url, status_url
from compactlog.cli.main import main
from compactlog.cli.remote import BrokerError
from compactlog.server.state import BrokerState, Listener
from compactlog.server.metrics.listener import HttpListener
from compactlog.server.status.routes import register_status_page
from compactlog.storage.datadir import DataDir


def test_status_url():
    assert status_url("http://127.0.0.1:9644") == "http://127.0.0.1:9644/v1/status.json"
    assert status_url("127.0.0.1:9644/") == "http://127.0.0.1:9644/v1/status.json"
    assert status_url("https://h:1/prefix/") == "https://h:1/prefix/v1/status.json"
    assert status_url("http://h:1/x/status.json") == "http://h:1/x/status.json"


def test_listener_url():
    assert listener_url("127.0.0.1:9644", "b:9092") == "http://127.0.0.1:9644"
    assert listener_url("0.0.0.0:9644", "broker.example:9092") == "http://broker.example:9644"
    assert listener_url("https://:9644", "10.0.0.1:9092") == "https://10.0.0.1:9644"
    assert listener_url("[::1]:9644", "b:9092") == "http://[::1]:9644"
    with pytest.raises(BrokerError, match="a port the system chose"):
        listener_url("127.0.0.1:0", "b:9092")
    with pytest.raises(BrokerError, match="not HOST:PORT"):
        listener_url("nonsense", "b:9092")


@pytest.fixture
def live(tmp_path):
    dd = DataDir(str(tmp_path / "d"), create=True, writable=True)
    dd.create_topic("t", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    dd.create_topic("plain", 1, {})
    for p in range(2):
        log = dd.open_log("t", p)
        log.append_records([b"a", b"a", b"b"], [b"1", b"2", b"3"])
        log.roll()
        log.append_records([b"c"], [b"4"] if p == 0 else [None])
    dd.open_log("plain", 0)
    state = BrokerState(dd, 0, "c", Listener("PLAINTEXT", "127.0.0.1", 9092))
    # the broker's own HTTP listener, its context as the broker's BrokerMetrics gives it
    http = HttpListener("127.0.0.1", 0, context=SimpleNamespace(state=state, background=None))
    register_status_page(http)
    http.start()
    try:
        yield dd, http.url
    finally:
        http.stop()
        dd.close()


def test_live_rows_are_the_offline_rows(live, capsys):
    dd, url = live
    assert main(["cleaner", "status", "--metrics-url", url, "--json"]) == 0
    live_lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert main(["--data-dir", dd.path, "cleaner", "status", "--json"]) == 0
    offline_lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["topic"] for x in live_lines[:-1]] == ["t", "t"]
    assert live_lines[:-1] == offline_lines[:-1]
    assert live_lines[-1]["maxDirtyPercent"] == offline_lines[-1]["maxDirtyPercent"] == 100
    # the table, as offline
    assert main(["cleaner", "status", "--metrics-url", url, "--topic", "t"]) == 0
    live_text = capsys.readouterr().out
    assert main(["--data-dir", dd.path, "cleaner", "status", "--topic", "t"]) == 0
    assert live_text == capsys.readouterr().out
    assert "t-0" in live_text and "max-dirty-percent: 100" in live_text


def test_live_refusals(live, capsys):
    dd, url = live
    assert main(["cleaner", "status", "--metrics-url", url, "--topic", "nope"]) == 1
    assert capsys.readouterr().err.strip() == f"error: topic 'nope' does not exist on the broker ({url}/v1/status.json)"
    assert main(["cleaner", "status", "--metrics-url", url, "--now-ms", "5"]) == 2
    assert "--now-ms applies to a data dir" in capsys.readouterr().err
    assert main(["cleaner", "status", "--metrics-url", url, "--bootstrap-server", "h:1"]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main(["cleaner", "status", "--metrics-url", url + "/nothing-here.json"]) == 1
    assert capsys.readouterr().err.strip() == f"error: {url}/nothing-here.json: HTTP 404 Not Found"


def test_nothing_listening_is_one_line(capsys):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["cleaner", "status", "--metrics-url", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: http://127.0.0.1:{port}/v1/status.json: cannot connect: Connection refused"


def test_check_same_broker():
    from compactlog.cli.live_status import BrokerIdentity, check_same_broker
    from compactlog.errors import CompactlogError
    me = BrokerIdentity("c1", 0, "127.0.0.1:9092")
    doc = {"broker": {"clusterId": "c1", "nodeId": 0, "advertised": "PLAINTEXT://127.0.0.1:9092",
                      "advertisedListeners": ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://127.0.0.1:9093"]}}
    check_same_broker(doc, me, "u", "b:1")
    check_same_broker(doc, BrokerIdentity("c1", 0, "127.0.0.1:9093"), "u", "b:1")     # asked on another listener
    # a document without the list (an older broker): its first listener
    check_same_broker({"broker": {"clusterId": "c1", "nodeId": 0, "advertised": "PLAINTEXT://127.0.0.1:9092"}},
                      me, "u", "b:1")
    for other in ({"clusterId": "c2"}, {"nodeId": 1}, {"advertisedListeners": ["PLAINTEXT://127.0.0.1:9094"]}):
        bad = {"broker": {**doc["broker"], **other, "dataDir": "/d"}}
        with pytest.raises(CompactlogError, match=r"^u is another broker's status \(cluster .*data dir /d\), "
                                                  r"not the one of b:1 \(cluster c1, node 0, 127.0.0.1:9092\)"):
            check_same_broker(bad, me, "u", "b:1")
    with pytest.raises(CompactlogError, match="does not say which broker"):
        check_same_broker({"cleaner": {"statuses": []}}, me, "u", "b:1")
