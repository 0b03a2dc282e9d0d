"""The dispatch table and the advertised APIs are derived from the per-API declarations, every
API's error response encodes for every version, and the
layers stay apart: the protocol and the transport import no API module (that no module imports
itself back through another, in server/ or anywhere: ``compactlog/layers_test.py``)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest

from compactlog.server import dispatch
from compactlog.server.apis.handler import ASYNC, INLINE, THREAD, Api, ApiHandler
from compactlog.server.conftest import fetch_body, request
from compactlog.server.dispatch import DECLARED_APIS, advertised_apis, dispatch_table, error_response
from compactlog.server.messages import build, nested
from compactlog.server.protocol import encode_response
from compactlog.server.versions import request_schema

SERVER = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(SERVER))


def test_each_declaration_is_one_dispatch_entry_and_one_advertised_range():
    table = dispatch_table()
    assert set(table) == {a.key for a in DECLARED_APIS}
    advertised = advertised_apis(table)
    for a in DECLARED_APIS:
        assert table[a.key] == Api(a.key, a.handler, a.mode, a.quick)
        assert advertised.get(a.key) is a
        assert a.mode in (INLINE, THREAD, ASYNC)
    del table[60]
    assert 60 not in advertised_apis(table)               # no handler, not advertised


def test_every_declared_api_has_its_error_response():
    class Request:
        api_key, response_version, body = 18, 3, None
    assert error_response(Request(), -1).error_code == -1
    Request.api_key = 57                                   # UpdateFeatures: not declared
    assert error_response(Request(), -1) is None


def test_a_declaration_names_where_it_runs():
    with pytest.raises(ValueError, match="mode"):
        ApiHandler(99, "Nope", 0, 0, mode="later", handler=print, error_response=print)


def test_produce_is_advertised_from_0_and_accepted_from_3():
    produce = dispatch.BROKER.get(0)
    assert (produce.min_version, produce.accepted_min, produce.max_version) == (0, 3, 12)


@pytest.mark.slow          # a fresh process each (the layers, statically: compactlog/layers_test.py)
@pytest.mark.parametrize("module", ["compactlog.server.protocol", "compactlog.server.transport"])
def test_protocol_and_transport_import_no_api_module(module):
    code = (f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('compactlog.server.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    loaded = set(eval(out.stdout))
    handlers = {m for m in loaded if m.startswith(("compactlog.server.apis.", "compactlog.coordinator.group"))
                or m == "compactlog.server.dispatch"}
    assert handlers <= {"compactlog.server.apis.handler"}, handlers


def test_error_responses_encode_for_every_api(state):
    table = dispatch_table()
    for api in state.apis:
        for version in range(api.accepted_min, api.max_version + 1):
            if api.key == 18:
                continue
            body = _sample_body(api.key, version)
            if body is None:
                continue
            resp = error_response(request(api.key, version, body), -1, "boom")
            assert resp is not None, (api.name, version)
            encode_response(request(api.key, version, body), resp)
    assert set(table) >= {0, 1, 2, 3, 18, 22}


def _sample_body(api_key, version):
    if api_key == 0:
        cls = request_schema(0, version)
        return build(cls, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1),
                     topic_data=(build(nested(cls, "TopicProduceData"), name="t", partition_data=(
                         build(nested(cls, "PartitionProduceData"), index=0, records=b""),)),))
    if api_key == 1:
        return fetch_body("t", 0, 0, version=version)
    if api_key == 3:
        cls = request_schema(3, version)
        return build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name="t", topic_id=None),))
    cls = request_schema(api_key, version)
    try:
        return build(cls)
    except TypeError:
        return None
