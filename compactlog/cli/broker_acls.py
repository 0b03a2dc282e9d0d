"""``acls --bootstrap-server``: kafka-acls.sh's AdminClient calls (createAcls, describeAcls,
deleteAcls) through confluent-kafka, with the client settings of ``--command-config``.

librdkafka drops DescribeAcls' top-level error code (``rd_kafka_DescribeAclsResponse_parse``
reads it and returns success with no ACLs), so a broker without an authorizer
(SECURITY_DISABLED) and a principal without Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED)
would both look like "no ACLs". Kafka's tool fails in both cases; so does this one: an empty
answer is checked with the authorized operations DescribeCluster reports (Describe on the cluster
or not) and the broker's ``authorizer.class.name`` (DescribeConfigs, which nothing refuses when
there is no authorizer).
"""

from __future__ import annotations

from ..server import AclBinding, AclBindingFilter
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
        self._checked = False

    def __enter__(self) -> "BrokerAcls":
        self.admin = admin_client(self.bootstrap, self.settings)
        return self

    def __exit__(self, *exc) -> None:
        self.admin = None

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        found = result(self.admin.describe_acls(_filter(acl_filter), request_timeout=TIMEOUT_S), "DescribeAcls")
        if not found and not self._checked:
            self._check_empty_answer()
        return [AclBinding.of(b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
                              b.operation.value, b.permission_type.value) for b in found]

    def create(self, bindings: list[AclBinding]) -> None:
        from confluent_kafka.admin import AclBinding as CkBinding
        ck = [CkBinding(*_fields(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.principal,
                                 b.entry.host, b.entry.operation, b.entry.permission_type)) for b in bindings]
        futures = self.admin.create_acls(ck, request_timeout=TIMEOUT_S)
        for b, f in zip(bindings, futures.values()):
            result(f, f"CreateAcls {b}")

    def delete(self, filters: list[AclBindingFilter]) -> None:
        futures = self.admin.delete_acls([_filter(f) for f in filters], request_timeout=TIMEOUT_S)
        for f in futures.values():
            result(f, "DeleteAcls")

    def _check_empty_answer(self) -> None:
        """Fail as Kafka's tool would when an empty DescribeAcls answer was a refusal."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AclOperation, ConfigResource
        cluster = result(self.admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S),
                         "DescribeCluster")
        if AclOperation.DESCRIBE not in (cluster.authorized_operations or ()):
            raise BrokerError("DescribeAcls: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed. (DescribeAcls "
                              "needs Describe on the cluster, CreateAcls and DeleteAcls Alter; a super user has both)")
        node = ConfigResource(ConfigResource.Type.BROKER, str(cluster.controller.id if cluster.controller else 0))
        future = list(self.admin.describe_configs([node], request_timeout=TIMEOUT_S).values())[0]
        try:
            configs = future.result(timeout=TIMEOUT_S)
        except KafkaException:
            self._checked = True        # refused: then an authorizer is on, and the answer was right
            return
        entry = configs.get("authorizer.class.name")
        if entry is None or not entry.value:
            raise BrokerError("DescribeAcls: SECURITY_DISABLED: No Authorizer is configured on the broker (set "
                              "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer)")
        self._checked = True


def _fields(resource_type, name, pattern_type, principal, host, operation, permission_type) -> tuple:
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    return (ResourceType(int(resource_type)), name, ResourcePatternType(int(pattern_type)), principal, host,
            AclOperation(int(operation)), AclPermissionType(int(permission_type)))


def _filter(f: AclBindingFilter):
    from confluent_kafka.admin import AclBindingFilter as CkFilter
    return CkFilter(*_fields(f.pattern.resource_type, f.pattern.name, f.pattern.pattern_type, f.entry.principal,
                             f.entry.host, f.entry.operation, f.entry.permission_type))


__all__ = ["BrokerAcls", "BrokerError"]
