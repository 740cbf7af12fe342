"""scripts/nss-myhostname.sh: `myhostname` on the hosts line of an
nsswitch.conf (what makes the port URLs' *.localhost names resolve), added
once, after "files", the rest of the file untouched; a file that has it is
not rewritten. On copies in a temp dir: never the host's file.

    /usr/bin/python3 -m pytest -q tests/scripts/test_nss_myhostname.py
"""
import os
import subprocess

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "scripts", "nss-myhostname.sh")

CASES = [
    ("hosts:          files dns\n", "hosts: files myhostname dns\n"),
    ("hosts: dns files mdns4_minimal [NOTFOUND=return]\n", "hosts: dns files myhostname mdns4_minimal [NOTFOUND=return]\n"),
    ("hosts: dns\n", "hosts: myhostname dns\n"),
    ("passwd: files\n", "passwd: files\nhosts:          files myhostname dns\n"),
]


def run(path):
    return subprocess.run(["bash", SCRIPT, str(path)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("before,after", CASES)
def test_adds_once(tmp_path, before, after):
    f = tmp_path / "nsswitch.conf"
    head, tail = "# nsswitch\npasswd:         files systemd\n", "networks:       files\n"
    f.write_text(head + before + tail if before.startswith("hosts") else head + tail + before)
    os.chmod(f, 0o644)
    r = run(f)
    assert r.returncode == 0, r.stderr
    text = f.read_text()
    assert text.count("myhostname") == 1, text
    hosts = [l for l in text.splitlines() if l.startswith("hosts:")]
    assert hosts == [after.splitlines()[-1]], text
    assert text.startswith("# nsswitch\npasswd:         files systemd\n")
    assert oct(os.stat(f).st_mode & 0o777) == "0o644"
    st = os.stat(f)
    r = run(f)
    assert r.returncode == 0 and r.stderr == ""
    assert f.read_text() == text and os.stat(f).st_ino == st.st_ino, "second run rewrote the file"


def test_present_is_left_alone(tmp_path):
    f = tmp_path / "nsswitch.conf"
    f.write_text("hosts:\tfiles myhostname dns # keep\n")
    ino = os.stat(f).st_ino
    assert run(f).returncode == 0
    assert f.read_text() == "hosts:\tfiles myhostname dns # keep\n" and os.stat(f).st_ino == ino


def test_missing_file_is_an_error(tmp_path):
    r = run(tmp_path / "nope")
    assert r.returncode != 0 and "no such file" in r.stderr
    assert not (tmp_path / "nope").exists()
