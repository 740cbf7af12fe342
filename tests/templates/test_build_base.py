"""Recipes FROM base (the host's /usr) and FROM a template a recipe built on
it: the steps run in one sandbox that is then snapshotted (docs/templates.md
"Recipes on base"); start and ready commands (LABEL paddock.start-cmd /
paddock.ready-cmd / paddock.ready-timeout), checked at build time and run
at each create over HTTP."""
import json
import os
import shutil

import pytest

from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest import wait_teardowns
from pdtest.server import Server


@pytest.fixture
def ctx(work):
    d = os.path.join(work, "basectx-%d" % os.getpid())
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "hello.txt"), "w") as f:
        f.write("hello from the context\n")
    with open(os.path.join(d, "sub", "a"), "w") as f:
        f.write("a\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def recipe(ctx, text):
    with open(os.path.join(ctx, "Dockerfile"), "w") as f:
        f.write(text)


def events(r):
    return [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{")]


def test_from_base_run_copy_env_workdir_user(tp, ctx):
    recipe(ctx, """FROM base
RUN echo "made by RUN as $(id -u)" > /opt/made.txt && mkdir -p /srv/app
COPY hello.txt /srv/app/
COPY --chown=user sub /home/user/sub/
ENV MODE=test
WORKDIR /srv/work
USER user
RUN echo "$MODE as $(id -un) in $(pwd)" > /home/user/who
""")
    r = tp.tpl("build", "onbase", ctx, "--json")
    assert r.returncode == 0, r.stderr
    assert tp.debris() == []
    # the RUN's file, the COPY's, the host's /usr, the config in effect
    r = tp.sandbox("onbase", "sh", "-c", "cat /opt/made.txt /srv/app/hello.txt /home/user/who; "
                   "stat -c '%U %a' /home/user/sub/a /srv/app/hello.txt; echo $MODE; pwd; id -un; "
                   "test /usr/bin/python3 -ef /usr/bin/python3 && ls /usr/bin/python3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["made by RUN as 0", "hello from the context", "test as user in /srv/work",
                                     "user 644", "root 644", "test", "/srv/work", "user", "/usr/bin/python3"], r.stdout
    # the host's /usr itself, not a copy of it: a file only the host has
    host_only = sorted(os.listdir("/usr/bin"))[0]
    r = tp.sandbox("onbase", "ls", "/usr/bin/" + host_only)
    assert r.returncode == 0, r.stderr
    r = tp.tpl("inspect", "onbase", check=True)
    info = json.loads(r.stdout)
    assert info["kind"] == "recipe" and info["source"] == "base", info
    # unchanged: nothing runs, nothing is re-registered
    before = os.stat(os.path.join(tp.state, "templates", "onbase", "config.json")).st_ino
    r = tp.tpl("build", "onbase", ctx, "--json")
    assert r.returncode == 0, r.stderr
    assert any(e["event"] == "step" and e["text"] == "unchanged" for e in events(r)), r.stderr
    assert os.stat(os.path.join(tp.state, "templates", "onbase", "config.json")).st_ino == before
    # a changed recipe rebuilds and replaces it
    recipe(ctx, "FROM base\nRUN echo second > /opt/made.txt\n")
    r = tp.tpl("build", "onbase", ctx)
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("onbase", "cat", "/opt/made.txt")
    assert r.stdout == "second\n", r.stderr
    # a recipe on that one keeps its files and config
    recipe(ctx, "FROM onbase\nRUN cat /opt/made.txt > /opt/again\n")
    r = tp.tpl("build", "ontop", ctx)
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("ontop", "cat", "/opt/again")
    assert r.stdout == "second\n", r.stderr
    # in use by ontop: onbase stays
    r = tp.tpl("rm", "onbase")
    assert r.returncode != 0 and "ontop" in r.stderr, r.stderr
    tp.tpl("rm", "ontop", check=True)
    tp.tpl("rm", "onbase", check=True)
    assert "onbase" not in tp.template_dirs()


def test_from_base_failing_run_registers_nothing(tp, ctx):
    recipe(ctx, "FROM base\nRUN echo before\nRUN echo oh-no-base >&2; exit 7\n")
    r = tp.tpl("build", "basefail", ctx)
    assert r.returncode != 0
    assert "status 7" in r.stderr and "oh-no-base" in r.stderr, r.stderr
    assert "basefail" not in tp.template_dirs()
    assert tp.debris() == []
    # a USER the template lacks: named, in E2B envd's words
    recipe(ctx, "FROM base\nUSER root123\nRUN whoami\n")
    r = tp.tpl("build", "basefail", ctx)
    assert r.returncode != 0
    assert "failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'" in r.stderr, \
        r.stderr
    assert "basefail" not in tp.template_dirs()
    assert tp.debris() == []


def test_start_cmd_checked_at_build(tp, ctx):
    # ready at once: the build passes, the template records both commands
    recipe(ctx, 'FROM base\nLABEL paddock.start-cmd="touch /tmp/up; exec sleep 600" '
                'paddock.ready-cmd="[ -f /tmp/up ]"\n')
    r = tp.tpl("build", "withstart", ctx)
    assert r.returncode == 0, r.stderr
    assert "the start command is ready" in r.stderr, r.stderr
    info = json.loads(tp.tpl("inspect", "withstart", check=True).stdout)
    assert info["start"]["cmd"] == "touch /tmp/up; exec sleep 600" and info["start"]["ready"] == "[ -f /tmp/up ]"
    # the start command's process is not in the snapshot
    r = tp.sandbox("withstart", "sh", "-c", "pgrep -x sleep || echo none")
    assert r.stdout == "none\n", r.stdout
    tp.tpl("rm", "withstart", check=True)
    # a ready command that never succeeds: the build fails with the start
    # command's output, and nothing is registered
    recipe(ctx, 'FROM base\nRUN echo ran > /opt/x\nLABEL paddock.start-cmd="echo starting-up; exec sleep 600" '
                'paddock.ready-cmd="[ -f /never ]" paddock.ready-timeout=2\n')
    r = tp.tpl("build", "neverready", ctx)
    assert r.returncode != 0
    assert "[ -f /never ]" in r.stderr and "did not succeed within 2 s" in r.stderr, r.stderr
    assert "starting-up" in r.stderr, r.stderr
    assert "neverready" not in tp.template_dirs()
    assert tp.debris() == []
    # a start command that fails: at once (not after the ready timeout),
    # with its output
    recipe(ctx, 'FROM base\nLABEL paddock.start-cmd="echo no-config >&2; exit 4" paddock.ready-cmd="[ -f /never ]" '
                'paddock.ready-timeout=600\n')
    r = tp.tpl("build", "badstart", ctx)
    assert r.returncode != 0
    assert "exited with status 4" in r.stderr and "no-config" in r.stderr, r.stderr
    assert "badstart" not in tp.template_dirs()


@pytest.mark.parametrize("bad", ["0", "601", "abc", "5s", "-3"])
def test_ready_timeout_out_of_range_refused(tp, ctx, bad):
    """paddock.ready-timeout outside 1..600 (or not a number) is refused at
    build, naming the label and the range; nothing is registered."""
    recipe(ctx, 'FROM base\nRUN echo ran > /opt/x\nLABEL paddock.start-cmd="exec sleep 600" '
                'paddock.ready-timeout=%s\n' % bad)
    r = tp.tpl("build", "badtimeout", ctx)
    assert r.returncode != 0
    assert "paddock.ready-timeout=" + bad in r.stderr and "1 to 600" in r.stderr, r.stderr
    assert "badtimeout" not in tp.template_dirs()
    assert tp.debris() == []


def test_ready_timeout_refused_on_an_image_recipe(tp, ctx, bb_image):
    recipe(ctx, 'FROM %s\nLABEL paddock.start-cmd="exec sleep 600" paddock.ready-timeout=9999\n' % bb_image)
    r = tp.tpl("build", "imgbadtimeout", ctx)
    assert r.returncode != 0
    assert "paddock.ready-timeout=9999" in r.stderr and "1 to 600" in r.stderr, r.stderr
    assert "imgbadtimeout" not in tp.template_dirs()
    assert tp.debris() == []


def test_failed_rebuild_keeps_the_old_template(tp, ctx):
    """A rebuild whose snapshot fails (directories nested deeper than the
    snapshot copies) leaves the old template whole and usable."""
    recipe(ctx, "FROM base\nRUN echo first > /opt/v\n")
    tp.tpl("build", "keepold", ctx, check=True)
    try:
        before = tp.template_dirs()
        recipe(ctx, "FROM base\nRUN echo second > /opt/v && mkdir -p /opt/deep/$(printf 'd/%.0s' $(seq 300))\n")
        r = tp.tpl("build", "keepold", ctx)
        assert r.returncode != 0
        # the snapshot failed (the message names the path down to the
        # depth, cut at the error size)
        assert "snapshot" in r.stderr and "opt: deep: d: d:" in r.stderr, r.stderr
        r = tp.sandbox("keepold", "cat", "/opt/v")
        assert r.returncode == 0 and r.stdout == "first\n", (r.stdout, r.stderr)
        assert tp.template_dirs() == before
        assert tp.debris() == []
        # a rebuild that works swaps the new one in, and leaves nothing else
        recipe(ctx, "FROM base\nRUN echo third > /opt/v\n")
        tp.tpl("build", "keepold", ctx, check=True)
        r = tp.sandbox("keepold", "cat", "/opt/v")
        assert r.stdout == "third\n", (r.stdout, r.stderr)
        assert tp.template_dirs() == before
        assert tp.debris() == []
    finally:
        tp.tpl("rm", "keepold")


def test_failed_image_rebuild_keeps_a_template_built_on_base(tp, ctx, bb_image):
    """An image recipe rebuilding a template built on base is registered
    under its own name and swapped in whole: one that fails (here at its
    registration: the image has no such USER) leaves the old one usable,
    and one that works replaces it and leaves nothing else."""
    recipe(ctx, "FROM base\nRUN echo first > /opt/v\n")
    tp.tpl("build", "keepbase", ctx, check=True)
    try:
        before = tp.template_dirs()
        recipe(ctx, "FROM %s\nUSER nosuch\n" % bb_image)
        r = tp.tpl("build", "keepbase", ctx)
        assert r.returncode != 0
        assert "'nosuch' is not in its /etc/passwd" in r.stderr, r.stderr
        r = tp.sandbox("keepbase", "cat", "/opt/v")
        assert r.returncode == 0 and r.stdout == "first\n", (r.returncode, r.stdout, r.stderr)
        assert tp.template_dirs() == before
        assert tp.debris() == []
        recipe(ctx, "FROM %s\nENV SECOND=yes\n" % bb_image)
        tp.tpl("build", "keepbase", ctx, check=True)
        r = tp.sandbox("keepbase", "sh", "-c", "echo $SECOND $FROM_IMAGE; test -e /opt/v || echo no-old-file")
        assert r.stdout == "yes yes\nno-old-file\n", (r.stdout, r.stderr)
        assert tp.template_dirs() == before
        assert tp.debris() == []
    finally:
        tp.tpl("rm", "keepbase")


def test_rebuild_on_a_built_template_keeps_the_stack_records(tp, ctx):
    """A rebuild swapped in under its own name: the template it stacks on
    records it by that name (not the build's temporary one), so that one
    stays undeletable while it is used and deletable after."""
    recipe(ctx, "FROM base\nRUN echo low > /opt/low\n")
    tp.tpl("build", "stacklow", ctx, check=True)
    try:
        for n in ("one", "two"):
            recipe(ctx, "FROM stacklow\nRUN echo %s > /opt/top\n" % n)
            tp.tpl("build", "stacktop", ctx, check=True)
            r = tp.sandbox("stacktop", "cat", "/opt/low", "/opt/top")
            assert r.stdout == "low\n%s\n" % n, (r.stdout, r.stderr)
        # `paddock run` tears its sandbox down after reporting the exit: the
        # sandbox's own use of the template goes with the teardown
        wait_teardowns(tp.state)
        users = os.listdir(os.path.join(tp.state, "templates", "stacklow", "users"))
        assert users == ["@stacktop"], users
        r = tp.tpl("rm", "stacklow")
        assert r.returncode != 0 and "stacktop" in r.stderr, r.stderr
        tp.tpl("rm", "stacktop", check=True)
        tp.tpl("rm", "stacklow", check=True)
        assert tp.debris() == []
    finally:
        tp.tpl("rm", "stacktop")
        tp.tpl("rm", "stacklow")


def test_start_cmd_on_an_image_recipe(tp, ctx, bb_image):
    recipe(ctx, 'FROM %s\nLABEL paddock.start-cmd="exec sleep 600" paddock.ready-cmd="[ -f /never ]" '
                'paddock.ready-timeout=1\n' % bb_image)
    r = tp.tpl("build", "imgnever", ctx)
    assert r.returncode != 0 and "did not succeed within 1 s" in r.stderr, r.stderr
    assert "imgnever" not in tp.template_dirs()
    assert tp.debris() == []


@pytest.fixture(scope="module")
def srv(tp):
    # the templates of tp's state dir are the operator's (shared)
    s = Server(tp.state, "--pool", "0", prefix="pd-tplbase-")
    try:
        s.start()
        yield s
    finally:
        s.finish()


def sandboxes(srv):
    st, j = srv.api("GET", "/sandboxes", expect=200)
    return [x["id"] for x in (j["sandboxes"] if isinstance(j, dict) else j)]


def test_start_cmd_at_create(tp, ctx, srv):
    recipe(ctx, 'FROM base\nENV PORT_FILE=/tmp/port\n'
                'LABEL paddock.start-cmd="[ \\"\\$MODE\\" != bad ] || { echo refused-mode-\\$MODE >&2; exit 5; }; '
                'echo $(id -un) > /tmp/who; exec python3 -m http.server 8431 --bind 127.0.0.1" '
                'paddock.ready-cmd="[ -n \\"$(ss -Htln sport = :8431)\\" ]"\n')
    r = tp.tpl("build", "webstart", ctx)
    assert r.returncode == 0, r.stderr
    # the operator's recipe template, shown with its start command
    st, t = srv.api("GET", "/templates/webstart", expect=200)
    assert t["kind"] == "recipe" and "http.server 8431" in t["start"]["cmd"], t
    sb = srv.create({"template": "webstart"})
    try:
        # ready when the create answers: the server listens already
        j = srv.exec(sb["id"], "cat /tmp/who; python3 -c \"import urllib.request as u; "
                     "print(u.urlopen('http://127.0.0.1:8431/').status)\"")
        assert j["exit_code"] == 0 and j["stdout"] == "user\n200\n", j
    finally:
        assert srv.delete(sb["id"]) in (200, 204)
    # a start command that fails at create: a clear error, no sandbox left
    before = sandboxes(srv)
    st, j = srv.api("POST", "/sandboxes", {"template": "webstart", "env": {"MODE": "bad"}})
    if st == 201:
        srv.delete(j["id"])
    # the template's fault, not the server's: 422, not 500
    assert st == 422, (st, j)
    text = json.dumps(j)
    assert "start_command_failed" in text, j
    assert "start command" in text and "refused-mode-bad" in text and "status 5" in text, j
    assert sandboxes(srv) == before
    assert not [n for n in os.listdir(os.path.join(srv.rundir, "sandboxes"))
                if n not in before] if os.path.isdir(os.path.join(srv.rundir, "sandboxes")) else True
    tp.tpl("rm", "webstart", check=True)


def test_from_a_snapshot_of_an_image_sandbox(tp, ctx, srv, bb_image):
    """FROM a snapshot (not an image): its files, and the image config below it."""
    tp.tpl("pull", "bbsnapsrc", bb_image, check=True)
    sb = srv.create({"template": "bbsnapsrc"})
    try:
        j = srv.exec(sb["id"], ["sh", "-c", "echo in-the-snapshot > /snapfile"], user="root")
        assert j["exit_code"] == 0, j
        srv.api("POST", "/sandboxes/%s/snapshots" % sb["id"], {"name": "bbsnap"}, expect=201)
    finally:
        assert srv.delete(sb["id"]) in (200, 204)
    try:
        recipe(ctx, "FROM bbsnap\nRUN cat /snapfile > /copied && echo $FROM_IMAGE >> /copied\n")
        r = tp.tpl("build", "fromsnap", ctx)
        assert r.returncode == 0, r.stderr
        r = tp.sandbox("fromsnap", "sh", "-c", "cat /copied; echo $FROM_IMAGE")
        assert r.stdout == "in-the-snapshot\nyes\nyes\n", (r.stdout, r.stderr)
        # over HTTP a snapshot is no build base
        st, j = srv.api("POST", "/templates", {"name": "fromsnap2", "recipe": "FROM bbsnap\nRUN true\n"})
        assert st in (400, 404), j
        assert "fromsnap2" not in tp.template_dirs()
    finally:
        tp.tpl("rm", "fromsnap")
        srv.api("DELETE", "/snapshots/bbsnap")
        tp.tpl("rm", "bbsnapsrc")
