"""Helpers for the admin APIs' tests (topics, records, configs, cluster; the dynamic key stores'
in ``security/``): ``make_state``, a broker state over a fresh data dir with a fixed node, cluster
and clock; ``call``, which runs a handler as the broker would and checks that its answer encodes
(so a body kio cannot write fails here and not on a client's connection); the requests' builders."""

from __future__ import annotations

import datetime
import importlib

import pytest

from compactlog.server.apis.configs import (handle_alter_configs, handle_describe_configs,
                                            handle_incremental_alter_configs)
from compactlog.server.apis.topics import handle_create_topics
from compactlog.server.protocol import Request, encode_response
from compactlog.server.state import BrokerState, Listener
from compactlog.server.versions import request_schema
from compactlog.storage.config import BrokerConfig
from compactlog.storage.conftest import Clock
from compactlog.storage.datadir import DataDir

NODE = 1
TIMEOUT = datetime.timedelta(seconds=30)


@pytest.fixture
def make_state(tmp_path):
    opened = []

    def make(**props):
        path = tmp_path / f"data{len(opened)}"
        path.mkdir()
        dd = DataDir(str(path), writable=True, clock=Clock(),
                     broker=BrokerConfig({k.replace("_", "."): str(v) for k, v in props.items()}))
        opened.append(dd)
        return BrokerState(dd, NODE, "compactlog-test-cluster", Listener("PLAINTEXT", "127.0.0.1", 19092))
    yield make
    for dd in opened:
        dd.close()


def nested(api_key: int, version: int):
    return importlib.import_module(request_schema(api_key, version).__module__)


def call(handler, state, body):
    """Run ``handler`` on ``body`` as the broker would, and check that the answer encodes."""
    cls = type(body)
    version = cls.__version__
    request = Request(cls.__api_key__, version, 7, "admin-test", None, body, 0, version, True)
    response = handler(state, request)
    encode_response(request, response)
    return response


# -- the requests' builders -------------------------------------------------------------------------------------

def create_req(topics, version=7, validate_only=False):
    m = nested(19, version)
    items = []
    for t in topics:
        t = t if isinstance(t, tuple) else (t,)
        name, parts, rf, configs, assignments = t + (None, 1, 1, {}, ())[len(t):]
        items.append(m.CreatableTopic(
            name=name, num_partitions=parts, replication_factor=rf,
            assignments=tuple(m.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(b))
                              for i, b in assignments),
            configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in configs.items())))
    return m.CreateTopicsRequest(topics=tuple(items), validate_only=validate_only)


def create(state, *topics, **kw):
    return call(handle_create_topics, state, create_req(topics, **kw)).topics


def one(results):
    assert len(results) == 1
    return results[0]


def delete_req(names, version=5):
    return request_schema(20, version)(topic_names=tuple(names), timeout=TIMEOUT)


def partitions_req(topics, version=3, validate_only=False):
    m = nested(37, version)
    return m.CreatePartitionsRequest(
        topics=tuple(m.CreatePartitionsTopic(
            name=n, count=c, assignments=None if a is None else
            tuple(m.CreatePartitionsAssignment(broker_ids=tuple(b)) for b in a))
            for n, c, a in topics),
        timeout=TIMEOUT, validate_only=validate_only)


def delete_records_req(spec, version=2):
    m = nested(21, version)
    return m.DeleteRecordsRequest(topics=tuple(
        m.DeleteRecordsTopic(name=n, partitions=tuple(
            m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts))
        for n, parts in spec), timeout=TIMEOUT)


def describe_req(resources, version=4, synonyms=True, documentation=False):
    m = nested(32, version)
    items = tuple(m.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
                  for t, n, k in resources)
    kw = {"include_documentation": documentation} if version >= 3 else {}
    return m.DescribeConfigsRequest(resources=items, include_synonyms=synonyms, **kw)


def describe(state, *resources, **kw):
    return call(handle_describe_configs, state, describe_req(resources, **kw)).results


def by_name(result):
    return {c.name: c for c in result.configs}


def incremental_req(resources, validate_only=False, version=1):
    m = nested(44, version)
    return m.IncrementalAlterConfigsRequest(resources=tuple(
        m.AlterConfigsResource(resource_type=t, resource_name=n, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops))
        for t, n, ops in resources), validate_only=validate_only)


def alter_req(resources, validate_only=False, version=2):
    m = nested(33, version)
    return m.AlterConfigsRequest(resources=tuple(
        m.AlterConfigsResource(resource_type=t, resource_name=n, configs=tuple(
            m.AlterableConfig(name=k, value=v) for k, v in configs))
        for t, n, configs in resources), validate_only=validate_only)


def errors(results):
    return [(r.error_code, r.error_message) for r in results]


def fill(state, topic, n, partition=0):
    log = state.datadir.open_log(topic, partition)
    for i in range(n):
        log.append_records([b"k%d" % i], [b"v" * 20])
    return log


def incremental(state, *resources, **kw):
    return call(handle_incremental_alter_configs, state, incremental_req(resources, **kw)).responses


def alter(state, *resources, **kw):
    return call(handle_alter_configs, state, alter_req(resources, **kw)).responses
