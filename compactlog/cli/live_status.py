"""``cleaner status --metrics-url URL`` / ``--bootstrap-server HOST:PORT``: a live broker's cleaner
state, read from the status document its HTTP listener serves (``/v1/status.json``, computed by
``server.status.data.status_data``) instead of from a data dir.

With ``--bootstrap-server`` the listener's address is asked of the broker itself: its
``metrics.listener`` setting, through DescribeConfigs (as ``kafka-configs.sh --describe`` reads a
broker's settings); a wildcard host means the bootstrap server's host. That address may reach
another process (a port mapping, a proxy, a broker whose setting names an address another broker
holds), so the document read there must be the asked broker's own: its cluster id and node id
those DescribeCluster answered, and the endpoint DescribeCluster gave among its advertised
listeners (``check_same_broker``). Another broker's document is refused, never printed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
import urllib.error
import urllib.parse
import urllib.request

from ..errors import CompactlogError
from .remote import TIMEOUT_S, BrokerError, admin_client, config_entries, result

STATUS_PATH = "v1/status.json"
LISTENER_SETTING = "metrics.listener"


def status_url(metrics_url: str) -> str:
    """The status document's URL under a listener's base URL (``http://127.0.0.1:9644``); a URL
    already naming a ``.json`` document is kept."""
    url = metrics_url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CompactlogError(f"--metrics-url {metrics_url!r}: expected http://HOST:PORT")
    if parts.path.endswith(".json"):
        return url
    return urllib.parse.urljoin(url if url.endswith("/") else url + "/", STATUS_PATH)


def listener_url(value: str, bootstrap: str) -> str:
    """``metrics.listener`` (``HOST:PORT``, optionally with a scheme) as a URL a client can reach."""
    text = value.strip()
    scheme = "http"
    if "://" in text:
        scheme, text = text.split("://", 1)
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise BrokerError(f"{bootstrap}: {LISTENER_SETTING}={value!r} is not HOST:PORT; give --metrics-url")
    if port == "0":
        raise BrokerError(f"{bootstrap}: {LISTENER_SETTING}={value!r}: the broker's HTTP listener is on a port "
                          f"the system chose; give --metrics-url with the port from the broker's log")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = bootstrap.rpartition(":")[0].strip("[]") or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


@dataclass(frozen=True)
class BrokerIdentity:
    """Who the broker at a bootstrap address is, as DescribeCluster answers."""
    cluster_id: str | None
    node_id: int
    endpoint: str                   # host:port, the advertised endpoint of the listener asked


def broker_status_address(bootstrap: str) -> tuple[BrokerIdentity, str]:
    """The broker's identity (DescribeCluster) and its HTTP listener's base URL, from its
    ``metrics.listener`` (DescribeConfigs)."""
    admin = admin_client(bootstrap)      # referenced until its futures resolve (librdkafka)
    cluster = result(admin.describe_cluster(), "DescribeCluster")
    nodes = cluster.nodes
    if not nodes:
        raise BrokerError(f"{bootstrap}: DescribeCluster named no broker")
    node = nodes[0]
    host = f"[{node.host}]" if ":" in node.host else node.host
    identity = BrokerIdentity(cluster.cluster_id, node.id, f"{host}:{node.port}")
    entries = {e.name: e.value for e in config_entries(admin, "broker", str(node.id))}
    value = entries.get(LISTENER_SETTING)
    if value is None:
        raise BrokerError(f"{bootstrap}: the broker reports no {LISTENER_SETTING} setting (it serves no HTTP "
                          f"listener); give --metrics-url")
    if not value.strip():
        raise BrokerError(f"{bootstrap}: the broker's HTTP listener is off ({LISTENER_SETTING} is empty); "
                          f"start it with --override {LISTENER_SETTING}=127.0.0.1:9644")
    return identity, listener_url(value, bootstrap)


def _endpoint(listener: str) -> str:
    """``host:port`` of ``NAME://host:port``."""
    return listener.split("://", 1)[-1]


def check_same_broker(doc: dict, identity: BrokerIdentity, url: str, bootstrap: str) -> None:
    """Refuse a status document that is not the broker's at ``bootstrap``: its cluster id, node id
    and advertised endpoints must be the ones that broker gave (DescribeCluster)."""
    me = doc.get("broker")
    if not isinstance(me, dict) or "nodeId" not in me or "clusterId" not in me:
        raise CompactlogError(f"{url} does not say which broker it describes, so it cannot be checked to be "
                              f"{bootstrap}'s; give --metrics-url to read it anyway")
    listeners = me.get("advertisedListeners") or ([me["advertised"]] if me.get("advertised") else [])
    endpoints = {_endpoint(x) for x in listeners}
    if (me["clusterId"] == identity.cluster_id and me["nodeId"] == identity.node_id
            and identity.endpoint in endpoints):
        return
    theirs = f"cluster {me['clusterId']}, node {me['nodeId']}, {', '.join(listeners) or 'no listener'}"
    if me.get("dataDir"):
        theirs += f", data dir {me['dataDir']}"
    raise CompactlogError(f"{url} is another broker's status ({theirs}), not the one of {bootstrap} (cluster "
                          f"{identity.cluster_id}, node {identity.node_id}, {identity.endpoint}): the "
                          f"{LISTENER_SETTING} address {bootstrap} reports reaches another process; nothing "
                          f"printed. Give --metrics-url with the address of {bootstrap}'s own HTTP listener")


def fetch_status(url: str) -> dict:
    """The status document at ``url``; any failure is one CompactlogError line."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as e:
        raise CompactlogError(f"{url}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
        raise CompactlogError(f"{url}: cannot connect: {reason}") from None
    except (TimeoutError, OSError) as e:
        raise CompactlogError(f"{url}: {e.strerror or e}") from None
    try:
        doc = json.loads(body)
    except ValueError:
        raise CompactlogError(f"{url}: not a status document (the body is not JSON)") from None
    if not isinstance(doc, dict) or "cleaner" not in doc or "statuses" not in doc.get("cleaner", {}):
        raise CompactlogError(f"{url}: not a compactlog status document")
    return doc
