"""``acls --bootstrap-server``: kafka-acls.sh's AdminClient calls (createAcls, describeAcls,
deleteAcls) through confluent-kafka, with the client settings of ``--command-config``."""

from __future__ import annotations

from ..server.authorizer.acl import AclBinding, AclBindingFilter
from .remote import TIMEOUT_S, BrokerError, ClientLog, result


def admin_client(bootstrap: str, security: dict[str, str]):
    """``remote.admin_client`` with the client's security settings (``client_config``)."""
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": TIMEOUT_S * 1000,
                        "allow.auto.create.topics": False, **security, **ClientLog().config()})


class BrokerAcls:
    def __init__(self, bootstrap: str, settings: dict[str, str]):
        self.bootstrap = bootstrap
        self.settings = settings
        self.admin = None

    def __enter__(self) -> "BrokerAcls":
        self.admin = admin_client(self.bootstrap, self.settings)
        return self

    def __exit__(self, *exc) -> None:
        self.admin = None

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        found = result(self.admin.describe_acls(_filter(acl_filter), request_timeout=TIMEOUT_S), "DescribeAcls")
        return [AclBinding.of(b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
                              b.operation.value, b.permission_type.value) for b in found]

    def create(self, bindings: list[AclBinding]) -> None:
        from confluent_kafka.admin import AclBinding as CkBinding
        ck = [CkBinding(*_fields(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.principal,
                                 b.entry.host, b.entry.operation, b.entry.permission_type)) for b in bindings]
        futures = self.admin.create_acls(ck, request_timeout=TIMEOUT_S)
        for b, f in zip(ck, futures.values()):
            result(f, f"CreateAcls {b}")

    def delete(self, filters: list[AclBindingFilter]) -> None:
        futures = self.admin.delete_acls([_filter(f) for f in filters], request_timeout=TIMEOUT_S)
        for f in futures.values():
            result(f, "DeleteAcls")


def _fields(resource_type, name, pattern_type, principal, host, operation, permission_type) -> tuple:
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    return (ResourceType(int(resource_type)), name, ResourcePatternType(int(pattern_type)), principal, host,
            AclOperation(int(operation)), AclPermissionType(int(permission_type)))


def _filter(f: AclBindingFilter):
    from confluent_kafka.admin import AclBindingFilter as CkFilter
    return CkFilter(*_fields(f.pattern.resource_type, f.pattern.name, f.pattern.pattern_type, f.entry.principal,
                             f.entry.host, f.entry.operation, f.entry.permission_type))


__all__ = ["BrokerAcls", "BrokerError"]
