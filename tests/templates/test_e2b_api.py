"""E2B's template build API (docs/e2b.md "Templates"), at the HTTP level
the SDK v2's Template.build() speaks: reserve (POST /v3/templates), the
signed upload URL and the upload (GET /templates/{id}/files/{hash}, PUT
it), the build start (POST /v2/templates/{id}/builds/{buildID}), its status
with log entries, and aliases; each bad input a clear 4xx that changes
nothing. Images come from the suite's loopback registry only."""
import datetime
import gzip
import hashlib
import io
import json
import os
import tarfile
import time
import urllib.parse

import pytest

from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server
from test_api import _start, follow_log, tar_of


@pytest.fixture(scope="module")
def srv(registry, regenv):
    s = Server(None, "--pool", "0", "--template-registry", registry.host, prefix="pd-tple2b-")
    try:
        _start(s, regenv)
        yield s
    finally:
        s.finish()


@pytest.fixture(scope="module")
def other(srv):
    r = srv.cli("key", "create", "--name", "other", "--state-dir", srv.state)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def xkey(srv, key):
    return srv.key if key == "default" else key


def e2b(srv, method, path, body=None, key="default", **kw):
    """An E2B control-plane call with X-API-Key, as the SDK makes it."""
    st, _h, data = srv.request(method, path, body, key=None,
                               headers={"X-API-Key": xkey(srv, key)}, **kw)
    return st, (json.loads(data) if data.strip() else None)


def reserve(srv, name, key="default"):
    st, j = e2b(srv, "POST", "/v3/templates", {"name": name, "cpuCount": 2, "memoryMB": 1024}, key=key)
    assert st == 202, j
    assert j["templateID"] == name.split(":")[0] and len(j["buildID"]) == 36, j
    return j


def link(srv, tid, h, key="default"):
    return e2b(srv, "GET", "/templates/%s/files/%s" % (tid, h), key=key)


def put(srv, url, data, headers=None):
    u = urllib.parse.urlsplit(url)
    assert u.hostname == "127.0.0.1" and u.port == srv.port, url
    st, _h, body = srv.raw("PUT", u.path + "?" + u.query, data, headers=headers, timeout=120)
    return st, body


def status(srv, tid, bid, offset=None, key="default"):
    q = "" if offset is None else "?logsOffset=%s" % offset
    return e2b(srv, "GET", "/templates/%s/builds/%s/status%s" % (tid, bid, q), key=key)


def state_of(srv, tid):
    with open(os.path.join(srv.state, "template-builds", tid, "status")) as f:
        return json.load(f)["status"]


def files_of(srv, tid):
    d = os.path.join(srv.state, "e2b-templates", tid, "files")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def context_tgz():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in (("hello.txt", b"hello from e2b\n"), ("app/main.sh", b"echo main\n")):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


H1 = hashlib.sha256(b"one").hexdigest()
H2 = hashlib.sha256(b"two").hexdigest()


@pytest.fixture(scope="module")
def built(srv, bb_image):
    """The whole flow of Template.build(): a template with COPY, ENV, RUN,
    WORKDIR, built from the loopback registry."""
    j = reserve(srv, "e2bt:v1")
    tid, bid = j["templateID"], j["buildID"]
    assert j["tags"] == ["v1"] and j["names"] == ["e2bt"], j
    assert state_of(srv, tid) == "waiting"
    st, s = status(srv, tid, bid)
    assert st == 200 and s["status"] == "waiting" and s["logEntries"] == [], s
    st, l = link(srv, tid, H1)
    assert st == 201 and l["present"] is False and "token=" in l["url"], l
    st, body = put(srv, l["url"], context_tgz())
    assert st == 200, body
    st, l2 = link(srv, tid, H1)
    assert st == 201 and l2["present"] is True, l2
    steps = [
        {"type": "COPY", "args": ["hello.txt", "/app/hello.txt", "", ""], "filesHash": H1, "force": False},
        {"type": "COPY", "args": ["app", "/srv/app", "", ""], "filesHash": H1, "force": False},
        {"type": "ENV", "args": ["GREETING", "hi there $HOME \"q\"", "OTHER", "x"], "force": False},
        {"type": "RUN", "args": ["echo built-by-e2b > /built\necho second-line >> /built"], "force": False},
        {"type": "WORKDIR", "args": ["/app"], "force": False},
    ]
    st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid),
                {"fromImage": bb_image, "steps": steps, "force": False, "startCmd": None, "readyCmd": None})
    assert st == 202, r
    follow_log(srv, tid)            # to the build's end (an event, not a sleep)
    st, s = status(srv, tid, bid)
    assert st == 200 and s["status"] == "ready", s
    return tid, bid, s


def test_build_flow_and_sandbox(srv, built):
    tid, bid, s = built
    assert s["templateID"] == tid and s["buildID"] == bid
    assert s["logEntries"] and len(s["logEntries"]) <= 100, s
    e = s["logEntries"][0]
    assert set(e) >= {"timestamp", "level", "message"} and e["level"] == "info", e
    assert s["logs"] == [x["message"] for x in s["logEntries"]]
    sid = srv.create({"template": tid})["id"]
    try:
        out = srv.exec(sid, ["sh", "-c", "cat /app/hello.txt /srv/app/main.sh /built; echo \"$GREETING|$OTHER\"; pwd"])
        assert out["stdout"] == ('hello from e2b\necho main\nbuilt-by-e2b\nsecond-line\n'
                                 'hi there $HOME "q"|x\n/app\n'), out
    finally:
        srv.delete(sid)
    # and through E2B's own create
    st, j = e2b(srv, "POST", "/sandboxes", {"templateID": tid, "timeout": 60})
    assert st == 201, j
    srv.delete(j["sandboxID"])


def test_logs_offset_counts_entries(srv, built):
    tid, bid, s = built
    n = len(s["logEntries"])
    st, s1 = status(srv, tid, bid, offset=1)
    assert st == 200 and s1["logEntries"] == s["logEntries"][1:], s1
    st, s2 = status(srv, tid, bid, offset=n)
    assert st == 200 and s2["logEntries"] == [] and s2["status"] == "ready", s2
    for bad in ("-1", "x", ""):
        st, j = status(srv, tid, bid, offset=bad)
        assert st == 400 and "logsOffset" in j["message"], j


def test_started_twice_is_refused(srv, built, bb_image):
    tid, bid, _s = built
    st, j = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid), {"fromImage": bb_image, "steps": []})
    assert st == 409 and "started" in j["message"], j


def test_aliases(srv, built, other):
    tid = built[0]
    st, j = e2b(srv, "GET", "/templates/aliases/" + tid)
    assert st == 200 and j == {"templateID": tid, "public": False}, j
    st, j = e2b(srv, "GET", "/templates/aliases/" + tid, key=other)
    assert st == 403, j
    st, j = e2b(srv, "GET", "/templates/aliases/no-such-template")
    assert st == 404, j
    st, j = e2b(srv, "GET", "/templates/aliases/base", key=other)
    assert st == 200 and j["public"] is True, j
    st, j = e2b(srv, "GET", "/templates/aliases/Bad_Name")
    assert st == 404, j


def test_another_keys_template_is_unknown(srv, built, other):
    tid, bid, _s = built
    for path in ("/templates/%s/files/%s" % (tid, H1), "/templates/%s/builds/%s/status" % (tid, bid)):
        st, j = e2b(srv, "GET", path, key=other)
        assert st == 404, (path, j)
    st, j = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid), {"fromTemplate": "base"}, key=other)
    assert st == 404, j
    # nor can it take the name
    st, j = e2b(srv, "POST", "/v3/templates", {"name": tid}, key=other)
    assert st == 409, j
    # the owner's upload URL is not another template's
    st, l = link(srv, tid, H1)
    u = urllib.parse.urlsplit(l["url"])
    q = urllib.parse.parse_qs(u.query)
    st, _h, body = srv.raw("PUT", "/e2b/template-files/%s/%s?token=%s" % (tid, H2, q["token"][0]), b"x" * 10)
    assert st == 403, body
    assert H2 not in files_of(srv, tid)


def test_unknown_ids_and_bad_hashes(srv):
    j = reserve(srv, "e2bunk")
    tid, bid = j["templateID"], j["buildID"]
    for path in ("/templates/nope/files/%s" % H1, "/templates/nope/builds/%s/status" % bid,
                 "/templates/%s/builds/00000000-0000-4000-8000-000000000000/status" % tid):
        st, r = e2b(srv, "GET", path)
        assert st == 404, (path, r)
    st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, "00000000-0000-4000-8000-000000000000"),
                {"fromTemplate": "base"})
    assert st == 404, r
    for h in ("abc", H1.upper(), H1 + "0", "../" + H1[3:]):
        st, r = link(srv, tid, urllib.parse.quote(h, safe=""))
        assert st in (400, 404), (h, r)
        if st == 400:
            assert "hash" in r["message"], r
    st, r = link(srv, tid, "z" * 64)
    assert st == 400 and "hash" in r["message"], r
    # a PUT with no token, a wrong one
    for q in ("", "?token=" + "0" * 64):
        st, _h, body = srv.raw("PUT", "/e2b/template-files/%s/%s%s" % (tid, H1, q), b"data")
        assert st == 403, body
    assert files_of(srv, tid) == [] and state_of(srv, tid) == "waiting"
    for body in ({}, {"name": "Bad_Name"}, {"name": "x:"}, {"name": "ok", "tags": [1]}):
        st, r = e2b(srv, "POST", "/v3/templates", body)
        assert st == 400, (body, r)


def test_hostile_and_oversized_uploads(srv):
    tid = reserve(srv, "e2bhostile")["templateID"]
    _st, l = link(srv, tid, H1)
    for entries in ([("../escape", b"x", "file")], [("/abs", b"x", "file")],
                    [("ln", "/etc", "symlink"), ("ln/passwd", b"x", "file")],
                    [("dev", None, "dev")], [("a", b"x", "file"), ("h", "a", "hardlink")]):
        st, body = put(srv, l["url"], tar_of(entries))
        assert st == 400, (entries, body)
    st, body = put(srv, l["url"], b"this is not a tar archive at all" * 40)
    assert st == 400, body
    st, body = put(srv, l["url"], gzip.compress(b"not a tar either" * 100))
    assert st == 400, body
    big = 64 * 1024 * 1024 + 1
    st, body = put(srv, l["url"], b"\0" * big)
    assert st == 413, body
    assert files_of(srv, tid) == []
    d = os.path.join(srv.state, "e2b-templates", tid)
    assert [n for n in os.listdir(d) if n.startswith(".")] == [], "no scratch left"
    _st, l = link(srv, tid, H1)
    assert l["present"] is False


def test_malformed_steps_change_nothing(srv, bb_image, registry):
    j = reserve(srv, "e2bbad")
    tid, bid = j["templateID"], j["buildID"]
    _st, l = link(srv, tid, H1)
    assert put(srv, l["url"], context_tgz())[0] == 200
    cases = [
        ({"steps": []}, "one of fromImage"),
        ({"fromImage": bb_image, "fromTemplate": "base"}, "one of fromImage"),
        ({"fromImage": bb_image, "steps": {}}, "array"),
        ({"fromImage": bb_image, "steps": [{"type": "EXPOSE", "args": ["80"]}]}, "unknown step type"),
        ({"fromImage": bb_image, "steps": [{"type": "RUN", "args": []}]}, "RUN takes"),
        ({"fromImage": bb_image, "steps": [{"type": "RUN", "args": [1]}]}, "args (strings)"),
        ({"fromImage": bb_image, "steps": ["RUN"]}, "step 1"),
        ({"fromImage": bb_image, "steps": [{"type": "COPY", "args": ["hello.txt", "/x"], "filesHash": H2}]},
         "filesHash"),
        ({"fromImage": bb_image, "steps": [{"type": "COPY", "args": ["../x", "/x"], "filesHash": H1}]},
         "inside the context"),
        ({"fromImage": bb_image, "steps": [{"type": "COPY", "args": ["a*/x.txt", "/x"], "filesHash": H1}]},
         "glob only in its last component"),
        ({"fromImage": bb_image, "steps": [{"type": "COPY", "args": ["{a,b}.txt", "/x"], "filesHash": H1}]},
         "glob only in its last component"),
        ({"fromImage": bb_image, "steps": [{"type": "COPY", "args": ["hello.txt", "/x", "", "0755"],
                                            "filesHash": H1}]}, "mode"),
        ({"fromImage": bb_image, "steps": [{"type": "ENV", "args": ["A"]}]}, "pairs"),
        ({"fromImage": bb_image, "steps": [{"type": "ENV", "args": ["A", "x\nRUN evil"]}]}, "control"),
        ({"fromImage": bb_image, "steps": [{"type": "WORKDIR", "args": ["/a\nRUN evil"]}]}, "WORKDIR takes"),
        ({"fromImage": bb_image, "steps": [{"type": "USER", "args": ["bob smith"]}]}, "USER takes"),
        ({"fromImage": bb_image, "startCmd": "sleep 1\nRUN evil"}, "startCmd"),
        ({"fromImage": bb_image, "startCmd": 3}, "startCmd"),
        ({"fromImage": bb_image, "readyCmd": "true"}, "readyCmd without a startCmd"),
        ({"fromImage": bb_image, "fromImageRegistry": {"type": "registry", "username": "u", "password": "p"}},
         "fromImageRegistry"),
        ({"fromTemplate": "no-such-template"}, "unknown template"),
    ]
    for body, words in cases:
        st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid), body)
        assert st in (400, 404) and words in r["message"], (body, st, r)
        assert state_of(srv, tid) == "waiting", body
    # a short name is Docker Hub's, which this server does not allow
    st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid), {"fromImage": "python:3.12"})
    assert st == 403 and "docker.io" in r["message"], r
    assert state_of(srv, tid) == "waiting"
    assert not os.path.exists(os.path.join(srv.state, "template-builds", tid, "context"))


def test_failed_build_reports_error(srv, bb_image):
    j = reserve(srv, "e2bfail")
    tid, bid = j["templateID"], j["buildID"]
    st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid),
                {"fromImage": bb_image, "steps": [{"type": "RUN", "args": ["echo oh-no; exit 3"]}]})
    assert st == 202, r
    follow_log(srv, tid)
    st, s = status(srv, tid, bid)
    assert st == 200 and s["status"] == "error" and s["reason"]["message"], s
    assert any("oh-no" in e["message"] for e in s["logEntries"]), s


def test_run_as_user_and_from_template(srv, built):
    """fromTemplate of the key's own template; a RUN as root (aptInstall's)
    leaves the default user alone, a RUN as 1000:1000 runs as that uid (busybox has no `user`)."""
    j = reserve(srv, "e2bchild")
    tid, bid = j["templateID"], j["buildID"]
    steps = [{"type": "RUN", "args": ["id -u > /as-root", "root"]},
             {"type": "RUN", "args": ["id -u > /tmp/as-user", "1000:1000"]}]
    st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid), {"fromTemplate": built[0], "steps": steps})
    assert st == 202, r
    follow_log(srv, tid)
    st, s = status(srv, tid, bid)
    assert s["status"] == "ready", s
    sid = srv.create({"template": tid})["id"]
    try:
        out = srv.exec(sid, ["sh", "-c", "cat /as-root /tmp/as-user /app/hello.txt; id -u"])
        assert out["stdout"] == "0\n1000\nhello from e2b\n1000\n", out
    finally:
        srv.delete(sid)


# ---- tags (POST/DELETE /templates/tags, GET /templates/{id}/tags) ----

def tags_of(srv, tid, key="default"):
    st, j = e2b(srv, "GET", "/templates/%s/tags" % tid, key=key)
    assert st == 200, j
    for t in j:
        assert set(t) == {"tag", "buildID", "createdAt"} and t["createdAt"].endswith("Z"), t
        # when the tag was given, on the wall clock (not 1970: the monotonic one)
        assert abs(datetime.datetime.strptime(t["createdAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp() - time.time()) < 86400, t
    return {t["tag"]: t["buildID"] for t in j}


def e2b_create(srv, template, key="default"):
    st, j = e2b(srv, "POST", "/sandboxes", {"templateID": template, "timeout": 60}, key=key)
    if st == 201:
        srv.delete(j["sandboxID"])
    return st, j


def test_tags_assign_list_remove(srv, built):
    """A build's tag (e2bt:v1) names it; assign adds names for the same
    build, Sandbox.create('NAME:TAG') starts it, remove takes them away."""
    tid, bid, _s = built
    assert tags_of(srv, tid) == {"v1": bid}
    st, j = e2b(srv, "POST", "/templates/tags", {"target": tid + ":v1", "tags": ["production", tid + ":stable"]})
    assert st == 201 and j == {"buildID": bid, "tags": ["production", "stable"]}, j
    assert tags_of(srv, tid) == {"v1": bid, "production": bid, "stable": bid}
    # assigning a tag it has again changes nothing; a target without a tag is the build
    st, j = e2b(srv, "POST", "/templates/tags", {"target": tid, "tags": ["stable"]})
    assert st == 201 and j["buildID"] == bid, j
    assert tags_of(srv, tid) == {"v1": bid, "production": bid, "stable": bid}
    st, j = e2b_create(srv, tid + ":production")
    assert st == 201 and j["templateID"] == tid, j
    st, j = e2b(srv, "DELETE", "/templates/tags", {"name": tid, "tags": ["production"]})
    assert st == 204, j
    assert tags_of(srv, tid) == {"v1": bid, "stable": bid}
    st, j = e2b_create(srv, tid + ":production")
    assert st == 404 and tid + ":production" in j["message"], j
    assert e2b_create(srv, tid + ":stable")[0] == 201


def test_tags_bad_input_changes_nothing(srv, built):
    tid, bid, _s = built
    before = tags_of(srv, tid)
    cases = [
        {"tags": ["x"]},
        {"target": ":v1", "tags": ["x"]},
        {"target": tid + ":", "tags": ["x"]},
        {"target": "Bad_Name:v1", "tags": ["x"]},
        {"target": tid + ":v1", "tags": [":invalid-tag"]},        # E2B's tags.test.ts: no alias
        {"target": tid + ":v1", "tags": [tid + ":"]},              # ... no tag
        {"target": tid + ":v1", "tags": ["other-template:x"]},
        {"target": tid + ":v1", "tags": []},
        {"target": tid + ":v1", "tags": "x"},
        {"target": tid + ":v1", "tags": [1]},
        {"target": tid + ":v1", "tags": [".hidden"]},
        {"target": tid + ":v1", "tags": ["a b"]},
        {"target": tid + ":v1", "tags": ["x" * 129]},
        {"target": tid + ":v1", "tags": ["ok", "bad/tag"]},
    ]
    for body in cases:
        st, j = e2b(srv, "POST", "/templates/tags", body)
        assert st == 400 and ("tag" in j["message"] or "target" in j["message"]), (body, st, j)
    for body in ({"tags": ["v1"]}, {"name": "Bad_Name", "tags": ["v1"]}, {"name": tid, "tags": []},
                 {"name": tid, "tags": [":v1"]}):
        st, j = e2b(srv, "DELETE", "/templates/tags", body)
        assert st == 400, (body, st, j)
    # an unknown tag: 404, and the known one beside it stays
    st, j = e2b(srv, "DELETE", "/templates/tags", {"name": tid, "tags": ["v1", "no-such-tag"]})
    assert st == 404 and "no-such-tag" in j["message"], j
    st, j = e2b(srv, "POST", "/templates/tags", {"target": tid + ":no-such-tag", "tags": ["x"]})
    assert st == 404 and "no-such-tag" in j["message"], j
    assert tags_of(srv, tid) == before
    # a build's own tags are checked as these are
    for name in ("e2bbadtag:.x", "e2bbadtag:a/b"):
        st, j = e2b(srv, "POST", "/v3/templates", {"name": name})
        assert st == 400, (name, j)
    st, j = e2b(srv, "POST", "/v3/templates", {"name": "e2bbadtag", "tags": ["ok", "no good"]})
    assert st == 400, j
    assert e2b(srv, "GET", "/templates/aliases/e2bbadtag")[0] == 404


def test_tags_unknown_and_another_keys(srv, built, other):
    tid, _bid, _s = built
    before = tags_of(srv, tid)
    for key in ("default", other):
        name = "no-such-template" if key == "default" else tid
        st, j = e2b(srv, "GET", "/templates/%s/tags" % name, key=key)
        assert st == 404, (key, j)
        st, j = e2b(srv, "POST", "/templates/tags", {"target": name + ":v1", "tags": ["mine"]}, key=key)
        assert st == 404, (key, j)
        st, j = e2b(srv, "DELETE", "/templates/tags", {"name": name, "tags": ["v1"]}, key=key)
        assert st == 404, (key, j)
        st, j = e2b_create(srv, name + ":v1", key=key)
        assert st == 404, (key, j)
    # shared templates have no tags here
    assert e2b(srv, "GET", "/templates/base/tags")[0] == 404
    assert e2b_create(srv, "base:v1")[0] == 404
    assert tags_of(srv, tid) == before


def test_tags_of_a_new_build_replace_the_old(srv):
    """paddock keeps one build a template: a new build's request names
    its tags and drops the build before's (their root is going)."""
    j = reserve(srv, "e2btagnew:one")
    assert tags_of(srv, "e2btagnew") == {"one": j["buildID"]}
    st, j2 = e2b(srv, "POST", "/v3/templates", {"name": "e2btagnew", "tags": ["two", "three"]})
    assert st == 202, j2
    assert tags_of(srv, "e2btagnew") == {"two": j2["buildID"], "three": j2["buildID"]}
    st, j3 = e2b(srv, "POST", "/v3/templates", {"name": "e2btagnew"})
    assert st == 202 and j3["tags"] == ["default"], j3
    assert tags_of(srv, "e2btagnew") == {"default": j3["buildID"]}


def test_native_delete_and_rebuild_drop_the_tags(srv, bb_image):
    """Tags name an E2B build: a native delete of the template, or a native
    build of the name by the same key (after a delete, or replacing it),
    makes a template they never named. They are gone (GET answers 404, as
    for any template without an E2B build; NAME:TAG starts nothing), and
    the next E2B build starts with its own tags only."""
    name = "e2bnat"
    tags_file = os.path.join(srv.state, "e2b-templates", name, "tags")

    def native_build():
        st, j = srv.api("POST", "/templates", {"name": name, "image": bb_image})
        assert st == 202, j
        follow_log(srv, name)
        assert state_of(srv, name) == "ready"
    try:
        reserve(srv, name + ":v1")
        st, j = e2b(srv, "POST", "/templates/tags", {"target": name + ":v1", "tags": ["prod"]})
        assert st == 201, j
        assert set(tags_of(srv, name)) == {"v1", "prod"}
        assert srv.api("DELETE", "/templates/" + name)[0] == 204
        native_build()
        st, j = e2b(srv, "GET", "/templates/%s/tags" % name)
        assert st == 404, (st, j)
        for tag in ("v1", "prod"):
            assert e2b_create(srv, "%s:%s" % (name, tag))[0] == 404
        assert not os.path.exists(tags_file)
        # the name's E2B build after that: its own tags, nothing of before
        j = reserve(srv, name + ":v2")
        assert tags_of(srv, name) == {"v2": j["buildID"]}
        # a native rebuild replacing it (no delete between) drops them too
        native_build()
        assert e2b(srv, "GET", "/templates/%s/tags" % name)[0] == 404
        assert e2b_create(srv, name + ":v2")[0] == 404
        assert e2b_create(srv, name)[0] == 201      # the native template itself starts
    finally:
        srv.api("DELETE", "/templates/" + name)


def test_snapshot_named_tags_is_deletable(srv):
    """DELETE /templates/tags is also removeTags' path: without a body it
    is the snapshot delete of a snapshot named "tags"; with one, removeTags
    as before."""
    sid = srv.create()["id"]
    try:
        st, j = e2b(srv, "POST", "/sandboxes/%s/snapshots" % sid, {"name": "tags"})
        assert st == 201 and j["snapshotID"] == "tags", j
    finally:
        srv.delete(sid)
    st, j = e2b(srv, "GET", "/snapshots?name=tags")
    assert st == 200 and [s["snapshotID"] for s in j] == ["tags"], j
    st, j = e2b(srv, "DELETE", "/templates/tags")
    assert st == 204, (st, j)
    st, j = e2b(srv, "GET", "/snapshots?name=tags")
    assert st == 200 and j == [], j
    assert "tags" not in os.listdir(os.path.join(srv.state, "templates"))
    # gone: a second delete is 404, and removeTags still answers as removeTags
    assert e2b(srv, "DELETE", "/templates/tags")[0] == 404
    st, j = e2b(srv, "DELETE", "/templates/tags", {"name": "no-such-template", "tags": ["v1"]})
    assert st == 404 and "no-such-template" in j["message"], j


def test_tags_survive_a_restart(srv, built, regenv):
    """Last in this file: the server restarts on the same state."""
    tid, bid, _s = built
    before = tags_of(srv, tid)
    assert before and set(before.values()) == {bid}
    srv.stop()
    _start(srv, regenv)
    assert tags_of(srv, tid) == before
    assert e2b_create(srv, tid + ":v1")[0] == 201
