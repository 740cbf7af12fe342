#!/usr/bin/python3
"""paddock's E2B code-interpreter bridge: runs INSIDE a sandbox.

paddock serve writes this file to /opt/paddock/kernel_bridge.py in the
sandbox and starts it (as "user") the first time an E2B SDK talks to port
49999; requests reach it through the agent's TCP tunnel. It speaks the HTTP
API the @e2b/code-interpreter SDK expects and runs code in Jupyter kernels
(Debian's python3-jupyter-client + python3-ipykernel), one kernel per
context:

  POST   /execute {code, context_id?, language?, env_vars?}
         -> one JSON object per line, flushed as it happens:
            {"type":"stdout"|"stderr","text"}
            {"type":"result","is_main_result",...formats}   (text, html, png, ...)
            {"type":"error","name","value","traceback"}
            {"type":"number_of_executions","execution_count"}
            {"type":"end_of_execution"}
  POST   /contexts {language?, cwd?}      -> {id, language, cwd}
  GET    /contexts                        -> [{id, language, cwd}]
  DELETE /contexts/{id}                   -> {}
  POST   /contexts/{id}/restart           -> {}
  GET    /health                          -> "OK"

Standard library only, besides jupyter_client.
"""
import argparse
import json
import os
import queue
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORMATS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}

SETUP_CODE = r"""
import os as __pd_os
try:
    __pd_os.chdir(%r)
except OSError:
    pass
try:
    import matplotlib as __pd_mpl
    __pd_mpl.use("module://matplotlib_inline.backend_inline")
    get_ipython().run_line_magic("matplotlib", "inline")
except Exception:
    pass
del __pd_os
"""

LANGUAGES = {"python": "python3", "python3": "python3"}


class Context:
    def __init__(self, language, cwd):
        from jupyter_client.manager import KernelManager

        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self.km = KernelManager(kernel_name=LANGUAGES[language])
        self.km.start_kernel(cwd=cwd if os.path.isdir(cwd) else None)
        self.kc = None
        self._connect()

    def _connect(self):
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.silent(SETUP_CODE % self.cwd)

    def silent(self, code):
        msg_id = self.kc.execute(code, silent=True, store_history=False)
        self._drain(msg_id, None)

    def restart(self):
        self.kc.stop_channels()
        self.km.restart_kernel(now=True)
        self._connect()

    def shutdown(self):
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)

    def _drain(self, msg_id, emit):
        """Relay iopub messages of msg_id until the kernel is idle again."""
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                if not self.km.is_alive():
                    if emit:
                        emit({"type": "error", "name": "KernelDied",
                              "value": "the kernel died", "traceback": ""})
                    return
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            content = msg["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                return
            if emit is None:
                continue
            if kind == "stream":
                emit({"type": "stderr" if content.get("name") == "stderr" else "stdout",
                      "text": content.get("text", "")})
            elif kind in ("execute_result", "display_data"):
                out = {"type": "result", "is_main_result": kind == "execute_result"}
                extra = {}
                for mime, value in content.get("data", {}).items():
                    key = FORMATS.get(mime)
                    if key:
                        out[key] = value
                    else:
                        extra[mime] = value
                if extra:
                    out["extra"] = extra
                emit(out)
            elif kind == "error":
                emit({"type": "error", "name": content.get("ename", ""),
                      "value": content.get("evalue", ""),
                      "traceback": "\n".join(content.get("traceback", []))})
            elif kind == "execute_input":
                emit({"type": "number_of_executions",
                      "execution_count": content.get("execution_count")})

    def execute(self, code, env_vars, emit):
        with self.lock:
            if env_vars:
                self.silent("import os as __pd_os\n__pd_saved_env = {k: __pd_os.environ.get(k) for k in %r}\n"
                            "__pd_os.environ.update(%r)\ndel __pd_os" % (list(env_vars), env_vars))
            try:
                msg_id = self.kc.execute(code, store_history=True, allow_stdin=False)
                try:
                    self._drain(msg_id, emit)
                except BrokenPipeError:
                    self.km.interrupt_kernel()
                    self._drain(msg_id, None)
                    raise
            finally:
                if env_vars:
                    self.silent("import os as __pd_os\nfor __k, __v in __pd_saved_env.items():\n"
                                "    if __v is None: __pd_os.environ.pop(__k, None)\n"
                                "    else: __pd_os.environ[__k] = __v\n"
                                "del __pd_os, __pd_saved_env")


class Bridge:
    def __init__(self):
        self.lock = threading.Lock()
        self.contexts = {}
        self.default = None

    def create(self, language, cwd):
        ctx = Context(language, cwd)
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def get_default(self, language="python"):
        with self.lock:
            ctx = self.default
        if ctx is None:
            ctx = Context(language, os.environ.get("HOME", "/home/user"))
            with self.lock:
                if self.default is None:
                    self.default = ctx
                    self.contexts[ctx.id] = ctx
                else:
                    ctx.shutdown()
                    ctx = self.default
        return ctx


BRIDGE = Bridge()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "paddock-kernel-bridge/0.1"

    def log_message(self, fmt, *args):
        pass

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n <= 0:
            return {}
        try:
            obj = json.loads(self.rfile.read(n))
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    def _path(self):
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_GET(self):
        p = self._path()
        if p == "/health":
            body = b"OK"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif p == "/contexts":
            with BRIDGE.lock:
                items = [{"id": c.id, "language": c.language, "cwd": c.cwd}
                         for c in BRIDGE.contexts.values()]
            self._json(200, items)
        else:
            self._json(404, {"error": "not found"})

    def do_DELETE(self):
        p = self._path()
        if p.startswith("/contexts/"):
            cid = p[len("/contexts/"):]
            with BRIDGE.lock:
                ctx = BRIDGE.contexts.pop(cid, None)
                if ctx is not None and ctx is BRIDGE.default:
                    BRIDGE.default = None
            if ctx is None:
                return self._json(404, {"error": "context %s not found" % cid})
            ctx.shutdown()
            return self._json(200, {})
        self._json(404, {"error": "not found"})

    def do_POST(self):
        p = self._path()
        body = self._body()
        if body is None:
            return self._json(400, {"error": "the body must be a JSON object"})
        if p == "/contexts":
            language = body.get("language") or "python"
            if language not in LANGUAGES:
                return self._json(400, {"error": "language %r is not supported (python only)" % language})
            cwd = body.get("cwd") or os.environ.get("HOME", "/home/user")
            try:
                ctx = BRIDGE.create(language, cwd)
            except Exception as e:  # noqa: BLE001 - report any start failure
                return self._json(500, {"error": "cannot start a kernel: %s" % e})
            return self._json(200, {"id": ctx.id, "language": ctx.language, "cwd": ctx.cwd})
        if p.startswith("/contexts/") and p.endswith("/restart"):
            cid = p[len("/contexts/"):-len("/restart")]
            with BRIDGE.lock:
                ctx = BRIDGE.contexts.get(cid)
            if ctx is None:
                return self._json(404, {"error": "context %s not found" % cid})
            with ctx.lock:
                ctx.restart()
            return self._json(200, {})
        if p == "/execute":
            return self._execute(body)
        self._json(404, {"error": "not found"})

    def _execute(self, body):
        code = body.get("code")
        if not isinstance(code, str):
            return self._json(400, {"error": "code must be a string"})
        cid = body.get("context_id")
        language = body.get("language")
        env_vars = body.get("env_vars") or {}
        if not isinstance(env_vars, dict) or not all(isinstance(v, str) for v in env_vars.values()):
            return self._json(400, {"error": "env_vars must be an object of strings"})
        try:
            if cid:
                with BRIDGE.lock:
                    ctx = BRIDGE.contexts.get(cid)
                if ctx is None:
                    return self._json(404, {"error": "context %s not found" % cid})
            else:
                if language and language not in LANGUAGES:
                    return self._json(400, {"error": "language %r is not supported (python only)" % language})
                ctx = BRIDGE.get_default()
        except Exception as e:  # noqa: BLE001
            return self._json(500, {"error": "cannot start a kernel: %s" % e})
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.flush()

        def emit(obj):
            self.wfile.write(json.dumps(obj).encode() + b"\n")
            self.wfile.flush()

        try:
            ctx.execute(code, env_vars, emit)
            emit({"type": "end_of_execution"})
        except BrokenPipeError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=49999)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    # start the default kernel now: the first runCode is then quicker
    threading.Thread(target=lambda: _warm(), daemon=True).start()
    srv.serve_forever()


def _warm():
    try:
        BRIDGE.get_default()
    except Exception as e:  # noqa: BLE001
        print("kernel_bridge: default kernel: %s" % e, file=sys.stderr)


if __name__ == "__main__":
    main()
