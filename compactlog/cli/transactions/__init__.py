"""``transactions``: kafka-transactions.sh (Kafka's ``TransactionsCommand``), split as the tool is:
``command`` (the subcommands and their options), ``service`` (what each subcommand does, Kafka's
rules for ``abort`` and ``find-hanging``, and its tables) and ``backends`` (through a broker with
kafka-python's admin client, or on a data dir through the Python API's ``Transactions``).
"""

from . import command  # noqa: F401 - registers the commands on the CLI's app
