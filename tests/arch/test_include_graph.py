"""The include graph of src/ (docs/architecture.md): who may include whom.

    /usr/bin/python3 -m pytest -q tests/arch/test_include_graph.py

Standard library only; reads every `#include "..."` under src/ (quoted
includes: the project's own headers; <...> are the system's). Rules:

  (a) the server's three parts do not form a loop: core/ includes nothing
      of api/ or e2b/, api/ nothing of e2b/ (e2b/ may use both);
  (b) src/lib includes only lib/ and proto/ (nothing "upward": no jail,
      tiers, vm, net, server);
  (c) no include cycle between files, anywhere;
  (d) no cycle between the top-level folders of src/;
  (e) the tier boundary: src/server includes nothing of tiers/, vm/,
      jail/, and of net/ only the policy language (net/policy.h); no
      PD_ISO_<TIER> name appears in it (tiers are named in lib/tier_list.h);
  (f) every include names its folder relative to src/ (the only include
      directory), never by bare name or relative to the including file.
"""
import collections
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(REPO, "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

SERVER_PARTS = ("server/core", "server/api", "server/e2b")
# a server part may include the parts listed (besides itself)
SERVER_ALLOWED = {
    "server/core": set(),
    "server/api": {"server/core"},
    "server/e2b": {"server/core", "server/api"},
}
LIB_ALLOWED = {"lib", "proto"}
SERVER_NET_ALLOWED = {"net/policy.h"}


def read_includes(root=SRC):
    """{file relative to src/: [quoted includes as written]}"""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith((".c", ".h")):
                p = os.path.join(d, n)
                with open(p, encoding="utf-8", errors="replace") as f:
                    out[os.path.relpath(p, root)] = INCLUDE.findall(f.read())
    return out


def folder(path):
    """The unit the rules speak of: server/<part> for the server, else the
    top-level folder (net/netd/dns.c is net)."""
    parts = path.split("/")
    if parts[0] == "server" and len(parts) > 2:
        return "server/" + parts[1]
    return parts[0] if len(parts) > 1 else "."


def graph(includes):
    """(edges {file: {file}}, unresolved [(file, include)]): an include is
    resolved relative to src/ only."""
    edges = collections.defaultdict(set)
    unresolved = []
    for f, incs in includes.items():
        for i in incs:
            if i in includes:
                edges[f].add(i)
            else:
                unresolved.append((f, i))
    return edges, unresolved


def folder_edges(edges):
    """{(from folder, to folder): [example "file -> include", ...]}"""
    out = collections.defaultdict(list)
    for f, targets in edges.items():
        for t in targets:
            a, b = folder(f), folder(t)
            if a != b:
                out[(a, b)].append("%s -> %s" % (f, t))
    return out


def cycles(nodes, edges):
    """Strongly connected components with more than one node (or a self
    loop): Tarjan, iterative."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in nodes:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in edges.get(v, ()):
                    out.append(sorted(comp))
    return out


# ---- the checks, as functions of an include map (tested on fakes below) ----

def server_part_violations(includes):
    edges, _ = graph(includes)
    bad = []
    for (a, b), ex in sorted(folder_edges(edges).items()):
        if a in SERVER_PARTS and b in SERVER_PARTS and b not in SERVER_ALLOWED[a]:
            bad.append("%s includes %s: %s" % (a, b, ex[0]))
    fe = folder_edges(edges)
    part_edges = {a: {b for (x, b) in fe if x == a and b in SERVER_PARTS} for a in SERVER_PARTS}
    for c in cycles(set(SERVER_PARTS), part_edges):
        bad.append("loop between server parts: %s" % " <-> ".join(c))
    return bad


def lib_violations(includes):
    edges, _ = graph(includes)
    return ["%s (lib may include only %s)" % (ex, ", ".join(sorted(LIB_ALLOWED)))
            for (a, b), exs in sorted(folder_edges(edges).items()) if a == "lib" and b not in LIB_ALLOWED
            for ex in exs]


def file_cycles(includes):
    edges, _ = graph(includes)
    return cycles(set(includes), edges)


def folder_cycles(includes):
    edges, _ = graph(includes)
    fe = folder_edges(edges)
    fedges = collections.defaultdict(set)
    for a, b in fe:
        fedges[a].add(b)
    return cycles({folder(f) for f in includes}, fedges)


def server_boundary_violations(includes, texts):
    bad = []
    for f, incs in sorted(includes.items()):
        if not f.startswith("server/"):
            continue
        for i in incs:
            top = i.split("/")[0]
            if top in ("tiers", "vm", "jail") or (top == "net" and i not in SERVER_NET_ALLOWED):
                bad.append("%s includes %s" % (f, i))
        for m in re.finditer(r"\bPD_ISO_[A-Z]+\b", texts.get(f, "")):
            if m.group(0) != "PD_ISO__MAX":
                bad.append("%s names a tier: %s" % (f, m.group(0)))
    return bad


def unresolved(includes):
    return ["%s: #include \"%s\"" % x for x in graph(includes)[1]]


def read_texts(root=SRC):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith((".c", ".h")):
                p = os.path.join(d, n)
                with open(p, encoding="utf-8", errors="replace") as f:
                    out[os.path.relpath(p, root)] = f.read()
    return out


# ---- src/ as it is ----

def test_the_tree_is_read():
    inc = read_includes()
    assert len(inc) > 200
    assert "server/core/server.h" in inc and "lib/sandbox.h" in inc


def test_server_parts_form_no_loop():
    bad = server_part_violations(read_includes())
    assert not bad, "\n".join(bad)


def test_lib_includes_nothing_upward():
    bad = lib_violations(read_includes())
    assert not bad, "\n".join(bad)


def test_no_file_include_cycle():
    bad = file_cycles(read_includes())
    assert not bad, "include cycles: %s" % bad


def test_no_folder_cycle():
    bad = folder_cycles(read_includes())
    assert not bad, "folder cycles: %s" % bad


def test_server_names_no_tier_and_no_network_plumbing():
    bad = server_boundary_violations(read_includes(), read_texts())
    assert not bad, "\n".join(bad)


def test_includes_name_their_folder():
    bad = unresolved(read_includes())
    assert not bad, "not a path relative to src/ (docs/architecture.md):\n" + "\n".join(bad)


# ---- the checks themselves catch what they must ----

def test_checks_catch_a_server_loop():
    inc = {"server/core/a.h": ["server/api/b.h"], "server/api/b.h": ["server/core/a.h"],
           "server/e2b/c.c": ["server/api/b.h"]}
    bad = server_part_violations(inc)
    assert any("server/core includes server/api" in b for b in bad)
    assert any("loop between server parts" in b for b in bad)
    # api -> e2b alone is no loop but still refused
    bad = server_part_violations({"server/api/x.c": ["server/e2b/y.h"], "server/e2b/y.h": []})
    assert bad == ["server/api includes server/e2b: server/api/x.c -> server/e2b/y.h"]
    assert server_part_violations({"server/e2b/y.c": ["server/api/x.h", "server/core/z.h"],
                                   "server/api/x.h": ["server/core/z.h"], "server/core/z.h": []}) == []


def test_checks_catch_an_upward_include():
    inc = {"lib/sandbox.c": ["vm/vm.h", "lib/util.h", "proto/frame.h"], "vm/vm.h": [], "lib/util.h": [],
           "proto/frame.h": []}
    assert lib_violations(inc) == ["lib/sandbox.c -> vm/vm.h (lib may include only lib, proto)"]


def test_checks_catch_cycles():
    inc = {"a/x.h": ["a/y.h"], "a/y.h": ["a/x.h"], "b/z.h": ["b/z.h"], "a/w.c": ["a/x.h"]}
    assert file_cycles(inc) == [["a/x.h", "a/y.h"], ["b/z.h"]]
    inc = {"a/x.c": ["b/y.h"], "b/y.h": [], "b/z.c": ["c/w.h"], "c/w.h": [], "c/v.c": ["a/u.h"], "a/u.h": []}
    assert folder_cycles(inc) == [["a", "b", "c"]]


def test_checks_catch_the_server_naming_a_tier():
    inc = {"server/core/m.c": ["net/router.h", "net/policy.h", "vm/vm.h"], "net/router.h": [],
           "net/policy.h": [], "vm/vm.h": []}
    texts = {"server/core/m.c": "if (iso == PD_ISO_MICROVM) x; y[PD_ISO__MAX];"}
    assert server_boundary_violations(inc, texts) == [
        "server/core/m.c includes net/router.h", "server/core/m.c includes vm/vm.h",
        "server/core/m.c names a tier: PD_ISO_MICROVM"]


def test_checks_catch_a_bare_include():
    assert unresolved({"lib/a.c": ["util.h"], "lib/util.h": []}) == ['lib/a.c: #include "util.h"']
