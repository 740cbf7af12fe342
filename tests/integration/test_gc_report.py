"""`paddock gc` says what it kept and removed of the logs it does not
always remove: the audit logs and the console logs of failed microvm
starts (<state>/vm/failed, kept 7 days), on stderr and in --json."""
import json
import os
import subprocess
import time

from pdtest import PADDOCK_BIN, child_env


def gc(state, *args):
    return subprocess.run([PADDOCK_BIN, "gc", "--state-dir", state, *args], env=child_env(),
                          capture_output=True, text=True, timeout=120)


def put(path, data, age_days=0):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)
    if age_days:
        t = time.time() - age_days * 86400
        os.utime(path, (t, t))


def test_gc_reports_console_logs(tmp_path):
    state = str(tmp_path / "state")
    failed = os.path.join(state, "vm", "failed")
    put(os.path.join(failed, "aaaa-1.console.log"), "panic\n")                   # kept
    put(os.path.join(failed, "bbbb-2.console.log"), "old\n", age_days=8)        # past retention
    put(os.path.join(failed, "notes.txt"), "not a console log\n", age_days=8)
    put(os.path.join(state, "audit", "cccc.jsonl"), "{}\n")
    r = gc(state)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "removed 0 sandboxes\n"
    assert "kept 1 console log of failed microvm starts (6 bytes) in %s/vm/failed, removed 1 " % state \
        in r.stderr, r.stderr
    assert "kept 1 audit log (3 bytes)" in r.stderr, r.stderr
    assert sorted(os.listdir(failed)) == ["aaaa-1.console.log", "notes.txt"]
    # the same as JSON, and a second gc removes nothing more
    r = gc(state, "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j == {"removed_sandboxes": 0, "audit_logs_kept": 1, "audit_log_bytes": 3, "console_logs_kept": 1,
                 "console_log_bytes": 6, "console_logs_removed": 0, "outdated_base_templates_kept": 0}, j
    assert r.stderr == ""


def test_gc_without_logs_says_nothing_of_them(tmp_path):
    state = str(tmp_path / "state")
    r = gc(state)
    assert r.returncode == 0, r.stderr
    assert "console log" not in r.stderr and "audit log" not in r.stderr, r.stderr
    j = json.loads(gc(state, "--json").stdout)
    assert j["console_logs_kept"] == 0 and j["console_logs_removed"] == 0


def test_gc_bad_argument_changes_nothing(tmp_path):
    state = str(tmp_path / "state")
    failed = os.path.join(state, "vm", "failed")
    put(os.path.join(failed, "bbbb-2.console.log"), "old\n", age_days=8)
    r = gc(state, "--json", "extra")
    assert r.returncode != 0
    assert "unexpected argument 'extra'" in r.stderr
    assert os.listdir(failed) == ["bbbb-2.console.log"]
