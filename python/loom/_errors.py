"""Loom's errors as Python exceptions: one class per status code.

Every failure of Loom raises a subclass of :class:`loom.Error` that carries
Loom's status code (``code``, the name as in ``loom/status.hpp``) and its
message, which names what was wrong and where.
"""


class Error(RuntimeError):
    """A Loom call failed. ``code`` is Loom's status code name."""

    code = "unknown"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(Error, ValueError):
    code = "invalid_argument"


class NotFoundError(Error, LookupError):
    code = "not_found"


class UnimplementedError(Error, NotImplementedError):
    code = "unimplemented"


class IncompatibleError(Error):
    code = "incompatible"


class ResourceExhaustedError(Error, MemoryError):
    code = "resource_exhausted"


class DeviceLostError(Error):
    code = "device_lost"


class DeadlineExceededError(Error, TimeoutError):
    code = "deadline_exceeded"


class DataLossError(Error):
    code = "data_loss"


class InternalError(Error):
    code = "internal"


class FailedPreconditionError(Error):
    code = "failed_precondition"


class UnavailableError(Error):
    code = "unavailable"


class OutOfRangeError(Error, IndexError):
    code = "out_of_range"


class CancelledError(Error):
    code = "cancelled"


class AlreadyExistsError(Error):
    code = "already_exists"


# Indexed by the numeric code (loom::StatusCode, loom_status_code_t).
_BY_CODE = [None, InvalidArgumentError, NotFoundError, UnimplementedError, IncompatibleError,
            ResourceExhaustedError, DeviceLostError, DeadlineExceededError, DataLossError,
            InternalError, FailedPreconditionError, UnavailableError, OutOfRangeError,
            CancelledError, AlreadyExistsError]


def from_status(code: int, message: str) -> Error:
    """The exception for a failed status (called by the extension)."""
    cls = _BY_CODE[code] if 0 < code < len(_BY_CODE) else Error
    return cls(message)
