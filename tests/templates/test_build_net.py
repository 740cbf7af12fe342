"""The network of a recipe's RUN steps (docs/templates.md "Network of RUN
steps"): none by default; `template build --net open|policy --allow/--deny`
(CLI), "network" (POST /api/v1/templates) or ?network=&allow=&deny= (a
context upload), E2B builds with what --e2b-network gives E2B. The RUN
sandboxes reach the fake internet of tests/network (a network namespace
this module makes; nothing leaves the machine) through the instance's
router: the never list holds, a policy's rules hold, the audit has the
sandbox's egress decisions, and the step cache tells a RUN with a network
from one without."""
import json
import os
import sys

import pytest

from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from _tplfix import own_state
from pdtest import REPO
from pdtest.server import Server
from test_api import _start, follow_log, tar_of
from test_build import ctx, recipe  # noqa: F401  (the context dir fixture)
from test_e2b_api import e2b, reserve, status

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "network"))
from _fakenet import METADATA, WEB, FakeNet  # noqa: E402


def get(addr, out="/got"):
    """A shell command: an HTTP GET of addr:80 into out (busybox's wget
    crashes where there is no route, so nc), failing if it cannot connect."""
    return "printf 'GET / HTTP/1.0\\n\\n' | busybox nc -w 3 %s 80 > %s" % (addr, out)


@pytest.fixture(scope="module")
def fakenet(tmp_path_factory):
    fn = FakeNet(tmp_path_factory.mktemp("fakenet-tpl")).start()
    yield fn
    fn.stop()


@pytest.fixture(scope="module")
def tn(state_root, regenv, fakenet):
    """A state dir of this module's: its router goes to the fake internet."""
    yield from own_state(state_root, regenv, "templates-net")


def names(tp):
    return [n for n in tp.template_dirs() if not n.startswith(".")]


def cached_steps(r):
    ev = [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{")]
    return len([e for e in ev if e["event"] == "cached" and e.get("text") == "step"])


def test_run_has_no_network_by_default(tn, ctx, bb_image, fakenet):
    recipe(ctx, "FROM %s\nRUN %s\n" % (bb_image, get(WEB[0])))
    before = names(tn)
    r = tn.tpl("build", "nonet", ctx)
    assert r.returncode == 125, r.stderr
    assert "RUN exited with status 1" in r.stderr, r.stderr
    assert names(tn) == before and tn.debris() == []


def test_run_with_net_open_reaches_the_internet_not_the_never_list(tn, ctx, bb_image, fakenet):
    # the fake internet answers; metadata (never list) does not, even in open
    recipe(ctx, "FROM %s\nRUN %s && ! %s\n" % (bb_image, get(WEB[0]), get(METADATA[0], "/dev/null")))
    r = tn.tpl("build", "open", ctx, "--net", "open", *fakenet.args())
    assert r.returncode == 0, r.stderr
    assert "network open: sandbox " in r.stderr, r.stderr
    r = tn.sandbox("open", "cat", "/got")
    assert "hello from %s host=" % WEB[0] in r.stdout, r.stderr
    assert tn.tpl("rm", "open").returncode == 0


def test_run_with_a_policy_reaches_what_it_allows_only(tn, ctx, bb_image, fakenet):
    recipe(ctx, "FROM %s\nRUN %s && ! %s\n" % (bb_image, get(WEB[1]), get(WEB[0], "/dev/null")))
    r = tn.tpl("build", "pol", ctx, "--net", "policy", "--allow", WEB[1] + ":80/tcp", *fakenet.args())
    assert r.returncode == 0, r.stderr
    assert tn.sandbox("pol", "cat", "/got").stdout.find("hello from %s" % WEB[1]) >= 0
    # a deny rule in open mode holds too
    r = tn.tpl("build", "pol", ctx, "--net", "open", "--deny", WEB[1], *fakenet.args())
    assert r.returncode == 125 and "RUN exited with status 1" in r.stderr, r.stderr
    assert tn.tpl("rm", "pol").returncode == 0


def bash_get(addr, out="/got"):
    """The same GET with bash's /dev/tcp (base has bash, not always busybox)."""
    return ("bash -c 'exec 3<>/dev/tcp/%s/80 && printf \"GET / HTTP/1.0\\r\\n\\r\\n\" >&3 "
            "&& cat <&3 > %s'" % (addr, out))


def test_recipe_on_base_gets_the_build_network(tn, ctx, fakenet):
    # a recipe FROM base runs its steps in one live sandbox (build_live.c):
    # the build's network applies there too, none by default
    recipe(ctx, "FROM base\nRUN %s\n" % bash_get(WEB[0]))
    r = tn.tpl("build", "basenonet", ctx)
    assert r.returncode != 0, r.stderr
    assert "basenonet" not in names(tn)
    r = tn.tpl("build", "basenet", ctx, "--net", "open", *fakenet.args())
    assert r.returncode == 0, r.stderr
    assert "network open: sandbox " in r.stderr, r.stderr
    assert "hello from %s host=" % WEB[0] in tn.sandbox("basenet", "cat", "/got").stdout
    assert tn.tpl("rm", "basenet").returncode == 0


def test_step_cache_key_has_the_network(tn, ctx, bb_image, fakenet):
    recipe(ctx, "FROM %s\nRUN %s || echo offline > /got\n" % (bb_image, get(WEB[0])))
    r = tn.tpl("build", "cachenet", ctx, "--json")
    assert r.returncode == 0 and cached_steps(r) == 0, r.stderr
    assert tn.sandbox("cachenet", "cat", "/got").stdout == "offline\n"
    # the same RUN with a network is another step: it runs
    r = tn.tpl("build", "cachenet", ctx, "--json", "--net", "open", *fakenet.args())
    assert r.returncode == 0 and cached_steps(r) == 0, r.stderr
    assert tn.sandbox("cachenet", "cat", "/got").stdout.find("hello from %s" % WEB[0]) >= 0
    # each is cached under its own network
    r = tn.tpl("build", "cachenet", ctx, "--json", "--net", "open", *fakenet.args())
    assert r.returncode == 0 and cached_steps(r) == 1, r.stderr
    r = tn.tpl("build", "cachenet", ctx, "--json")
    assert r.returncode == 0 and cached_steps(r) == 1, r.stderr
    assert tn.sandbox("cachenet", "cat", "/got").stdout == "offline\n"
    assert tn.tpl("rm", "cachenet").returncode == 0


@pytest.mark.parametrize("args,msg", [
    (["--net", "bogus"], "--net"),
    (["--net", "none", "--allow", WEB[0]], "--net none"),
    (["--allow", "not a rule"], "--allow"),
    (["--network-file", "/nonexistent/net.json"], "--network-file"),
    (["--net", "open", "--network-file", "/dev/null"], "not both"),
])
def test_bad_network_options_change_nothing(tn, ctx, bb_image, args, msg):
    recipe(ctx, "FROM %s\nRUN true\n" % bb_image)
    before = names(tn)
    r = tn.tpl("build", "badnet", ctx, *args)
    assert r.returncode == 125 and msg in r.stderr, r.stderr
    assert names(tn) == before and tn.debris() == []


def test_network_is_for_build_only(tn, bb_image):
    r = tn.tpl("pull", "x", bb_image, "--net", "open")
    assert r.returncode == 125 and "are for build" in r.stderr, r.stderr
    assert "x" not in tn.template_dirs()


# ---- over HTTP ----


@pytest.fixture(scope="module")
def srv(registry, regenv, fakenet):
    s = Server(None, "--pool", "0", "--template-registry", registry.host, "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver, prefix="pd-tplnet-")
    try:
        _start(s, regenv)
        yield s
    finally:
        s.finish()


def wait(srv, name):
    _h, log = follow_log(srv, name)
    _st, t = srv.api("GET", "/templates/" + name, expect=200)
    return t, log


def sandbox_cat(srv, template, path):
    sb = srv.create({"template": template})
    try:
        return srv.exec(sb["id"], ["cat", path])["stdout"]
    finally:
        srv.api("DELETE", "/sandboxes/" + sb["id"])


def test_api_recipe_with_a_policy(srv, bb_image):
    text = "FROM %s\nRUN %s && ! %s\n" % (bb_image, get(WEB[0]), get(WEB[1], "/dev/null"))
    srv.api("POST", "/templates", {"name": "apinet", "recipe": text,
                                   "network": {"mode": "policy", "allow": [WEB[0] + ":80"]}}, expect=202)
    t, log = wait(srv, "apinet")
    assert t["status"] == "ready", (t, log)
    assert t["network"]["mode"] == "policy", t
    assert sandbox_cat(srv, "apinet", "/got").find("hello from %s" % WEB[0]) >= 0
    # the RUN sandbox's egress decisions are in its audit (the server's state dir keeps it)
    sbid = log.split("network policy: sandbox ")[1].split()[0]
    with open(os.path.join(srv.state, "audit", sbid + ".jsonl")) as f:
        audit = f.read()
    assert WEB[1] in audit, audit
    # without a network the same recipe fails
    srv.api("POST", "/templates", {"name": "apinonet", "recipe": text}, expect=202)
    t, log = wait(srv, "apinonet")
    assert t["status"] == "failed" and "network" not in t, (t, log)
    for n in ("apinet", "apinonet"):
        srv.api("DELETE", "/templates/" + n, expect=204)


def test_api_context_upload_with_network_query(srv, bb_image):
    body = tar_of([("Dockerfile", ("FROM %s\nRUN %s\n" % (bb_image, get(WEB[2]))).encode(),
                    "file")])
    st, _h, out = srv.request("POST", "/api/v1/templates/ctxnet/build", body, query={"network": "open"})
    assert st == 202, out
    t, log = wait(srv, "ctxnet")
    assert t["status"] == "ready" and t["network"]["mode"] == "open", (t, log)
    assert sandbox_cat(srv, "ctxnet", "/got").find("hello from %s" % WEB[2]) >= 0
    srv.api("DELETE", "/templates/ctxnet", expect=204)


@pytest.mark.parametrize("body,query,msg", [
    ({"name": "badnet", "recipe": "FROM scratch\n", "network": {"mode": "bogus"}}, None, "network"),
    ({"name": "badnet", "recipe": "FROM scratch\n", "network": {"mode": "none", "allow": ["1.2.3.4"]}}, None,
     "network"),
    ({"name": "badnet", "image": "x/y:1", "network": {"mode": "open"}}, None, "with a recipe"),
    (None, {"network": "bogus"}, "network"),
    (None, {"network": "policy", "allow": "not a rule"}, "network"),
    (None, {"network": "open", "deny": b"\xff"}, "network"),        # refused, never dropped
])
def test_api_bad_network_changes_nothing(srv, body, query, msg):
    before = sorted(os.listdir(os.path.join(srv.state, "template-builds"))) \
        if os.path.isdir(os.path.join(srv.state, "template-builds")) else []
    if body is not None:
        st, _h, out = srv.request("POST", "/api/v1/templates", body)
    else:
        st, _h, out = srv.request("POST", "/api/v1/templates/badnet/build",
                                  tar_of([("Dockerfile", b"FROM scratch\n", "file")]), query=query)
    assert st == 400 and msg in out.decode(), out
    after = sorted(os.listdir(os.path.join(srv.state, "template-builds"))) \
        if os.path.isdir(os.path.join(srv.state, "template-builds")) else []
    assert after == before


def e2b_run_build(srv, name, image):
    """An E2B build whose one step is a RUN that fetches WEB[0]: its status."""
    j = reserve(srv, name)
    tid, bid = j["templateID"], j["buildID"]
    st, r = e2b(srv, "POST", "/v2/templates/%s/builds/%s" % (tid, bid),
                {"fromImage": image, "steps": [{"type": "RUN", "args": [get(WEB[0])]}]})
    assert st == 202, r
    follow_log(srv, tid)
    st, s = status(srv, tid, bid)
    assert st == 200, s
    return s


def test_e2b_build_has_the_e2b_network(srv, bb_image):
    """E2B's builder has the internet: so do E2B builds' RUN steps, on a
    server whose E2B sandboxes get it (--e2b-network open, the default)."""
    s = e2b_run_build(srv, "e2bnet", bb_image)
    assert s["status"] == "ready", s
    assert sandbox_cat(srv, "e2bnet", "/got").find("hello from %s" % WEB[0]) >= 0
    srv.api("DELETE", "/templates/e2bnet", expect=204)


def test_e2b_build_capped_at_none(registry, regenv, fakenet, bb_image):
    s = Server(None, "--pool", "0", "--template-registry", registry.host, "--net-uplink", fakenet.uplink,
               "--net-resolver", fakenet.resolver, "--e2b-network", "none", prefix="pd-tplnet0-")
    try:
        _start(s, regenv)
        assert e2b_run_build(s, "e2bnonet", bb_image)["status"] == "error"
    finally:
        s.finish()


def test_sdk_build_with_a_network(srv, bb_image, tmp_path):
    """The Python SDK's Templates.build(network=...): a recipe and a context."""
    sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
    from paddock import BuildError, Templates
    tpl = Templates(api_key=srv.key, url=srv.url)
    text = "FROM %s\nRUN %s\n" % (bb_image, get(WEB[0]))
    t = tpl.build("sdknet", recipe=text, network="open")
    assert t.status == "ready" and t.raw["network"]["mode"] == "open", t
    (tmp_path / "Dockerfile").write_text(text)
    t = tpl.build("sdknet", context=str(tmp_path), network={"mode": "policy", "allow": [WEB[0] + ":80"]})
    assert t.status == "ready" and t.raw["network"]["mode"] == "policy", t
    with pytest.raises(BuildError):
        tpl.build("sdknet", recipe=text)
    tpl.delete("sdknet")
