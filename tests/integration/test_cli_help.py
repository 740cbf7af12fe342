"""Every verb's --help fits an 80-column terminal (and exits 0 on stdout).

    /usr/bin/python3 -m pytest -q tests/integration/test_cli_help.py

Needs a build; no server, no root."""
import re
import subprocess

import pytest

from pdtest import PADDOCK_BIN
from pdtest.server import server_env


def verbs():
    """The verbs `paddock --help` lists (local and client), so a new verb
    is checked without touching this file."""
    out = subprocess.run([PADDOCK_BIN, "--help"], capture_output=True, text=True, timeout=30).stdout
    return [m.group(1) for m in re.finditer(r"^  ([a-z]+) ", out, re.M)]


SUBVERBS = [("key", "create"), ("key", "list"), ("template", "ls"), ("template", "pull"), ("template", "build")]


def too_wide(text):
    return [l for l in text.splitlines() if len(l.expandtabs()) > 80]


def test_the_verb_list_is_complete():
    v = verbs()
    for need in ("run", "serve", "create", "ls", "exec", "cp", "pause", "snapshot", "template"):
        assert need in v, v


@pytest.mark.parametrize("args", [[v] for v in verbs()] + [list(s) for s in SUBVERBS] + [[]],
                         ids=lambda a: " ".join(a) or "paddock")
def test_help_fits_80_columns(args):
    r = subprocess.run([PADDOCK_BIN] + args + ["--help"], capture_output=True, text=True, timeout=30,
                       env=server_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (args, r.stderr)
    assert r.stdout.strip(), (args, r.stderr)
    assert too_wide(r.stdout) == [], "paddock %s --help" % " ".join(args)
