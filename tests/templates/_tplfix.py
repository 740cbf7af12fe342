"""Fixtures of the templates suite (each test module imports them: a
conftest.py here would shadow tests/conftest.py for suites run together) (docs/templates.md): a state dir of its
own, a local registry (Debian's docker-registry, run by us on a free
loopback port with our own config: never the packaged service on :5000),
a registries.conf marking it insecure (plain HTTP), and images pushed there."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import importlib.util
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _oci  # noqa: E402
from _reg import Registry, free_port  # noqa: E402,F401

# tests/conftest.py (its fixtures pytest already has; its classes we load
# under another module name: "conftest" is this file's)
_spec = importlib.util.spec_from_file_location(
    "pd_tests_conftest", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conftest.py"))
_top = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_top)
Paddock, child_env, leftovers = _top.Paddock, _top.child_env, _top.leftovers



@pytest.fixture(scope="module")
def work(state_root):
    d = tempfile.mkdtemp(prefix="pd-templates-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def registry(work):
    root = os.path.join(work, "registry")
    os.makedirs(root)
    r = Registry(root)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def regenv(work, registry):
    """The environment paddock and skopeo run with: our registries.conf."""
    conf = os.path.join(work, "registries.conf")
    with open(conf, "w") as f:
        f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n' % registry.host)
    return {"CONTAINERS_REGISTRIES_CONF": conf}


class TP(Paddock):
    def __init__(self, state, env):
        super().__init__(state)
        self.env = env

    def tpl(self, *args, timeout=180, check=False):
        r = self.run(list(args), verb="template", timeout=timeout, env=self.env)
        if check:
            assert r.returncode == 0, r.stderr
        return r

    def sandbox(self, template, *cmd, opts=(), timeout=120):
        return self.run(["--template", template] + list(opts) + (["--"] + list(cmd) if cmd else []),
                        timeout=timeout, env=self.env)

    def template_dirs(self):
        d = os.path.join(self.state, "templates")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def layer_dirs(self):
        d = os.path.join(self.state, "layers")
        return sorted(n for n in os.listdir(d) if not n.startswith(".gc")) if os.path.isdir(d) else []

    def debris(self):
        """Half-made things a failed pull or build must not leave."""
        out = [n for n in self.template_dirs() if n.startswith(".") and not n.endswith(".lock")]
        out += [n for n in self.template_dirs() if n.startswith("paddock-build-")]
        out += [n for n in self.layer_dirs() if n.startswith(".tmp")]
        img = os.path.join(self.state, "images")
        if os.path.isdir(img):
            out += [n for n in os.listdir(img) if n.startswith("tmp-")]
        return out


def own_state(state_root, regenv, sub):
    """A TP on state dir state_root/sub, gc'd and checked at the end."""
    p = TP(os.path.join(state_root, sub), regenv)
    os.makedirs(p.state, exist_ok=True)
    yield p
    r = p.gc()
    assert r.returncode == 0, r.stderr
    assert leftovers(p.state) == {}
    shutil.rmtree(p.state, ignore_errors=True)


@pytest.fixture(scope="module")
def tp(state_root, regenv):
    yield from own_state(state_root, regenv, "templates")


@pytest.fixture(scope="module")
def bb_image(work, registry, regenv):
    """busybox in one layer, pushed as bb:1 (a plain image)."""
    lay = os.path.join(work, "bb")
    digest = _oci.write_layout(lay, [_oci.busybox_layer().bytes()],
                               config={"Env": ["PATH=/bin", "FROM_IMAGE=yes"]})
    _oci.push(lay, registry.host + "/bb:1", regenv)
    return registry.host + "/bb:1"


