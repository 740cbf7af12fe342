"""No file outside src/proto builds or reads an agent frame by hand.

The agent protocol (src/proto/proto.h) has one host-side client,
src/proto/client.h: typed spawn options, one call per request, the
request/reply loop, and decoders that check what the agent says before
anything reads it (src/proto/agent_check.c). A caller that encoded a SPAWN
itself, or walked a reply's attributes itself, would skip those checks and
drift from the other callers (it happened: issue 13 found SPAWN built in
seven places, native and E2B differing). So outside src/proto, and outside
src/agent (the other end of the protocol), C code may not:

  - encode a frame header (pd_frame_hdr_encode) or queue a frame of its
    choosing (pd_conn_queue, pd_conn_queue_msg);
  - build or walk an attribute list (struct pd_msg, pd_msg_*, pd_attr_*,
    struct pd_attr) or name an attribute tag (PD_A_*);
  - name a request type (PD_T_SPAWN, PD_T_LIST, ...: every frame type of
    proto.h but those a host receives and dispatches on: REPLY, ERROR,
    OUTPUT, GAP, EXIT, DATA, WATCH_EVENT, FILE_OPENED, TUNNEL_CLOSE).

Standard library only; reads the source tree, runs nothing.

    /usr/bin/python3 -m pytest -q tests/arch/test_frames_only_in_proto.py
"""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(REPO, "src")

# The two ends of the protocol.
OWNERS = ("proto", "agent")

# Frame types a host receives and may dispatch on (or, DATA and
# TUNNEL_CLOSE, that flow both ways and are sent through the client).
RECEIVED = {"REPLY", "ERROR", "OUTPUT", "GAP", "EXIT", "DATA", "WATCH_EVENT", "FILE_OPENED", "TUNNEL_CLOSE"}

FIX = "use src/proto/client.h (add the request or decoder there if it is missing)"


def frame_types(proto_h):
    """Every PD_T_ name of proto.h's enum pd_frame_type."""
    with open(proto_h) as f:
        text = f.read()
    body = re.search(r"enum pd_frame_type\s*\{(.*?)\};", strip(text), re.S).group(1)
    return re.findall(r"\bPD_T_([A-Z0-9_]+)\s*=", body)


def strip(code):
    """C code without comments and string or character literals (kept as
    blanks, newlines kept, so line numbers stay right)."""
    out = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", code[i:j]))
            i = j
        elif code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", code[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rules(types):
    requests = sorted(set(types) - RECEIVED)
    return [
        (re.compile(r"\bpd_frame_hdr_encode\b"), "encodes a frame header"),
        (re.compile(r"\bpd_conn_queue(?:_msg)?\b"), "queues a frame by hand"),
        (re.compile(r"\bstruct\s+pd_msg\b(?!_)|\bpd_msg_\w+"), "builds or walks an attribute list"),
        (re.compile(r"\bstruct\s+pd_attr\b|\bpd_attr_\w+"), "reads an attribute by hand"),
        (re.compile(r"\bPD_A_[A-Z0-9_]+"), "names an attribute tag"),
        (re.compile(r"\bPD_T_(?:%s)\b" % "|".join(requests)), "names a request type"),
    ]


def offences(root, path_filter=None):
    """[(relative path, line, token, what)] over root/src's C files outside
    the protocol's owners."""
    src = os.path.join(root, "src")
    checks = rules(frame_types(os.path.join(src, "proto", "proto.h")))
    found = []
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        if rel_dir.split(os.sep)[0] in OWNERS:
            dirnames[:] = []
            continue
        for name in sorted(filenames):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if path_filter and not path_filter(rel):
                continue
            with open(path, errors="replace") as f:
                code = strip(f.read())
            for lineno, line in enumerate(code.split("\n"), 1):
                for rx, what in checks:
                    for m in rx.finditer(line):
                        found.append((rel, lineno, m.group(0), what))
    return found


def scan_text(code, types):
    """The offences of one piece of code (for the tests of the scanner)."""
    hits = []
    for rx, what in rules(types):
        hits += [m.group(0) for m in rx.finditer(strip(code))]
    return hits


def test_no_frame_built_outside_proto():
    found = offences(REPO)
    report = "\n".join("%s:%d: %s (%s)" % f for f in found[:60])
    assert not found, "%d place(s) outside src/proto handle agent frames by hand; %s:\n%s" % (
        len(found), FIX, report)


def test_request_types_come_from_proto_h():
    types = frame_types(os.path.join(SRC, "proto", "proto.h"))
    # the types the check forbids by name are read from the header: a new
    # request type is covered the day it is added
    assert "SPAWN" in types and "LIST" in types and "FILE_READ" in types
    assert RECEIVED <= set(types), "a frame type the check allows is no longer in proto.h"


def test_the_scanner_sees_a_hand_built_spawn():
    # what src/server/core/pool.c did before the client existed
    old = '''
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_ARG, argv[i]);
        pd_msg_put_u32(&m, PD_A_FOLLOW, 1);
        if (pd_conn_queue_msg(&c, PD_T_SPAWN, pd_conn_new_id(&c), &m) < 0)
                return -1;
        struct pd_attr a;
        if (pd_msg_find(p, h.len, PD_A_PID, &a) && pd_attr_u32(&a, &pid))
                return 0;
    '''
    types = frame_types(os.path.join(SRC, "proto", "proto.h"))
    hits = scan_text(old, types)
    for token in ("struct pd_msg", "pd_msg_put_str", "PD_A_ARG", "pd_conn_queue_msg", "PD_T_SPAWN",
                  "struct pd_attr", "pd_attr_u32", "PD_A_PID"):
        assert token in hits, "the scanner missed %s" % token


def test_the_scanner_allows_what_a_caller_may_do():
    # dispatching on received frames, through the client, in comments and
    # messages: not offences
    ok = '''
        /* a SPAWN with PD_A_FOLLOW: pd_msg_put_u32 is proto's */
        if (h.type == PD_T_OUTPUT || h.type == PD_T_EXIT || h.type == PD_T_ERROR)
                return pd_client_spawn(&c, &o, &pid, &err);
        pd_log("warn", "PD_T_SPAWN failed: pd_msg_put");
    '''
    types = frame_types(os.path.join(SRC, "proto", "proto.h"))
    assert scan_text(ok, types) == []
