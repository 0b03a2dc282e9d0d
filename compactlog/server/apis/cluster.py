"""The cluster APIs: DescribeCluster (60), Kafka's ``KafkaApis.handleDescribeCluster`` and
``AuthHelper.computeDescribeClusterResponse`` (the authorized operations on the cluster: 0 without
DESCRIBE on it, every one without an authorizer), and DescribeLogDirs (35),
``ReplicaManager.describeLogDirs`` for the broker's one log dir (DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED and no results)."""

from __future__ import annotations

import os

from kio.schema.errors import ErrorCode

from ..authorizer import auth_helper
from ..messages import CLUSTER_OPERATIONS, NO_THROTTLE, OPERATIONS_NOT_REQUESTED, build, response_types
from ..state import BrokerState
from .handler import THREAD, ApiHandler

CLUSTER_AUTHORIZED_OPERATIONS = CLUSTER_OPERATIONS
ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2


def handle_describe_cluster(state: BrokerState, request):
    """DescribeCluster (60): KafkaApis.handleDescribeCluster, AuthHelper.computeDescribeClusterResponse.
    The node is the only broker and, as KRaft brokers answer, the controller id."""
    body = request.body
    cls, module = response_types(request)
    version = request.response_version
    endpoint = getattr(body, "endpoint_type", ENDPOINT_BROKER)

    def failed(code_v0, code, message):
        return build(cls, throttle_time=NO_THROTTLE, error_code=code_v0 if version == 0 else code,
                     error_message=message, endpoint_type=ENDPOINT_BROKER, cluster_id="", controller_id=-1,
                     brokers=(), cluster_authorized_operations=OPERATIONS_NOT_REQUESTED)
    if endpoint not in (ENDPOINT_BROKER, ENDPOINT_CONTROLLER):
        return failed(ErrorCode.invalid_request, ErrorCode.unsupported_endpoint_type,
                      f"Unsupported endpoint type {endpoint}")
    if endpoint != ENDPOINT_BROKER:
        return failed(ErrorCode.invalid_request, ErrorCode.mismatched_endpoint_type,
                      "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                      "of type CONTROLLER")
    me = state.advertised_for(request)
    broker = build(module.DescribeClusterBroker, broker_id=state.node_id, host=me.host,
                   port=me.port, rack=None, is_fenced=False)
    operations = (CLUSTER_AUTHORIZED_OPERATIONS if body.include_cluster_authorized_operations
                  else OPERATIONS_NOT_REQUESTED)
    if operations != OPERATIONS_NOT_REQUESTED:      # asked for: what the principal may do (0 without DESCRIBE)
        operations = auth_helper.cluster_operations(state, request)
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 endpoint_type=ENDPOINT_BROKER, cluster_id=state.cluster_id, controller_id=state.node_id,
                 brokers=(broker,), cluster_authorized_operations=operations)


def handle_describe_log_dirs(state: BrokerState, request):
    """DescribeLogDirs (35): ReplicaManager.describeLogDirs for the broker's one log dir: every
    partition asked for (all when ``topics`` is null) with its size; offset lag 0 (no future
    replica); total and usable bytes of the file system (v4)."""
    body = request.body
    cls, module = response_types(request)
    if not auth_helper.authorize_cluster(state, request, auth_helper.DESCRIBE):
        return describe_log_dirs_error(body, cls, ErrorCode.cluster_authorization_failed, None)
    dd = state.datadir
    if body.topics is None:
        wanted = {t: None for t in dd.topics()}
    else:
        wanted = {t.topic: set(t.partitions) for t in body.topics}
    topics = []
    for name, parts in wanted.items():
        if not dd.has_topic(name):
            continue
        rows = []
        for p in dd.partitions(name):
            if parts is not None and p not in parts:
                continue
            log = state.log(name, p)
            if log is None:
                continue
            rows.append(build(module.DescribeLogDirsPartition, partition_index=p, partition_size=log.size(),
                              offset_lag=0, is_future_key=False))
        if rows:
            topics.append(build(module.DescribeLogDirsTopic, name=name, partitions=tuple(rows)))
    st = os.statvfs(dd.path)
    result = build(module.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=dd.path,
                   topics=tuple(topics), total_bytes=st.f_blocks * st.f_frsize,
                   usable_bytes=st.f_bavail * st.f_frsize)
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,))


def describe_cluster_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                 endpoint_type=getattr(body, "endpoint_type", 1), cluster_id="", controller_id=-1,
                 brokers=(), cluster_authorized_operations=OPERATIONS_NOT_REQUESTED)


def describe_log_dirs_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, results=())


# both run in a worker thread: DescribeLogDirs reads the file system, and neither is a hot path
DESCRIBE_CLUSTER = ApiHandler(60, "DescribeCluster", 0, 1, mode=THREAD, handler=handle_describe_cluster,
                              error_response=describe_cluster_error)
DESCRIBE_LOG_DIRS = ApiHandler(35, "DescribeLogDirs", 1, 4, mode=THREAD, handler=handle_describe_log_dirs,
                               error_response=describe_log_dirs_error)
