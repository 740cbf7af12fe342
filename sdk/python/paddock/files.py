"""sbx.files: streamed upload and download, stat, list, mkdir, move, remove."""
import io
import posixpath

from .exceptions import NotFoundError, SandboxError
from ._http import CHUNK, iter_body
from .models import EntryInfo


def _chunks(f, size=CHUNK):
    while True:
        b = f.read(size)
        if not b:
            return
        if isinstance(b, str):
            b = b.encode()
        yield b


class Files:
    def __init__(self, api, sandbox_id):
        self._api = api
        self._sid = sandbox_id

    def _p(self, suffix=""):
        return "/sandboxes/%s/files%s" % (self._sid, suffix)

    def write(self, path, data, user=None, mode=None):
        """Write data (str, bytes, or a file-like object, streamed) to path;
        missing parent directories are created. Returns the EntryInfo."""
        if isinstance(data, str):
            data = data.encode()
        q = [("path", path), ("user", user), ("mode", ("%o" % mode) if isinstance(mode, int) else mode)]
        rewind = None
        if isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
            def again():
                return body
        else:
            try:
                start = data.tell()
                data.seek(start)
                rewind = start
            except (AttributeError, OSError, io.UnsupportedOperation):
                rewind = None
            if rewind is None:
                self._make_parents(path, user)
            def again():
                if rewind is not None:
                    data.seek(rewind)
                return _chunks(data)
        try:
            j = self._api.request("PUT", self._p(), query=q, body=again())
        except NotFoundError:
            # E2B creates the parents: do it and try once more
            if isinstance(data, (bytes, bytearray, memoryview)) or rewind is not None:
                if not self._make_parents(path, user):
                    raise
                j = self._api.request("PUT", self._p(), query=q, body=again())
            else:
                raise
        return EntryInfo.from_json(j)

    def _make_parents(self, path, user):
        parent = posixpath.dirname(path)
        if not parent or parent == "/":
            return False
        try:
            self._api.request("POST", self._p("/mkdir"), json_body={"path": parent, "parents": True},
                              query=[("user", user)] if user else None)
            return True
        except SandboxError as e:
            return e.status == 409

    def read(self, path, format="text", user=None):
        """The file's content: format "text" (str), "bytes", or "stream" (an
        iterator of bytes chunks; read it to the end or close it)."""
        if format not in ("text", "bytes", "stream"):
            raise ValueError("format must be text, bytes or stream")
        q = [("path", path), ("user", user)]
        if format == "stream":
            conn, resp = self._api.open("GET", self._p(), query=q)
            return iter_body(resp, conn)
        data = self._api.request("GET", self._p(), query=q, raw=True)
        return data.decode("utf-8", "replace") if format == "text" else data

    def list(self, path, depth=1, user=None):
        j = self._api.request("GET", self._p("/list"), query=[("path", path), ("depth", str(depth)),
                                                               ("user", user)])
        return [EntryInfo.from_json(e) for e in j.get("entries", [])]

    def get_info(self, path, user=None):
        return EntryInfo.from_json(self._api.request("GET", self._p("/stat"), query=[("path", path), ("user", user)]))

    def exists(self, path, user=None):
        try:
            self.get_info(path, user)
            return True
        except NotFoundError:
            return False

    def make_dir(self, path, user=None):
        """Create a directory and its parents. False if it already existed."""
        try:
            self._api.request("POST", self._p("/mkdir"), json_body={"path": path, "parents": True},
                              query=[("user", user)] if user else None)
            return True
        except SandboxError as e:
            if e.status == 409:
                return False
            raise

    def rename(self, old_path, new_path, user=None):
        return EntryInfo.from_json(self._api.request("POST", self._p("/move"),
                                                     json_body={"from": old_path, "to": new_path},
                                                     query=[("user", user)] if user else None))

    def remove(self, path, user=None):
        """Remove a file or a directory (recursively)."""
        self._api.request("DELETE", self._p(), query=[("path", path), ("user", user)])
