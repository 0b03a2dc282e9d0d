"""InitProducerId (API key 22): Kafka's ``TransactionCoordinator.handleInitProducerId`` for
idempotent producers only.

Without a transactional id Kafka always hands out a new id with epoch 0 (the supplied id and
epoch are ignored). Transactions are not offered (wire-protocol.md §7): a transactional id is
refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which stops the client at once instead of
letting it retry until its timeout.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..messages import NO_THROTTLE, build, response_class
from ..state import BrokerState
from .handler import THREAD, ApiHandler


def handle_init_producer_id(state: BrokerState, request):
    body = request.body
    cls = response_class(request)

    def answer(code: ErrorCode, pid: int = -1, epoch: int = -1):
        return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=pid,
                     producer_epoch=epoch)

    pid_in = getattr(body, "producer_id", -1)
    epoch_in = getattr(body, "producer_epoch", -1)
    if (pid_in == -1) != (epoch_in == -1):
        return answer(ErrorCode.invalid_request)
    if body.transactional_id is not None:
        if body.transactional_id == "":
            return answer(ErrorCode.invalid_request)
        return answer(ErrorCode.transactional_id_authorization_failed)
    pid = state.producer_ids.allocate()
    return answer(ErrorCode.none, pid, 0)


def init_producer_id_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=-1, producer_epoch=-1)


# the producer id block is persisted before an id of it is handed out: a worker thread
INIT_PRODUCER_ID = ApiHandler(22, "InitProducerId", 0, 4, mode=THREAD, handler=handle_init_producer_id,
                              error_response=init_producer_id_error)
