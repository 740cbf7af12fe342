"""Templates over HTTP (docs/templates.md "Templates over HTTP", docs/api.md
"Templates"): create from a registry image under the operator's allowlist,
from a recipe (JSON text) or a recipe with a context tar; asynchronous
status; the build log, followed and by offset; list, inspect, delete; the
per-key namespace; and bad input, each a clear 4xx that changes nothing.
The registry is the suite's own on loopback; nothing comes from the
internet."""
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

import _oci
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest.server import Server


def _start(srv, regenv):
    """Start srv with the suite's registries.conf (the registry is plain HTTP)."""
    old = {k: os.environ.get(k) for k in regenv}
    os.environ.update(regenv)
    try:
        srv.start()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return srv


@pytest.fixture(scope="module")
def srv(registry, regenv):
    s = Server(None, "--pool", "0", "--template-registry", registry.host, prefix="pd-tplapi-")
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


def builds(srv):
    d = os.path.join(srv.state, "template-builds")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def templates(srv):
    d = os.path.join(srv.state, "templates")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def layers(srv):
    d = os.path.join(srv.state, "layers")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def follow_log(srv, name, key="default", offset=None):
    q = {"follow": 1}
    if offset is not None:
        q["offset"] = offset
    st, h, body = srv.request("GET", "/api/v1/templates/%s/log" % name, key=key, query=q, timeout=300)
    assert st == 200, body
    return h, body.decode()


def wait_built(srv, name, want="ready"):
    """Follow the log to the build's end; then the template."""
    _h, log = follow_log(srv, name)
    st, t = srv.api("GET", "/templates/" + name, expect=200)
    assert t["status"] == want, (t, log)
    return t, log


def tar_of(entries):
    """entries: (name, bytes | None for a dir, kind) -> tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data, kind in entries:
            ti = tarfile.TarInfo(name)
            ti.mode = 0o644
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            elif kind == "dev":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
                t.addfile(ti)
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, data
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def post_context(srv, name, tar, query=None, key="default"):
    st, _h, body = srv.request("POST", "/api/v1/templates/%s/build" % name, tar, key=key,
                               headers={"Content-Type": "application/x-tar"}, query=query, timeout=120)
    return st, (json.loads(body) if body.strip() else None)


# ---- from an image ----

@pytest.fixture(scope="module")
def apibb(srv, bb_image):
    st, j = srv.api("POST", "/templates", {"name": "apibb", "image": bb_image})
    assert st == 202 and j["status"] == "queued" and j["log"] == "/api/v1/templates/apibb/log", j
    t, log = wait_built(srv, "apibb")
    assert t["source"] == bb_image and t["shared"] is False and t["layers"] >= 1, t
    assert "path" not in t, "no host path over HTTP"
    assert log, "the pull wrote its progress to the log"
    return "apibb"


def test_pull_runs_a_sandbox_with_the_image_env(srv, apibb):
    sid = srv.create({"template": apibb})["id"]
    try:
        out = srv.exec(sid, ["sh", "-c", "echo $FROM_IMAGE"])
        assert out["stdout"] == "yes\n", out
        # in use: delete refused, naming the sandbox, and nothing changes
        before = layers(srv)
        st, j = srv.api("DELETE", "/templates/" + apibb)
        assert st == 409 and sid in json.dumps(j), j
        assert layers(srv) == before and apibb in templates(srv)
    finally:
        srv.delete(sid)
    names = {t["name"]: t for t in srv.api("GET", "/templates", expect=200)[1]["templates"]}
    assert names["base"]["shared"] is True and names[apibb]["status"] == "ready", names


def test_log_offsets(srv, apibb):
    _h, whole = follow_log(srv, apibb)
    st, h, part = srv.request("GET", "/api/v1/templates/%s/log" % apibb, query={"offset": 5})
    assert st == 200 and h["X-Paddock-Offset"] == "5" and part.decode() == whole[5:], (st, part)
    st, _h, _b = srv.request("GET", "/api/v1/templates/%s/log" % apibb, query={"offset": len(whole.encode()) + 10})
    assert st == 416
    for bad in ("-1", "x", ""):
        st, _h, _b = srv.request("GET", "/api/v1/templates/%s/log" % apibb, query={"offset": bad})
        assert st == 400, bad


def test_another_key_sees_nothing(srv, apibb, other):
    names = [t["name"] for t in srv.api("GET", "/templates", key=other, expect=200)[1]["templates"]]
    assert apibb not in names and "base" in names
    for method, path in (("GET", "/templates/apibb"), ("DELETE", "/templates/apibb"),
                         ("GET", "/templates/apibb/log")):
        st, j = srv.api(method, path, key=other)
        assert st == 404, (method, path, st, j)
    st, j = srv.api("POST", "/sandboxes", {"template": apibb}, key=other)
    assert st == 400 and "unknown template" in json.dumps(j), j
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"templateID": apibb}, key=None,
                               headers={"X-API-Key": other, "Content-Type": "application/json"})
    assert st == 404, body
    # ... while its owner's E2B create finds it
    st, _h, body = srv.request("POST", "/v2/sandboxes", {"templateID": apibb}, key=None,
                               headers={"X-API-Key": srv.key, "Content-Type": "application/json"})
    assert st == 201, body
    assert srv.delete(json.loads(body)["sandboxID"]) == 204
    # one namespace: the name is taken for every key
    st, j = srv.api("POST", "/templates", {"name": apibb, "image": "x"}, key=other)
    assert st in (400, 409), j
    st, j = srv.api("POST", "/templates", {"name": apibb, "recipe": "FROM scratch\n"}, key=other)
    assert st == 409 and "taken" in json.dumps(j), j
    assert apibb in templates(srv)


# ---- from a recipe ----

def test_recipe_text(srv, apibb):
    recipe = "FROM apibb\nARG WHO=nobody\nENV GREETING=hi-$WHO\nRUN echo built-by-recipe > /built\n"
    st, j = srv.api("POST", "/templates", {"name": "apirec", "recipe": recipe, "build_args": {"WHO": "api"}})
    assert st == 202, j
    _t, log = wait_built(srv, "apirec")
    sid = srv.create({"template": "apirec"})["id"]
    try:
        out = srv.exec(sid, ["sh", "-c", "cat /built; echo $GREETING"])
        assert out["stdout"] == "built-by-recipe\nhi-api\n", out
    finally:
        srv.delete(sid)
    assert srv.api("DELETE", "/templates/apirec")[0] == 204
    assert "apirec" not in templates(srv) and "apirec" not in builds(srv)


def test_recipe_with_context(srv, apibb):
    tar = tar_of([("Recipe", b"FROM apibb\nCOPY hello.txt /hello.txt\nCOPY sub /sub\n", "file"),
                  ("hello.txt", b"hello from the context\n", "file"), ("sub", None, "dir"),
                  ("sub/a", b"A\n", "file"), ("sub/link", "a", "symlink")])
    st, j = post_context(srv, "apictx", tar, query={"recipe": "Recipe"})
    assert st == 202, j
    wait_built(srv, "apictx")
    sid = srv.create({"template": "apictx"})["id"]
    try:
        out = srv.exec(sid, ["sh", "-c", "cat /hello.txt /sub/link"])
        assert out["stdout"] == "hello from the context\nA\n", out
    finally:
        srv.delete(sid)
    assert srv.api("DELETE", "/templates/apictx")[0] == 204


def test_failing_build(srv, apibb):
    st, j = srv.api("POST", "/templates", {"name": "apifail", "recipe": "FROM apibb\nRUN echo oh-no; exit 3\n"})
    assert st == 202, j
    t, log = wait_built(srv, "apifail", want="failed")
    assert "oh-no" in log and t.get("error"), (t, log)
    assert "apifail" not in templates(srv)
    st, j = srv.api("POST", "/sandboxes", {"template": "apifail"})
    assert st == 400, j
    names = {t["name"]: t for t in srv.api("GET", "/templates", expect=200)[1]["templates"]}
    assert names["apifail"]["status"] == "failed"
    with open(os.path.join(srv.state, "template-builds", "apifail", "owner")) as f:
        owner = f.read()
    assert srv.api("DELETE", "/templates/apifail")[0] == 204
    assert "apifail" not in builds(srv)
    # a build whose process died while no server watched it (a restart):
    # failed, not "building" for ever, and it can be deleted. The record is
    # made by hand under a name of its own: rewriting apifail's would race
    # this server's own reaper of apifail's build child (CI saw that).
    rec = os.path.join(srv.state, "template-builds", "apiorphan")
    os.makedirs(rec)
    with open(os.path.join(rec, "owner"), "w") as f:
        f.write(owner)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with open(os.path.join(rec, "status"), "w") as f:
        f.write('{"status": "building"}')
    with open(os.path.join(rec, "pid"), "w") as f:
        f.write("%d\n" % dead.pid)
    t = srv.api("GET", "/templates/apiorphan", expect=200)[1]
    assert t["status"] == "failed" and "without a result" in t["error"], t
    assert srv.api("DELETE", "/templates/apiorphan")[0] == 204
    assert "apiorphan" not in builds(srv)


def test_rebuild_right_after_a_failed_build(srv, apibb):
    """A failed build's name built again at once: the old build child, reaped
    a moment later, must not judge the new record ("exited with status ..."
    in a queued build, whose log follow then ended at once)."""
    for i in range(3):
        st, j = srv.api("POST", "/templates", {"name": "apiagain", "recipe": "FROM apibb\nRUN echo no-%d; exit 3\n" % i})
        assert st == 202, j
        wait_built(srv, "apiagain", want="failed")
        st, j = srv.api("POST", "/templates", {"name": "apiagain", "recipe": "FROM apibb\nRUN echo yes-%d\n" % i})
        assert st == 202, j
        t, log = wait_built(srv, "apiagain")
        assert "yes-%d" % i in log and not t.get("error"), (t, log)
    assert srv.api("DELETE", "/templates/apiagain")[0] == 204


# ---- the allowlist and bad input ----

def test_registry_not_allowed(srv, apibb):
    before = (builds(srv), templates(srv))
    st, j = srv.api("POST", "/templates", {"name": "nope", "image": "registry.example.com/x:1"})
    assert st == 403 and "--template-registry" in json.dumps(j), j
    st, j = srv.api("POST", "/templates", {"name": "nope", "recipe": "FROM registry.example.com/x:1\nRUN true\n"})
    assert st == 403, j
    assert (builds(srv), templates(srv)) == before


def test_no_registry_allowed_by_default(regenv, bb_image):
    s = Server(None, "--pool", "0", prefix="pd-tplapi0-")
    try:
        _start(s, regenv)
        st, j = s.api("POST", "/templates", {"name": "nope", "image": bb_image})
        assert st == 403 and "paddock serve --template-registry" in json.dumps(j), j
        assert not builds(s)
    finally:
        s.finish()


@pytest.mark.parametrize("ref", ["oci:/tmp/x", "oci-archive:/etc/passwd", "containers-storage:busybox",
                                 "dir:/tmp", "docker-archive:/tmp/a.tar", "busybox", "busybox:1", "-v/x:1",
                                 "127.0.0.1:5000/../x", "a b/c", "x/y\nz", "", "h:p/x:1", "/etc/passwd"])
def test_malformed_refs(srv, ref):
    before = (builds(srv), templates(srv))
    st, j = srv.api("POST", "/templates", {"name": "badref", "image": ref})
    assert st == 400, (ref, j)
    assert (builds(srv), templates(srv)) == before


@pytest.mark.parametrize("name", ["../x", "a/b", "BASE", "base", "x" * 65, "paddock-x", "fork-1", "", ".", "a b"])
def test_hostile_names(srv, bb_image, name):
    before = (builds(srv), templates(srv))
    st, j = srv.api("POST", "/templates", {"name": name, "image": bb_image})
    assert st == 400, (name, j)
    assert (builds(srv), templates(srv)) == before


def test_bad_bodies(srv, apibb):
    before = (builds(srv), templates(srv))
    for body in ({"name": "x1"}, {"name": "x1", "image": "a", "recipe": "b"}, {"name": "x1", "image": 3},
                 {"name": "x1", "recipe": "FROM scratch\n", "extra": 1},
                 {"name": "x1", "recipe": "FROM scratch\nEXPOSE 80\n"},
                 {"name": "x1", "recipe": "ARG R=x\nFROM $R\n"},
                 {"name": "x1", "recipe": "FROM scratch\n", "build_args": {"A=B": "1"}},
                 {"name": "x1", "recipe": "FROM nosuchtemplate-or-ref\n"}):
        st, j = srv.api("POST", "/templates", body)
        assert st in (400, 404), (body, st, j)
    st, j = srv.api("POST", "/templates", {"name": "x1", "recipe": "FROM scratch\n" + "#" * (300 << 10)})
    assert st == 413, j
    assert (builds(srv), templates(srv)) == before


@pytest.mark.parametrize("entries,why", [
    ([("Dockerfile", b"FROM scratch\n", "file"), ("../evil", b"x", "file")], "'..'"),
    ([("Dockerfile", b"FROM scratch\n", "file"), ("/etc/evil", b"x", "file")], "absolute"),
    ([("Dockerfile", b"FROM scratch\n", "file"), ("a/../../evil", b"x", "file")], "'..'"),
    ([("Dockerfile", b"FROM scratch\n", "file"), ("null", None, "dev")], "only files"),
    ([("Dockerfile", b"FROM scratch\n", "file"), ("h", "Dockerfile", "hardlink")], "hard links"),
    ([("Dockerfile", b"FROM scratch\n", "file"), ("l", "/etc", "symlink"), ("l/evil", b"x", "file")], "l/evil"),
    ([("hello", b"x", "file")], "no recipe"),
])
def test_hostile_context(srv, entries, why):
    before = (builds(srv), templates(srv), sorted(os.listdir("/etc")))
    st, j = post_context(srv, "apihostile", tar_of(entries))
    assert st == 400 and why in json.dumps(j), (st, j)
    assert (builds(srv), templates(srv), sorted(os.listdir("/etc"))) == before
    assert not os.path.exists(os.path.join(os.path.dirname(srv.state), "evil"))


def test_context_not_a_tar_and_too_large(srv):
    before = (builds(srv), templates(srv))
    st, j = post_context(srv, "apibig", b"this is not a tar archive" * 100)
    assert st == 400, j

    def chunks():
        block = b"\0" * (1 << 20)
        for _ in range(65):
            yield block
    st, _h, body = srv.request("POST", "/api/v1/templates/apibig/build", chunks(),
                               headers={"Content-Type": "application/x-tar"},
                               timeout=120)
    assert st == 413, body
    assert (builds(srv), templates(srv)) == before


def test_unknown_and_shared(srv):
    for method, path in (("GET", "/templates/nosuch"), ("DELETE", "/templates/nosuch"),
                         ("GET", "/templates/nosuch/log")):
        assert srv.api(method, path)[0] == 404, (method, path)
    assert srv.api("GET", "/templates/a..b")[0] == 400
    st, j = srv.api("DELETE", "/templates/base")
    assert st == 403, j


def test_delete_drops_unused_layers(srv, regenv, work):
    """The API's delete and the CLI's rm both take the layers no template
    uses any more out of the store."""
    lay = os.path.join(work, "only-mine")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("mine", "x\n").bytes()])
    before = layers(srv)
    r = srv.cli("template", "pull", "--state-dir", srv.state, "onlymine", "oci:%s:latest" % lay, env=regenv,
                timeout=180)
    assert r.returncode == 0, r.stderr
    added = set(layers(srv)) - set(before)
    assert added, "the image brought a layer of its own"
    # the operator's template is shared: a key cannot delete it
    st, j = srv.api("DELETE", "/templates/onlymine")
    assert st == 403, j
    r = srv.cli("template", "rm", "--state-dir", srv.state, "onlymine")
    assert r.returncode == 0, r.stderr
    assert not (added & set(layers(srv))), "its own layers left the store"


def test_delete_api_template_drops_its_layers(srv, registry, regenv, work):
    lay = os.path.join(work, "apionly")
    _oci.write_layout(lay, [_oci.busybox_layer().bytes(), _oci.Layer().file("apionly", "y\n").bytes()])
    _oci.push(lay, registry.host + "/apionly:1", regenv)
    before = set(layers(srv))
    st, j = srv.api("POST", "/templates", {"name": "apionly", "image": registry.host + "/apionly:1"})
    assert st == 202, j
    wait_built(srv, "apionly")
    added = set(layers(srv)) - before
    assert added
    assert srv.api("DELETE", "/templates/apionly")[0] == 204
    assert not (added & set(layers(srv)))
    assert "apionly" not in templates(srv) and "apionly" not in builds(srv)


def test_snapshot_is_not_a_template_here(srv, other):
    """Snapshots are their key's and have their own routes: on
    /templates/{name} they are unknown to every key, the owner included."""
    sid = srv.create({})["id"]
    try:
        srv.api("POST", "/sandboxes/%s/snapshots" % sid, {"name": "apisnap"})
    finally:
        srv.delete(sid)
    try:
        for key in ("default", other):
            assert srv.api("GET", "/templates/apisnap", key=key)[0] == 404
            assert srv.api("DELETE", "/templates/apisnap", key=key)[0] == 404
        names = [t["name"] for t in srv.api("GET", "/templates", key=other, expect=200)[1]["templates"]]
        assert "apisnap" not in names
    finally:
        assert srv.api("DELETE", "/snapshots/apisnap")[0] == 204


def test_builds_at_once_are_capped(srv, bb_image):
    """At most 4 builds under way on a server: the fifth is 429 and
    reserves nothing. (Records of builds under way, their process this
    test's own: alive, so not taken for dead.)"""
    fake = ["apibusy%d" % i for i in range(4)]
    for n in fake:
        d = os.path.join(srv.state, "template-builds", n)
        os.makedirs(d)
        with open(os.path.join(d, "owner"), "w") as f:
            f.write("0" * 16 + "\n")
        with open(os.path.join(d, "status"), "w") as f:
            f.write('{"status": "building"}')
        with open(os.path.join(d, "pid"), "w") as f:
            f.write("%d\n" % os.getpid())
    try:
        before = (builds(srv), templates(srv))
        st, j = srv.api("POST", "/templates", {"name": "apififth", "image": bb_image})
        assert st == 429 and "under way" in json.dumps(j), j
        assert (builds(srv), templates(srv)) == before
    finally:
        for n in fake:
            shutil.rmtree(os.path.join(srv.state, "template-builds", n), ignore_errors=True)
