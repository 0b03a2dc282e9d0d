"""InitProducerId (API key 22): Kafka's ``KafkaApis.handleInitProducerIdRequest`` and, for
idempotent producers, ``TransactionCoordinator.handleInitProducerId``.

Without a transactional id Kafka always hands out a new id with epoch 0 (the supplied id and
epoch are ignored). With one, the transaction coordinator answers (``apis/transactions.py``: epoch
bumps, fencing, KIP-360 recovery, epoch exhaustion; transactions.md §2.2). v5 only declares that
the client understands TRANSACTION_ABORTABLE; v6 (KIP-939 two-phase commit) is not offered.

Authorization (security.md §7.4): a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (``authorizeByResourceType``), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, response_class
from ..state import BrokerState
from .transactions import init_transactional_producer
from .handler import THREAD, ApiHandler


def handle_init_producer_id(state: BrokerState, request):
    body = request.body
    cls = response_class(request)

    def answer(code: ErrorCode, pid: int = -1, epoch: int = -1):
        return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=pid,
                     producer_epoch=epoch)

    if body.transactional_id is not None:
        if not auth_helper.authorize(state, request, auth_helper.WRITE, auth_helper.TRANSACTIONAL_ID,
                                     body.transactional_id):
            return answer(ErrorCode.transactional_id_authorization_failed)
    elif not (auth_helper.authorize_cluster(state, request, auth_helper.IDEMPOTENT_WRITE, log_if_denied=False)
              or auth_helper.authorize_by_resource_type(state, request, auth_helper.WRITE, auth_helper.TOPIC)):
        return answer(ErrorCode.cluster_authorization_failed)
    pid_in = getattr(body, "producer_id", -1)
    epoch_in = getattr(body, "producer_epoch", -1)
    if (pid_in == -1) != (epoch_in == -1):
        return answer(ErrorCode.invalid_request)
    if body.transactional_id is not None:
        return init_transactional_producer(state, request, answer)
    pid = state.producer_ids.allocate()
    return answer(ErrorCode.none, pid, 0)


def init_producer_id_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=-1, producer_epoch=-1)


# the producer id block is persisted before an id of it is handed out: a worker thread
INIT_PRODUCER_ID = ApiHandler(22, "InitProducerId", 0, 5, mode=THREAD, handler=handle_init_producer_id,
                              error_response=init_producer_id_error, coordinator=True)
