"""paddock template build: recipes (a Dockerfile subset) built in
sandboxes, with a step cache."""
import json
import os
import shutil

import pytest
from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)


@pytest.fixture
def ctx(work):
    d = os.path.join(work, "ctx-%d" % os.getpid())
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


def test_build_cache_hits_and_misses(tp, ctx, bb_image):
    recipe(ctx, """# a recipe
ARG BASE=%s
FROM $BASE
ENV APP=/srv/app \\
    MODE=test
WORKDIR ${APP}
COPY hello.txt ./
COPY sub sub/
RUN echo "built $MODE" > built && mkdir -p /data && echo d > /data/d
USER user
CMD ["/bin/sh", "-c", "cat /srv/app/built /srv/app/hello.txt"]
""" % bb_image)
    r = tp.tpl("build", "app", ctx, "--json")
    assert r.returncode == 0, r.stderr
    assert not [e for e in events(r) if e["event"] == "cached" and e.get("text") == "step"]
    # the default command, user and working directory of the result
    r = tp.sandbox("app")
    assert r.stdout == "built test\nhello from the context\n", r.stderr
    r = tp.sandbox("app", "sh", "-c", "id -u; pwd; cat sub/a /data/d; echo $MODE")
    assert r.stdout.split() == ["1000", "/srv/app", "a", "d", "test"], r.stderr
    # unchanged: every step from the cache, nothing re-registered
    r = tp.tpl("build", "app", ctx, "--json")
    assert r.returncode == 0, r.stderr
    ev = events(r)
    assert len([e for e in ev if e["event"] == "cached" and e.get("text") == "step"]) == 3   # COPY, COPY, RUN
    assert any(e["event"] == "step" and e["text"] == "unchanged" for e in ev)
    # a context file changes: its COPY and what follows run again
    with open(os.path.join(ctx, "hello.txt"), "w") as f:
        f.write("changed\n")
    r = tp.tpl("build", "app", ctx, "--json")
    assert r.returncode == 0, r.stderr
    assert len([e for e in events(r) if e["event"] == "cached" and e.get("text") == "step"]) == 0
    assert tp.sandbox("app").stdout == "built test\nchanged\n"
    assert tp.debris() == []
    ls = {t["name"]: t for t in json.loads(tp.tpl("ls", "--json", check=True).stdout)}
    assert ls["app"]["kind"] == "recipe"
    assert tp.tpl("rm", "app").returncode == 0


def test_failing_run_registers_nothing(tp, ctx, bb_image):
    recipe(ctx, "FROM %s\nRUN echo about to fail; echo boom >&2; exit 3\n" % bb_image)
    before = tp.template_dirs()
    r = tp.tpl("build", "failing", ctx)
    assert r.returncode == 125
    assert "RUN exited with status 3" in r.stderr and "boom" in r.stderr, r.stderr
    assert "line 2" in r.stderr
    assert tp.template_dirs() == before
    assert tp.debris() == []
    assert tp.leftovers() == {}          # its sandbox is gone


def test_copy_escaping_the_context_refused(tp, ctx, work, bb_image):
    outside = os.path.join(work, "outside-secret")
    with open(outside, "w") as f:
        f.write("secret")
    for src in ("../outside-secret", "link-out"):
        if src == "link-out":
            os.symlink(outside, os.path.join(ctx, "link-out"))
        recipe(ctx, "FROM %s\nCOPY %s /x\n" % (bb_image, src))
        r = tp.tpl("build", "escape", ctx)
        assert r.returncode == 125
        assert "outside the build context" in r.stderr, r.stderr
        assert "escape" not in tp.template_dirs() and tp.debris() == []


def test_arg_and_env_expansion(tp, ctx, bb_image):
    recipe(ctx, """ARG TAG=1
FROM %s:${TAG}
ARG V=default
ARG W
ENV X=${V}-x Y=${W:-unset} Z=${V:+set}
WORKDIR /w/$V
RUN echo "$X $Y $Z $V" > /w/out
""" % bb_image.rsplit(":", 1)[0])
    r = tp.tpl("build", "expand", ctx, "--build-arg", "V=2")
    assert r.returncode == 0, r.stderr
    r = tp.sandbox("expand", "sh", "-c", "cat /w/out; pwd; echo $X")
    assert r.stdout.split("\n")[:3] == ["2-x unset set 2", "/w/2", "2-x"], r.stderr
    assert tp.tpl("rm", "expand").returncode == 0


@pytest.mark.parametrize("text,want", [
    ("FROM {img}\nEXPOSE 80\n", "line 2: unknown or unsupported instruction 'EXPOSE'"),
    ("FROM {img}\nFROBNICATE x\n", "line 2: unknown or unsupported instruction 'FROBNICATE'"),
    ("RUN true\n", "only ARG may come before FROM"),
    ("FROM {img}\nFROM {img}\n", "one stage only"),
    ("FROM {img}\nADD http://example.invalid/x /x\n", "from a URL is not supported"),
    ("FROM base AS x y\n", "FROM IMAGE [AS NAME] expected"),
])
def test_bad_recipes(tp, ctx, bb_image, text, want):
    recipe(ctx, text.format(img=bb_image))
    before = tp.template_dirs()
    r = tp.tpl("build", "bad", ctx)
    assert r.returncode == 125
    assert want in r.stderr, r.stderr
    assert tp.template_dirs() == before and tp.debris() == []
