"""``meta.properties``: a data dir's cluster and node identity in KRaft's format (Kafka's
``MetaProperties``: ``cluster.id``, ``node.id``, ``version``; ZooKeeper-era dirs say ``broker.id``).
Read here by every floor (the broker's start, the offline cleaner's remote tier, the CLI's node
id); written only by the broker's first start (``server.state.load_identity``)."""

from __future__ import annotations

import os

from ..errors import StorageError
from .fsutil import read_text

META_PROPERTIES = "meta.properties"


def read(data_dir: str) -> dict[str, str]:
    """The file's keys and values ({} when there is none); a line that is not ``key=value`` (nor
    a comment) is a StorageError naming the file and line."""
    path = os.path.join(data_dir, META_PROPERTIES)
    if not os.path.exists(path):
        return {}
    props: dict[str, str] = {}
    for n, line in enumerate(read_text(path).splitlines(), start=1):
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        key, sep, value = s.partition("=")
        if not sep:
            raise StorageError(f"{path}: line {n}: expected key=value, found {line!r}")
        props[key.strip()] = value.strip()
    return props


def stored_node_id(data_dir: str, props: dict[str, str]) -> int | None:
    """The node id the file records (``node.id``, else a ZooKeeper-era ``broker.id``), None
    without one; a value that is not a number is a StorageError."""
    stored = props.get("node.id", props.get("broker.id"))
    if stored is None:
        return None
    try:
        return int(stored)
    except ValueError:
        raise StorageError(f"{os.path.join(data_dir, META_PROPERTIES)}: node.id {stored!r} is not a number") from None
