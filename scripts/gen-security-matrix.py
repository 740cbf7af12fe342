#!/usr/bin/env python3
"""Regenerates docs/security-matrix.md (attack x tier -> outcome) from the
escape suite's results.

    scripts/gen-security-matrix.py            # read build/security-results.json
    scripts/gen-security-matrix.py --run      # run the suite first (pytest, as root)
    scripts/gen-security-matrix.py --results FILE --out FILE

The results file is written by tests/security/test_escape_suite.py on every
run (PADDOCK_ESCAPE_RESULTS overrides its path); it carries the machine facts
(kernel, Landlock ABI, cgroup layout, date), each tier's availability, and per
(tier, attack) the outcome, who stopped it ("how") and a detail.
"""
import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIERS = ["container", "supervised", "process", "gvisor", "microvm"]

# microvm: tests/microvm/test_microvm_escape.py runs the attacks that aim at
# the host (each must be blocked, checked host-side) and writes its own
# results file; the others would reach only the guest's own kernel.
GUEST_OWN = "guest-own"


def merge_microvm(d, path):
    if not os.path.exists(path):
        return
    with open(path) as f:
        res = json.load(f)["results"]
    d["tiers"]["microvm"] = {"available": True, "why": ""}
    d["results"]["microvm"] = res
    for a in d["expect"]:
        d["expect"][a]["microvm"] = "blocked" if a in res else GUEST_OWN


# gvisor: tests/gvisor/test_gvisor_escape.py runs every attack but the
# supervised tier's races and the volume ones (the tier refuses volumes);
# those aimed at the host are asserted blocked there, the rest (aimed at the
# kernel, now the Sentry) are recorded.
GVISOR_HOST_AIMED = {
    "fs/host_canary", "fs/paddock_state", "fs/etc_shadow", "fs/hardlink_secret", "fs/dotdot_walk",
    "fs/proc1_root", "fs/root_secrets", "fs/leaked_fds",
    "net/host_loopback_listener", "net/udp_to_host", "net/metadata_endpoints", "net/abstract_unix_host",
    "net/host_unix_socket", "net/interfaces_visible", "proc/kill_host_pid", "proc/ptrace_host_supervisor",
}
NOT_RUN = "not-run"


def merge_gvisor(d, path):
    if not os.path.exists(path):
        return
    with open(path) as f:
        res = json.load(f)["results"]
    d["tiers"]["gvisor"] = {"available": True, "why": ""}
    d["results"]["gvisor"] = res
    for a in d["expect"]:
        d["expect"][a]["gvisor"] = ("blocked" if a in GVISOR_HOST_AIMED else
                                    "not-promised" if a in res else NOT_RUN)


COVERED_ELSEWHERE = [
    ("server: hostile file-API paths (`..`, absolute, NUL, over-long)",
     "tests/server/test_server_procs_files.py::test_dotdot_stays_inside, ::test_bad_paths_are_400"),
    ("server: symlink planted inside the sandbox", "tests/server/test_server_procs_files.py::test_symlink_planted_inside_is_resolved_inside"),
    ("server: FIFO / device through the file API", "tests/server/test_server_procs_files.py::test_fifo_refused"),
    ("server: upload larger than the writable layer", "tests/server/test_server_procs_files.py::test_upload_bigger_than_writable_layer_is_507"),
    ("server: aborted upload leaves nothing", "tests/server/test_server_procs_files.py::test_aborted_upload_leaves_nothing"),
    ("server: unknown sandbox ids, bad ids", "tests/server/test_server_procs_files.py::test_unknown_sandbox_and_bad_ids"),
    ("process tier: file API maps /home/user, refuses the rest", "tests/integration/test_process_tier.py::test_file_api_maps_home"),
    ("process tier: Landlock ABI downgrade refused/recorded", "tests/integration/test_process_tier.py::test_strict_on_abi7_and_refusal_on_older"),
    ("container: `rm -rf /` as root leaves the host intact", "tests/security/test_container_escape.py::test_rm_rf_root_does_not_touch_host"),
    ("container: uid map is an unprivileged range", "tests/security/test_container_escape.py::test_uid_map_unprivileged"),
]


def cell(res, exp):
    if res is None:
        if exp == NOT_RUN:
            return "not run (supervised races; volumes refused on this tier)"
        return "not run: aims at the guest's own kernel" if exp == GUEST_OWN else "—"
    out, how = res.get("outcome"), res.get("how", "")
    how = how.replace("|", "/")
    if out == "blocked":
        s = "blocked: %s" % how
    elif out == "escaped":
        s = "**ESCAPED**: %s" % how
    else:
        s = "*error*: %s" % how
    if exp == "not-promised":
        s += " *(not promised)*"
    elif out == "blocked" and exp.startswith("blocked-by:") and not how.startswith(exp.split(":", 1)[1]):
        s += " *(expected %s)*" % exp.split(":", 1)[1]
    return s


def verdict(res, exp):
    if res is None or exp in (GUEST_OWN, NOT_RUN):
        return None
    if exp == "not-promised":
        return "recorded"
    if res["outcome"] != "blocked":
        return "FAIL"
    if exp.startswith("blocked-by:") and not res["how"].startswith(exp.split(":", 1)[1]):
        return "FAIL"
    return "pass"


def render(d):
    f = d["facts"]
    lines = []
    w = lines.append
    w("# Security matrix: escape attempts per isolation tier")
    w("")
    w("Generated by `scripts/gen-security-matrix.py` from the results of "
      "`tests/security/test_escape_suite.py` (attacks in `tests/security/escape/<category>/`). "
      "Do not edit by hand: rerun the suite and the script.")
    w("")
    w("Each attack is a small python program run inside a sandbox (`paddock run -u root`, the strongest "
      "attacker inside) that reports `blocked`, `escaped` or `error` and *how*: an errno named "
      "`(paddock seccomp)` is paddock's filter (docs/seccomp.md); `(kernel)` means the call reached the "
      "kernel and failed there (missing capability, read-only mount); `EACCES` in the process tier is "
      "Landlock or the host's file modes; `not visible` means the target does not exist in the sandbox's "
      "namespaces; `contained` means the action worked but stayed inside the sandbox (checked from the host "
      "where it matters: canaries, listeners, a victim process, marker files and processes). "
      "*(not promised)*: the tier does not promise it (docs/security.md); the outcome is recorded, "
      "not asserted.")
    w("")
    # What each tier promises where the attacks below cannot say it in one
    # cell: volumes and SysV/POSIX IPC (docs/security.md, "Volumes" and the
    # process tier's list of gaps). Kept here so the matrix says it next to
    # the results that test it.
    w("## Volumes and IPC: what each tier promises")
    w("")
    w("| tier | volumes (`-v HOST:SB`) | SysV IPC, POSIX message queues | abstract unix sockets |")
    w("|---|---|---|---|")
    w("| container, supervised | offered: an idmapping of their own per volume (the sandbox's `user` is the "
      "directory's owner, root inside and everyone else unprivileged ids of the sandbox's range, never host "
      "root), `nosuid`, file capabilities refused; a root-owned directory is refused read-write | the "
      "sandbox's own IPC namespace | the sandbox's own network namespace |")
    w("| process | not offered | refused by its seccomp filter (`ENOSYS`): nothing shared with the host or "
      "other sandboxes, nothing outlives the sandbox | `socket(AF_UNIX)` refused (`EPERM`); `socketpair` for "
      "stream/seqpacket only |")
    w("| gvisor | refused (the gofer does host file I/O as host root, so the volume promise cannot hold) | "
      "the Sentry's own (user-space kernel) | the Sentry's own |")
    w("| microvm | not offered | the guest kernel's own | the guest kernel's own |")
    w("")
    w("## Machine")
    w("")
    w("| fact | value |")
    w("|---|---|")
    w("| date | %s |" % f.get("date"))
    w("| kernel (`uname -r`) | %s |" % f.get("kernel"))
    if f.get("ia32_entry"):
        w("| i386 entry (`int 0x80`) | %s |" % f["ia32_entry"]["why"])
    w("| Landlock ABI (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`) | %s |" % f.get("landlock_abi"))
    w("| cgroups | %s |" % f.get("cgroup"))
    w("| CPUs | %s |" % f.get("cpus"))
    w("| suite wall time | %s s |" % d.get("secs"))
    w("")
    w("## Tiers")
    w("")
    w("| tier | state | pass | fail | recorded (not promised) |")
    w("|---|---|---|---|---|")
    counts = {}
    for t in TIERS:
        ti = d["tiers"].get(t, {"available": False, "why": "not run"})
        if not ti["available"]:
            state = "not built" if t == "microvm" else "tier not available"
            w("| %s | %s (`%s`) | | | |" % (t, state, ti["why"].replace("|", "/")))
            continue
        c = {"pass": 0, "FAIL": 0, "recorded": 0}
        for a in sorted(d["expect"]):
            v = verdict(d["results"][t].get(a), d["expect"][a][t])
            if v:
                c[v] += 1
        counts[t] = c
        w("| %s | ran | %d | %d | %d |" % (t, c["pass"], c["FAIL"], c["recorded"]))
    w("")
    fails = []
    for t in TIERS:
        if not d["tiers"].get(t, {}).get("available"):
            continue
        for a in sorted(d["expect"]):
            r = d["results"][t].get(a)
            if verdict(r, d["expect"][a][t]) == "FAIL":
                fails.append("- **%s** on `%s`: %s: %s — %s" % (a, t, r["outcome"], r["how"], r.get("detail", "")))
    if fails:
        w("## Failures (a promise broken)")
        w("")
        lines.extend(fails)
        w("")
    w("## Attack × tier")
    w("")
    cols = [t for t in TIERS]
    w("| attack | run | " + " | ".join(cols) + " |")
    w("|---|---|" + "---|" * len(cols))
    for a in sorted(d["expect"], key=lambda n: (["fs", "proc", "kernel", "net", "supervised"].index(n.split("/")[0]), n)):
        row = []
        for t in cols:
            ti = d["tiers"].get(t, {})
            if not ti.get("available"):
                row.append("not built" if t == "microvm" else "tier not available")
            else:
                row.append(cell(d["results"][t].get(a), d["expect"][a][t]))
        w("| `%s` | %s | %s |" % (a, d["modes"].get(a, ""), " | ".join(row)))
    w("")
    w("## What each attack does")
    w("")
    for a in sorted(d["docs"]):
        w("- `%s`: %s" % (a, d["docs"][a]))
    w("")
    w("## Covered elsewhere")
    w("")
    w("| surface | tests |")
    w("|---|---|")
    for s, t in COVERED_ELSEWHERE:
        w("| %s | `%s` |" % (s, t))
    w("")
    w("## Not covered")
    w("")
    w("- The `microvm` tier: only the attacks aimed at the host run (tests/microvm/test_microvm_escape.py, "
      "each asserted blocked with its host-side checks); the rest would reach the guest's own kernel, which "
      "the tier does not promise to defend (docs/security.md).")
    w("- Attacks as `user` (uid 1000) in general: the batch runs as root inside; setuid, the TOCTOU race and "
      "/proc reads drop to uid 1000 themselves.")
    w("- Kernel exploits through allowed syscalls, side channels.")
    w("- Egress policy (network modes open/policy) is attacked in tests/network (metadata, host loopback, "
      "LAN, DNS exfiltration, IP-literal forms, other resolvers, QUIC, SNI/Host fronting), not here: "
      "every attack above runs under network none.")
    w("- Other sandboxes' processes and files (only paddock's state dir, runtime dir and workspaces paths are probed).")
    w("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.environ.get("PADDOCK_ESCAPE_RESULTS")
                    or os.path.join(REPO, "build", "security-results.json"))
    ap.add_argument("--microvm-results", default=os.path.join(REPO, "build", "security-results-microvm.json"))
    ap.add_argument("--gvisor-results", default=os.path.join(REPO, "build", "security-results-gvisor.json"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "security-matrix.md"))
    ap.add_argument("--run", action="store_true", help="run tests/security/test_escape_suite.py first")
    args = ap.parse_args()
    if args.run:
        env = dict(os.environ, PADDOCK_ESCAPE_RESULTS=os.path.abspath(args.results))
        subprocess.run(["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/security/test_escape_suite.py", "tests/microvm/test_microvm_escape.py",
                        "tests/gvisor/test_gvisor_escape.py"],
                       cwd=REPO, env=env)
    with open(args.results) as f:
        d = json.load(f)
    merge_microvm(d, args.microvm_results)
    merge_gvisor(d, args.gvisor_results)
    text = render(d)
    with open(args.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    print("wrote %s (%d attacks)" % (args.out, len(d["expect"])))


if __name__ == "__main__":
    sys.exit(main())
