"""Consumer groups: Kafka's classic group coordinator and the ``__consumer_offsets`` topic.

``compactlog.record.consumer_offsets`` holds the record formats (sans-IO), ``coordinator`` the group state machine and the
committed offsets (sans-IO, an injected clock, timers the caller drives), ``service`` runs the
coordinator inside the broker (appends to ``__consumer_offsets``, loading at start, timers and
offset expiry) and ``handlers`` answers the group APIs.
"""
