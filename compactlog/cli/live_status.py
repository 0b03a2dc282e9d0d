"""``cleaner status --metrics-url URL`` / ``--bootstrap-server HOST:PORT``: a live broker's cleaner
state, read from the status document its HTTP listener serves (``/v1/status.json``, computed by
``server.status.data.status_data``) instead of from a data dir.

With ``--bootstrap-server`` the listener's address is asked of the broker itself: its
``metrics.listener`` setting, through DescribeConfigs (as ``kafka-configs.sh --describe`` reads a
broker's settings); a wildcard host means the bootstrap server's host.
"""

from __future__ import annotations

import json
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


def metrics_url_of(bootstrap: str) -> str:
    """The HTTP listener's base URL, from the broker's ``metrics.listener`` (DescribeConfigs)."""
    admin = admin_client(bootstrap)      # referenced until its futures resolve (librdkafka)
    nodes = result(admin.describe_cluster(), "DescribeCluster").nodes
    if not nodes:
        raise BrokerError(f"{bootstrap}: DescribeCluster named no broker")
    entries = {e.name: e.value for e in config_entries(admin, "broker", str(nodes[0].id))}
    value = entries.get(LISTENER_SETTING)
    if value is None:
        raise BrokerError(f"{bootstrap}: the broker reports no {LISTENER_SETTING} setting (it serves no HTTP "
                          f"listener); give --metrics-url")
    if not value.strip():
        raise BrokerError(f"{bootstrap}: the broker's HTTP listener is off ({LISTENER_SETTING} is empty); "
                          f"start it with --override {LISTENER_SETTING}=127.0.0.1:9644")
    return listener_url(value, bootstrap)


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
