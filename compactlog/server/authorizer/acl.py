"""ACLs as Kafka models them, with the codes they have on the wire (security.md §7.2).

Kafka's ``ResourceType``, ``AclOperation``, ``PatternType`` and ``AclPermissionType`` enums, the
``ResourcePattern`` / ``AccessControlEntry`` / ``AclBinding`` triple, and the filters the ACL admin
APIs and ``kafka-acls.sh`` use (``ResourcePatternFilter``, ``AccessControlEntryFilter``,
``AclBindingFilter``). Also ``AclEntry.supportedOperations`` (the authorized-operations bitfields),
``SecurityUtils``'s names (``Read``, ``IdempotentWrite``, parsed in any case) and principal syntax,
and ``AclControlManager.validateNewAcl`` / ``validateFilter``: what a new ACL or a filter must be.

Pure data: no I/O, nothing of the broker.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

CLUSTER_NAME = "kafka-cluster"          # the one name of the CLUSTER resource
WILDCARD = "*"                          # a resource name or host matching any
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _coerce(enum_cls, code: int):
    """A wire code as the enum member; a code Kafka does not know is UNKNOWN (``fromCode``)."""
    try:
        return enum_cls(code)
    except ValueError:
        return enum_cls.UNKNOWN


R, O = ResourceType, AclOperation
_SUPPORTED = {
    R.TOPIC: frozenset({O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS,
                        O.ALTER_CONFIGS}),
    R.GROUP: frozenset({O.READ, O.DESCRIBE, O.DELETE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}),
    R.CLUSTER: frozenset({O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE,
                          O.ALTER, O.DESCRIBE}),
    R.TRANSACTIONAL_ID: frozenset({O.DESCRIBE, O.WRITE}),
    R.DELEGATION_TOKEN: frozenset({O.DESCRIBE}),
    R.USER: frozenset({O.CREATE_TOKENS, O.DESCRIBE_TOKENS}),
}
del R, O


def supported_operations(resource_type: ResourceType) -> frozenset:
    """``AclEntry.supportedOperations``: the operations a resource of this type has."""
    return _SUPPORTED[resource_type]


def operations_bitfield(operations) -> int:
    """``Utils.to32BitField``: bit ``1 << code`` for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


# -- names as Kafka's tools print and read them (SecurityUtils) --------------------------------------

def pascal_name(member: enum.Enum) -> str:
    """``SecurityUtils.operationName``: IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def parse_name(enum_cls, text: str):
    """``SecurityUtils.operation`` / ``resourceType`` / ``permissionType``: ``Read``, ``READ``,
    ``read`` and ``IdempotentWrite`` / ``IDEMPOTENT_WRITE`` / ``idempotent_write`` all name a
    member; anything else is UNKNOWN."""
    key = text.strip().replace("_", "").upper()
    for member in enum_cls:
        if member.name.replace("_", "") == key:
            return member
    return enum_cls.UNKNOWN


def parse_principal(text: str) -> tuple[str, str]:
    """``SecurityUtils.parseKafkaPrincipal``: (type, name) of ``Type:name``; ValueError otherwise."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    kind, _, name = text.partition(":")
    return kind, name


# -- ACLs and filters ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (Kafka's ``AclBinding``; ``StandardAcl`` holds the same seven fields)."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(cls, resource_type, name: str, pattern_type, principal: str, host: str, operation,
           permission_type) -> "AclBinding":
        """From wire codes or members; a code Kafka does not know becomes UNKNOWN."""
        return cls(ResourcePattern(_coerce(ResourceType, resource_type), name, _coerce(PatternType, pattern_type)),
                   AccessControlEntry(principal, host, _coerce(AclOperation, operation),
                                      _coerce(AclPermissionType, permission_type)))

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """``ResourcePatternFilter``: type ANY matches every type; name None any name; pattern type
    ANY any pattern type with exactly that name; MATCH the patterns that apply to that name."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:       # MATCH
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """``AccessControlEntryFilter``: None principal or host match any; operation and permission
    type ANY match any."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type


ANY_ENTRY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    @classmethod
    def of(cls, resource_type, name: str | None, pattern_type, principal: str | None, host: str | None,
           operation, permission_type) -> "AclBindingFilter":
        """From the wire fields of DescribeAcls / DeleteAcls."""
        return cls(ResourcePatternFilter(_coerce(ResourceType, resource_type), name, _coerce(PatternType, pattern_type)),
                   AccessControlEntryFilter(principal, host, _coerce(AclOperation, operation),
                                            _coerce(AclPermissionType, permission_type)))

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def problem(self) -> str | None:
        """``AclControlManager.validateFilter``: why the filter cannot be used, or None."""
        if self.pattern.is_unknown():
            return "Unknown patternFilter."
        if self.entry.is_unknown():
            return "Unknown entryFilter."
        return None


ANY_ACL = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), ANY_ENTRY)


def new_acl_problem(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be created, or None (``AclControlManager.validateNewAcl`` and the
    checks of ``AclApis.handleCreateAcls``), in Kafka's words."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {p.resource_type.name}"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {p.pattern_type.name}"
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {e.operation.name}"
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {e.permission_type.name}"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return "Invalid empty resource name"
    try:
        kind, _ = parse_principal(e.principal)
    except ValueError as err:
        return str(err)
    if not kind:
        return f"expected a string in format principalType:principalName but got {e.principal}"
    if not e.host:
        return "Invalid empty host"
    return None
