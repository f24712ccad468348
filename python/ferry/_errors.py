"""ferry's exceptions: one class per ferry::ErrorCode, all subclasses of ferry.Error."""

import builtins


class Error(Exception):
    """A ferry error: ``code`` (the C++ ErrorCode's name), ``message`` (the failing call and its
    arguments) and ``where`` (the file:line in ferry where it was created)."""

    code = "unknown"

    def __init__(self, message, where=""):
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self):
        return f"{self.code}: {self.message}"


class InvalidArgumentError(Error, ValueError):
    code = "invalid_argument"


class OutOfRangeError(Error, ValueError):
    code = "out_of_range"


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 (ferry.TimeoutError on purpose)
    code = "timeout"


class UnavailableError(Error):
    code = "unavailable"


class OutOfMemoryError(Error, MemoryError):
    code = "out_of_memory"


class ResourceExhaustedError(Error):
    code = "resource_exhausted"


class ReleasedError(Error):
    code = "released"


class DeviceClosedError(Error):
    code = "device_closed"


class DeviceLostError(Error):
    code = "device_lost"


class FailedPreconditionError(Error):
    code = "failed_precondition"


class TimelineFailedError(Error):
    code = "timeline_failed"


class BackendError(Error):
    code = "backend_error"


class DataCorruptError(Error):
    code = "data_corrupt"


class NotFoundError(Error, FileNotFoundError):
    code = "not_found"


class InternalError(Error):
    code = "internal"


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, OutOfRangeError, TimeoutError, UnavailableError, OutOfMemoryError,
    ResourceExhaustedError, ReleasedError, DeviceClosedError, DeviceLostError,
    FailedPreconditionError, TimelineFailedError, BackendError, DataCorruptError, NotFoundError,
    InternalError)}


def _make(code, message, where):
    """Called by the extension to build the exception of a ferry Status."""
    return _BY_CODE.get(code, Error)(message, where)


__all__ = ["Error"] + [cls.__name__ for cls in _BY_CODE.values()]
