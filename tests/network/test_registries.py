"""Egress out of the box, against the real internet this machine may reach
(issue 15): the package registries the host is configured for. The hosts
are read from the host's own npm config and apt sources at run time, never
written here. A handful of single requests, never a loop: per sandbox one
npm metadata fetch of a small package and one `apt-get update` of one
suite and component.

Nothing is configured: no --net-uplink, no --net-resolver. paddock's
default uplink (TCP through the relay, the rest through slirp4netns) and
the host's resolvers carry it.
A test skips, saying why, only when the host itself cannot reach the
registry (checked with one request from the host, and only after the
sandbox failed).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pdtest import PADDOCK_BIN, Paddock  # noqa: E402

NETD = os.environ.get("PADDOCK_NETD") or os.path.join(os.path.dirname(PADDOCK_BIN), "net", "paddock-netd")
UPLINK = os.environ.get("PADDOCK_UPLINK") or os.path.join(os.path.dirname(PADDOCK_BIN), "net", "paddock-uplink")
PACKAGE = "left-pad"            # a small package; only its abbreviated metadata is fetched


def npm_registry():
    """The registry URL of the host's npm config."""
    if shutil.which("npm"):
        r = subprocess.run(["npm", "config", "get", "registry"], capture_output=True, text=True, timeout=60)
        url = r.stdout.strip()
        if r.returncode == 0 and url.startswith("http"):
            return url.rstrip("/") + "/"
    for rc in (os.path.expanduser("~/.npmrc"), "/etc/npmrc", "/usr/etc/npmrc"):
        try:
            for line in open(rc):
                m = re.match(r"\s*registry\s*=\s*(\S+)", line)
                if m:
                    return m.group(1).rstrip("/") + "/"
        except OSError:
            pass
    return "https://registry.npmjs.org/"       # npm's own default when nothing sets one


def apt_source():
    """(uri, suite, component, signed_by) of the host's first Debian source."""
    entries = []
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    for path in files:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            m = re.match(r"\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(\S+)", line)
            if m:
                opts = m.group(1) or ""
                sb = re.search(r"signed-by=(\S+?)[\] ]", opts + " ")
                entries.append((m.group(2), m.group(3), m.group(4), sb.group(1) if sb else None))
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in open(path).read().split("\n\n"):
            f = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith((" ", "#")):
                    k, v = line.split(":", 1)
                    f[k.strip().lower()] = v.split()
            if "deb" in f.get("types", []) and f.get("uris") and f.get("suites") and f.get("components"):
                entries.append((f["uris"][0], f["suites"][0], f["components"][0],
                                (f.get("signed-by") or [None])[0]))
    entries = [e for e in entries if e[0].startswith("http")]
    if not entries:
        pytest.skip("the host has no http(s) apt source")
    uri, suite, comp, sb = entries[0]
    if not sb:
        sb = "/usr/share/keyrings/debian-archive-keyring.gpg"
    return uri.rstrip("/"), suite, comp, sb


def host_of(url):
    return urllib.parse.urlparse(url).hostname


# one npm metadata fetch and one apt-get update; prints a JSON verdict
CHECK = r"""
import json, os, subprocess, sys
npm_url, apt_line, other = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
r = subprocess.run(["curl", "-sS", "--max-time", "60", "-H", "Accept: application/vnd.npm.install-v1+json",
                    npm_url], capture_output=True, text=True)
try:
    out["npm"] = "ok" if r.returncode == 0 and json.loads(r.stdout).get("name") else "bad: %s" % r.stdout[:200]
except ValueError:
    out["npm"] = "error %d: %s" % (r.returncode, (r.stderr or r.stdout)[:200])
os.makedirs("/tmp/apt/lists/partial", exist_ok=True)
with open("/tmp/apt/sources.list", "w") as f:
    f.write(apt_line + "\n")
r = subprocess.run(["apt-get", "update", "-o", "Dir::Etc::sourcelist=/tmp/apt/sources.list",
                    "-o", "Dir::Etc::sourceparts=-", "-o", "Dir::State::lists=/tmp/apt/lists",
                    "-o", "APT::Sandbox::User=root", "-o", "Acquire::Languages=none",
                    "-o", "Acquire::Retries=0", "-o", "Acquire::http::Timeout=60"],
                   capture_output=True, text=True)
lists = [n for n in os.listdir("/tmp/apt/lists") if n.endswith("InRelease") or n.endswith("Release")]
fail = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith(("E:", "Err:", "W: Failed"))]
out["apt"] = "ok" if r.returncode == 0 and lists and not fail else "error %d: %s" % (r.returncode, fail[:3])
import socket
try:
    socket.getaddrinfo(other, 443)
    out["other"] = "resolved"
except OSError as e:
    out["other"] = "failed: %s" % e
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def reg():
    npm = npm_registry()
    uri, suite, comp, sb = apt_source()
    return {"npm_url": npm + PACKAGE, "npm_host": host_of(npm),
            "apt_line": "deb [signed-by=%s] %s %s %s" % (sb, uri, suite, comp), "apt_host": host_of(uri),
            "apt_url": "%s/dists/%s/InRelease" % (uri, suite)}


@pytest.fixture(scope="module")
def pd(state_root):
    p = Paddock(os.path.join(state_root, "net-registries"))
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr


def env():
    e = {"PADDOCK_UPLINK": UPLINK}
    if os.access(NETD, os.X_OK):
        e["PADDOCK_NETD"] = NETD
    return e


def check(pd, reg, net, other):
    r = pd.run(["-u", "root"] + net + ["--", "python3", "-c", CHECK, reg["npm_url"], reg["apt_line"], other],
               timeout=600, env=env())
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def host_reaches(url):
    """One request from the host itself (only asked after a sandbox failed)."""
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "--max-time", "60", "-w", "%{http_code}", url],
                       capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.startswith(("2", "3"))


def skip_unless_host_reaches(reg, res):
    for key, url in (("npm", reg["npm_url"]), ("apt", reg["apt_url"])):
        if res.get(key) != "ok" and not host_reaches(url):
            pytest.skip("the host itself cannot reach %s (%s)" % (host_of(url), url))


def test_open_reaches_the_hosts_registries(pd, reg):
    res, err = check(pd, reg, ["--net", "open"], reg["npm_host"])
    if res["npm"] != "ok" or res["apt"] != "ok":
        skip_unless_host_reaches(reg, res)
    assert res["npm"] == "ok" and res["apt"] == "ok", res
    assert "warning" not in err, err


def test_policy_reaches_the_registries_it_allows_and_no_other_name(pd, reg):
    # another name: the other registry, not allowed here (no request leaves:
    # paddock's resolver answers NXDOMAIN itself)
    res, err = check(pd, reg, ["--net", "policy", "--allow", reg["npm_host"], "--allow", reg["apt_host"]],
                     "deb.example.org" if reg["apt_host"] != "deb.example.org" else "npm.example.org")
    if res["npm"] != "ok" or res["apt"] != "ok":
        skip_unless_host_reaches(reg, res)
    assert res["npm"] == "ok" and res["apt"] == "ok", res
    assert res["other"].startswith("failed"), res
    # allowing one registry only: the other one's name fails
    res, _ = check(pd, reg, ["--net", "policy", "--allow", reg["npm_host"]], reg["apt_host"])
    assert res["npm"] == "ok" and res["apt"] != "ok" and res["other"].startswith("failed"), res


def test_none_reaches_neither(pd, reg):
    res, _ = check(pd, reg, ["--net", "none"], reg["npm_host"])
    assert res["npm"] != "ok" and res["apt"] != "ok" and res["other"].startswith("failed"), res
