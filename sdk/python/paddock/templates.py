"""Templates over HTTP (docs/api.md, "Templates"): list, pull an image,
build from a recipe (and a context), follow the build log, inspect,
delete. Builds are asynchronous on the server: pull() and build() wait
for the end by default, handing each log line to on_log, and raise
BuildError if the build failed (its log in .log)."""
import io
import json
import os
import tarfile

from ._http import ApiClient, CHUNK
from .exceptions import InvalidArgumentError, SandboxError
from .models import TemplateInfo


class BuildError(SandboxError):
    """A template build ended in `failed`: .error is the server's reason,
    .log the build's output."""

    def __init__(self, name, error, log):
        super().__init__("template %s: build failed: %s" % (name, error or "(no reason given)"))
        self.name, self.error, self.log = name, error, log


def _name(name):
    if not isinstance(name, str) or not name or "/" in name or "?" in name or "#" in name or name in (".", ".."):
        raise InvalidArgumentError("invalid template name %r" % (name,))
    return name


def _tar_of(context):
    """A build context as tar bytes: a directory path (packed here, its
    symlinks as symlinks) or bytes / a file object already holding a tar."""
    if isinstance(context, (bytes, bytearray)):
        return bytes(context)
    if hasattr(context, "read"):
        return context.read()
    if isinstance(context, (str, os.PathLike)) and os.path.isdir(context):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            for entry in sorted(os.listdir(context)):
                t.add(os.path.join(context, entry), arcname=entry)
        return buf.getvalue()
    raise InvalidArgumentError("a build context is a directory, tar bytes or a file object, not %r" % (context,))


class Templates:
    """Templates of the key: Templates(api_key=, url=) or sbx-independent
    paddock.Templates(); every method talks to the server at once."""

    def __init__(self, api_key=None, url=None, request_timeout=None, _api=None):
        self._api = _api or ApiClient(api_key, url, request_timeout)

    def list(self):
        """TemplateInfo of base, the shared templates, the key's own, and its
        builds not (yet) registered."""
        j = self._api.request("GET", "/templates")
        return [TemplateInfo.from_json(t) for t in j.get("templates", [])]

    def get(self, name):
        return TemplateInfo.from_json(self._api.request("GET", "/templates/%s" % _name(name)))

    def pull(self, name, image, wait=True, on_log=None):
        """Register image ("REGISTRY/REPO[:TAG][@sha256:D]"; the registry must
        be one the server allows) as template `name`."""
        j = self._api.request("POST", "/templates", json_body={"name": _name(name), "image": image})
        return self.wait(name, on_log=on_log) if wait else TemplateInfo.from_json(j)

    def build(self, name, recipe=None, context=None, recipe_path=None, build_args=None, wait=True, on_log=None,
              network=None):
        """Build template `name` from a recipe (Dockerfile syntax, text) or
        from a context (a directory, or tar bytes) holding one at
        recipe_path (default "Dockerfile"). network: the RUN steps' network
        ("none", the default, "open", or a policy {"mode", "allow", "deny"}
        as docs/network.md has it). With wait (the default) follow the build
        log to its end: each line goes to on_log; returns the TemplateInfo,
        or raises BuildError."""
        _name(name)
        if (recipe is None) == (context is None):
            raise InvalidArgumentError("build needs a recipe or a context (one of them)")
        if isinstance(network, str):
            network = {"mode": network}
        if network is not None and not isinstance(network, dict):
            raise InvalidArgumentError("network is a mode (none, open, policy) or a policy dict")
        if context is None:
            body = {"name": name, "recipe": recipe}
            if build_args:
                body["build_args"] = {str(k): str(v) for k, v in build_args.items()}
            if network is not None:
                body["network"] = network
            j = self._api.request("POST", "/templates", json_body=body)
        else:
            q = [("recipe", recipe_path)] + [("build_arg", "%s=%s" % kv) for kv in (build_args or {}).items()]
            if network is not None:
                if set(network) - {"mode", "allow", "deny"}:
                    raise InvalidArgumentError("with a context, network takes mode, allow and deny only")
                q += [("network", network.get("mode", "none"))]
                q += [("allow", r) for r in network.get("allow", [])] + [("deny", r) for r in network.get("deny", [])]
            j = self._api.request("POST", "/templates/%s/build" % name, query=q, body=_tar_of(context),
                                  headers={"Content-Type": "application/x-tar"})
        # without wait: the answer to the request (status "queued"), not a
        # GET that could still see the previous build's status
        return self.wait(name, on_log=on_log) if wait else TemplateInfo.from_json(j)

    def log(self, name, offset=0, follow=False):
        """The build's output from byte `offset`: with follow, an iterator
        of lines (bytes) until the build ends; without, the bytes so far."""
        q = [("offset", str(int(offset)))] + ([("follow", "1")] if follow else [])
        if not follow:
            return self._api.request("GET", "/templates/%s/log" % _name(name), query=q, raw=True)
        conn, resp = self._api.open("GET", "/templates/%s/log" % _name(name), query=q, timeout=None)

        def lines():
            try:
                while True:
                    line = resp.readline(CHUNK)
                    if not line:
                        return
                    yield line
            finally:
                conn.close()
        return lines()

    def wait(self, name, on_log=None):
        """Follow the build log of `name` to its end; the TemplateInfo, or
        BuildError if it failed."""
        out = []
        for line in self.log(name, follow=True):
            out.append(line)
            if on_log:
                on_log(line.decode("utf-8", "replace"))
        info = self.get(name)
        if info.status == "failed":
            raise BuildError(name, info.error, b"".join(out).decode("utf-8", "replace"))
        return info

    def delete(self, name):
        """Remove the key's template (refused while a sandbox or snapshot uses it)."""
        self._api.request("DELETE", "/templates/%s" % _name(name))
        return True
