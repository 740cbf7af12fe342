"""GET /api/v1/tiers (issue 17): the facts of `paddock tiers` for API
clients: every tier of the build, available or not and why, what it
isolates, its capabilities, and the last figures `paddock tiers --measure`
kept in the state dir (a GET measures nothing)."""
import json
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
    """`paddock tiers` on the same state dir: {tier: (ok, isolates, why,
    escape line)}."""
    r = srv.cli("tiers", "--state-dir", srv.state, *args, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()[1:]
    out = {}
    for row, why, esc in zip(lines[0::3], lines[1::3], lines[2::3]):
        name, ok = row.split()[:2]
        out[name] = (ok == "yes", row, why.strip()[1:-1], esc.strip())
    return out


def test_every_tier_with_the_clis_facts(srv):
    t = tiers(srv)
    assert sorted(t) == sorted(TIERS)
    cli = cli_rows(srv)
    for name, o in t.items():
        assert set(o) == {"name", "available", "why", "isolates", "capabilities", "measured", "escape",
                          "escape_why"}, o
        assert o["available"] == cli[name][0], (name, o, cli[name])
        assert o["why"] == cli[name][2], (name, o["why"], cli[name][2])
        assert o["isolates"] and o["isolates"] in cli[name][1]
        assert o["measured"] is None, o     # nothing measured on this state dir yet
        # the escape suite never wrote its summary into this state dir
        assert o["escape"] is None and o["escape_why"] == "never run on this host", o
        assert cli[name][3] == "escape suite: never run on this host", cli[name]
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


ESCAPE = os.path.join("{state}", "tiers.escape.json")


def write_summary(srv, per_tier, results_file):
    """What the escape suites write after a run (pdtest/escape_summary.py),
    into this server's state dir."""
    from pdtest import escape_summary
    return escape_summary.record(per_tier, results_file, path=ESCAPE.format(state=srv.state))


def test_escape_results_are_the_suites_last_run(srv, tmp_path):
    """A summary the suite wrote: each tier's date, counts and table are
    shown by GET, `paddock tiers` and `paddock tiers --json` alike; a tier
    the suite did not run stays null with the reason."""
    res = str(tmp_path / "security-results-gvisor.json")
    blocked = {"outcome": "blocked", "how": "EPERM (kernel)"}
    path = write_summary(srv, {
        "gvisor": {"a/1": blocked, "a/2": {"outcome": "blocked", "how": "ENOSYS (paddock seccomp)"},
                   "a/3": {"outcome": "escaped", "how": "unshare worked"}, "a/4": {"outcome": "error", "how": "x"}},
        "container": {"a/1": blocked, "a/2": {"outcome": "blocked", "how": "ENOSYS (paddock seccomp)"}}}, res)
    try:
        t = tiers(srv)
        g, c = t["gvisor"]["escape"], t["container"]["escape"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", g["date"]), g
        # ENOSYS on gvisor is the Sentry's "not implemented"; on container, paddock's seccomp
        assert {k: g[k] for k in ("attacks", "blocked", "allowed", "not_implemented", "errors")} == \
            {"attacks": 4, "blocked": 1, "allowed": 1, "not_implemented": 1, "errors": 1}, g
        assert (c["attacks"], c["blocked"], c["not_implemented"]) == (2, 2, 0), c
        assert g["results"] == res and g["matrix"].endswith("docs/security-matrix.md"), g
        assert t["gvisor"]["escape_why"] is None
        assert t["microvm"]["escape"] is None and t["microvm"]["escape_why"] == "never run on this host"
        cli = cli_rows(srv)
        assert cli["gvisor"][3] == ("escape suite %s: 4 attacks, 1 blocked, 1 allowed, 1 not implemented, "
                                    "1 errors; table: %s" % (g["date"], res)), cli["gvisor"]
        assert cli["microvm"][3] == "escape suite: never run on this host"
        r = srv.cli("tiers", "--state-dir", srv.state, "--json", timeout=600)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == {"tiers": list(t.values())}
        r = srv.cli("tiers", "--state-dir", srv.state, "--json", "--isolation", "gvisor", timeout=600)
        assert json.loads(r.stdout) == {"tiers": [t["gvisor"]]}
    finally:
        os.unlink(path)


@pytest.mark.parametrize("content, note", [
    ("{not json", "is malformed (line 1"),
    ('{"tiers": []}', 'is malformed (no "tiers" object)'),
    ('{"tiers": {"gvisor": {"date": "yesterday", "attacks": 1, "blocked": 1, "allowed": 0, '
     '"not_implemented": 0, "errors": 0}}}', "is malformed (tier 'gvisor': no \"date\""),
    ('{"tiers": {"gvisor": {"date": "2026-01-31T12:00:00Z", "attacks": "9", "blocked": 1, "allowed": 0, '
     '"not_implemented": 0, "errors": 0}}}', "is malformed (tier 'gvisor': \"attacks\" is not a count)"),
])
def test_malformed_escape_results_give_a_note(srv, content, note):
    """A broken summary (half-written, edited by hand): every tier says what
    is wrong with it, nothing is made up, nothing crashes."""
    path = ESCAPE.format(state=srv.state)
    with open(path, "w") as f:
        f.write(content)
    try:
        t = tiers(srv)
        assert t["gvisor"]["escape"] is None, t["gvisor"]
        assert t["gvisor"]["escape_why"].startswith("tiers.escape.json " + note), t["gvisor"]
        assert t["gvisor"]["escape_why"].endswith(": ignored")
        cli = cli_rows(srv)
        assert cli["gvisor"][3] == "escape suite: " + t["gvisor"]["escape_why"]
        assert srv.request("GET", "/api/v1/health")[0] == 200
    finally:
        os.unlink(path)


def test_needs_a_key(srv):
    assert srv.request("GET", "/api/v1/tiers", key=None)[0] == 401
