"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction`` and the
transaction-coordinator module): ``metadata`` (one id's state machine and epoch rules),
``coordinator`` (the sans-IO decisions), ``state_log`` (``__transaction_state``), ``markers``
(COMMIT/ABORT markers on local partitions), ``verification`` (KIP-890's check of a
transactional write, for Produce and TxnOffsetCommit) and ``service`` (the coordinator on the
shared ``coordinator.runtime``: loading, timers). The wire APIs are ``server/apis/transactions.py``."""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
