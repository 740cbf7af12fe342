"""Numbers read from paddock's C headers, so tests never copy them.

    enums("src/proto/proto.h")   -> {"pd_frame_type": [Enumerator("PD_T_HELLO", 1, "handshake..."), ...], ...}
    defines("src/agent/agent.h") -> {"AG_MAX_CONNS": 256, ...}   (integer macros only)

The reader knows the subset the headers use: `enum name { NAME = value, ... };`
with an optional comment after an enumerator (its kind, for attributes:
"u32", "u64", "string", "nested"), and `#define NAME expression` where the
expression is integer literals (with a u suffix), names defined earlier, + - *
<< >> | and parentheses. Anything else in a value raises ValueError rather
than being misread; tests/integration/agent/test_proto_header.py checks the
result against what the C compiler sees."""
import collections
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Enumerator = collections.namedtuple("Enumerator", "name value comment")

_COMMENT = re.compile(r"/\*(.*?)\*/", re.S)
_ENUM = re.compile(r"\benum\s+(\w+)\s*\{([^}]*)\}\s*;")
# NAME = value, then on the same line an optional comment (a placeholder here)
_ITEM = re.compile(r"(\w+)\s*=\s*([^,}@\n]+?)\s*(?:,|(?=\}|@|\n|$))[ \t]*(?:@(\d+)@)?")
_DEFINE = re.compile(r"^#define[ \t]+(\w+)[ \t]+([^@\n]+?)[ \t]*(?:@\d+@.*)?$", re.M)
_SAFE = re.compile(r"^[\sA-Za-z0-9_()+\-*<>|]*$")
_LITERAL = re.compile(r"\b(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*\b")


def _path(path):
    return path if os.path.isabs(path) else os.path.join(REPO, path)


def _read(path):
    """The header's text with every comment replaced by @n@, and the
    comments (whitespace and leading stars folded) by n."""
    with open(_path(path)) as f:
        text = f.read()
    comments = []

    def hold(m):
        comments.append(" ".join(m.group(1).replace("*", " ").split()))
        return "@%d@" % (len(comments) - 1)
    return _COMMENT.sub(hold, text), comments


def evaluate(expr, names=None):
    """An integer C constant expression of the subset above."""
    names = names or {}
    if not _SAFE.match(expr):
        raise ValueError("not a plain integer expression: %r" % expr)
    py = _LITERAL.sub(lambda m: str(int(m.group(1), 0)), expr)

    def name(m):
        if m.group(0) not in names:
            raise ValueError("unknown name %r in %r" % (m.group(0), expr))
        return str(names[m.group(0)])
    py = re.sub(r"\b[A-Za-z_]\w*\b", name, py)
    return int(eval(py, {"__builtins__": {}}, {}))


def enums(path):
    """Every `enum name { ... };` of a header, in order of appearance."""
    text, comments = _read(path)
    out = {}
    for m in _ENUM.finditer(text):
        known = {}
        items = []
        for it in _ITEM.finditer(m.group(2)):
            value = evaluate(it.group(2), known)
            known[it.group(1)] = value
            items.append(Enumerator(it.group(1), value, comments[int(it.group(3))] if it.group(3) else ""))
        # what the items did not explain (an enumerator without "= value",
        # say) must be nothing but comments, commas and blanks
        rest = re.sub(r"@\d+@|[\s,]", "", _ITEM.sub("", m.group(2)))
        if rest:
            raise ValueError("enum %s in %s: cannot read %r" % (m.group(1), path, rest[:60]))
        out[m.group(1)] = items
    return out


def enum_values(path, enum, prefix=""):
    """{NAME without prefix: value} of one enum."""
    return {e.name[len(prefix):]: e.value for e in enums(path)[enum] if e.name.startswith(prefix)}


def defines(path):
    """Integer #defines of a header (others are left out)."""
    text, _comments = _read(path)
    out = {}
    for m in _DEFINE.finditer(text):
        try:
            out[m.group(1)] = evaluate(m.group(2), out)
        except (ValueError, SyntaxError):
            continue
    return out
