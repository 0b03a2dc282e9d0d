"""Consumer groups: Kafka's classic group coordinator and the ``__consumer_offsets`` topic.

Split as Kafka's group coordinator is (all sans-IO, an injected clock, timers the caller drives):
``classic_group`` (a group and its members; ``classic_group_state`` its states),
``group_manager`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance timers),
``offset_manager`` (committed offsets: commit, fetch, delete, expiry, replay) and ``shard``
(the two composed); ``coordinator.runtime`` holds what they share with the transaction
coordinator (results, timers, loading partitions, the error table, the running thread),
``api_data`` the requests and answers, ``config`` the settings. The record formats are
``compactlog.record.consumer_offsets``. ``service`` runs the shard inside the broker (appends to
``__consumer_offsets``, transactional offset commits and the transaction coordinator's markers,
loading at start, timers and offset expiry) on that runtime; ``server/apis/groups.py`` answers
the group APIs.

Where the next group types go (Kafka's ``group`` package has one ``Group`` interface and a class
per type): KIP-848's consumer group is ``consumer/`` (its sans-IO cores: model, assignors,
reconciliation, target assignment, regexes); ``group_manager`` manages its groups beside the
classic ones, ``shard.replay`` replays its records (``ConsumerGroupMetadata``,
``...TargetAssignment``, ...) instead of skipping them at load, its timers run on
``coordinator.runtime``, and its APIs (ConsumerGroupHeartbeat, ConsumerGroupDescribe) are declared
in ``server/apis/groups.py``. Share groups (KIP-932) get a package of their own beside this one,
``coordinator/share/``, on the same ``coordinator.runtime`` (``__share_group_state``), as Kafka's
share coordinator sits beside the group coordinator on coordinator-common.
"""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
