"""Consumer groups: Kafka's classic group coordinator and the ``__consumer_offsets`` topic.

Split as Kafka's group coordinator is (all sans-IO, an injected clock, timers the caller drives):
``classic_group`` (a group and its members; ``classic_group_state`` its states),
``group_manager`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance timers),
``offset_manager`` (committed offsets: commit, fetch, delete, expiry, replay) and ``shard``
(the two composed); ``runtime`` holds what they share (results, timers, loading partitions),
``api_data`` the requests and answers, ``config`` the settings. The record formats are
``compactlog.record.consumer_offsets``. ``service`` runs the shard inside the broker (appends to
``__consumer_offsets``, transactional offset commits and the transaction coordinator's markers,
loading at start, timers and offset expiry) and ``handlers`` answers the group APIs.
"""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
