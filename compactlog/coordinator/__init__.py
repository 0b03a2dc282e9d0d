"""The coordinators: Kafka's group coordinator (``group/``) and transaction coordinator (``txn/``)
on one runtime (``runtime.py``, Kafka's ``CoordinatorRuntime`` of coordinator-common), with their
internal topics (``internal_topics.py``) and their use without a broker (``offline.py``).

Floors: beneath ``server/`` and ``api.py``; it imports ``record`` and ``storage`` only, never
``server`` or ``cli`` (``structure_test.py`` checks). The broker (``server/``) runs the services
and declares their APIs in ``server/apis/``; ``api.py`` and the CLI use the names exported here,
the public surface, and nothing deeper. The names resolve on first use, so importing the package
loads none of the coordinators (they load kio's tables).

Where the next coordinators go: KIP-848's consumer groups in ``group/`` (see its docstring),
share groups (KIP-932) in ``share/`` on the same runtime.
"""

from __future__ import annotations

from ..lazy import exports

_EXPORTS = {
    # groups: the group coordinator of a data dir, and the one input its offset commit takes
    "GroupCoordinatorService": "group.service",
    "CommitPartition": "group.api_data",
    "load_groups": "offline",
    # transactions: the coordinator's cache as a starting broker loads it, the admin's marker
    "load_transactions": "offline",
    "OfflineBroker": "offline",
    "write_marker": "txn.markers",
    "TRANSACTION_STATE_TOPIC": "txn.state_log",
    # Kafka's Topic.INTERNAL_TOPICS
    "INTERNAL_TOPICS": "internal_topics",
    # a coordinator's answer as an API gives it: (error code, result), a refusal mapped to its code
    "answered": "runtime",
}

__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
