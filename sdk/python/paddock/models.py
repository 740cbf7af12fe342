"""Plain result objects."""
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Dict, List, Optional


def parse_time(s):
    """An RFC 3339 UTC string from the server as an aware datetime (None stays None)."""
    if not s:
        return None
    try:
        return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        try:
            return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            return None


@dataclass
class SandboxInfo:
    sandbox_id: str
    template: str
    state: str
    started_at: Optional[datetime]
    end_at: Optional[datetime]
    timeout: int
    memory_mb: int
    cpus: float
    metadata: Dict[str, str] = field(default_factory=dict)
    envs: Dict[str, str] = field(default_factory=dict)
    isolation: str = "container"
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def id(self):
        return self.sandbox_id

    # E2B spells it template_id
    @property
    def template_id(self):
        return self.template

    @classmethod
    def from_json(cls, j):
        return cls(sandbox_id=j["id"], template=j.get("template"), state=j.get("state"),
                   started_at=parse_time(j.get("created_at")), end_at=parse_time(j.get("expires_at")),
                   timeout=j.get("timeout"), memory_mb=j.get("memory_mb"), cpus=j.get("cpus"),
                   metadata=j.get("metadata") or {}, envs=j.get("env") or {},
                   isolation=j.get("isolation", "container"), raw=j)


@dataclass
class SandboxMetrics:
    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    memory_limit_bytes: int
    pids: int
    pids_limit: int
    disk_used_bytes: int
    disk_limit_bytes: int
    raw: dict = field(default_factory=dict, repr=False)

    # E2B-style names
    @property
    def mem_used(self):
        return self.memory_bytes

    @property
    def mem_total(self):
        return self.memory_limit_bytes

    @classmethod
    def from_json(cls, j):
        return cls(**{k: j.get(k) for k in ("cpu_seconds", "memory_bytes", "memory_peak_bytes",
                                              "memory_limit_bytes", "pids", "pids_limit", "disk_used_bytes",
                                              "disk_limit_bytes")}, raw=j)


@dataclass
class EntryInfo:
    name: str
    path: str
    type: str           # "file", "dir", "symlink", "other"
    size: int
    mode: int
    uid: int
    gid: int
    modified_time: Optional[datetime]
    symlink_target: Optional[str] = None

    @property
    def is_dir(self):
        return self.type == "dir"

    @property
    def is_file(self):
        return self.type == "file"

    @classmethod
    def from_json(cls, j):
        return cls(name=j.get("name"), path=j.get("path"), type=j.get("type"), size=j.get("size"),
                   mode=j.get("mode"), uid=j.get("uid"), gid=j.get("gid"),
                   modified_time=parse_time(j.get("modified_at")), symlink_target=j.get("link_target"))


@dataclass
class ProcessInfo:
    pid: int
    tag: Optional[str]
    cmd: str
    args: List[str]
    cwd: Optional[str]
    state: str
    exit_code: Optional[int]
    signal: Optional[int]
    raw: dict = field(default_factory=dict, repr=False)
    reason: Optional[str] = None            # once exited: exit, signal, timeout, oom
    memory_limit_mb: Optional[int] = None   # with reason "oom": the limit that was hit

    @classmethod
    def from_json(cls, j):
        argv = j.get("cmd") or []
        return cls(pid=j["pid"], tag=j.get("tag"), cmd=argv[0] if argv else "", args=list(argv[1:]),
                   cwd=j.get("cwd"), state=j.get("state"), exit_code=j.get("exit_code"),
                   signal=j.get("signal"), raw=j, reason=j.get("reason"), memory_limit_mb=j.get("memory_limit_mb"))


@dataclass
class CommandResult:
    stdout: str
    stderr: str
    exit_code: int
    error: Optional[str] = None
    signal: Optional[int] = None
    reason: str = "exit"
    memory_limit_mb: Optional[int] = None   # reason "oom": the memory limit that was hit


@dataclass
class SnapshotInfo:
    name: str
    source: Optional[str] = None        # the sandbox it was taken from
    template: Optional[str] = None      # what that sandbox was started from
    isolation: Optional[str] = None
    created_at: Optional[datetime] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j):
        return cls(name=j["name"], source=j.get("source"), template=j.get("template"),
                   isolation=j.get("isolation"), created_at=parse_time(j.get("created_at")), raw=j)


@dataclass
class TemplateInfo:
    name: str
    status: str = "ready"               # queued, building, ready, failed (waiting: E2B's reserved)
    builtin: bool = False
    shared: bool = False
    error: Optional[str] = None
    created_at: Optional[datetime] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j):
        return cls(name=j["name"], status=j.get("status") or "ready", builtin=bool(j.get("builtin")),
                   shared=bool(j.get("shared")), error=j.get("error"), created_at=parse_time(j.get("created_at")),
                   raw=j)


@dataclass
class NetworkInfo:
    mode: str                           # none, open, policy
    rules: List = field(default_factory=list)
    dropped_packets: int = 0
    dropped_bytes: int = 0
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j):
        return cls(mode=j.get("mode"), rules=j.get("rules") or [], dropped_packets=j.get("dropped_packets") or 0,
                   dropped_bytes=j.get("dropped_bytes") or 0, raw=j)


@dataclass
class PortsInfo:
    public: bool
    domain: str                         # host[:port] the port hosts live under
    port_token: str                     # X-Paddock-Port-Token (or ?paddock_port_token=)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j):
        return cls(public=bool(j.get("public")), domain=j.get("domain"), port_token=j.get("port_token"), raw=j)
