"""paddock: a Python client for the paddock sandbox server.

    from paddock import Sandbox
    with Sandbox.create() as sbx:
        print(sbx.commands.run("echo hi").stdout)

Server and key: url=/api_key= arguments, else PADDOCK_URL (default
http://127.0.0.1:49982) and PADDOCK_API_KEY, else (as the CLI does) the
key file of the local state dir ($PADDOCK_STATE_DIR/api-key, default
/var/lib/paddock/api-key) when it is readable."""
from .commands import CommandExitException, CommandHandle, Commands
from .exceptions import (AuthenticationError, AuthenticationException, ConnectionError, InvalidArgumentError,
                         InvalidArgumentException, NoSpaceError, NoSpaceException, NotFoundError,
                         NotFoundException, PaddockError, PermissionDeniedError, PermissionError, RateLimitError, RateLimitException, SandboxError,
                         SandboxException, TimeoutError, TimeoutException)
from .files import Files
from .models import (CommandResult, EntryInfo, NetworkInfo, PortsInfo, ProcessInfo, SandboxInfo, SandboxMetrics,
                     SnapshotInfo, TemplateInfo)
from .pty import Pty, PtySize
from .templates import BuildError, Templates
from .sandbox import Sandbox
from ._http import VERSION as __version__

__all__ = [
    "Sandbox", "Commands", "Files", "CommandHandle", "CommandResult", "CommandExitException", "EntryInfo",
    "ProcessInfo", "SandboxInfo", "SandboxMetrics", "SnapshotInfo", "TemplateInfo", "NetworkInfo", "PortsInfo",
    "Pty", "PtySize", "Templates", "BuildError", "PaddockError", "AuthenticationError", "NotFoundError",
    "InvalidArgumentError", "PermissionError", "PermissionDeniedError", "TimeoutError", "SandboxError", "NoSpaceError", "RateLimitError", "ConnectionError",
    "SandboxException", "AuthenticationException", "NotFoundException", "InvalidArgumentException",
    "TimeoutException", "RateLimitException", "NoSpaceException",
]
