"""What ``compactlog acls`` does (the command and its options are declared in ``acls.py``):
Kafka's ``AclCommand`` checks of the options, the ACLs they stand for, the three actions and their
output, on a data dir (``DataDirAcls``) or through a broker (``broker_acls.BrokerAcls``)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import typer

from ..errors import ConfigError
from ..server import (ANY_ENTRY, CLUSTER_NAME, WILDCARD, AccessControlEntry, AccessControlEntryFilter, AclBinding,
                      AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
                      ResourcePatternFilter, ResourceType, parse_name, parse_principal, pascal_name,
                      supported_operations)
from .common import fail

_PATTERN_TYPES = ("literal", "prefixed", "any", "match")


@dataclass
class Plan:
    """What one command line asks for: resource filter -> the ACL entries given for it."""
    action: str
    pattern_type: PatternType
    resources: dict          # ResourcePatternFilter -> list[AccessControlEntry]


def run(c, *, add, remove, list_, topic, group, transactional_id, cluster, pattern_type, allow_principal,
        deny_principal, allow_host, deny_host, operation, principal, producer, consumer, idempotent, force,
        bootstrap_server, command_config) -> None:
    actions = [name for name, on in (("add", add), ("remove", remove), ("list", list_)) if on]
    if len(actions) != 1:
        fail("Command must include exactly one action: --list, --add, --remove.", 2)
    action = actions[0]
    if command_config and not bootstrap_server:
        fail("--command-config goes with --bootstrap-server", 2)
    if action == "list" and (producer or consumer or allow_host or allow_principal or deny_host or deny_principal):
        fail("Option --list does not go with --producer, --consumer, --allow-host, --allow-principal, "
             "--deny-host or --deny-principal", 2)
    if (producer or consumer) and (operation or deny_principal or deny_host):
        fail("Options --producer and --consumer do not go with --operation, --deny-principal or --deny-host", 2)
    if principal and action != "list":
        fail("The --principal option is only available if --list is set", 2)
    if producer and not topic:
        fail("With --producer you must specify a --topic", 2)
    if idempotent and not producer:
        fail("The --idempotent option is only available if --producer is set", 2)
    if consumer and (not topic or not group or (not producer and (cluster or transactional_id))):
        fail("With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
             "option should be specified.", 2)
    if pattern_type.lower() not in _PATTERN_TYPES:
        fail(f"Unknown resource-pattern-type: {pattern_type} (literal, prefixed, any, match)", 2)
    ptype = parse_name(PatternType, pattern_type)
    if action == "add" and ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        fail(f"A '--resource-pattern-type' value of '{ptype.name}' is not valid when adding acls.", 2)

    if cluster and ptype == PatternType.PREFIXED:
        fail("--cluster is the one resource named kafka-cluster: it takes no --resource-pattern-type prefixed", 2)
    filters = _resource_filters(ptype, topic, group, transactional_id, cluster or idempotent)
    if not filters and action != "list":
        fail("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
             "--transactional-id <id>", 2)
    allowed = _principals(allow_principal)
    denied = _principals(deny_principal)
    allow_hosts = _hosts(allow_host, allowed)
    deny_hosts = _hosts(deny_host, denied)

    def entries(ops) -> list[AccessControlEntry]:
        out = [AccessControlEntry(p, h, op, AclPermissionType.ALLOW) for p in allowed for op in ops for h in allow_hosts]
        out += [AccessControlEntry(p, h, op, AclPermissionType.DENY) for p in denied for op in ops for h in deny_hosts]
        return out

    resources: dict = {}
    if not producer and not consumer:
        ops = [_operation(o) for o in operation or ["All"]]
        for f in filters:
            resources[f] = entries(ops)
    if producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                resources[f] = entries([AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                resources[f] = entries([AclOperation.WRITE, AclOperation.DESCRIBE])
            elif f.resource_type == ResourceType.CLUSTER and idempotent:
                resources[f] = entries([AclOperation.IDEMPOTENT_WRITE])
    if consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                resources[f] = _merge(resources.get(f, []), entries([AclOperation.READ, AclOperation.DESCRIBE]))
            elif f.resource_type == ResourceType.GROUP:
                resources[f] = _merge(resources.get(f, []), entries([AclOperation.READ]))
    for f, es in resources.items():
        valid = supported_operations(f.resource_type) | {AclOperation.ALL}
        if any(e.operation not in valid for e in es):
            names = ", ".join(o.name for o in sorted(valid))
            fail(f"ResourceType {f.resource_type.name} only supports operations [{names}]", 2)
    if action == "add" and any(not es for es in resources.values()):
        fail("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.", 2)

    plan = Plan(action, ptype, resources)
    if bootstrap_server:
        from .broker_acls import BrokerAcls
        from .client_config import read_command_config
        target = BrokerAcls(bootstrap_server, read_command_config(command_config))
    else:
        target = DataDirAcls(c, write=action != "list")
    with target:
        if action == "add":
            _add(target, plan)
        elif action == "remove":
            _remove(target, plan, force)
        else:
            _list(target, plan, _principals(principal))


# -- the three actions (AclCommand.addAcls / removeAcls / listAcls) -----------------------------------

def _add(target, plan: Plan) -> None:
    for f, es in plan.resources.items():
        pattern = ResourcePattern(f.resource_type, f.name, f.pattern_type)
        existing = set(target.describe(AclBindingFilter(f, ANY_ENTRY)))
        new = []
        for e in _sorted(es):
            binding = AclBinding(pattern, e)
            if binding in existing:
                typer.echo(f"Acl {binding} already exists.")
            else:
                new.append(binding)
        if new:
            typer.echo(f"Adding ACLs for resource `{pattern}`: \n {_lines(b.entry for b in new)}\n")
            target.create(new)


def _remove(target, plan: Plan, force: bool) -> None:
    for f, es in plan.resources.items():
        if not es:
            if _confirm(force, f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"):
                target.delete([AclBindingFilter(f, ANY_ENTRY)])
        elif _confirm(force, f"Are you sure you want to remove ACLs: \n {_lines(es)}\n from resource filter "
                             f"`{f}`? (y/n)"):
            target.delete([AclBindingFilter(f, AccessControlEntryFilter(e.principal, e.host, e.operation,
                                                                          e.permission_type)) for e in _sorted(es)])


def _list(target, plan: Plan, principals: list[str]) -> None:
    filters = list(plan.resources) or [ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)]
    found: dict = {}
    for f in filters:
        for b in target.describe(AclBindingFilter(f, ANY_ENTRY)):
            found.setdefault(b.pattern, set()).add(b.entry)
    if not principals:
        _print_resources(found)
        return
    for p in principals:
        typer.echo(f"ACLs for principal `{p}`")
        _print_resources({r: {e for e in es if e.principal == p} for r, es in found.items()})


def _print_resources(found: dict) -> None:
    for pattern in sorted(found, key=lambda r: (r.resource_type, r.name, r.pattern_type)):
        if found[pattern]:
            typer.echo(f"Current ACLs for resource `{pattern}`:\n{_lines(found[pattern])}\n")


# -- helpers ------------------------------------------------------------------------------------------

def _resource_filters(ptype, topics, groups, transactional_ids, cluster: bool) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter: one filter per resource, in Kafka's order (the cluster only
    with literal patterns)."""
    out = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), ptype) for t in topics or ()]
    if cluster and ptype == PatternType.LITERAL:
        out.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    out += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), ptype) for g in groups or ()]
    out += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, i, ptype) for i in transactional_ids or ()]
    return list(dict.fromkeys(out))


def _principals(values) -> list[str]:
    out = []
    for v in values or ():
        v = v.strip()
        try:
            kind, _ = parse_principal(v)
        except ValueError as e:
            fail(str(e), 2)
        if not kind:
            fail(f"expected a string in format principalType:principalName but got {v}", 2)
        out.append(v)
    return list(dict.fromkeys(out))


def _hosts(values, principals) -> list[str]:
    if values:
        return list(dict.fromkeys(v.strip() for v in values))
    return [WILDCARD] if principals else []


def _operation(text: str) -> AclOperation:
    op = parse_name(AclOperation, text)
    if op in (AclOperation.UNKNOWN, AclOperation.ANY):
        valid = ", ".join(pascal_name(o) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY))
        fail(f"Invalid operation {text!r}; valid operation names are: {valid}", 2)
    return op


def _merge(a: list, b: list) -> list:
    return list(dict.fromkeys(a + b))


def _sorted(entries) -> list[AccessControlEntry]:
    return sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))


def _lines(entries) -> str:
    return "\n".join(f"\t{e}" for e in _sorted(entries))


def _confirm(force: bool, question: str) -> bool:
    if force:
        return True
    typer.echo(question)
    try:
        answer = input()
    except EOFError:
        answer = ""
    return answer.strip().lower() == "y"


# -- on a data dir ------------------------------------------------------------------------------------

class DataDirAcls:
    """The data dir's ACL file: read as it is (``--list``), or changed under the data-dir lock,
    with the rules the broker's CreateAcls and DeleteAcls apply (``AclSet``)."""

    def __init__(self, c, *, write: bool):
        self.c = c
        self.write = write
        self.dd = None
        self.changed = False

    def __enter__(self) -> "DataDirAcls":
        from ..server import AclStore
        path = self.c.require_data_dir()
        if self.write:
            self.dd = self.c.open(write=True, create=True)      # the lock: no broker or other writer there
        elif not os.path.isdir(path):
            raise ConfigError(f"{path}: data directory does not exist")
        self.store = AclStore(path)
        self.acls = self.store.load()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self.dd is None:
            return
        self.dd.close()
        from ..server import authorizer_enabled
        try:
            enabled = authorizer_enabled(self.dd.broker)
        except ConfigError:
            enabled = True          # a class name serve refuses: serve says so when it starts
        if exc_type is None and self.changed and not enabled:
            typer.echo(f"note: {self.store.path} updated; the broker applies ACLs only with authorizer.class.name="
                       f"org.apache.kafka.metadata.authorizer.StandardAuthorizer (server.properties)", err=True)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.acls.matching(acl_filter)

    def create(self, bindings: list[AclBinding]) -> None:
        new, results = self.acls.with_created(bindings)
        problems = [f"{b}: {m}" for b, (code, m) in zip(bindings, results) if code]
        if problems:
            raise ConfigError("; ".join(problems))
        self._save(new)

    def delete(self, filters: list[AclBindingFilter]) -> None:
        new, results = self.acls.with_deleted(filters)
        problems = [m for code, m, _ in results if code]
        if problems:
            raise ConfigError("; ".join(problems))
        self._save(new)

    def _save(self, new) -> None:
        if new is self.acls:
            return
        self.store.save(new)
        self.acls = new
        self.changed = True
