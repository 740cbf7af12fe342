"""The HTTP transport: one http.client connection per request (threads may
share an ApiClient), JSON in and out, typed errors, streamed bodies."""
import http.client
import json
import os
import socket
import urllib.parse

from .exceptions import ConnectionError, PaddockError, TimeoutError, error_for

DEFAULT_URL = "http://127.0.0.1:49982"
DEFAULT_STATE_DIR = "/var/lib/paddock"
DEFAULT_REQUEST_TIMEOUT = 60.0
CHUNK = 64 * 1024

try:
    from importlib.metadata import version as _version
    VERSION = _version("paddock")
except Exception:  # not installed: used from a source tree
    VERSION = "0.1.0"


class ApiClient:
    def __init__(self, api_key=None, url=None, request_timeout=None):
        self.url = (url or os.environ.get("PADDOCK_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("PADDOCK_API_KEY") or local_key()
        self.request_timeout = request_timeout or DEFAULT_REQUEST_TIMEOUT
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise PaddockError("invalid server URL '%s' (expected http://HOST:PORT)" % self.url)
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")

    # -- plumbing ----------------------------------------------------------

    def _conn(self, timeout):
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _headers(self, extra=None):
        h = {"User-Agent": "paddock-python/" + VERSION, "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        if extra:
            h.update(extra)
        return h

    def path(self, path, query=None):
        p = self._prefix + "/api/v1" + path
        if query:
            q = [(k, v) for k, v in query if v is not None]
            if q:
                p += "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
        return p

    def open(self, method, path, query=None, body=None, json_body=None, headers=None, timeout=None,
             ok=(200, 201, 202, 204)):
        """Send a request; return (conn, response) with the body unread.
        Raises the typed error for a non-2xx answer. body may be bytes or an
        iterable of bytes (sent chunked)."""
        hdrs = self._headers(headers)
        chunked = False
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        elif body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
            chunked = True
            hdrs.setdefault("Content-Type", "application/octet-stream")
        elif body is not None:
            hdrs.setdefault("Content-Type", "application/octet-stream")
        elif method in ("POST", "PUT"):
            hdrs["Content-Length"] = "0"
        conn = self._conn(self.request_timeout if timeout is None else timeout)
        try:
            conn.request(method, self.path(path, query), body=body, headers=hdrs, encode_chunked=chunked)
            resp = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise TimeoutError("%s %s: no answer from %s in time" % (method, path, self.url)) from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            # A refused upload may be answered before the body was sent.
            raise ConnectionError("cannot reach the paddock server at %s: %s" % (self.url, e)) from e
        if resp.status not in ok:
            try:
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            conn.close()
            raise _error(resp.status, raw)
        return conn, resp

    def request(self, method, path, query=None, json_body=None, body=None, headers=None, timeout=None,
                raw=False):
        conn, resp = self.open(method, path, query=query, json_body=json_body, body=body, headers=headers,
                               timeout=timeout)
        try:
            data = resp.read()
        except socket.timeout as e:
            raise TimeoutError("%s %s: answer not complete in time" % (method, path)) from e
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionError("%s %s: connection lost: %s" % (method, path, e)) from e
        finally:
            conn.close()
        if raw:
            return data
        if resp.status == 204 or not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise PaddockError("%s %s: the server answered something that is not JSON" % (method, path)) from e


def local_key():
    """The key `paddock serve` stored in the local state dir, as the CLI
    reads it: $PADDOCK_STATE_DIR/api-key (default /var/lib/paddock), when
    this user may read it; else None."""
    path = os.path.join(os.environ.get("PADDOCK_STATE_DIR") or DEFAULT_STATE_DIR, "api-key")
    try:
        with open(path) as f:
            return f.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _error(status, raw):
    code, message = None, None
    try:
        e = json.loads(raw)["error"]
        code, message = e.get("code"), e.get("message")
    except Exception:
        message = raw.decode("utf-8", "replace").strip()[:500] or None
    return error_for(status, code, message)


def iter_body(resp, conn, chunk=CHUNK):
    """Yield a response body in chunks, closing the connection at the end."""
    try:
        while True:
            b = resp.read1(chunk) if hasattr(resp, "read1") else resp.read(chunk)
            if not b:
                return
            yield b
    finally:
        conn.close()
