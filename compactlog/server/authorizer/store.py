"""Where a data dir keeps its ACLs: ``DIR/compactlog.acls.json``.

Kafka keeps each ACL as an ``AccessControlEntryRecord`` (an id and the seven fields) in its
metadata log; one node keeps the same records in one JSON file beside ``compactlog.topics.json``,
replaced whole on each change (temporary file, fsync, rename, fsync of the directory), so a crash
leaves the old set or the new one, never a mix. A file at the top of the data dir, not a
directory: Kafka's log loader refuses any directory that is not ``<topic>-<partition>``, so the
data dir stays one a Kafka broker, ``log-dirs``, ``dump-log`` and the Spark source read as before.

The broker loads the file before its listeners open and writes it while it holds the data-dir
lock; ``compactlog acls`` writes it offline under the same lock, and reads it without one.
"""

from __future__ import annotations

import json
import os

from ...errors import StorageError
from ...storage.fsutil import atomic_write, read_text
from .acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, new_acl_problem
from .standard import AclSet

ACLS_FILE = "compactlog.acls.json"
FORMAT_VERSION = 1


class AclStore:
    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, ACLS_FILE)

    def load(self) -> AclSet:
        """The stored ACLs (none when the file does not exist). A file that cannot be read whole
        is refused: dropping one entry silently could drop a DENY."""
        if not os.path.exists(self.path):
            return AclSet()
        try:
            doc = json.loads(read_text(self.path))
        except ValueError as e:
            raise StorageError(f"{self.path}: not an ACL file ({e})") from None
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or not isinstance(doc.get("acls"), list):
            raise StorageError(f"{self.path}: not an ACL file of version {FORMAT_VERSION}")
        acls = {}
        for n, item in enumerate(doc["acls"]):
            try:
                acl_id = str(item["id"])
                binding = _binding(item)
            except (KeyError, TypeError, ValueError) as e:
                raise StorageError(f"{self.path}: ACL #{n} is not valid ({type(e).__name__}: {e})") from None
            acls[acl_id] = binding
        return AclSet(acls)

    def save(self, acls: AclSet) -> None:
        items = [_record(i, b) for i, b in sorted(acls.by_id.items(), key=lambda kv: _sort_key(kv[1]))]
        text = json.dumps({"version": FORMAT_VERSION, "acls": items}, indent=1) + "\n"
        atomic_write(self.path, text.encode("utf-8"))


def _sort_key(b: AclBinding):
    return (b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.principal, b.entry.host,
            b.entry.operation, b.entry.permission_type)


def _record(acl_id: str, b: AclBinding) -> dict:
    """``AccessControlEntryRecord``'s fields, enum members by name (readable, and stable: the
    names are Kafka's)."""
    return {"id": acl_id, "resource_type": b.pattern.resource_type.name, "resource_name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name, "principal": b.entry.principal, "host": b.entry.host,
            "operation": b.entry.operation.name, "permission_type": b.entry.permission_type.name}


def _binding(item: dict) -> AclBinding:
    b = AclBinding.of(ResourceType[item["resource_type"]], str(item["resource_name"]),
                      PatternType[item["pattern_type"]], str(item["principal"]), str(item["host"]),
                      AclOperation[item["operation"]], AclPermissionType[item["permission_type"]])
    problem = new_acl_problem(b)
    if problem is not None:
        raise ValueError(problem)
    return b
