"""A registry that redirects blob downloads (docs/templates.md "Redirects"):
skopeo follows redirects to any host, so a server-made pull runs it in a
network namespace of its own whose only way out is paddock's proxy, which
takes the allowed registries only. The registry here is a front on
loopback for the suite's docker-registry that answers every blob GET with
a 307 to somewhere else: another loopback port (which would serve the blob)
or a host name; both are refused, nothing is registered. Without a
redirect the same front pulls fine through the guard."""
import http.client
import http.server
import json
import os
import threading

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server
from test_api import _start, layers, templates, wait_built


class Front(http.server.ThreadingHTTPServer):
    """Relays to the registry at upstream (host:port); with redirect set,
    a blob GET is answered 307 to redirect + the path instead."""
    daemon_threads = True

    def __init__(self, upstream):
        self.upstream = upstream
        self.redirect = None
        self.hits = []
        super().__init__(("127.0.0.1", 0), Relay)

    @property
    def host(self):
        return "127.0.0.1:%d" % self.server_address[1]


class Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def relay(self, body=True):
        srv = self.server
        srv.hits.append(self.path)
        if srv.redirect and "/blobs/" in self.path and self.command == "GET":
            self.send_response(307)
            self.send_header("Location", srv.redirect + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        c = http.client.HTTPConnection(srv.upstream, timeout=30)
        try:
            # each header as sent (skopeo sends several Accept lines)
            c.putrequest(self.command, self.path, skip_accept_encoding=True)
            for k, v in self.headers.items():
                if k.lower() not in ("host", "connection"):
                    c.putheader(k, v)
            c.endheaders()
            r = c.getresponse()
            data = r.read()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)
        finally:
            c.close()

    def do_GET(self):
        self.relay()

    def do_HEAD(self):
        self.relay(body=False)


@pytest.fixture(scope="module")
def fronts(registry):
    """front: the registry with redirects; blobs: a plain relay on another
    loopback port (where a redirect would send the pull)."""
    front, blobs = Front(registry.host), Front(registry.host)
    ts = [threading.Thread(target=s.serve_forever, daemon=True) for s in (front, blobs)]
    for t in ts:
        t.start()
    yield front, blobs
    for s in (front, blobs):
        s.shutdown()
        s.server_close()


@pytest.fixture(scope="module")
def srv(fronts, regenv, work):
    front, _blobs = fronts
    # our registries.conf plus the front (plain HTTP too)
    conf = os.path.join(work, "registries-redirect.conf")
    with open(regenv["CONTAINERS_REGISTRIES_CONF"]) as f:
        text = f.read()
    with open(conf, "w") as f:
        f.write(text + '[[registry]]\nlocation = "%s"\ninsecure = true\n' % front.host)
    s = Server(None, "--pool", "0", "--template-registry", front.host, prefix="pd-tplredir-")
    try:
        _start(s, {"CONTAINERS_REGISTRIES_CONF": conf})
        yield s
    finally:
        s.finish()


def image(work, registry, regenv, tag):
    """An image of its own (no blob of it in any cache), pushed to the
    registry; its name as the front serves it."""
    lay = os.path.join(work, "redir-" + tag)
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file(tag, tag * 1000).bytes()])
    _oci.push(lay, registry.host + "/redir:" + tag, regenv)
    return "redir:" + tag


def pull(srv, front, name, ref):
    st, j = srv.api("POST", "/templates", {"name": name, "image": front.host + "/" + ref})
    assert st == 202, j


def test_no_redirect_pulls_through_the_guard(srv, fronts, work, registry, regenv):
    front, _blobs = fronts
    front.redirect = None
    pull(srv, front, "rdplain", image(work, registry, regenv, "plain"))
    t, log = wait_built(srv, "rdplain")
    assert any("/blobs/" in h for h in front.hits), front.hits
    sid = srv.create({"template": "rdplain"})["id"]
    try:
        assert srv.exec(sid, ["cat", "/plain"])["stdout"] == "plain" * 1000
    finally:
        srv.delete(sid)
    assert srv.api("DELETE", "/templates/rdplain")[0] == 204


def test_redirect_to_another_loopback_port_refused(srv, fronts, work, registry, regenv):
    front, blobs = fronts
    ref = image(work, registry, regenv, "lo")
    front.redirect = "http://" + blobs.host
    blobs.hits.clear()
    before = layers(srv)
    try:
        pull(srv, front, "rdlo", ref)
        t, log = wait_built(srv, "rdlo", want="failed")
    finally:
        front.redirect = None
    assert blobs.hits == [], "the redirect's target was reached: %s" % blobs.hits
    assert "rdlo" not in templates(srv) and layers(srv) == before
    assert "connection refused" in (log + t.get("error", "")).lower(), (t, log)
    assert srv.api("DELETE", "/templates/rdlo")[0] == 204


def test_redirect_to_another_host_refused(srv, fronts, work, registry, regenv):
    """A host name (Go proxies every name but "localhost"): the proxy
    refuses it by name, without resolving it. "localhost." resolves from
    /etc/hosts to the blob relay on loopback, so a paddock without the
    guard would fetch the blob from there (and send nothing off the host)."""
    front, blobs = fronts
    ref = image(work, registry, regenv, "host")
    front.redirect = "http://localhost.:%d" % blobs.server_address[1]
    blobs.hits.clear()
    before = layers(srv)
    try:
        pull(srv, front, "rdhost", ref)
        t, log = wait_built(srv, "rdhost", want="failed")
    finally:
        front.redirect = None
    assert "rdhost" not in templates(srv) and layers(srv) == before
    assert blobs.hits == [], "the redirect's target was reached: %s" % blobs.hits
    text = log + json.dumps(t)
    assert "403" in text or "Forbidden" in text or "not a registry this server may pull from" in text, (t, log)
    assert srv.api("DELETE", "/templates/rdhost")[0] == 204
