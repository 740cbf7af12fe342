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
  GET    /ready   -> 200 once the default kernel is up (503 before; 500
                     if it could not start): what --wait-ready polls

Languages: python (a Jupyter kernel) and bash (one bash process per
context, its state kept between runs); any other is refused naming these.

Every request may carry X-Paddock-Env (base64 of a JSON object of
strings): the sandbox's envVars, added by paddock serve (the SDK's own
headers never reach here). A bridge started ahead of its sandbox's owner
(the warm pool, --warm) learns them that way: they are put in its own
environment and in every kernel's before the request is handled.

--warm: the default kernel also imports the common data modules (numpy,
pandas, matplotlib.pyplot) into sys.modules, binding no name the user
sees, so a pooled sandbox's first runCode starts at once.

Inside each Python kernel this same file is loaded as a module
(kernel_setup): figures left open by a non-inline backend (a script
that set matplotlib.use("Agg")) are shown after each run, and a
matplotlib figure's display carries E2B's structured `chart`.

Standard library only, besides jupyter_client.
"""
import argparse
import base64
import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time
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
    "application/vnd.paddock.chart+json": "chart",
}

CHART_MIME = "application/vnd.paddock.chart+json"
# a kernel start on a loaded 2-core host has been seen to take over 60 s
KERNEL_START_S = 150
HERE = os.path.abspath(__file__)
WARM_MODULES = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot")

SETUP_CODE = r"""
def __pd_setup():
    import importlib.util, os, sys
    try:
        os.chdir(%r)
    except OSError:
        pass
    spec = importlib.util.spec_from_file_location("_paddock_kernel", %r)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["_paddock_kernel"] = mod
    mod.kernel_setup(get_ipython())
__pd_setup()
del __pd_setup
"""

# The warm-up: modules imported, no name bound in the user's namespace.
WARM_CODE = r"""
def __pd_warm():
    import importlib
    for name in %r:
        try:
            importlib.import_module(name)
        except Exception:
            pass
__pd_warm()
del __pd_warm
""" % (WARM_MODULES,)


# ---- inside a kernel (loaded there as module _paddock_kernel) ----

def kernel_setup(ip):
    """Inline figures, figures of other backends shown after each run, and
    the chart formatter. Runs in the kernel; binds nothing in the user's
    namespace."""
    try:
        import matplotlib
        matplotlib.use("module://matplotlib_inline.backend_inline")
        ip.run_line_magic("matplotlib", "inline")
    except Exception:
        pass
    try:
        from IPython.core.formatters import BaseFormatter
        from traitlets import ObjectName, Unicode

        class ChartFormatter(BaseFormatter):
            format_type = Unicode(CHART_MIME)
            print_method = ObjectName("_repr_paddock_chart_")
            _return_type = (dict,)

        f = ChartFormatter(parent=ip.display_formatter)
        ip.display_formatter.formatters[CHART_MIME] = f
        f.for_type_by_name("matplotlib.figure", "Figure", figure_chart)
    except Exception:
        pass
    ip.events.register("post_run_cell", show_open_figures)


def show_open_figures(*_):
    """A backend other than inline (matplotlib.use("Agg")) shows nothing at
    the end of a run: display the figures it left open, as inline would."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        import matplotlib
        if "inline" in matplotlib.get_backend():
            return
        nums = plt.get_fignums()
        if not nums:
            return
        from IPython.display import display
        for n in nums:
            display(plt.figure(n))
        plt.close("all")
    except Exception:
        pass


def _num(v):
    try:
        import numpy
        if isinstance(v, numpy.generic):
            v = v.item()
    except ImportError:
        pass
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, (int, float, str)):
        return v
    return str(v)


def _ticks(ax, which):
    try:
        ticks = ax.get_xticks() if which == "x" else ax.get_yticks()
        labels = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
        return [_num(t) for t in ticks], [t.get_text() for t in labels]
    except Exception:
        return [], []


def _axes_chart(ax):
    """E2B's chart of one Axes: line, scatter, bar, pie or box (the
    @e2b/code-interpreter SDK's ChartTypes), None when it is none of them."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Wedge

    base = {"title": ax.get_title()}
    two_d = dict(base, x_label=ax.get_xlabel() or None, y_label=ax.get_ylabel() or None,
                 x_unit=None, y_unit=None)
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        texts = [t.get_text() for t in ax.texts]
        elems = []
        for i, w in enumerate(wedges):
            label = w.get_label()
            if (not label or label.startswith("_")) and i < len(texts):
                label = texts[i]
            elems.append({"label": label, "angle": _num(abs(w.theta2 - w.theta1)), "radius": _num(w.r)})
        return dict(base, type="pie", elements=elems)
    bars = [c for c in getattr(ax, "containers", []) if type(c).__name__ == "BarContainer"]
    if bars:
        _, xlabels = _ticks(ax, "x")
        elems = []
        for c in bars:
            group = c.get_label() or ""
            if group.startswith("_"):
                group = ""
            for i, r in enumerate(c.patches):
                x = r.get_x() + r.get_width() / 2
                label = str(_num(x))
                for t in ax.get_xticklabels():
                    if t.get_text() and abs(t.get_position()[0] - x) < max(r.get_width() / 2, 1e-9):
                        label = t.get_text()
                elems.append({"label": label, "value": str(_num(r.get_height())), "group": group})
        return dict(two_d, type="bar", elements=elems)
    lines = ax.get_lines()
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    if not lines and not scatters:
        return None
    xt, xl = _ticks(ax, "x")
    yt, yl = _ticks(ax, "y")
    pts = dict(two_d, x_ticks=xt, x_tick_labels=xl, x_scale=ax.get_xscale(),
               y_ticks=yt, y_tick_labels=yl, y_scale=ax.get_yscale())
    if lines and not scatters:
        elems = [{"label": l.get_label(), "points": [[_num(x), _num(y)] for x, y in l.get_xydata()]}
                 for l in lines]
        return dict(pts, type="line", elements=elems)
    elems = [{"label": c.get_label(), "points": [[_num(x), _num(y)] for x, y in c.get_offsets()]}
             for c in scatters]
    return dict(pts, type="scatter", elements=elems)


def figure_chart(fig):
    """A figure's chart: its one Axes', or a superchart of several."""
    try:
        charts = [c for c in (_axes_chart(ax) for ax in fig.get_axes()) if c is not None]
    except Exception:
        return None
    if not charts:
        return None
    if len(charts) == 1:
        return charts[0]
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    return {"type": "superchart", "title": title, "elements": charts}


# ---- the bridge ----

LANGUAGES = {"python": "python3", "python3": "python3", "bash": "bash", "sh": "bash"}
SUPPORTED = "python, bash"


def unsupported(language):
    return "language %r is not supported: this sandbox runs %s (no Debian-packaged kernel for others)" % (
        language, SUPPORTED)


def new_context(language, cwd, warm=False):
    if LANGUAGES[language] == "bash":
        return BashContext(language, cwd)
    return Context(language, cwd, warm)


class Context:
    def __init__(self, language, cwd, warm=False):
        from jupyter_client.manager import KernelManager

        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self.km = KernelManager(kernel_name=LANGUAGES[language])
        # the input history in memory only (In, Out, _i still work): the
        # default writes each run to ~/.ipython's SQLite file with four
        # fdatasyncs, beside the run, on every runCode
        self.km.start_kernel(cwd=cwd if os.path.isdir(cwd) else None,
                             extra_arguments=["--HistoryManager.enabled=False"])
        self.kc = None
        self._connect()
        if warm:
            self.silent(WARM_CODE)

    def _connect(self):
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=KERNEL_START_S)
        self.silent(SETUP_CODE % (self.cwd, HERE))

    def set_env(self, env):
        with self.lock:
            self.silent("import os as __pd_os\n__pd_os.environ.update(%r)\ndel __pd_os" % (env,))

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


class BashContext:
    """One bash per context, its state (cwd, variables) kept between runs.
    Each run is eval'd from a quoted here-document (the code reaches bash
    unchanged, a syntax error is a failed run, not a broken shell) and
    ends with a marker line on stdout and on stderr carrying $?."""

    def __init__(self, language, cwd):
        self.id = str(uuid.uuid4())
        self.language = "bash"
        self.cwd = cwd
        self.lock = threading.Lock()
        self.count = 0
        self._start()

    def _start(self):
        self.proc = subprocess.Popen(["/bin/bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=self.cwd if os.path.isdir(self.cwd) else None, close_fds=True)

    def set_env(self, env):
        with self.lock:
            self._run("".join("export %s=%s\n" % (k, _sh_quote(v)) for k, v in env.items()), None)

    def restart(self):
        self.shutdown()
        self._start()

    def shutdown(self):
        try:
            self.proc.kill()
            self.proc.wait()
        except OSError:
            pass

    def _run(self, code, emit):
        mark = "__paddock_end_%s" % uuid.uuid4().hex
        script = "eval \"$(cat <<'%s'\n%s\n%s\n)\" </dev/null\n__pd_rc=$?\necho; echo %s $__pd_rc\n" \
                 "echo >&2; echo %s >&2\n" % (mark, code, mark, mark, mark)
        try:
            self.proc.stdin.write(script.encode())
            self.proc.stdin.flush()
        except OSError:
            pass
        status = [None]

        def pump(stream, kind):
            # a bare newline is held back: the last one is the echo that
            # puts the marker on a line of its own
            held = False
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace")
                if line.startswith(mark):
                    if kind == "stdout":
                        try:
                            status[0] = int(line.split()[1])
                        except (IndexError, ValueError):
                            status[0] = -1
                    return
                if held and emit:
                    emit({"type": kind, "text": "\n"})
                held = line == "\n"
                if not held and emit:
                    emit({"type": kind, "text": line})
        t = threading.Thread(target=pump, args=(self.proc.stderr, "stderr"), daemon=True)
        t.start()
        pump(self.proc.stdout, "stdout")
        t.join()
        return status[0]

    def execute(self, code, env_vars, emit):
        with self.lock:
            if env_vars:
                code = "".join("export %s=%s\n" % (k, _sh_quote(v)) for k, v in env_vars.items()) + code
            self.count += 1
            emit({"type": "number_of_executions", "execution_count": self.count})
            rc = self._run(code, emit)
            if rc is None:
                emit({"type": "error", "name": "KernelDied", "value": "bash exited", "traceback": ""})
                self.restart()
            elif rc != 0:
                emit({"type": "error", "name": "ExitCode", "value": "exit status %d" % rc, "traceback": ""})


def _sh_quote(v):
    return "'" + v.replace("'", "'\\''") + "'"


class Bridge:
    def __init__(self):
        self.lock = threading.Lock()
        self.contexts = {}
        self.default = None
        self.warm = False
        self.ready = threading.Event()
        self.failed = None
        self.env_lock = threading.Lock()
        self.default_lock = threading.Lock()
        self.env_seen = None

    def apply_env(self, header):
        """The sandbox's envVars (X-Paddock-Env) into the bridge's
        environment and every context's, once: the header is the same on
        every request of a sandbox."""
        if not header or header == self.env_seen:
            return
        with self.env_lock:
            if header == self.env_seen:
                return
            try:
                env = json.loads(base64.b64decode(header))
            except ValueError:
                return
            if not isinstance(env, dict):
                return
            env = {k: v for k, v in env.items()
                   if isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\0" not in k + v}
            changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
            if changed:
                os.environ.update(changed)
                with self.lock:
                    ctxs = list(self.contexts.values())
                for ctx in ctxs:
                    ctx.set_env(changed)
            self.env_seen = header

    def create(self, language, cwd):
        ctx = new_context(language, cwd)
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def get_default(self, language="python"):
        """The default context of a language: python's is made at start,
        bash's on first use."""
        if LANGUAGES[language] == "bash":
            with self.lock:
                for c in self.contexts.values():
                    if getattr(c, "default_bash", False):
                        return c
            ctx = BashContext(language, os.environ.get("HOME", "/home/user"))
            ctx.default_bash = True
            with self.lock:
                self.contexts[ctx.id] = ctx
            return ctx
        # one start at a time: a runCode that comes while the start-up
        # thread starts the default kernel waits for that one, rather than
        # starting a second kernel beside it
        with self.default_lock:
            with self.lock:
                ctx = self.default
            if ctx is None:
                ctx = Context(language, os.environ.get("HOME", "/home/user"), self.warm)
                with self.lock:
                    self.default = ctx
                    self.contexts[ctx.id] = ctx
        return ctx


BRIDGE = Bridge()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "paddock-kernel-bridge/0.1"
    # TCP_NODELAY: each /execute line goes out as it is written, not held
    # back (Nagle) until the agent acknowledges the one before
    disable_nagle_algorithm = True

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
        BRIDGE.apply_env(self.headers.get("X-Paddock-Env"))
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_GET(self):
        p = self._path()
        if p == "/ready":
            if BRIDGE.failed:
                return self._json(500, {"error": BRIDGE.failed})
            return self._json(200 if BRIDGE.ready.is_set() else 503, {"ready": BRIDGE.ready.is_set()})
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
                         for c in BRIDGE.contexts.values() if not getattr(c, "default_bash", False)]
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
                return self._json(400, {"error": unsupported(language)})
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

    def _stream(self, objs):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        for obj in objs + [{"type": "end_of_execution"}]:
            self.wfile.write(json.dumps(obj).encode() + b"\n")

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
                    # an execution error: the SDK shows a 400's body only
                    # in its diagnostics, an error's value always
                    return self._stream([{"type": "error", "name": "UnsupportedLanguage",
                                          "value": unsupported(language), "traceback": ""}])
                ctx = BRIDGE.get_default(language or "python")
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


def wait_ready(port, timeout):
    """--wait-ready: poll /ready until the default kernel is up (exit 0),
    failed (exit 1) or the time is out (exit 2). What the warm pool runs."""
    import urllib.error
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/ready" % port, timeout=5) as r:
                if r.status == 200:
                    return 0
        except urllib.error.HTTPError as e:
            if e.code == 500:
                print("kernel_bridge: %s" % e.read().decode("utf-8", "replace"), file=sys.stderr)
                return 1
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    return 2


def main():
    # X-Paddock-Env carries up to E2B's envVars limit, past http.client's
    # 64 KiB header line
    http.client._MAXLINE = 16 << 20
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=49999)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--warm", action="store_true", help="import the common modules in the default kernel")
    ap.add_argument("--wait-ready", type=int, metavar="SECONDS", help="wait for a running bridge, then exit")
    args = ap.parse_args()
    if args.wait_ready is not None:
        sys.exit(wait_ready(args.port, args.wait_ready))
    BRIDGE.warm = args.warm
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    # start the default kernel now: the first runCode is then quicker
    threading.Thread(target=lambda: _warm(), daemon=True).start()
    srv.serve_forever()


def _warm():
    try:
        BRIDGE.get_default()
        BRIDGE.ready.set()
    except Exception as e:  # noqa: BLE001
        BRIDGE.failed = "default kernel: %s" % e
        print("kernel_bridge: default kernel: %s" % e, file=sys.stderr)


if __name__ == "__main__":
    main()
