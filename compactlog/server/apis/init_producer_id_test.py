"""InitProducerId (``apis/init_producer_id.py``) without a transactional id, through the handler:
ids handed out once, across restarts too; a transactional id goes to the transaction coordinator
(``apis/transactions_test.py``)."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from compactlog.server.apis.init_producer_id import handle_init_producer_id
from compactlog.server.conftest import request
from compactlog.server.messages import build
from compactlog.server.state import ProducerIdManager
from compactlog.server.versions import request_schema


def test_init_producer_id(state, tmp_path):
    cls = request_schema(22, 4)

    def init(tid=None, pid=-1, epoch=-1):
        body = build(cls, transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                     producer_id=pid, producer_epoch=epoch)
        return handle_init_producer_id(state, request(22, 4, body))

    a, b = init(), init(pid=5, epoch=3)
    assert (a.error_code, a.producer_epoch, b.producer_epoch) == (ErrorCode.none, 0, 0)
    assert b.producer_id == a.producer_id + 1
    assert init(pid=5).error_code == ErrorCode.invalid_request
    assert init(tid="").error_code == ErrorCode.invalid_request
    # a transactional id goes to the transaction coordinator (apis/transactions_test.py); none runs here
    assert init(tid="tx").error_code == ErrorCode.coordinator_not_available
    # ids are never handed out twice, across restarts too
    again = ProducerIdManager(state.datadir.path)
    assert again.allocate() > b.producer_id
    assert ProducerIdManager(state.datadir.path, highest_in_logs=5000).allocate() == 5001
