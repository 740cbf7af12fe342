"""Sandbox: create, connect, list, and everything one sandbox does. Shaped
like the E2B Python SDK's Sandbox so code can switch with an import."""
from ._http import ApiClient
from .commands import Commands
from .exceptions import NotFoundError
from .files import Files
from .models import NetworkInfo, PortsInfo, SandboxInfo, SandboxMetrics, SnapshotInfo
from .pty import Pty

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
                 network=None, auto_pause=None, _api=None, _info=None):
        self._api = _api or ApiClient(api_key, url, request_timeout)
        if _info is None:
            body = {"template": template, "timeout": timeout, "memory_mb": memory_mb, "cpus": cpus,
                    "pids": pids, "disk_mb": disk_mb, "isolation": isolation, "network": _policy(network),
                    "auto_pause": auto_pause,
                    "env": dict(envs) if envs else None, "metadata": dict(metadata) if metadata else None}
            body = {k: v for k, v in body.items() if v is not None}
            _info = self._api.request("POST", "/sandboxes", json_body=body)
        self._info = _info
        self.sandbox_id = _info["id"]
        self.commands = Commands(self._api, self.sandbox_id)
        self.files = Files(self._api, self.sandbox_id)
        self.pty = Pty(self._api, self.sandbox_id)

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

    def pause(self, mode=None):
        """Stop every process; the timeout stops counting until resume().
        mode: None (the tier's choice), "memory" (frozen, memory stays
        resident) or "disk" (saved to disk, memory released: microvm; other
        tiers refuse it with InvalidArgumentError and stay running)."""
        if mode not in (None, "memory", "disk"):
            from .exceptions import InvalidArgumentError
            raise InvalidArgumentError("pause mode is 'memory' or 'disk', not %r" % (mode,))
        self._info = self._api.request("POST", self._p("/pause"), json_body={"mode": mode} if mode else None)
        return SandboxInfo.from_json(self._info)

    def resume(self):
        self._info = self._api.request("POST", self._p("/resume"))
        return SandboxInfo.from_json(self._info)

    # -- network --------------------------------------------------------------

    def get_network(self):
        """The egress policy in force, with what the kernel dropped so far."""
        return NetworkInfo.from_json(self._api.request("GET", self._p("/network")))

    def set_network(self, policy=None, mode=None, allow=None, deny=None, rules=None, **fields):
        """Replace the egress policy while the sandbox runs (docs/network.md):
        a policy dict, or its fields (mode="policy", allow=["pypi.org:443/tcp"],
        deny=[...], rules=[...], strict=, conn_per_sec=, bytes_per_sec=).
        New connections follow it at once. Refused (SandboxError, 409) for a
        sandbox created without a network; a bad rule is
        InvalidArgumentError and changes nothing."""
        body = dict(_policy(policy) or {})
        for k, v in (("mode", mode), ("allow", allow), ("deny", deny), ("rules", rules)):
            if v is not None:
                body[k] = list(v) if k != "mode" else v
        body.update({k: v for k, v in fields.items() if v is not None})
        return NetworkInfo.from_json(self._api.request("PUT", self._p("/network"), json_body=body))

    # -- snapshots and forks ----------------------------------------------------

    def create_snapshot(self, name):
        """Save the sandbox's filesystem (microvm: memory and disk) as the
        named snapshot; start sandboxes from it with template=name."""
        return SnapshotInfo.from_json(self._api.request("POST", self._p("/snapshots"), json_body={"name": name}))

    @classmethod
    def list_snapshots(cls, api_key=None, url=None):
        """The key's snapshots, by name."""
        j = ApiClient(api_key, url).request("GET", "/snapshots")
        return [SnapshotInfo.from_json(s) for s in j.get("snapshots", [])]

    @classmethod
    def delete_snapshot(cls, name, api_key=None, url=None):
        """Remove a snapshot; False if there was none. Refused (SandboxError,
        409) while a sandbox or another snapshot stacks on it."""
        try:
            from .templates import _name
            ApiClient(api_key, url).request("DELETE", "/snapshots/%s" % _name(name))
            return True
        except NotFoundError:
            return False

    def fork(self, count=1):
        """count (1..64) new independent sandboxes from this one's current
        filesystem, limits, env, metadata and network policy: all or none."""
        j = self._api.request("POST", self._p("/fork"), json_body={"count": int(count)})
        return [Sandbox(_api=self._api, _info=i) for i in j.get("sandboxes", [])]

    # -- ports ------------------------------------------------------------------

    def get_ports(self):
        """PortsInfo(public, domain, port_token)."""
        return PortsInfo.from_json(self._api.request("GET", self._p("/ports")))

    def set_ports_public(self, public=True):
        """Public ports need no token (by design: anyone who reaches the server)."""
        return PortsInfo.from_json(self._api.request("POST", self._p("/ports/public"),
                                                     json_body={"public": bool(public)}))

    def get_host(self, port):
        """"PORT-ID.DOMAIN[:n]", as E2B's get_host: a service listening on
        `port` inside the sandbox is reached at http:// (or ws://) + it."""
        return "%d-%s.%s" % (_port(port), self.sandbox_id, self.get_ports().domain)

    def get_port_url(self, port, path="/", token=True):
        """A URL reaching `port` inside the sandbox through the server (the
        host form); with token (default), the port token in its query, so
        it works as it is unless the ports are public."""
        p = self.get_ports()
        url = "http://%d-%s.%s/%s" % (_port(port), self.sandbox_id, p.domain, path.lstrip("/"))
        if token and not p.public:
            url += ("&" if "?" in url else "?") + "paddock_port_token=" + p.port_token
        return url

    @property
    def port_token(self):
        return self.get_ports().port_token

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


def _policy(network):
    """A network argument as the API's policy object: "open" → {"mode": "open"}."""
    if network is None or isinstance(network, dict):
        return network
    if isinstance(network, str):
        return {"mode": network}
    from .exceptions import InvalidArgumentError
    raise InvalidArgumentError("network is a mode ('none', 'open', 'policy') or a policy dict, not %r" % (network,))


def _port(port):
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        from .exceptions import InvalidArgumentError
        raise InvalidArgumentError("a port is 1..65535, not %r" % (port,))
    return port


def _id(sandbox_id):
    # ids are [a-z0-9]{20}; refuse anything that could change the path
    if not isinstance(sandbox_id, str) or "/" in sandbox_id or "?" in sandbox_id or "#" in sandbox_id \
            or sandbox_id in ("", ".", ".."):
        from .exceptions import InvalidArgumentError
        raise InvalidArgumentError("invalid sandbox id %r" % (sandbox_id,))
    return sandbox_id
