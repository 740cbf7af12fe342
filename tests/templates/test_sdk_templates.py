"""The Python SDK's Templates (issue 20) against a real server and the
suite's loopback registry: pull with the build log, list, build from a
recipe and from a context directory, a failing build raises BuildError
with its log, delete; bad input is refused and changes nothing."""
import os
import sys

import pytest

from _tplfix import *  # noqa: F401,F403  (the suite's fixtures)
from pdtest import REPO
from pdtest.server import Server

sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
from paddock import (BuildError, InvalidArgumentError, NotFoundError, PermissionError as PdPermissionError,  # noqa: E402
                     Sandbox, Templates)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")


@pytest.fixture(scope="module")
def srv(registry, regenv):
    old = {k: os.environ.get(k) for k in regenv}
    os.environ.update(regenv)
    s = Server(None, "--pool", "0", "--template-registry", registry.host, prefix="pd-tplsdk-")
    try:
        s.start()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield s
    finally:
        s.finish()


@pytest.fixture(scope="module")
def tpl(srv):
    return Templates(api_key=srv.key, url=srv.url)


def run_in(srv, template, cmd):
    with Sandbox.create(template=template, api_key=srv.key, url=srv.url, timeout=120) as s:
        return s.commands.run(cmd).stdout


def test_pull_build_list_delete(srv, tpl, bb_image, tmp_path):
    lines = []
    t = tpl.pull("sdkbb", bb_image, on_log=lines.append)
    assert t.name == "sdkbb" and t.status == "ready" and t.raw["source"] == bb_image, t
    assert lines, "the pull's progress came through on_log"
    names = [x.name for x in tpl.list()]
    assert names[0] == "base" and "sdkbb" in names
    assert tpl.get("sdkbb").shared is False

    t = tpl.build("sdkrec", recipe="FROM sdkbb\nARG WHO=nobody\nRUN echo by-$WHO > /built\n",
                  build_args={"WHO": "sdk"})
    assert t.status == "ready"
    assert run_in(srv, "sdkrec", ["cat", "/built"]) == "by-sdk\n"

    ctx = tmp_path / "ctx"
    (ctx / "sub").mkdir(parents=True)
    (ctx / "Recipe").write_text("FROM sdkbb\nCOPY hello.txt /hello.txt\nCOPY sub /sub\n")
    (ctx / "hello.txt").write_text("hello from the context\n")
    (ctx / "sub" / "a").write_text("A\n")
    os.symlink("a", str(ctx / "sub" / "link"))
    t = tpl.build("sdkctx", context=str(ctx), recipe_path="Recipe")
    assert run_in(srv, "sdkctx", ["cat", "/hello.txt", "/sub/link"]) == "hello from the context\nA\n"

    # the build log, read again by offset
    whole = tpl.log("sdkctx")
    assert whole and tpl.log("sdkctx", offset=5) == whole[5:]

    for n in ("sdkctx", "sdkrec"):
        assert tpl.delete(n) is True
    assert "sdkctx" not in [x.name for x in tpl.list()]
    with pytest.raises(NotFoundError):
        tpl.get("sdkctx")


def test_failing_build_raises_with_its_log(srv, tpl, bb_image):
    tpl.pull("sdkbb2", bb_image)
    with pytest.raises(BuildError) as e:
        tpl.build("sdkfail", recipe="FROM sdkbb2\nRUN echo oh-no; exit 3\n")
    assert "oh-no" in e.value.log and e.value.error, (e.value.error, e.value.log)
    assert tpl.get("sdkfail").status == "failed"
    assert tpl.delete("sdkfail")
    # wait=False: the answer to the request; wait() follows it later
    t = tpl.build("sdklater", recipe="FROM sdkbb2\nRUN true\n", wait=False)
    assert t.status == "queued", t
    assert tpl.wait("sdklater").status == "ready"
    assert tpl.delete("sdklater") and tpl.delete("sdkbb2")


def test_bad_input(srv, tpl, tmp_path):
    before = [x.name for x in tpl.list()]
    with pytest.raises(InvalidArgumentError):
        tpl.build("x", recipe="FROM a\n", context=str(tmp_path))       # one of the two
    with pytest.raises(InvalidArgumentError):
        tpl.build("x")
    with pytest.raises(InvalidArgumentError):
        tpl.get("../etc")
    with pytest.raises(InvalidArgumentError) as e:
        tpl.build("Bad_Name", recipe="FROM sdkbb\n")
    assert e.value.status == 400
    with pytest.raises(InvalidArgumentError):
        tpl.pull("short", "python:3.12")                                # a short name: no registry
    with pytest.raises(PdPermissionError):
        tpl.delete("base")
    with pytest.raises(InvalidArgumentError) as e:
        tpl.build("notar", context=b"not a tar")
    assert "not a tar" in str(e.value)
    assert [x.name for x in tpl.list()] == before
