"""Kafka's ``StandardAuthorizer`` (KRaft's, ``metadata/.../authorizer``) on one node.

``AclSet`` is ``StandardAuthorizerData``'s ACL cache: an immutable snapshot of every ACL by id,
indexed for the one question asked per request, "which ACLs apply to this resource name": a dict
of literal names per resource type, and one of prefixed names with the lengths they come in, so
that a lookup is one dict probe per distinct prefix length (Kafka walks a sorted set the same
way). Changes build a new snapshot (``with_created`` / ``with_deleted``: ``AclControlManager``'s
rules), which ``StandardAuthorizer`` persists and then swaps in, so a request in a worker thread
always reads one consistent set without a lock.

``StandardAuthorizer.authorize`` is ``StandardAuthorizerData.authorize`` and ``findResult``
(security.md §7.1-7.3): super users first; then a DENY that applies wins over any ALLOW; an ALLOW
applies to its operation, ALL, and for DESCRIBE also READ/WRITE/DELETE/ALTER, for DESCRIBE_CONFIGS
also ALTER_CONFIGS (a DENY only to its own operation or ALL); with no applicable ACL the answer is
DENIED when the resource has ACLs of anyone, else ``allow.everyone.if.no.acl.found``. Every decision
is logged on ``kafka.authorizer.logger`` as Kafka's audit log writes it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Iterable

from kio.schema.errors import ErrorCode

from ...errors import ConfigError
from .acl import (WILDCARD, WILDCARD_PRINCIPAL, AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                  PatternType, ResourceType, new_acl_problem, parse_principal)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_ACCEPTED_NAMES = (STANDARD_AUTHORIZER, "StandardAuthorizer")
MAX_RECORDS_PER_USER_OP = 10000         # QuorumController.MAX_RECORDS_PER_USER_OP

audit_log = logging.getLogger("kafka.authorizer.logger")

O = AclOperation
_IMPLIES_DESCRIBE = frozenset({O.DESCRIBE, O.READ, O.WRITE, O.DELETE, O.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS})
del O


def new_acl_id() -> str:
    """An id for a new ACL, written as Kafka writes a Uuid (URL-safe base64, no padding)."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def acl_text(b: AclBinding) -> str:
    """``StandardAcl.toString``, as the audit log names the rule."""
    return (f"StandardAcl(resourceType={b.pattern.resource_type.name}, resourceName={b.pattern.name}, "
            f"patternType={b.pattern.pattern_type.name}, principal={b.entry.principal}, host={b.entry.host}, "
            f"operation={b.entry.operation.name}, permissionType={b.entry.permission_type.name})")


def applies(b: AclBinding, principals: tuple[str, str], host: str, operation: AclOperation) -> bool | None:
    """``StandardAuthorizerData.findResult`` for an ACL whose pattern matches the resource: True
    (ALLOW applies), False (DENY applies) or None (it does not apply)."""
    e = b.entry
    if e.principal not in principals:
        return None
    if e.host != WILDCARD and e.host != host:
        return None
    if e.operation != AclOperation.ALL:
        if e.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if e.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if e.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != e.operation:
                return None
        elif operation != e.operation:
            return None
    return e.permission_type == AclPermissionType.ALLOW


class AclSet:
    """Every ACL of the node by id, indexed by resource; never changed once built."""

    def __init__(self, acls: dict[str, AclBinding] | None = None):
        self.by_id: dict[str, AclBinding] = dict(acls or {})
        literal: dict[ResourceType, dict[str, list]] = {}
        prefixed: dict[ResourceType, dict[str, list]] = {}
        for b in self.by_id.values():
            table = literal if b.pattern.pattern_type == PatternType.LITERAL else prefixed
            table.setdefault(b.pattern.resource_type, {}).setdefault(b.pattern.name, []).append(b)
        self._literal = {t: {n: tuple(v) for n, v in names.items()} for t, names in literal.items()}
        self._prefixed = {t: {n: tuple(v) for n, v in names.items()} for t, names in prefixed.items()}
        self._prefix_lengths = {t: tuple(sorted({len(n) for n in names})) for t, names in prefixed.items()}
        self._bindings = frozenset(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, binding: AclBinding) -> bool:
        return binding in self._bindings

    def applicable(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs whose pattern matches the literal resource ``name``: LITERAL with that name or
        ``*``, PREFIXED with a prefix of it (case-sensitive)."""
        out: list[AclBinding] = []
        literal = self._literal.get(resource_type)
        if literal:
            out.extend(literal.get(name, ()))
            if name != WILDCARD:
                out.extend(literal.get(WILDCARD, ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for n in self._prefix_lengths[resource_type]:
                if n > len(name):
                    break
                out.extend(prefixed.get(name[:n], ()))
        return out

    def of_type(self, resource_type: ResourceType) -> Iterable[AclBinding]:
        for table in (self._literal, self._prefixed):
            for acls in table.get(resource_type, {}).values():
                yield from acls

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """``AclCache.acls(filter)``: every ACL the filter matches."""
        return [b for b in self.by_id.values() if acl_filter.matches(b)]

    # -- changes (AclControlManager.createAcls / deleteAcls) -------------------------------------------
    def with_created(self, bindings: Iterable[AclBinding]) -> tuple["AclSet", list[tuple[ErrorCode, str | None]]]:
        """The set with ``bindings`` added, and one (error, message) per binding in order: each is
        checked alone; one that exists already succeeds without a second copy."""
        acls = dict(self.by_id)
        present = set(self._bindings)
        results = []
        for b in bindings:
            problem = new_acl_problem(b)
            if problem is not None:
                results.append((ErrorCode.invalid_request, problem))
                continue
            if b not in present:
                present.add(b)
                acls[new_acl_id()] = b
            results.append((ErrorCode.none, None))
        if len(acls) - len(self.by_id) > MAX_RECORDS_PER_USER_OP:
            message = f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single operation."
            return self, [(ErrorCode.invalid_request, message)] * len(results)
        return (self if len(acls) == len(self.by_id) else AclSet(acls)), results

    def with_deleted(self, filters: Iterable[AclBindingFilter]
                     ) -> tuple["AclSet", list[tuple[ErrorCode, str | None, list[AclBinding]]]]:
        """The set without what ``filters`` match, and per filter (error, message, removed ACLs).
        All removals of one call go together (``ControllerResult.atomicOf``)."""
        removed: set[str] = set()
        results = []
        for f in filters:
            problem = f.problem()
            if problem is not None:
                results.append((ErrorCode.invalid_request, problem, []))
                continue
            hits = [(i, b) for i, b in self.by_id.items() if f.matches(b)]
            if len(removed | {i for i, _ in hits}) > MAX_RECORDS_PER_USER_OP:
                results.append((ErrorCode.invalid_request, f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} "
                                                           f"acls in a single delete operation.", []))
                continue
            removed.update(i for i, _ in hits)
            results.append((ErrorCode.none, None, [b for _, b in hits]))
        if not removed:
            return self, results
        return AclSet({i: b for i, b in self.by_id.items() if i not in removed}), results


@dataclass(frozen=True)
class Decision:
    """An answer and the rule that gave it (``MatchingRule``), for the audit log."""
    allowed: bool
    rule: str


class StandardAuthorizer:
    """The broker's authorizer: settings, the current ``AclSet`` and where it is kept.

    ``store`` has ``save(acls: AclSet)``; a change is answered only once it is durable there, and
    only then do requests see it.
    """

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 acls: AclSet | None = None, store=None, node_id: int = 0):
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.store = store
        self.node_id = node_id
        self._acls = acls or AclSet()
        self._change_lock = threading.Lock()
        self._default = Decision(allow_if_no_acl, "DefaultAllow" if allow_if_no_acl else "DefaultDeny")

    @property
    def acl_set(self) -> AclSet:
        return self._acls

    # -- deciding ------------------------------------------------------------------------------------
    def decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
               name: str) -> Decision:
        """``StandardAuthorizerData.authorize`` for one action on the literal resource ``name``."""
        if principal in self.super_users:
            return Decision(True, "SuperUser")
        principals = (principal, WILDCARD_PRINCIPAL)
        allow = None
        found = False
        for b in self._acls.applicable(resource_type, name):
            found = True
            result = applies(b, principals, host, operation)
            if result is False:
                return Decision(False, f"MatchingAcl(acl={acl_text(b)})")
            if result and allow is None:
                allow = b
        if allow is not None:
            return Decision(True, f"MatchingAcl(acl={acl_text(allow)})")
        if found:
            return Decision(False, "DefaultDeny")
        return self._default

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, *, request_name: str = "", log_if_allowed: bool = True, log_if_denied: bool = True,
                  ref_count: int = 1) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource; logged as
        Kafka's audit log: a denial of a requested resource at INFO, an allow at DEBUG, probes
        (bitfields, filtering) at TRACE, which here is DEBUG-5."""
        d = self.decide(principal, host, operation, resource_type, name)
        if d.allowed:
            level = logging.DEBUG if log_if_allowed else TRACE
        else:
            level = logging.INFO if log_if_denied else TRACE
        if audit_log.isEnabledFor(level):
            audit_log.log(level, _audit_message(principal, d, operation, host, resource_type, name, request_name,
                                                ref_count))
        return d.allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType, *, request_name: str = "") -> bool:
        """``Authorizer.authorizeByResourceType``: may the principal do ``operation`` on some
        resource of the type? (InitProducerId without a transactional id, for WRITE on TOPIC.)"""
        if self.authorize(principal, host, operation, resource_type, "hardcode", request_name=request_name,
                          log_if_allowed=True, log_if_denied=False, ref_count=0):
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for b in self._acls.of_type(resource_type):
            e = b.entry
            if e.host != host and e.host != WILDCARD:
                continue
            if e.principal not in principals:
                continue
            if e.operation != operation and e.operation != AclOperation.ALL:
                continue
            literal = b.pattern.pattern_type == PatternType.LITERAL
            if e.permission_type == AclPermissionType.DENY:
                if literal and b.pattern.name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(b.pattern.name)
            elif e.permission_type == AclPermissionType.ALLOW:
                if literal and b.pattern.name == WILDCARD:
                    wildcard_allow = True
                else:
                    (allow_literal if literal else allow_prefixed).add(b.pattern.name)
        if wildcard_allow:
            return True
        for literal, names in ((True, allow_literal), (False, allow_prefixed)):
            for name in names:
                if literal and name in deny_literal:
                    continue
                if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                    return True
        return False

    # -- the ACLs ------------------------------------------------------------------------------------
    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self._acls.matching(acl_filter)

    def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        with self._change_lock:
            new, results = self._acls.with_created(bindings)
            self._install(new)
        return results

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        with self._change_lock:
            new, results = self._acls.with_deleted(filters)
            self._install(new)
        return results

    def _install(self, new: AclSet) -> None:
        if new is self._acls:
            return
        if self.store is not None:
            self.store.save(new)            # durable first: an OSError leaves the old set in force
        self._acls = new


TRACE = 5          # log4j's TRACE, below DEBUG


def _audit_message(principal, d: Decision, operation, host, resource_type, name, request_name, ref_count) -> str:
    """``StandardAuthorizerData.buildAuditMessage``."""
    return (f"Principal = {principal} is {'Allowed' if d.allowed else 'Denied'} operation = {operation.name} "
            f"from host = {host} on resource = {_resource_type_name(resource_type)}:LITERAL:{name} for request = "
            f"{request_name} with resourceRefCount = {ref_count} based on rule {d.rule}")


def _resource_type_name(resource_type: ResourceType) -> str:
    """``SecurityUtils.resourceTypeName``: Topic, Group, Cluster, TransactionalId ..."""
    return "".join(part.capitalize() for part in resource_type.name.split("_"))


# -- configuration -----------------------------------------------------------------------------------

def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (DNs hold commas), each ``Type:name``."""
    out = set()
    for item in (value or "").split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            kind, _ = parse_principal(item)
        except ValueError:
            kind = ""
        if not kind:
            raise ConfigError(f"invalid value {value!r} for configuration super.users: {item!r} is not a principal "
                              f"of the form Type:name (User:admin); entries are separated by ';'")
        out.add(item)
    return frozenset(out)


def authorizer_enabled(broker) -> bool:
    """``authorizer.class.name`` names Kafka's StandardAuthorizer (empty: no authorizer, as Kafka);
    any other class is refused, since no Java class can run here."""
    name = (broker.get("authorizer.class.name") or "").strip()
    if not name:
        return False
    if name in _ACCEPTED_NAMES:
        return True
    hint = ""
    if name.endswith("AclAuthorizer"):
        hint = ("; kafka.security.authorizer.AclAuthorizer (ZooKeeper) left Kafka in 4.0, and "
                "StandardAuthorizer applies the same ACLs")
    raise ConfigError(f"invalid value {name!r} for configuration authorizer.class.name: compactlog offers "
                      f"{STANDARD_AUTHORIZER} only{hint}")


def authorizer_for(broker, store, node_id: int = 0) -> StandardAuthorizer | None:
    """The broker's authorizer from its settings, with the ACLs ``store`` holds; None when
    ``authorizer.class.name`` is empty. Settings are checked even then, so a typo in
    ``super.users`` is not found only on the day the authorizer is turned on."""
    super_users = parse_super_users(broker.get("super.users"))
    allow = broker.get("allow.everyone.if.no.acl.found")
    if not authorizer_enabled(broker):
        return None
    return StandardAuthorizer(super_users, allow, store.load(), store, node_id)
