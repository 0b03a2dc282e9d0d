"""``BrokerBackend`` beside a broker whose group coordinator is still loading: Kafka's tool (its
Java admin) asks again on COORDINATOR_LOAD_IN_PROGRESS; librdkafka's admin hands the error over, and
for ListGroups puts it beside an empty list. The admin here is a stand-in answering as librdkafka
does (its futures and result types), so the retry is tested without timing a real broker's load."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from ...errors import CompactlogError
from . import backends
from .backends import BrokerBackend


def _done(value=None, error=None) -> Future:
    f = Future()
    if error is not None:
        f.set_exception(KafkaException(KafkaError(error)))
    else:
        f.set_result(value)
    return f


class _LoadingAdmin:
    """Answers ``loading`` requests with COORDINATOR_LOAD_IN_PROGRESS, then with the group."""

    def __init__(self, loading: int, code: int = KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
        self.loading, self.code, self.calls = loading, code, 0

    def _still_loading(self) -> bool:
        self.calls += 1
        return self.calls <= self.loading

    def list_consumer_groups(self, **_):
        from confluent_kafka import ConsumerGroupState
        if self._still_loading():
            return _done(SimpleNamespace(valid=[], errors=[KafkaError(self.code)]))
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id="g", state=ConsumerGroupState.STABLE)],
                                     errors=[]))

    def list_consumer_group_offsets(self, reqs, **_):
        if self._still_loading():
            return {"g": _done(error=self.code)}
        tp = SimpleNamespace(topic="t", partition=0, offset=7)
        return {"g": _done(SimpleNamespace(topic_partitions=[tp]))}


def _backend(admin) -> BrokerBackend:
    b = BrokerBackend.__new__(BrokerBackend)
    b.bootstrap, b.admin = "127.0.0.1:1", admin
    return b


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch):
    monkeypatch.setattr(backends, "RETRY_BACKOFF_S", 0.0)


def test_a_loading_coordinator_is_asked_again_not_listed_as_no_groups():
    admin = _LoadingAdmin(loading=3)
    assert _backend(admin).list_groups() == [("g", "Stable")]
    assert admin.calls == 4


def test_committed_offsets_asked_again_while_the_coordinator_loads():
    admin = _LoadingAdmin(loading=2, code=KafkaError.NOT_COORDINATOR)
    assert _backend(admin).committed("g") == {("t", 0): 7}
    assert admin.calls == 3


def test_a_coordinator_that_never_loads_fails_loudly(monkeypatch):
    monkeypatch.setattr(backends, "TIMEOUT_S", 0.05)
    with pytest.raises(CompactlogError, match="(?i)load"):
        _backend(_LoadingAdmin(loading=10**9)).list_groups()
    with pytest.raises(CompactlogError, match="(?i)load"):
        _backend(_LoadingAdmin(loading=10**9)).committed("g")


def test_other_errors_are_not_asked_again():
    admin = _LoadingAdmin(loading=1, code=KafkaError.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(CompactlogError):
        _backend(admin).list_groups()
    assert admin.calls == 1
