"""DescribeCluster through its handler (``apis/cluster.py``), sans IO: the one node, the cluster's
authorized operations, Kafka's answers for endpoint types."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.server.apis.conftest import NODE, call
from compactlog.server.apis.cluster import CLUSTER_AUTHORIZED_OPERATIONS, handle_describe_cluster
from compactlog.server.versions import request_schema


@pytest.fixture
def state(make_state):
    return make_state()


# -- DescribeCluster ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("include, operations", [(True, CLUSTER_AUTHORIZED_OPERATIONS),
                                                 (False, -2147483648)])
def test_describe_cluster(state, version, include, operations):
    body = request_schema(60, version)(include_cluster_authorized_operations=include)
    r = call(handle_describe_cluster, state, body)
    assert (r.error_code, r.error_message, r.cluster_id, r.controller_id) == \
        (E.none, None, "compactlog-test-cluster", NODE)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [(NODE, "127.0.0.1", 19092, None)]
    assert r.cluster_authorized_operations == operations
    if version >= 1:
        assert r.endpoint_type == 1


def test_cluster_operations_are_kafkas_cluster_acls():
    # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
    assert CLUSTER_AUTHORIZED_OPERATIONS == 0b1111110100000


@pytest.mark.parametrize("endpoint, code, message", [
    (2, E.mismatched_endpoint_type,
     "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"),
    (0, E.unsupported_endpoint_type, "Unsupported endpoint type 0"),
    (7, E.unsupported_endpoint_type, "Unsupported endpoint type 7"),
])
def test_describe_cluster_endpoint_types(state, endpoint, code, message):
    body = request_schema(60, 1)(include_cluster_authorized_operations=False, endpoint_type=endpoint)
    r = call(handle_describe_cluster, state, body)
    assert (r.error_code, r.error_message, r.brokers, r.controller_id) == (code, message, (), -1)
