"""docs/protocol.md against the code: its tables (frame types, attributes,
mux frame types, file types, watch events) and the limits it states
(connections, channels, frame sizes, buffers) are compared with the
headers they describe, so the prose cannot drift from the protocol.

    /usr/bin/python3 -m pytest -q tests/integration/agent/test_protocol_doc.py
"""
import os
import re

import pytest

from pdtest import REPO, cheader, pdproto

DOC = os.path.join(REPO, "docs", "protocol.md")
PROTO_H = "src/proto/proto.h"
VMMUX_H = "src/proto/vmmux.h"
AGENT_H = "src/agent/agent.h"
UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20}


@pytest.fixture(scope="module")
def doc():
    with open(DOC) as f:
        return f.read()


def stated(doc, pattern):
    """The one number the doc states where pattern (a regex whose group 1
    is the number and optional group 2 its unit) matches."""
    found = re.findall(pattern, doc)
    assert len(found) == 1, "docs/protocol.md: %r matches %d times" % (pattern, len(found))
    m = found[0] if isinstance(found[0], tuple) else (found[0], "")
    return int(m[0]) * UNITS[m[1] if len(m) > 1 else ""]


def section(doc, title):
    """The text of a section, from its heading to the next one."""
    m = re.search(r"^#+ %s\n(.*?)(?=^#+ |\Z)" % re.escape(title), doc, re.M | re.S)
    assert m, "no section %r in docs/protocol.md" % title
    return m.group(1)


def test_limits_match_the_code(doc):
    agent = cheader.defines(AGENT_H)
    proto = cheader.defines(PROTO_H)
    mux = cheader.defines(VMMUX_H)
    assert stated(doc, r"connections may be open at once \((\d+) at most\)") == agent["AG_MAX_CONNS"]
    assert stated(doc, r"\*\*channel\*\* \((\d+) at\s+most") == mux["PD_MUX_MAX_CHANNELS"]
    assert stated(doc, r"The (\d+) most recent exited processes") == agent["AG_MAX_EXITED"]
    assert stated(doc, r"each process has a (\d+) (MiB) stdin buffer") == agent["AG_STDIN_MAX"]
    assert stated(doc, r"Tunnels: (\d+) (MiB) towards TCP") == agent["AG_TUNNEL_BUF"]
    assert stated(doc, r"stops reading requests above (\d+) (MiB) of queued output") == agent["AG_OUT_HIGH"]
    assert stated(doc, r"at most `PD_FRAME_MAX` \((\d+) (MiB)\)") == proto["PD_FRAME_MAX"]
    assert stated(doc, r"`PD_FRAME_PREHELLO_MAX`\s+\((\d+)\)") == proto["PD_FRAME_PREHELLO_MAX"]
    assert stated(doc, r"Every frame is a (\d+)-byte big-endian header") == proto["PD_FRAME_HDR_LEN"]
    assert stated(doc, r"DATA\* \(id = request id, ≤ (\d+) (KiB) each\)") == proto["PD_DATA_CHUNK"]
    assert stated(doc, r"host  -> HELLO \{VERSION=(\d+), CLIENT\}") == proto["PD_PROTO_VERSION"]
    assert stated(doc, r"Mux frames: a (\d+)-byte big-endian header") == mux["PD_MUX_HDR"]
    assert stated(doc, r"and at most (\d+) (KiB) of payload") == mux["PD_MUX_MAX_PAYLOAD"]
    assert stated(doc, r"at most (\d+) (KiB) of unacknowledged DATA") == mux["PD_MUX_WINDOW"]
    assert stated(doc, r"\| 8 NETCFG \| host → guest \| (\d+) bytes") == mux["PD_MUX_NETCFG_LEN"]


def test_frame_types(doc):
    """Every frame type of proto.h is named in the doc with its number
    ("SPAWN (11)", "FILE_OPENED (54, ..."), and no name is given another."""
    types = pdproto.T
    said = {}
    for name, num in re.findall(r"\b([A-Z][A-Z_]+)\s+\((\d+)\b", doc):
        if name in types:
            said.setdefault(name, set()).add(int(num))
    wrong = {n: sorted(v) for n, v in said.items() if v != {types[n]}}
    assert wrong == {}, "frame types given numbers proto.h does not: %s" % wrong
    assert sorted(set(types) - set(said)) == [], "frame types the doc never numbers"


def test_requests_table_names_known_attributes(doc):
    """The attributes the requests table lists exist in proto.h."""
    rows = [l.split("|") for l in section(doc, "Requests").splitlines() if re.match(r"\| [A-Z_]+ \(\d+\) \|", l)]
    assert len(rows) > 20
    unknown = set()
    for row in rows:
        for word in re.findall(r"\b([A-Z][A-Z0-9_]{2,})\b", row[2]):
            if word not in pdproto.A:
                unknown.add(word)
    assert unknown == set(), "attributes in the requests table that proto.h lacks"


def test_attribute_table(doc):
    rows = re.findall(r"^\| (\d+) \| ([A-Z0-9_]+) \| (u32|u64|string|nested) \|", doc, re.M)
    doc_attrs = {name: (int(tag), kind) for tag, name, kind in rows}
    assert len(rows) == len(doc_attrs), "an attribute listed twice"
    header = {name: (tag, pdproto.KIND[name]) for name, tag in pdproto.A.items()}
    assert doc_attrs == header


def test_mux_types_table(doc):
    rows = re.findall(r"^\| (\d+) ([A-Z_]+) \| ", doc, re.M)
    assert {name: int(num) for num, name in rows} == cheader.enum_values(VMMUX_H, "pd_mux_type", "PD_MUX_")


def test_file_types_and_watch_events(doc):
    ftypes = {name.lower(): v for name, v in cheader.enum_values(PROTO_H, "pd_file_type", "PD_FT_").items()}
    for where in (r"FTYPE \| u32 \| ([^|]+)\|", r"FTYPE \(([^)]+)\)"):
        m = re.search(where, doc)
        assert m, "docs/protocol.md does not list the file types at %r" % where
        text = m.group(1)
        said = {name: int(num) for num, name in re.findall(r"(\d+) (file|dir|symlink|other)", text)}
        assert said == ftypes, (where, said)
    events = cheader.enum_values(PROTO_H, "pd_watch_event", "PD_WE_")
    m = re.search(r"- WATCH events: (.*?)\n\s*\n", doc, re.S)
    assert m, "docs/protocol.md does not list the watch events"
    text = m.group(1)
    said = {name: int(num) for name, num in re.findall(r"\b([A-Z]+) \((\d+)", text)}
    assert said == events
    streams = cheader.enum_values(PROTO_H, "pd_stream", "PD_STREAM_")
    assert stated(doc, r"\| STREAM \| u32 \| (\d+) stdout") == streams["STDOUT"]
    assert stated(doc, r"one stream, `PTY` \((\d+)\)") == streams["PTY"]
