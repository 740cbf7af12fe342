"""GET /api/v1/tiers (issue 17): the facts of `paddock tiers` for API
clients: every tier of the build, available or not and why, what it
isolates, its capabilities, and the last figures `paddock tiers --measure`
kept in the state dir (a GET measures nothing)."""
import os
import re

import pytest

from pdtest.server import Server, tmproot  # noqa: F401 (fixture)

TIERS = ["process", "container", "supervised", "gvisor", "microvm"]


@pytest.fixture(scope="module")
def srv(tmproot):
    s = Server(os.path.join(tmproot, "tiers"), "--pool", "0").start()
    yield s
    s.finish()


def tiers(srv):
    st, j = srv.json("GET", "/api/v1/tiers")
    assert st == 200, (st, j)
    return {t["name"]: t for t in j["tiers"]}


def cli_rows(srv, *args):
    """`paddock tiers` on the same state dir: {tier: (ok, isolates, why)}."""
    r = srv.cli("tiers", "--state-dir", srv.state, *args, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()[1:]
    out = {}
    for row, why in zip(lines[0::2], lines[1::2]):
        name, ok = row.split()[:2]
        out[name] = (ok == "yes", row, why.strip()[1:-1])
    return out


def test_every_tier_with_the_clis_facts(srv):
    t = tiers(srv)
    assert sorted(t) == sorted(TIERS)
    cli = cli_rows(srv)
    for name, o in t.items():
        assert set(o) == {"name", "available", "why", "isolates", "capabilities", "measured"}, o
        assert o["available"] == cli[name][0], (name, o, cli[name])
        assert o["why"] == cli[name][2], (name, o["why"], cli[name][2])
        assert o["isolates"] and o["isolates"] in cli[name][1]
        assert o["measured"] is None, o     # nothing measured on this state dir yet
    assert t["microvm"]["capabilities"]["pause_to_disk"] is True
    assert t["container"]["capabilities"]["pause_to_disk"] is False
    assert t["supervised"]["capabilities"]["policy_file"] is True
    if t["gvisor"]["available"]:
        assert re.search(r"--platform=(ptrace|systrap|kvm)$", t["gvisor"]["why"]), t["gvisor"]
        assert t["gvisor"]["capabilities"]["snapshot_memory"] is True


def test_measured_figures_are_the_last_measure(srv):
    """The figure comes from `paddock tiers --measure`, read back, for the
    tier measured only."""
    r = srv.cli("tiers", "--state-dir", srv.state, "--measure", "--isolation", "container", timeout=600)
    assert r.returncode == 0, r.stderr
    row = r.stdout.splitlines()[1]
    ms = float(re.search(r"(\d+) ms", row).group(1))
    t = tiers(srv)
    m = t["container"]["measured"]
    assert m is not None and abs(m["run_p50_ms"] - ms) <= 1, (m, row)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["measured_at"]), m
    assert all(t[n]["measured"] is None for n in TIERS if n != "container")
    assert tiers(srv)["container"]["measured"] == m     # a GET measures nothing


def test_needs_a_key(srv):
    assert srv.request("GET", "/api/v1/tiers", key=None)[0] == 401
