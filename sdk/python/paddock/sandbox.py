"""Sandbox: create, connect, list, and everything one sandbox does. Shaped
like the E2B Python SDK's Sandbox so code can switch with an import."""
from ._http import ApiClient
from .commands import Commands
from .exceptions import NotFoundError
from .files import Files
from .models import SandboxInfo, SandboxMetrics

_CREATE_FIELDS = ("template", "timeout", "memory_mb", "cpus", "pids", "disk_mb", "isolation")


class _either:
    """A method usable on the class (Sandbox.kill(id)) and on an instance
    (sbx.kill()), as E2B's is."""

    def __init__(self, on_instance, on_class):
        self.on_instance, self.on_class = on_instance, on_class

    def __get__(self, obj, cls):
        if obj is None:
            return self.on_class.__get__(cls, type(cls))
        return self.on_instance.__get__(obj, cls)


class Sandbox:
    """A sandbox on a paddock server. Sandbox(...) creates one, like
    Sandbox.create(...); use it as a context manager to kill it on exit."""

    def __init__(self, template="base", timeout=300, envs=None, metadata=None, memory_mb=None, cpus=None,
                 api_key=None, url=None, pids=None, disk_mb=None, isolation=None, request_timeout=None,
                 _api=None, _info=None):
        self._api = _api or ApiClient(api_key, url, request_timeout)
        if _info is None:
            body = {"template": template, "timeout": timeout, "memory_mb": memory_mb, "cpus": cpus,
                    "pids": pids, "disk_mb": disk_mb, "isolation": isolation,
                    "env": dict(envs) if envs else None, "metadata": dict(metadata) if metadata else None}
            body = {k: v for k, v in body.items() if v is not None}
            _info = self._api.request("POST", "/sandboxes", json_body=body)
        self._info = _info
        self.sandbox_id = _info["id"]
        self.commands = Commands(self._api, self.sandbox_id)
        self.files = Files(self._api, self.sandbox_id)

    @property
    def id(self):
        return self.sandbox_id

    def __repr__(self):
        return "<paddock.Sandbox %s>" % self.sandbox_id

    # -- constructors ---------------------------------------------------------

    @classmethod
    def create(cls, template="base", timeout=300, envs=None, metadata=None, memory_mb=None, cpus=None,
               api_key=None, url=None, **kw):
        return cls(template=template, timeout=timeout, envs=envs, metadata=metadata, memory_mb=memory_mb,
                   cpus=cpus, api_key=api_key, url=url, **kw)

    @classmethod
    def connect(cls, sandbox_id, api_key=None, url=None, request_timeout=None):
        """Attach to an existing sandbox (resuming it if it is paused, as E2B does)."""
        api = ApiClient(api_key, url, request_timeout)
        info = api.request("GET", "/sandboxes/%s" % _id(sandbox_id))
        if info.get("state") == "paused":
            info = api.request("POST", "/sandboxes/%s/resume" % _id(sandbox_id))
        return cls(_api=api, _info=info)

    @classmethod
    def list(cls, metadata=None, state=None, api_key=None, url=None, limit=None):
        """SandboxInfo of every sandbox this key owns, optionally filtered by
        metadata ({k: v}, all must match) and state ("running", "paused",
        "failed" or a list of them)."""
        api = ApiClient(api_key, url)
        q = []
        if state:
            q.append(("state", state if isinstance(state, str) else ",".join(state)))
        for k, v in (metadata or {}).items():
            q.append(("metadata", "%s=%s" % (k, v)))
        out, cursor = [], None
        while True:
            page = api.request("GET", "/sandboxes", query=q + [("limit", str(limit or 100)), ("cursor", cursor)])
            out += [SandboxInfo.from_json(s) for s in page.get("sandboxes", [])]
            cursor = page.get("next_cursor")
            if not cursor or (limit and len(out) >= limit):
                return out

    # -- this sandbox -----------------------------------------------------------

    def _p(self, suffix=""):
        return "/sandboxes/%s%s" % (self.sandbox_id, suffix)

    def get_info(self):
        self._info = self._api.request("GET", self._p())
        return SandboxInfo.from_json(self._info)

    def is_running(self):
        try:
            return self.get_info().state == "running"
        except NotFoundError:
            return False

    def set_timeout(self, timeout):
        """The sandbox is killed `timeout` seconds from now (unless changed again)."""
        self._info = self._api.request("POST", self._p("/timeout"), json_body={"timeout": int(timeout)})
        return SandboxInfo.from_json(self._info)

    def get_metrics(self):
        return SandboxMetrics.from_json(self._api.request("GET", self._p("/metrics")))

    def pause(self):
        """Freeze every process; the timeout stops counting until resume()."""
        self._info = self._api.request("POST", self._p("/pause"))
        return SandboxInfo.from_json(self._info)

    def resume(self):
        self._info = self._api.request("POST", self._p("/resume"))
        return SandboxInfo.from_json(self._info)

    def _kill_self(self):
        """Delete the sandbox. False if it was already gone."""
        try:
            self._api.request("DELETE", self._p())
            return True
        except NotFoundError:
            return False

    @classmethod
    def _kill_class(cls, sandbox_id, api_key=None, url=None):
        try:
            ApiClient(api_key, url).request("DELETE", "/sandboxes/%s" % _id(sandbox_id))
            return True
        except NotFoundError:
            return False

    kill = _either(_kill_self, _kill_class)

    def audit(self):
        """The sandbox's audit log so far, as a list of dicts."""
        import json
        raw = self._api.request("GET", self._p("/audit"), raw=True)
        return [json.loads(l) for l in raw.splitlines() if l.strip()]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False


def _id(sandbox_id):
    # ids are [a-z0-9]{20}; refuse anything that could change the path
    if not isinstance(sandbox_id, str) or "/" in sandbox_id or "?" in sandbox_id or "#" in sandbox_id \
            or sandbox_id in ("", ".", ".."):
        from .exceptions import InvalidArgumentError
        raise InvalidArgumentError("invalid sandbox id %r" % (sandbox_id,))
    return sandbox_id
