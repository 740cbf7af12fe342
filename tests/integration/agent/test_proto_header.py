"""The Python side of the agent protocol (tests/pdtest/pdproto.py) takes
its numbers from src/proto/proto.h when it is imported. These tests make
sure that reading is right: every name it found has the value the C
compiler gives it, no enumerator of the header is missed, every attribute
has a kind, and frame.c names every frame type of the header.

    /usr/bin/python3 -m pytest -q tests/integration/agent/test_proto_header.py

Needs a C compiler (cc), as the build does.
"""
import os
import re
import shutil
import subprocess

import pytest

from pdtest import REPO, cheader, pdproto

PROTO_H = os.path.join(REPO, "src", "proto", "proto.h")


def compiled_values(names, header="proto/proto.h"):
    """{name: value} as the C compiler evaluates each name in header."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler on this host")
    src = "#include <stdio.h>\n#include \"%s\"\nint main(void)\n{\n" % header
    src += "".join('        printf("%s %%lld\\n", (long long)(%s));\n' % (n, n) for n in names)
    src += "        return 0;\n}\n"
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "pd-proto-h-%d" % os.getpid())
    os.makedirs(tmp, exist_ok=True)
    try:
        with open(os.path.join(tmp, "dump.c"), "w") as f:
            f.write(src)
        r = subprocess.run([cc, "-std=gnu17", "-I", os.path.join(REPO, "src"), "-o", os.path.join(tmp, "dump"),
                            os.path.join(tmp, "dump.c")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out = subprocess.run([os.path.join(tmp, "dump")], capture_output=True, text=True, timeout=30,
                             check=True).stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {n: int(v) for n, v in (line.split() for line in out.splitlines())}


def test_every_enumerator_and_define_has_the_compilers_value():
    enums = cheader.enums(PROTO_H)
    parsed = {e.name: e.value for items in enums.values() for e in items}
    parsed.update(cheader.defines(PROTO_H))
    assert len(parsed) > 90
    assert compiled_values(sorted(parsed)) == parsed


def test_no_enumerator_is_missed():
    """Every `PD_X = ...` written in proto.h is one the reader returned."""
    with open(PROTO_H) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    written = set(re.findall(r"\b(PD_[A-Z0-9_]+)\s*=", text))
    parsed = {e.name for items in cheader.enums(PROTO_H).values() for e in items}
    assert written == parsed


def test_pdproto_tables_are_the_headers():
    enums = cheader.enums(PROTO_H)
    assert pdproto.T == {e.name[5:]: e.value for e in enums["pd_frame_type"]}
    assert pdproto.A == {e.name[5:]: e.value for e in enums["pd_attr_tag"]}
    assert len(pdproto.TN) == len(pdproto.T) and len(pdproto.AN) == len(pdproto.A), "a number used twice"
    assert (pdproto.STDOUT, pdproto.STDERR, pdproto.PTY) == tuple(e.value for e in enums["pd_stream"])
    assert pdproto.HDR.size == cheader.defines(PROTO_H)["PD_FRAME_HDR_LEN"]


def test_every_attribute_has_a_kind():
    """pdproto encodes integers as u32 or u64 and decodes strings and nested
    lists by the kind the header's comment gives each attribute."""
    kinds = pdproto.KIND
    assert set(kinds) == set(pdproto.A)
    assert [n for n, k in kinds.items() if k is None] == [], "attributes whose proto.h comment names no kind"
    assert pdproto.NESTED == {"PROC", "ENTRY"}
    assert {"PID", "UID", "VERSION"} <= {n for n, k in kinds.items() if k == "u32"}
    assert {"OFFSET", "SIZE", "TIME_NS"} <= pdproto.U64 and {"PATH", "ARG", "MESSAGE"} <= pdproto.STR


def test_encoding_follows_the_kinds():
    enc = pdproto.enc([("PID", 7), ("OFFSET", 7), ("PATH", "ab")])
    assert enc == (bytes([0, pdproto.A["PID"], 0, 0, 0, 0, 0, 4, 0, 0, 0, 7])
                   + bytes([0, pdproto.A["OFFSET"], 0, 0, 0, 0, 0, 8]) + (7).to_bytes(8, "big")
                   + bytes([0, pdproto.A["PATH"], 0, 0, 0, 0, 0, 2]) + b"ab\0\0")
    assert pdproto.dec(enc) == {"PID": [7], "OFFSET": [7], "PATH": ["ab"]}
    nested = pdproto.attr("PROC", pdproto.enc([("PID", 1), ("STATE", "running")]))
    assert pdproto.dec(nested) == {"PROC": [{"PID": [1], "STATE": ["running"]}]}


def test_frame_c_names_every_frame_type():
    """pd_frame_hdr_check accepts exactly the types pd_frame_type_name
    names: a type added to the enum but not to frame.c's switch would be
    refused on the wire."""
    with open(os.path.join(REPO, "src", "proto", "frame.c")) as f:
        named = dict(re.findall(r'case (PD_T_\w+): return "(\w+)";', f.read()))
    types = {e.name for e in cheader.enums(PROTO_H)["pd_frame_type"]}
    assert set(named) == types
    assert all(v == k[len("PD_T_"):] for k, v in named.items())
