"""sbx.pty: interactive terminals. A pty process is an ordinary process
started with "pty" and "stdin": its output is the one "pty" stream (read
like any output, resumable from an offset), its input goes through
POST .../stdin, and .../resize changes its size. Shaped like E2B's
sbx.pty (create / send_stdin / resize / kill / connect)."""
from .commands import CommandHandle, Commands, _offset


class PtySize:
    def __init__(self, rows=24, cols=80):
        self.rows, self.cols = int(rows), int(cols)

    def __repr__(self):
        return "PtySize(rows=%d, cols=%d)" % (self.rows, self.cols)


def _size(size):
    if size is None:
        return PtySize()
    if isinstance(size, PtySize):
        return size
    rows, cols = size              # a (rows, cols) pair
    return PtySize(rows, cols)


class Pty:
    def __init__(self, api, sandbox_id):
        self._api = api
        self._sid = sandbox_id
        self._cmds = Commands(api, sandbox_id)

    def create(self, size=None, on_data=None, cmd=None, envs=None, cwd=None, user=None, timeout=None, tag=None):
        """Start a terminal (default `bash -i -l`, TERM=xterm-256color) of
        size (PtySize or (rows, cols); default 24x80). on_data gets the
        terminal's output as bytes, in order. Returns a CommandHandle:
        .send_stdin(), .resize(rows, cols), .kill(), .wait(); its .stdout is
        the terminal's output so far."""
        sz = _size(size)
        pid = self._cmds._start(cmd or ["/bin/bash", "-i", "-l"], envs, cwd, user, timeout, True,
                                pty={"rows": sz.rows, "cols": sz.cols}, tag=tag)
        return CommandHandle(self._api, self._sid, pid, on_pty=on_data, pty_bytes=True)

    def connect(self, pid, on_data=None, offset=0):
        """A handle on a running terminal, its output from byte `offset` on
        (0: what the server's ring buffer still holds)."""
        _offset(offset)
        self._cmds.get(pid)
        return CommandHandle(self._api, self._sid, pid, on_pty=on_data, from_stdout=offset, pty_bytes=True)

    def send_stdin(self, pid, data):
        self._cmds.send_stdin(pid, data)

    def resize(self, pid, size):
        sz = _size(size)
        CommandHandle(self._api, self._sid, pid, start=False).resize(sz.rows, sz.cols)

    def kill(self, pid, signal="SIGKILL"):
        return self._cmds.kill(pid, signal)
