"""docs/architecture.md cannot drift from the code.

    /usr/bin/python3 -m pytest -q tests/arch/test_architecture_doc.py

Standard library only. The map names places in the code; this test holds it
to them:

  (a) every `path` (src/, tests/, docs/, bench/, scripts/, sdk/) names a
      file or folder that exists, and every relative Markdown link too;
  (b) every `path:function` names a function, table, struct or macro that
      is *defined* in that file (a prototype is not a definition), never a
      line number (lines move);
  (c) every bare `pd_...` / `ag_...` / `oci_...` / `netd_...` / `sv_...`
      identifier in backticks is defined somewhere under src/;
  (d) walk a (HTTP exec to execve) has at most 8 stops, each a
      `path:function`;
  (e) every binary src/**/meson.build builds, and every folder of src/,
      appears in the map;
  (f) the README links the map.

The checker's own tests (test_checker_*) make sure it can fail.
"""
import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "architecture.md")

ROOTS = ("src", "tests", "docs", "bench", "scripts", "sdk")
# a path starting at a top-level folder, then optionally :name or :line
REF = re.compile(r"(?<![\w./<>-])((?:%s)/[A-Za-z0-9_./+-]*)(?::([A-Za-z_]\w*|\d+)\b)?" % "|".join(ROOTS))
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE = re.compile(r"`(?:struct\s+)?((?:pd|ag|oci|netd|sv)_\w+)`")
C_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


# --------------------------------------------------------------------------
# the checker

def refs(text):
    """[(path, name or None)] in the order they appear."""
    out = []
    for m in REF.finditer(text):
        path = m.group(1).rstrip(".-")
        out.append((path, m.group(2)))
    return out


def strip_c(src):
    """C source without comments and with empty string/char literals;
    newlines kept."""
    def repl(m):
        s = m.group(0)
        if s.startswith("/"):
            return "\n" * s.count("\n") or " "
        return s[0] * 2
    return C_NOISE.sub(repl, src)


def _close_paren(text, i):
    """Index just after the ')' matching the '(' at text[i], or -1."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def c_defines(src, name):
    """Whether C source `src` defines `name`: a function with a body, a
    variable or table with an initializer, a struct/enum/union with a body,
    or a macro."""
    text = strip_c(src)
    n = re.escape(name)
    if re.search(r"^\s*#\s*define\s+%s\b" % n, text, re.M):
        return True
    if re.search(r"\b(?:struct|enum|union)\s+%s\s*\{" % n, text):
        return True
    # a definition starts in column 0 (declarations inside bodies do not)
    for m in re.finditer(r"^(?:[A-Za-z_][^;{}()=]*?\b)?%s\s*\(" % n, text, re.M):
        end = _close_paren(text, m.end() - 1)
        if end < 0:
            continue
        rest = text[end:].lstrip()
        while rest.startswith("__attribute__"):
            k = _close_paren(rest, rest.index("("))
            rest = rest[k:].lstrip() if k > 0 else ""
        if rest.startswith("{"):
            return True
    return bool(re.search(r"^[A-Za-z_][^;{}()]*?\b%s\s*(?:\[[^\]]*\])?\s*=" % n, text, re.M))


def py_defines(src, name):
    return bool(re.search(r"^\s*(?:async\s+)?(?:def|class)\s+%s\b|^%s\s*=" % (re.escape(name), re.escape(name)),
                          src, re.M))


def sh_defines(src, name):
    return bool(re.search(r"^\s*(?:function\s+)?%s\s*\(\s*\)" % re.escape(name), src, re.M))


def defines(path, name):
    with open(path, encoding="utf-8", errors="replace") as f:
        src = f.read()
    if path.endswith((".c", ".h")):
        return c_defines(src, name)
    if path.endswith(".py"):
        return py_defines(src, name)
    if path.endswith(".sh"):
        return sh_defines(src, name)
    return False


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(md_path):
    with open(md_path, encoding="utf-8") as f:
        return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", f.read(), re.M)}


def problems(text, repo, doc_dir):
    """Every broken reference in `text` (a doc living in doc_dir), as messages."""
    bad = []
    for path, name in refs(text):
        full = os.path.join(repo, path)
        if not os.path.exists(full):
            bad.append("%s: no such file or folder" % path)
            continue
        if name is None:
            continue
        if name.isdigit():
            bad.append("%s:%s: a line number drifts; name the function" % (path, name))
        elif os.path.isdir(full):
            bad.append("%s:%s: a folder defines no function" % (path, name))
        elif not defines(full, name):
            bad.append("%s: defines no %s" % (path, name))
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue            # http:, mailto:
        file_part, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(doc_dir, file_part)) if file_part else None
        if full and not os.path.exists(full):
            bad.append("link %s: no such file" % target)
        elif anchor and full and full.endswith(".md") and anchor not in anchors(full):
            bad.append("link %s: no heading #%s there" % (target, anchor))
    return bad


def bare_problems(text, repo):
    """Backticked pd_/ag_/... names not defined anywhere under src/."""
    names = sorted(set(BARE.findall(text)))
    if not names:
        return []
    sources = {}
    for p in glob.glob(os.path.join(repo, "src", "**", "*.[ch]"), recursive=True):
        with open(p, encoding="utf-8", errors="replace") as f:
            sources[p] = f.read()
    return ["`%s`: defined nowhere under src/" % n for n in names
            if not any(n in s and c_defines(s, n) for s in sources.values())]


def section(text, title_prefix):
    m = re.search(r"^## %s.*?$(.*?)(?=^## |\Z)" % re.escape(title_prefix), text, re.M | re.S)
    return m.group(1) if m else None


def stops(sec):
    """The numbered items of a walk: [item text]."""
    return re.findall(r"^\d+\.\s+(.*?)(?=^\d+\.\s|^\S|\Z)", sec, re.M | re.S)


# --------------------------------------------------------------------------
# the map

@pytest.fixture(scope="module")
def doc():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def test_paths_and_functions_exist(doc):
    assert refs(doc), "the map names no code at all"
    bad = problems(doc, REPO, os.path.dirname(DOC))
    assert not bad, "docs/architecture.md is out of date:\n  " + "\n  ".join(bad)


def test_bare_names_exist(doc):
    bad = bare_problems(doc, REPO)
    assert not bad, "docs/architecture.md is out of date:\n  " + "\n  ".join(bad)


def test_exec_walk_is_short_and_concrete(doc):
    sec = section(doc, "Walk a")
    assert sec, "no '## Walk a' section"
    items = stops(sec)
    assert 1 <= len(items) <= 8, "walk a has %d stops (at most 8)" % len(items)
    for i, it in enumerate(items, 1):
        first = refs(it)
        assert first and first[0][1], "walk a, stop %d does not start at a path:function" % i
    # it ends where the command starts
    assert "execve" in items[-1]


def test_walks_b_and_c_are_there(doc):
    for w in ("Walk b", "Walk c"):
        sec = section(doc, w)
        assert sec and stops(sec), "no numbered stops in '## %s'" % w
    assert "pd_cg_write" in section(doc, "Walk b")
    assert "pd_nft_tx_commit" in section(doc, "Walk c")


def built_binaries():
    names = set()
    for mb in glob.glob(os.path.join(REPO, "src", "**", "meson.build"), recursive=True):
        with open(mb, encoding="utf-8") as f:
            text = f.read()
        names.update(re.findall(r"\bexecutable\(\s*'([^']+)'", text))
        names.update(re.findall(r"\boutput\s*:\s*'(paddock[^']*)'", text))
    return names


def test_every_binary_is_on_the_map(doc):
    names = built_binaries()
    assert {"paddock", "paddock-agent", "paddock-oci"} <= names, names
    missing = sorted(n for n in names if "`%s`" % n not in doc)
    assert not missing, "binaries built but not in docs/architecture.md: %s" % ", ".join(missing)


def test_every_src_folder_is_on_the_map(doc):
    folders = []
    for d, subdirs, _ in os.walk(os.path.join(REPO, "src")):
        subdirs[:] = [s for s in subdirs if not s.startswith((".", "__")) and s != "node_modules"]     # .git, __pycache__, npm's
        rel = os.path.relpath(d, REPO)
        if rel != "src":
            folders.append(rel + "/")
    missing = sorted(f for f in folders if "`%s`" % f not in doc)
    assert not missing, "folders of src/ not in docs/architecture.md: %s" % ", ".join(missing)


def test_readme_links_the_map():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        assert "docs/architecture.md" in f.read()


# --------------------------------------------------------------------------
# the checker can fail

def test_checker_flags_a_missing_file():
    bad = problems("see `src/lib/no_such_file.c`", REPO, os.path.join(REPO, "docs"))
    assert bad == ["src/lib/no_such_file.c: no such file or folder"]


def test_checker_flags_a_missing_function():
    assert problems("`src/lib/tier.c:pd_tier_find`", REPO, REPO) == []
    assert problems("`src/lib/tier.c:pd_tier_lookup`", REPO, REPO) == ["src/lib/tier.c: defines no pd_tier_lookup"]


def test_checker_wants_a_definition_not_a_prototype():
    # tier.h declares pd_tier_find; tier.c defines it
    assert problems("`src/lib/tier.h:pd_tier_find`", REPO, REPO) == ["src/lib/tier.h: defines no pd_tier_find"]


def test_checker_refuses_line_numbers():
    assert problems("`src/lib/tier.c:12`", REPO, REPO) == [
        "src/lib/tier.c:12: a line number drifts; name the function"]


def test_checker_flags_broken_links():
    docs = os.path.join(REPO, "docs")
    assert problems("[x](api.md#audit)", REPO, docs) == []
    assert problems("[x](nope.md)", REPO, docs) == ["link nope.md: no such file"]
    assert problems("[x](api.md#no-such-heading)", REPO, docs) == [
        "link api.md#no-such-heading: no heading #no-such-heading there"]


def test_checker_reads_c_definitions():
    src = """
/* pd_in_comment(void) { } */
static const char *s = "pd_in_string(x) {";
int pd_proto(int a);
static enum MHD_Result
pd_def(struct x *r, const char *c,
       size_t *n)
{
        pd_call(r);
}
const struct pd_route pd_table[] = { { 0 } };
struct pd_thing { int x; };
#define PD_MACRO 1
"""
    for name in ("pd_def", "pd_table", "pd_thing", "PD_MACRO"):
        assert c_defines(src, name), name
    for name in ("pd_proto", "pd_call", "pd_in_comment", "pd_in_string"):
        assert not c_defines(src, name), name


def test_checker_counts_stops():
    sec = "intro\n\n1. `src/a.c:f` one\n   more\n2. `src/b.c:g` two\n\nafter\n"
    assert len(stops(sec)) == 2
