"""The base template's own /etc/profile (docs/templates.md, "The base
template's login profile"): every E2B command runs as `bash -l -c`, so the
profile runs no subshell and sources nothing the host's /etc/profile.d held,
while login shells get the PATH and environment they always had."""

USER_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games:/opt/paddock/bin"
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/paddock/bin"

# A fake `id` first on the PATH the login shell starts with: a profile that
# runs `$(id -u)` (Debian's does, twice) leaves the marker behind.
SPY = r"""
mkdir -p /tmp/spy && printf '#!/bin/sh\necho spawned >> /tmp/spy/log\nexec /usr/bin/id "$@"\n' > /tmp/spy/id
chmod +x /tmp/spy/id
PATH=/tmp/spy:$PATH bash -l -c 'true'
PATH=/tmp/spy:$PATH bash -l -i -c 'true' 2>/dev/null
if [ -e /tmp/spy/log ]; then echo "subshells: $(wc -l < /tmp/spy/log)"; else echo "subshells: 0"; fi
"""


def test_login_shell_runs_no_subshell(paddock):
    r = paddock.sh(SPY)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "subshells: 0", r.stdout


def test_profile_is_paddocks_not_the_hosts(paddock):
    r = paddock.sh("head -1 /etc/profile; ls -A /etc/profile.d | wc -l")
    assert r.returncode == 0, r.stderr
    first, count = r.stdout.splitlines()
    assert first.startswith("# /etc/profile: paddock's base template"), first
    assert count == "0", "the host's /etc/profile.d was copied into the base template"


def test_login_path_user_and_root(paddock):
    r = paddock.run(["--", "bash", "-l", "-c", 'echo "$PATH"; command -v python'])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [USER_PATH, "/opt/paddock/bin/python"]
    r = paddock.run(["--user", "root", "--", "bash", "-l", "-c", 'echo "$PATH"'])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [ROOT_PATH]


def test_login_environment(paddock):
    # What a login shell had before the profile changed, minus the host's
    # vendor scripts: the agent's variables, nothing the profile adds but PATH.
    r = paddock.run(["--", "bash", "-l", "-c", "env -u _ -u SHLVL -u PWD | sort"])
    assert r.returncode == 0, r.stderr
    env = dict(l.split("=", 1) for l in r.stdout.splitlines())
    assert env == {"HOME": "/home/user", "HOSTNAME": "paddock", "LANG": "C.UTF-8",
                   "LOGNAME": "user", "PATH": USER_PATH, "SHELL": "/bin/bash", "USER": "user"}


def test_interactive_login_shell_reads_bashrc(paddock):
    # An interactive login shell gets Debian's prompt from /etc/bash.bashrc,
    # as before; sh gets the plain one from the profile.
    r = paddock.sh("bash -l -i -c 'echo \"$PS1\"' 2>/dev/null; "
                   "PS1='> ' sh -l -c 'echo \"$PS1\"'")
    assert r.returncode == 0, r.stderr
    bash_ps1, sh_ps1 = r.stdout.splitlines()
    assert "\\u@\\h" in bash_ps1, bash_ps1
    assert sh_ps1 == "$ "


def test_profile_d_written_in_the_sandbox_is_sourced(paddock):
    r = paddock.run(["--user", "root", "--", "bash", "-c",
                     "echo 'export FROM_PROFILE_D=yes' > /etc/profile.d/mine.sh; "
                     "bash -l -c 'echo $FROM_PROFILE_D'"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "yes\n"
