#!/usr/bin/python3
"""Density benchmark: many idle sandboxes at once on one paddock server.

Starts `paddock serve --pool 0 --max-sandboxes 1100 --max-per-key 1100`,
creates --count (default 1000) sandboxes with a few threads, and measures:

  - the creation rate;
  - host memory: MemTotal - MemAvailable before and after (/proc/meminfo,
    median of several samples), the PSS of the sandboxes' own processes (the
    agents: every descendant of the server, from /proc/<pid>/smaps_rollup),
    the server's own PSS, and the kernel's share (Slab, page tables, kernel
    stacks, shmem); per idle sandbox beyond its own processes;
  - that every sandbox still answers (POST /exec {"cmd": ["true"]} on each);
  - the deletion rate, the memory given back, and that nothing is left
    (server's children, /api/v1/health count, `paddock gc`, cgroups);
  - the same-run peer (--peer bwrap, the default): --count idle
    `bwrap --unshare-all` sandboxes on a minimal root (/usr read-only, its
    own /proc, /dev, /tmp), each running a shell that echoes lines from a
    pipe, measured the same way (host memory before/after, the PSS of every
    process they run, /proc/slabinfo by cache) and each one asked to answer
    (a line written to it comes back). It runs before the paddock part, with
    nothing of paddock's up; `--peer none` leaves it out.

If --count cannot be reached it reports how far it got and what stopped it.

    sudo /usr/bin/python3 bench/density.py [--count N] [--threads N]

Standard library only; shares its helpers with bench/server.py. Writes
bench/reports/density.md. Cleans up on exit, also on failure.
"""

import argparse
import http.client
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as sb  # noqa: E402  (bench/server.py)

ROOT = sb.ROOT
SCRIPT = os.path.abspath(__file__)
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "density.md")
KiB = 1024
MEMKEYS = ["MemTotal", "MemAvailable", "MemFree", "Slab", "SReclaimable", "SUnreclaim",
           "PageTables", "KernelStack", "Shmem", "Cached", "AnonPages", "Percpu"]


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in MEMKEYS:
                out[k] = int(v.split()[0])  # KiB
    out["Used"] = out["MemTotal"] - out["MemAvailable"]
    return out


def slabinfo():
    """Bytes held per slab cache (/proc/slabinfo: num_slabs x pages per slab
    x page size, what the cache takes from the page allocator). Merged
    caches show under one name (SLUB aliases)."""
    out = {}
    try:
        with open("/proc/slabinfo") as f:
            for line in f:
                if line.startswith(("slabinfo", "#")):
                    continue
                x = line.split()
                # name active num objsize perslab pagesperslab : tunables l b s : slabdata active num shared
                out[x[0]] = int(x[14]) * int(x[5]) * 4096
    except OSError:
        pass
    return out


def slab_delta(a, b, n, top=15):
    """The caches that grew most between a and b: (name, KiB per sandbox, MiB total)."""
    d = sorted(((b.get(k, 0) - a.get(k, 0), k) for k in set(a) | set(b)), reverse=True)
    return [(k, v / 1024 / max(n, 1), v / 1048576) for v, k in d[:top] if v > 0]


def mem_sample(n=7, gap=0.25):
    """Median of n /proc/meminfo samples, gap seconds apart (KiB)."""
    samples = []
    for i in range(n):
        samples.append(meminfo())
        if i + 1 < n:
            time.sleep(gap)
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}, \
        (max(s["Used"] for s in samples) - min(s["Used"] for s in samples))


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(pid):
    kids = children_map()
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def rollup(pid):
    """{'Pss': KiB, 'Rss': KiB, ...} from smaps_rollup, or None."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            out = {}
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[-2])
            return out
    except OSError:
        return None


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def nfds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def procs_memory(pids):
    tot = {"Pss": 0, "Rss": 0, "Private": 0, "n": 0, "comms": {}}
    for p in pids:
        r = rollup(p)
        if not r:
            continue
        tot["n"] += 1
        tot["Pss"] += r.get("Pss", 0)
        tot["Rss"] += r.get("Rss", 0)
        tot["Private"] += r.get("Private_Clean", 0) + r.get("Private_Dirty", 0)
        c = comm(p)
        tot["comms"][c] = tot["comms"].get(c, 0) + 1
    return tot


def cgroup_usage(instance):
    """Memory charged to our instance's cgroup (v1 memory or v2), bytes, or None."""
    out = {}
    for base in ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        d = os.path.join(base, "paddock-" + instance)
        for name in ("memory.usage_in_bytes", "memory.kmem.usage_in_bytes", "memory.current"):
            try:
                with open(os.path.join(d, name)) as f:
                    out["%s/%s" % (os.path.relpath(d, "/sys/fs/cgroup"), name)] = int(f.read())
            except (OSError, ValueError):
                pass
    return out


def limits_snapshot(spid):
    facts = {}
    try:
        with open("/proc/%d/limits" % spid) as f:
            for line in f:
                if line.startswith("Max open files") or line.startswith("Max processes"):
                    facts[line[:26].strip()] = " ".join(line[26:].split()[:2])
    except OSError:
        pass
    for k, p in (("pid_max", "/proc/sys/kernel/pid_max"), ("threads-max", "/proc/sys/kernel/threads-max"),
                 ("pids in use", None)):
        if p:
            try:
                with open(p) as f:
                    facts[k] = f.read().strip()
            except OSError:
                pass
    facts["pids in use (host)"] = str(sum(1 for d in os.listdir("/proc") if d.isdigit()))
    return facts


def run_threads(nthreads, work, items):
    """Run work(client_index, item) over items with nthreads threads; stops
    handing out items once `stop` is set. Returns nothing (work records)."""
    lock = threading.Lock()
    it = iter(items)
    stop = threading.Event()

    def loop(ti):
        while not stop.is_set():
            with lock:
                try:
                    x = next(it)
                except StopIteration:
                    return
            if not work(ti, x):
                stop.set()

    ts = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return stop.is_set()

BWRAP_ARGV = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
              "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
              "/bin/sh", "-c", 'while read -r x; do echo "$x"; done']


def ask(p, word):
    """Write a line to an echo sandbox and read it back: does it answer?"""
    try:
        p.stdin.write(word + b"\n")
        p.stdin.flush()
        return p.stdout.readline() == word + b"\n"
    except (OSError, ValueError):
        return False


def bwrap_peer(args):
    """--count idle bwrap sandboxes, measured like paddock's (see the module
    doc). Returns a dict for the report; every sandbox is ended (stdin
    closed, then SIGKILL if it lingers) before it returns."""
    import subprocess
    R = {"argv": BWRAP_ARGV, "n": 0, "errs": [], "answered": 0, "not_answered": []}
    procs = []
    me = os.getpid()
    try:
        R["mem0"], R["noise0"] = mem_sample()
        R["slab0"] = slabinfo()
        t0 = time.monotonic()
        # started in batches of 32 at a time (as paddock's creates run several
        # in flight); each batch's sandboxes are asked for their first line
        i = 0
        while i < args.count and len(R["errs"]) < args.max_errors:
            batch = []
            for _ in range(min(32, args.count - i)):
                try:
                    batch.append(subprocess.Popen(BWRAP_ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                  stderr=subprocess.DEVNULL, close_fds=True))
                except OSError as e:
                    R["errs"].append("%s: %s" % (type(e).__name__, e))
                    break
            procs += batch
            for p in batch:
                # started means answering: the first line comes back
                if not ask(p, b"ready"):
                    R["errs"].append("sandbox %d did not answer its first line (exit %s)" % (i, p.poll()))
                i += 1
                if i % 100 == 0:
                    print("bwrap: %d started" % i, file=sys.stderr)
            if not batch:
                break
        R["create_secs"] = time.monotonic() - t0
        R["n"] = sum(1 for p in procs if p.poll() is None)
        time.sleep(args.settle)
        R["mem1"], R["noise1"] = mem_sample()
        R["slab1"] = slabinfo()
        R["procs"] = procs_memory(descendants(me))     # bwrap's and the shells: nothing else runs yet
        t0 = time.monotonic()
        for i, p in enumerate(procs):
            if ask(p, b"ping %d" % i):
                R["answered"] += 1
            else:
                R["not_answered"].append(i)
        R["answer_secs"] = time.monotonic() - t0
    finally:
        for p in procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 60
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()
        time.sleep(args.settle)
        R["mem2"], R["noise2"] = mem_sample()
        R["left"] = [(d, comm(d)) for d in descendants(me)]
    return R


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="idle sandboxes to hold at once (default 1000)")
    ap.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    ap.add_argument("--max-errors", type=int, default=20,
                    help="stop creating after this many failed creates (default 20)")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds to wait before memory samples (default 3)")
    ap.add_argument("--report", default=DEFAULT_REPORT, help="Markdown report path")
    ap.add_argument("--peer", choices=("bwrap", "none"), default="bwrap",
                    help="same-run peer measured first (default bwrap)")
    args = ap.parse_args()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    if os.geteuid() != 0:
        print("warning: not root; paddock serve needs root", file=sys.stderr)

    paddock = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(ROOT, "build", "src", "paddock"))
    agent = os.path.abspath(os.environ.get("PADDOCK_AGENT") or
                            os.path.join(ROOT, "build", "src", "agent", "paddock-agent"))
    ctx = sb.machine_ctx(shlex.join(["/usr/bin/python3", os.path.relpath(SCRIPT, ROOT)] + sys.argv[1:]))
    ctx["versions"] = [("paddock", sb.version_of([paddock, "version"])), ("python", sys.version.split()[0])]
    if args.peer == "bwrap":
        ctx["versions"].append(("bwrap", sb.version_of(["bwrap", "--version"])))
    cap = max(1100, args.count + 100)
    work = tempfile.mkdtemp(prefix="paddock-bench-density-")
    srv = sb.Server(paddock, agent, work, "density",
                    ["--pool", "0", "--max-sandboxes", str(cap), "--max-per-key", str(cap)])
    R = {"ids": [], "create_ms": [], "create_errs": [], "exec_ms": [], "exec_errs": [],
         "delete_ms": [], "delete_errs": []}
    lock = threading.Lock()
    problems, failed = [], None
    if args.peer == "bwrap":
        print("peer: %d bwrap sandboxes ..." % args.count, file=sys.stderr)
        try:
            R["bwrap"] = bwrap_peer(args)
        except Exception as e:  # noqa: BLE001 - reported; paddock's part still runs
            R["bwrap"] = {"failed": "%s: %s" % (type(e).__name__, e)}
        if R["bwrap"].get("left"):
            problems.append("bwrap peer: processes left: %s" % R["bwrap"]["left"][:5])
    try:
        srv.start()
        spid = srv.p.pid
        c0 = srv.client()
        # one create+delete first, untimed (template build, lazy set-up)
        st, b = c0.call("POST", "/api/v1/sandboxes", obj={})
        if st != 201:
            raise RuntimeError("first create: " + sb.http_error(st, b))
        c0.call("DELETE", "/api/v1/sandboxes/%s" % b["id"])
        time.sleep(args.settle)
        R["limits"] = limits_snapshot(spid)
        R["mem0"], R["noise0"] = mem_sample()
        R["slab0"] = slabinfo()
        R["server0"] = rollup(spid) or {}
        R["fds0"] = sb_fds0 = nfds(spid)
        R["cg0"] = cgroup_usage(sb.paddock_instance(srv.state))
        clients = [srv.client() for _ in range(args.threads)]

        # ---- create
        def create(ti, i):
            t0 = time.perf_counter_ns()
            try:
                st, body = clients[ti].call("POST", "/api/v1/sandboxes", obj={"timeout": 86400})
            except Exception as e:  # noqa: BLE001
                st, body = 0, "%s: %s" % (type(e).__name__, e)
                clients[ti].close()
            t1 = time.perf_counter_ns()
            with lock:
                if st == 201:
                    R["ids"].append(body["id"])
                    R["create_ms"].append(sb.ms(t1 - t0))
                    n = len(R["ids"])
                    if n % 100 == 0:
                        print("created %d (server fds %d)" % (n, nfds(spid)), file=sys.stderr)
                    return True
                R["create_errs"].append((len(R["ids"]), sb.http_error(st, body) if st else body))
                print("create failed after %d: %s" % (len(R["ids"]), R["create_errs"][-1][1]), file=sys.stderr)
                return len(R["create_errs"]) < args.max_errors
        print("creating %d sandboxes with %d threads ..." % (args.count, args.threads), file=sys.stderr)
        t0 = time.monotonic()
        run_threads(args.threads, create, range(args.count))
        R["create_secs"] = time.monotonic() - t0
        n = len(R["ids"])
        R["fds1"] = nfds(spid)
        time.sleep(args.settle)
        R["mem1"], R["noise1"] = mem_sample()
        R["slab1"] = slabinfo()
        R["server1"] = rollup(spid) or {}
        pids = descendants(spid)
        R["agents"] = procs_memory(pids)
        R["cg1"] = cgroup_usage(sb.paddock_instance(srv.state))
        R["limits1"] = limits_snapshot(spid)
        c0.close()                      # idle since the first create: the server may have dropped it
        try:
            st, h = c0.call("GET", "/api/v1/health")
        except (OSError, http.client.HTTPException) as e:
            st, h = 0, None
            problems.append("GET /api/v1/health with %d sandboxes: %s: %s" % (n, type(e).__name__, e))
        R["health1"] = h.get("sandboxes") if isinstance(h, dict) else None
        if R["health1"] is not None and R["health1"] != n:
            problems.append("the server counted %s sandboxes when memory was sampled, not %d: the "
                            "per-sandbox figures are off" % (R["health1"], n))

        # ---- every one answers
        def check(ti, sid):
            t0 = time.perf_counter_ns()
            try:
                st, body = clients[ti].call("POST", "/api/v1/sandboxes/%s/exec" % sid, obj={"cmd": ["true"]})
            except Exception as e:  # noqa: BLE001
                st, body = 0, "%s: %s" % (type(e).__name__, e)
                clients[ti].close()
            t1 = time.perf_counter_ns()
            with lock:
                if st == 200 and isinstance(body, dict) and body.get("exit_code") == 0:
                    R["exec_ms"].append(sb.ms(t1 - t0))
                else:
                    R["exec_errs"].append((sid, sb.http_error(st, body) if st else body))
            return True
        print("exec `true` in each ...", file=sys.stderr)
        t0 = time.monotonic()
        run_threads(args.threads, check, list(R["ids"]))
        R["exec_secs"] = time.monotonic() - t0

        # ---- delete all
        def delete(ti, sid):
            t0 = time.perf_counter_ns()
            try:
                st, body = clients[ti].call("DELETE", "/api/v1/sandboxes/%s" % sid)
            except Exception as e:  # noqa: BLE001
                st, body = 0, "%s: %s" % (type(e).__name__, e)
                clients[ti].close()
            t1 = time.perf_counter_ns()
            with lock:
                if st == 204:
                    R["delete_ms"].append(sb.ms(t1 - t0))
                else:
                    R["delete_errs"].append((sid, sb.http_error(st, body) if st else body))
            return True
        print("deleting ...", file=sys.stderr)
        t0 = time.monotonic()
        run_threads(args.threads, delete, list(R["ids"]))
        R["delete_secs"] = time.monotonic() - t0
        time.sleep(args.settle)
        R["mem2"], R["noise2"] = mem_sample()
        R["left_procs"] = [(p, comm(p)) for p in descendants(spid)]
        R["fds2"] = nfds(spid)
        c0.close()                      # idle since the first create: the server may have dropped it
        st, h = c0.call("GET", "/api/v1/health")
        R["health2"] = h.get("sandboxes") if isinstance(h, dict) else None
        for c in clients + [c0]:
            c.close()
    except Exception as e:  # noqa: BLE001
        failed = "%s: %s" % (type(e).__name__, e)
        print("error: " + failed, file=sys.stderr)
    finally:
        print("stopping the server and running paddock gc ...", file=sys.stderr)
        problems += srv.stop()
        R["gc_output"] = getattr(srv, "gc_output", None)
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(work):
            problems.append("could not remove %s" % work)
        for m in problems:
            print("cleanup: " + m, file=sys.stderr)
    ctx["load_after"] = sb.loadavg()
    return report(args, ctx, srv, R, problems, failed)

def bwrap_section(args, R, out):
    """The peer's rows, and paddock / bwrap per sandbox, same run."""
    B = R.get("bwrap")
    if not B:
        return []
    L = ["## Same-run peer: %d idle bwrap sandboxes" % args.count, ""]
    if B.get("failed"):
        return L + ["**The peer failed**: %s" % B["failed"], ""]
    n = B["n"]
    L += ["Measured first, before paddock's server started, the same way: `%s`, one per sandbox, "
          "stdin and stdout pipes to this process; each counts as started when a first line "
          "written to it came back. Its own processes are bwrap's (the outer one and the pid-1 "
          "reaper of its pid namespace) and the shell: every descendant of this process." %
          " ".join(shlex.quote(a) for a in B["argv"]), ""]
    if B["errs"]:
        L.append("- Failures while starting: %d; first: `%s`." % (len(B["errs"]), B["errs"][0]))
    if not n or "mem1" not in B:
        return L + ["- No bwrap sandbox was running: nothing to compare.", ""]
    m0, m1, m2 = B["mem0"], B["mem1"], B["mem2"]
    pr = B["procs"]
    d_used = m1["Used"] - m0["Used"]
    beyond = d_used - pr["Pss"]
    rows = []

    def row(label, kib, note=""):
        rows.append([label, "%.1f" % (kib / 1024), "%.0f" % (kib / n), "%.3f" % (kib / n / 1024), note])
    row("host memory in use, after − before", d_used,
        "median of 7 samples each; spread %.0f / %.0f MiB" % (B["noise0"] / 1024, B["noise1"] / 1024))
    row("  their own processes: PSS sum", pr["Pss"], "%d processes (%s); RSS sum %.0f MiB" % (
        pr["n"], ", ".join("%d %s" % (v, k) for k, v in sorted(pr["comms"].items())), pr["Rss"] / 1024))
    row("  **beyond their own processes**", beyond, "")
    for k in ("Slab", "SUnreclaim", "PageTables", "KernelStack", "Percpu"):
        row("    of which (kernel, host-wide Δ): %s" % k, m1[k] - m0[k])
    row("given back on ending all", m1["Used"] - m2["Used"], "cross-check of the first row")
    L += ["- Started **%d of %d** in %.1f s; **%d of %d answered** a line (%.1f s)%s." % (
        n, args.count, B["create_secs"], B["answered"], n, B["answer_secs"],
        "; not answering: %s" % B["not_answered"][:10] if B["not_answered"] else ""), "",
        sb.md_table(["what", "MiB total", "KiB per sandbox", "MiB per sandbox", "note"], rows, left=(0, 4)), ""]
    out.append("bwrap peer: %d/%d answered; host memory %.0f KiB per sandbox, own processes %.0f KiB, "
               "beyond them %.0f KiB" % (B["answered"], n, d_used / n, pr["Pss"] / n, beyond / n))
    # side by side, per sandbox
    pn = len(R.get("ids", []))
    if "mem1" in R and pn:
        p_used = R["mem1"]["Used"] - R["mem0"]["Used"]
        p_beyond = p_used - R["agents"]["Pss"]
        cmp_rows = [
            ["host memory in use", "%.0f" % (p_used / pn), "%.0f" % (d_used / n), "%.2f×" % ((p_used / pn) / (d_used / n))],
            ["own processes (PSS)", "%.0f" % (R["agents"]["Pss"] / pn), "%.0f" % (pr["Pss"] / n),
             "%.2f×" % ((R["agents"]["Pss"] / pn) / (pr["Pss"] / n)) if pr["Pss"] else "-"],
            ["beyond own processes", "%.0f" % (p_beyond / pn), "%.0f" % (beyond / n),
             "%.2f×" % ((p_beyond / pn) / (beyond / n)) if beyond > 0 else "-"],
            ["Slab (Δ)", "%.0f" % ((R["mem1"]["Slab"] - R["mem0"]["Slab"]) / pn), "%.0f" % ((m1["Slab"] - m0["Slab"]) / n),
             "%.2f×" % (((R["mem1"]["Slab"] - R["mem0"]["Slab"]) / pn) / ((m1["Slab"] - m0["Slab"]) / n))
             if m1["Slab"] > m0["Slab"] else "-"],
        ]
        L += ["### paddock vs bwrap, per idle sandbox (KiB, this run)", "",
              sb.md_table(["what", "paddock", "bwrap", "paddock / bwrap"], cmp_rows, left=(0,)), ""]
        out.append("paddock / bwrap per idle sandbox: in use %.2f×, beyond own processes %s" % (
            (p_used / pn) / (d_used / n), cmp_rows[2][3]))
        pa = dict((k, v) for k, v, _ in slab_delta(R.get("slab0", {}), R.get("slab1", {}), pn, top=40))
        bw = dict((k, v) for k, v, _ in slab_delta(B["slab0"], B["slab1"], n, top=40))
        keys = sorted(set(pa) | set(bw), key=lambda k: -max(pa.get(k, 0), bw.get(k, 0)))[:20]
        L += ["### Slab by cache per sandbox, both (KiB per sandbox, /proc/slabinfo growth)", "",
              "The 20 caches that grew most in either part; host-wide, so other work moves them too.", "",
              sb.md_table(["cache", "paddock", "bwrap"],
                          [[k, "%.1f" % pa.get(k, 0), "%.1f" % bw.get(k, 0)] for k in keys], left=(0,)), ""]
    return L


def report(args, ctx, srv, R, problems, failed):
    n = len(R["ids"])
    L = ["# paddock density benchmark", "",
         "Generated by `bench/density.py` (see `bench/README.md`). Do not edit by hand.", ""]
    L += sb.machine_lines(ctx)
    L += ["## Server", "", "```", srv.display() if srv.argv else "not started", "```", "",
          "Creates are `POST /api/v1/sandboxes {\"timeout\": 86400}` (a day: on a loaded machine the "
          "creates outlast the default 300 s; defaults otherwise: template base, 512 MB, 1 CPU, 512 pids, "
          "1024 MB disk) from %d threads, each with its own keep-alive connection; one untimed "
          "create + delete comes first." % args.threads, ""]
    out = []
    exit_code = 0
    if failed:
        L += ["**The run failed**: %s" % failed, ""]
        exit_code = 1
    if "create_secs" in R:
        rate = n / R["create_secs"] if R["create_secs"] else 0
        cm = R["create_ms"]
        line = ("created %d of %d in %.1f s: %.0f sandboxes/s; per create (%d threads in flight) "
                "p50 %s ms, p99 %s ms, max %s ms" % (n, args.count, R["create_secs"], rate, args.threads,
                                                      sb.fmt_ms(statistics.median(cm)) if cm else "-",
                                                      sb.fmt_ms(sb.pct(cm, 99)) if cm else "-",
                                                      sb.fmt_ms(max(cm)) if cm else "-"))
        out.append(line)
        L += ["## Creation", "", "- Created **%d of %d** sandboxes in %.1f s: **%.0f sandboxes/s**." %
              (n, args.count, R["create_secs"], rate)]
        if cm:
            L.append("- Latency of one create with %d in flight: p50 %s ms, p99 %s ms, max %s ms; "
                     "first 100: p50 %s ms; last 100: p50 %s ms." %
                     (args.threads, sb.fmt_ms(statistics.median(cm)), sb.fmt_ms(sb.pct(cm, 99)),
                      sb.fmt_ms(max(cm)), sb.fmt_ms(statistics.median(cm[:100])),
                      sb.fmt_ms(statistics.median(cm[-100:]))))
        if R["create_errs"]:
            L.append("- **Creation stopped or failed**: %d failed create(s); the first after %d "
                     "successes: `%s`; the last: `%s`." % (len(R["create_errs"]), R["create_errs"][0][0],
                                                          R["create_errs"][0][1], R["create_errs"][-1][1]))
        L.append("- Server's open fds: %s before, %s with %d sandboxes (%.1f per sandbox), %s after "
                 "deleting them." % (R.get("fds0"), R.get("fds1"), n,
                                     (R["fds1"] - R["fds0"]) / n if n else 0, R.get("fds2", "?")))
        L.append("- `/api/v1/health` counted %s sandboxes." % R.get("health1"))
        lim = R.get("limits1", {})
        if lim:
            L.append("- Limits seen: %s." % "; ".join("%s %s" % kv for kv in lim.items()))
        L.append("")
    if "mem1" in R and n:
        m0, m1, m2 = R["mem0"], R["mem1"], R.get("mem2")
        ag = R["agents"]
        s0, s1 = R["server0"].get("Pss", 0), R["server1"].get("Pss", 0)
        d_used = m1["Used"] - m0["Used"]
        beyond = d_used - ag["Pss"]
        rows = []

        def row(label, kib, note=""):
            rows.append([label, "%.1f" % (kib / 1024), "%.0f" % (kib / n), "%.3f" % (kib / n / 1024), note])
        row("host memory in use (MemTotal − MemAvailable), after − before", d_used,
            "median of 7 samples each; spread of the samples: %.0f / %.0f MiB" % (R["noise0"] / 1024, R["noise1"] / 1024))
        row("  sandboxes' own processes: PSS sum", ag["Pss"],
            "%d processes (%s); RSS sum %.0f MiB, private %.0f MiB" %
            (ag["n"], ", ".join("%d %s" % (v, k) for k, v in sorted(ag["comms"].items())),
             ag["Rss"] / 1024, ag["Private"] / 1024))
        row("  **beyond the sandboxes' own processes**", beyond, "the figure the target is about")
        row("    of which: paddock serve's PSS growth", s1 - s0, "%.1f → %.1f MiB" % (s0 / 1024, s1 / 1024))
        for k in ("Slab", "SUnreclaim", "PageTables", "KernelStack", "Shmem", "Percpu"):
            if k in m0:
                row("    of which (kernel, host-wide Δ): %s" % k, m1[k] - m0[k])
        if m2:
            back = m1["Used"] - m2["Used"]
            row("given back on deleting all (Used before delete − after)", back,
                "cross-check of the first row")
        head = ["what", "MiB total", "KiB per sandbox", "MiB per sandbox", "note"]
        per = beyond / n / 1024
        goal = "**Host memory per idle sandbox beyond its own processes: %.2f MiB** (target ≤ 1 MiB: %s)." % (
            per, "met" if per <= 1 else "NOT met")
        L += ["## Memory with %d idle sandboxes" % n, "",
              "Sampled %.0f s after the last create (and before the first create), 7 samples "
              "0.25 s apart, median. `MemTotal − MemAvailable` is host-wide: other work on this "
              "shared machine moves it too (see the sample spread), so the per-sandbox figures carry "
              "that noise divided by %d. The sandboxes' own processes are every descendant of "
              "`paddock serve` (each idle sandbox runs only its agent), PSS from "
              "`/proc/<pid>/smaps_rollup`. The kernel rows are host-wide deltas of "
              "/proc/meminfo counters, listed to show where the rest goes; they overlap "
              "(SUnreclaim is part of Slab)." % (args.settle, n), "",
              sb.md_table(head, rows, left=(0, 4)), "", goal, ""]
        sd = slab_delta(R.get("slab0", {}), R.get("slab1", {}), n)
        if sd:
            L += ["### What the kernel spends per sandbox: slab caches", "",
                  "Growth of each cache in /proc/slabinfo (slabs × pages per slab × 4 KiB, what the cache "
                  "took from the page allocator), before the first create → with %d sandboxes, the %d that "
                  "grew most; host-wide, so other work moves them too. Caches of the same object size are "
                  "merged by SLUB and show under one of their names." % (n, len(sd)), "",
                  sb.md_table(["cache", "KiB per sandbox", "MiB total"],
                              [[k, "%.1f" % per, "%.1f" % tot] for k, per, tot in sd], left=(0,)), ""]
            out.append("slab per sandbox, top caches: " + ", ".join("%s %.0f KiB" % (k, per) for k, per, _ in sd[:6]))
        cg0, cg1 = R.get("cg0", {}), R.get("cg1", {})
        for k in sorted(set(cg0) | set(cg1)):
            if k in cg1:
                L.append("- cgroup `%s`: %.1f MiB before, %.1f MiB with the sandboxes (%.0f KiB per sandbox)."
                         % (k, cg0.get(k, 0) / 2**20, cg1[k] / 2**20, (cg1[k] - cg0.get(k, 0)) / 1024 / n))
        L.append("")
        out.append("host memory per idle sandbox: %.0f KiB in all (MemAvailable), own processes' PSS "
                   "%.0f KiB, beyond them %.0f KiB = %.2f MiB (target <= 1 MiB: %s); server PSS +%.0f KiB/sandbox"
                   % (d_used / n, ag["Pss"] / n, beyond / n, per, "met" if per <= 1 else "NOT met", (s1 - s0) / n))
        if m2:
            out.append("given back on delete: %.0f KiB per sandbox" % ((m1["Used"] - m2["Used"]) / n))
    L += bwrap_section(args, R, out)
    if "exec_secs" in R:
        em = R["exec_ms"]
        ok = len(em)
        L += ["## Do they all answer?", "",
              "- `POST /api/v1/sandboxes/{id}/exec {\"cmd\": [\"true\"]}` on each of the %d, %d threads: "
              "**%d answered exit 0**, %d failed, in %.1f s (%.0f/s)." %
              (n, args.threads, ok, len(R["exec_errs"]), R["exec_secs"], n / R["exec_secs"] if R["exec_secs"] else 0)]
        if em:
            L.append("- Latency with %d in flight: p50 %s ms, p99 %s ms, max %s ms." %
                     (args.threads, sb.fmt_ms(statistics.median(em)), sb.fmt_ms(sb.pct(em, 99)), sb.fmt_ms(max(em))))
        if R["exec_errs"]:
            L.append("- First failures: %s" % "; ".join("%s: %s" % e for e in R["exec_errs"][:3]))
            exit_code = 1
        L.append("")
        out.append("exec true: %d/%d answered (p50 %s ms, p99 %s ms)" %
                   (ok, n, sb.fmt_ms(statistics.median(em)) if em else "-", sb.fmt_ms(sb.pct(em, 99)) if em else "-"))
    if "delete_secs" in R:
        dm = R["delete_ms"]
        L += ["## Deleting them", "",
              "- %d deleted (`DELETE` → 204) in %.1f s: **%.0f sandboxes/s**; %d failed." %
              (len(dm), R["delete_secs"], len(dm) / R["delete_secs"] if R["delete_secs"] else 0, len(R["delete_errs"]))]
        if dm:
            L.append("- Latency with %d in flight: p50 %s ms, p99 %s ms." %
                     (args.threads, sb.fmt_ms(statistics.median(dm)), sb.fmt_ms(sb.pct(dm, 99))))
        if R["delete_errs"]:
            L.append("- First failures: %s" % "; ".join("%s: %s" % e for e in R["delete_errs"][:3]))
        L.append("- Left after the deletes: %d processes under the server%s; `/api/v1/health` counts %s "
                 "sandboxes." % (len(R["left_procs"]), (" (%s)" % ", ".join("%d %s" % p for p in R["left_procs"][:5]))
                                  if R["left_procs"] else "", R.get("health2")))
        L.append("- Then SIGTERM to the server and `paddock gc --state-dir`: `%s`." % (R.get("gc_output") or "-"))
        L.append("")
        out.append("deleted %d in %.1f s (%.0f/s); left: %d processes, health count %s; gc: %s" %
                   (len(dm), R["delete_secs"], len(dm) / R["delete_secs"] if R["delete_secs"] else 0,
                    len(R["left_procs"]), R.get("health2"), R.get("gc_output")))
    L += ["## Notes", "",
          "- The machine has 2 shared cores and other work on it (the load averages above); "
          "host-wide memory counters move with that work."]
    for m in problems:
        L.append("- Cleanup: %s" % m)
    if not problems:
        L.append("- Cleanup: server stopped with SIGTERM, `paddock gc --state-dir` run, no cgroup "
                 "directory of this instance left, temp directory removed.")
    if n < args.count or failed:
        exit_code = 1
    sb.write_md(args.report, L)
    print()
    for line in out:
        print(line)
    print("report: %s" % os.path.relpath(args.report, os.getcwd()))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
