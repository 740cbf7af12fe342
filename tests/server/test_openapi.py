"""docs/openapi.yaml against the server as built.

    /usr/bin/python3 -m pytest -q tests/server/test_openapi.py

Standard library only: YAML is read by load_yaml below, a small reader for
the subset docs/openapi.yaml keeps to (block mappings and lists with space
indentation, one-line plain or quoted scalars, flow lists of scalars,
whole-line comments); it refuses anything else rather than misread it.

Checks:
  - the spec is well formed: OpenAPI 3.0.3, every $ref resolves;
  - its paths+methods are exactly the native routes of src/server/api/routes_*.c;
  - on a running `paddock serve`, every path+method answers something other
    than 404 "no such route" or 405, and the public ones need no key;
  - a created sandbox has exactly the Sandbox schema's required properties,
    and other answers (process, exec, entry, metrics, error) fit theirs.
"""
import json
import os
import re

import pytest

from pdtest.server import server_fixture

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(REPO, "docs", "openapi.yaml")
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
FAKE_ID = "a" * 20


# ---- a small YAML reader (the subset docs/openapi.yaml uses) ----

class YamlError(ValueError):
    pass


_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


def _scalar(s, no):
    if s.startswith('"'):
        if len(s) < 2 or not s.endswith('"'):
            raise YamlError("line %d: unterminated double-quoted scalar" % no)
        try:
            return json.loads(s)
        except ValueError as e:
            raise YamlError("line %d: %s" % (no, e))
    if s.startswith("'"):
        if len(s) < 2 or not s.endswith("'"):
            raise YamlError("line %d: unterminated single-quoted scalar" % no)
        return s[1:-1].replace("''", "'")
    if s.startswith("["):
        if not s.endswith("]"):
            raise YamlError("line %d: multi-line flow lists are not supported" % no)
        inner = s[1:-1].strip()
        return [] if not inner else [_scalar(x.strip(), no) for x in inner.split(",")]
    if s == "{}":
        return {}
    if s[0] in "{&*!|>%@`" or ": " in s or " #" in s or s.endswith(":"):
        raise YamlError("line %d: unsupported or ambiguous plain scalar %r (quote it)" % (no, s))
    if s in ("null", "~"):
        return None
    if s in ("true", "false"):
        return s == "true"
    if _INT.match(s):
        return int(s)
    if _FLOAT.match(s):
        return float(s)
    return s


def _split_key(s, no):
    """'key: rest' -> (key, rest); None if s is not a mapping entry."""
    if s[0] in "\"'":
        q = s[0]
        end = s.find(q, 1)
        while q == "'" and end != -1 and s[end + 1:end + 2] == "'":
            end = s.find(q, end + 2)
        if end == -1:
            raise YamlError("line %d: unterminated quoted key" % no)
        after = s[end + 1:]
        if after == ":" or after.startswith(": "):
            return _scalar(s[:end + 1], no), after[1:].strip()
        return None
    i = s.find(": ")
    if s.endswith(":") and (i == -1 or i == len(s) - 1):
        return s[:-1], ""
    if i == -1:
        return None
    return s[:i], s[i + 2:].strip()


def load_yaml(text):
    lines = []
    for no, raw in enumerate(text.splitlines(), 1):
        body = raw.lstrip(" ")
        if body.startswith("\t"):
            raise YamlError("line %d: tab in indentation" % no)
        s = body.rstrip()
        if not s or s.startswith("#"):
            continue
        if s in ("---", "...") or s.startswith(("%", "? ")):
            raise YamlError("line %d: unsupported YAML construct %r" % (no, s))
        lines.append([len(raw) - len(body), s, no])
    pos = [0]

    def is_item(s):
        return s == "-" or s.startswith("- ")

    def block(indent):
        if is_item(lines[pos[0]][1]):
            return seq(indent)
        return mapping(indent)

    def mapping(indent):
        out = {}
        while pos[0] < len(lines) and lines[pos[0]][0] == indent and not is_item(lines[pos[0]][1]):
            _, s, no = lines[pos[0]]
            kv = _split_key(s, no)
            if kv is None:
                raise YamlError("line %d: expected 'key: value', got %r" % (no, s))
            key, rest = kv
            pos[0] += 1
            if rest:
                value = _scalar(rest, no)
            elif pos[0] < len(lines) and lines[pos[0]][0] > indent:
                value = block(lines[pos[0]][0])
            else:
                value = None
            if key in out:
                raise YamlError("line %d: duplicate key %r" % (no, key))
            out[key] = value
        if pos[0] < len(lines) and lines[pos[0]][0] > indent:
            raise YamlError("line %d: unexpected indentation" % lines[pos[0]][2])
        return out

    def seq(indent):
        out = []
        while pos[0] < len(lines) and lines[pos[0]][0] == indent and is_item(lines[pos[0]][1]):
            _, s, no = lines[pos[0]]
            rest = s[1:].strip()
            if not rest:
                pos[0] += 1
                if pos[0] >= len(lines) or lines[pos[0]][0] <= indent:
                    raise YamlError("line %d: empty list item" % no)
                out.append(block(lines[pos[0]][0]))
            elif _split_key(rest, no) is not None:
                # "- key: value": a mapping whose first entry is on the dash line
                lines[pos[0]] = [indent + 2, rest, no]
                out.append(mapping(indent + 2))
            else:
                pos[0] += 1
                out.append(_scalar(rest, no))
        if pos[0] < len(lines) and lines[pos[0]][0] > indent:
            raise YamlError("line %d: unexpected indentation" % lines[pos[0]][2])
        return out

    if not lines:
        return None
    doc = block(lines[0][0])
    if pos[0] != len(lines):
        raise YamlError("line %d: unexpected dedent or content" % lines[pos[0]][2])
    return doc


# ---- the spec ----

@pytest.fixture(scope="module")
def spec():
    with open(SPEC, encoding="utf-8") as f:
        return load_yaml(f.read())


def resolve(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = spec
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def operations(spec):
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def test_reader_handles_the_subset():
    doc = load_yaml('a:\n  b: [x, "y z"]\n  c:\n    - k: 1\n      l: 0.5\n    - plain\n  d: "q: #"\n'
                    "  '200':\n    e: {}\n")
    assert doc == {"a": {"b": ["x", "y z"], "c": [{"k": 1, "l": 0.5}, "plain"], "d": "q: #", "200": {"e": {}}}}
    for bad in ("a: b: c\n", "a:\n\tb: 1\n", "a: |\n  x\n", "a: 1\na: 2\n", "a:\n  - x\n    y: 1\n"):
        with pytest.raises(YamlError):
            load_yaml(bad)


def test_spec_is_well_formed(spec):
    assert spec["openapi"] == "3.0.3"
    assert spec["info"]["title"] and spec["info"]["version"]
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    for name in ("Sandbox", "Process", "Entry", "Error", "SandboxCreate", "ProcessStart", "ExecRequest"):
        assert name in spec["components"]["schemas"], name
    refs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref":
                    refs.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(spec)
    assert refs
    for ref in refs:
        assert resolve(spec, {"$ref": ref}) is not None, ref
    seen = set()
    for path, method, op in operations(spec):
        assert op["responses"], (path, method)
        assert op.get("operationId") not in seen, op.get("operationId")
        seen.add(op.get("operationId"))
        params = [resolve(spec, p) for p in spec["paths"][path].get("parameters", []) + op.get("parameters", [])]
        in_path = {p["name"] for p in params if p["in"] == "path"}
        assert in_path == set(re.findall(r"\{(\w+)\}", path)), (path, in_path)


def server_routes():
    """(method, pattern) of every native route in the route tables."""
    out = set()
    for name in ("routes_sandboxes.c", "routes_procs.c", "routes_files.c", "routes_snapshots.c",
                 "routes_network.c"):
        with open(os.path.join(REPO, "src", "server", "api", name)) as f:
            for m in re.finditer(r'\{\s*"([A-Z]+)",\s*"(/[^"]*)"', f.read()):
                out.add((m.group(1).lower(), m.group(2)))
    return out


def test_spec_lists_exactly_the_native_routes(spec):
    routes = server_routes()
    assert len(routes) > 20
    documented = {(method, path) for path, method, _ in operations(spec)}
    assert documented - routes == set(), "in the spec, not in src/server/api/routes_*.c"
    assert routes - documented == set(), "in src/server/api/routes_*.c, not in the spec"


# ---- against a running server ----

srv = server_fixture("--pool", "0", prefix="pd-oa-")


def concrete(spec, path, item, op):
    """A request path for a spec path: placeholders filled, required query set."""
    url = path.replace("{id}", FAKE_ID).replace("{pid}", "1")
    params = [resolve(spec, p) for p in item.get("parameters", []) + op.get("parameters", [])]
    query = ["%s=x" % p["name"] for p in params if p["in"] == "query" and p.get("required")]
    return url + ("?" + "&".join(query) if query else "")


def test_every_documented_route_exists(spec, srv):
    checked = 0
    for path, method, op in operations(spec):
        url = concrete(spec, path, spec["paths"][path], op)
        body = "{}" if method in ("post", "put") else None
        public = op.get("security") == []
        st, _h, data = srv.request(method.upper(), url, body, key=None if public else "default")
        what = "%s %s -> %d %s" % (method.upper(), url, st, data[:200])
        assert st != 405, what
        if st == 404:
            err = json.loads(data)["error"]
            assert err["code"] == "not_found" and "no such route" not in err["message"], what
        assert st != 401, what
        if public:
            assert st == 200, what
        checked += 1
    assert checked == len(server_routes())


def test_unknown_routes_are_told_apart(srv):
    st, _h, data = srv.request("GET", "/api/v1/no-such-thing")
    assert st == 404 and "no such route" in json.loads(data)["error"]["message"]
    st, _h, _ = srv.request("PATCH", "/api/v1/sandboxes")
    assert st == 405


def check_object(spec, schema_name, obj, exact_required=False):
    schema = spec["components"]["schemas"][schema_name]
    keys = set(obj)
    required = set(schema.get("required", []))
    props = set(schema.get("properties", {}))
    assert required <= keys, "%s: missing %s" % (schema_name, sorted(required - keys))
    assert keys <= props, "%s: undocumented %s" % (schema_name, sorted(keys - props))
    if exact_required:
        assert keys == required, "%s: %s != required %s" % (schema_name, sorted(keys), sorted(required))


@pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")
def test_created_sandbox_matches_schema(spec, srv):
    sb = srv.json("POST", "/api/v1/sandboxes", {}, expect=201)[1]
    try:
        check_object(spec, "Sandbox", sb, exact_required=True)
        sid = sb["id"]
        check_object(spec, "Sandbox", srv.json("GET", "/api/v1/sandboxes/" + sid, expect=200)[1], exact_required=True)
        check_object(spec, "SandboxMetrics", srv.json("GET", "/api/v1/sandboxes/%s/metrics" % sid, expect=200)[1],
                     exact_required=True)
        res = srv.json("POST", "/api/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]}, expect=200)[1]
        check_object(spec, "ExecResult", res, exact_required=True)
        proc = srv.json("GET", "/api/v1/sandboxes/%s/processes/%d" % (sid, res["pid"]), expect=200)[1]
        check_object(spec, "Process", proc)
        assert proc["state"] == "exited" and proc["reason"] == "exit"
        entry = srv.json("GET", "/api/v1/sandboxes/%s/files/stat?path=/tmp" % sid, expect=200)[1]
        check_object(spec, "Entry", entry, exact_required=True)
        st, _h, data = srv.request("GET", "/api/v1/sandboxes/%s/processes/999999" % sid)
        assert st == 404
        err = json.loads(data)
        check_object(spec, "Error", err, exact_required=True)
        enum = spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
        assert err["error"]["code"] in enum
        paused = srv.json("POST", "/api/v1/sandboxes/%s/pause" % sid, expect=200)[1]
        check_object(spec, "Sandbox", paused)
        assert paused["expires_at"] is None and isinstance(paused["timeout_remaining_ms"], int)
    finally:
        assert srv.request("DELETE", "/api/v1/sandboxes/" + sb["id"])[0] == 204
