"""The coordinators' refusals: typed exceptions carrying Kafka's error code, as Kafka's state
machines throw ``Errors.X.exception()``; the runtime (runtime.py) turns any failure into the code an
API answers, in one place (``error_code_of``, ``answered``). Apart from the runtime so that the
state machines' own modules (``txn.metadata``) can raise them without importing it.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class CoordinatorError(Exception):
    """A request refused with a Kafka error code (Kafka's ``Errors.X.exception()`` thrown by a
    coordinator's state machine): ``code``, also as ``kafka_error`` as storage's errors carry it,
    so that ``error_code_of`` maps both."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or code.name)
        self.code = ErrorCode(code)

    @property
    def kafka_error(self) -> ErrorCode:
        return self.code


class GroupError(CoordinatorError):
    """The group coordinator's refusals (classic and consumer groups, offsets)."""


class TxnError(CoordinatorError):
    """The transaction coordinator's refusals."""


__all__ = ["CoordinatorError", "GroupError", "TxnError"]
