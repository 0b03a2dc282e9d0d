"""``consumer-groups``: kafka-consumer-groups.sh, split as Kafka's tool is: ``command`` (the command,
``ConsumerGroupCommand``), ``options`` (``ConsumerGroupCommandOptions`` and the option values),
``service`` (the actions of ``ConsumerGroupService``), ``reset_planner`` (``GroupOffsetsResetter``'s
plans, pure), ``printing`` (the column output) and ``backends`` (through a broker, or on a data dir
through the Python API).
"""

from . import command  # noqa: F401 - registers the command on the CLI's app
