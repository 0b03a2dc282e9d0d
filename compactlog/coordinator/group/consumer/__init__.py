"""The consumer group protocol (KIP-848): pure, sans-IO parts of Kafka's group coordinator.

``model`` (``ConsumerGroup``, ``ConsumerGroupMember``, the metadata hash), ``assignors``
(``UniformAssignor``, ``RangeAssignor``), ``target_assignment`` (``TargetAssignmentBuilder``),
``reconcile`` (``CurrentAssignmentBuilder``) and ``regex`` (RE2 subscriptions). The heartbeat
handler, timers and records' replay build on them in the coordinator runtime.
"""
