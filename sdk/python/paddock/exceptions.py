"""Typed errors. Every error the server returns carries its message
(`{"error": {"code", "message"}}`) in str(exc) and in `.message`."""
import builtins


class PaddockError(Exception):
    """Base of every paddock error."""

    def __init__(self, message, status=None, code=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class AuthenticationError(PaddockError):
    """401: missing or wrong API key."""


class PermissionError(PaddockError, builtins.PermissionError):
    """403: the key is valid but this is not allowed (inside the sandbox:
    a path the sandbox's user may not read or write). The server's message
    says what was refused."""


class NotFoundError(PaddockError):
    """404: no such sandbox, process, file (or not this key's)."""


class InvalidArgumentError(PaddockError):
    """400 (and 413): the request was refused as invalid."""


class TimeoutError(PaddockError, builtins.TimeoutError):
    """A request or a command ran out of time (504, or a client-side timeout)."""


class SandboxError(PaddockError):
    """The sandbox cannot do it now (409 conflict, 503, 500) or is gone."""


class NoSpaceError(PaddockError):
    """507: the sandbox's writable layer is full; the previous file is intact."""


class RateLimitError(PaddockError):
    """429: too many sandboxes (per key or in all)."""


class ConnectionError(PaddockError, builtins.ConnectionError):
    """The server cannot be reached."""


# E2B names, so code written against the E2B SDK keeps working.
SandboxException = SandboxError
AuthenticationException = AuthenticationError
NotFoundException = NotFoundError
InvalidArgumentException = InvalidArgumentError
TimeoutException = TimeoutError
RateLimitException = RateLimitError
NoSpaceException = NoSpaceError
PermissionDeniedError = PermissionError

_BY_STATUS = {
    400: InvalidArgumentError,
    401: AuthenticationError,
    403: PermissionError,
    404: NotFoundError,
    409: SandboxError,
    413: InvalidArgumentError,
    429: RateLimitError,
    503: SandboxError,
    504: TimeoutError,
    507: NoSpaceError,
}


def error_for(status, code, message):
    """The exception for an HTTP error answer."""
    cls = _BY_STATUS.get(status, SandboxError if status >= 500 else PaddockError)
    return cls(message or "HTTP %d" % status, status=status, code=code)
