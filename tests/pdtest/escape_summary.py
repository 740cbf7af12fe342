"""The escape suites' summary for the chooser (`paddock tiers`, GET
/api/v1/tiers; src/lib/tier_json.h): after a run, each suite records per
tier its date, how many attacks were blocked, allowed, "not implemented"
(gvisor: the Sentry answered ENOSYS) or ended in an error, and where its
full results are.

The file is <state dir>/tiers.escape.json, the state dir `paddock tiers`
and `paddock serve` read by default: $PADDOCK_STATE_DIR, else
/var/lib/paddock. PADDOCK_ESCAPE_SUMMARY=FILE writes elsewhere (tests of
the chooser use it; an empty value writes nothing). Other tiers' entries are
kept: the suites run separately (tests/security, tests/gvisor,
tests/microvm)."""
import fcntl
import json
import os
import time

from .env import REPO

MATRIX = "docs/security-matrix.md"
# tiers with no paddock seccomp filter of their own in front of the kernel
# they talk to: an ENOSYS there is the (user-space) kernel's own answer
SENTRY_TIERS = {"gvisor"}


def summary_path():
    p = os.environ.get("PADDOCK_ESCAPE_SUMMARY")
    if p is not None:
        return p or None
    state = os.environ.get("PADDOCK_STATE_DIR") or "/var/lib/paddock"
    return os.path.join(state, "tiers.escape.json")


def counts(tier, results):
    """{attacks, blocked, allowed, not_implemented, errors} of one tier's
    results ({attack: {outcome, how, ...}})."""
    c = {"attacks": 0, "blocked": 0, "allowed": 0, "not_implemented": 0, "errors": 0}
    for r in results.values():
        c["attacks"] += 1
        out, how = r.get("outcome"), r.get("how") or ""
        if out == "blocked":
            c["not_implemented" if tier in SENTRY_TIERS and how.startswith("ENOSYS") else "blocked"] += 1
        elif out == "escaped":
            c["allowed"] += 1
        else:
            c["errors"] += 1
    return c


def record(per_tier, results_file, path=None):
    """Merge {tier: results} into the summary; returns its path (None when
    PADDOCK_ESCAPE_SUMMARY is empty). A malformed file is replaced."""
    path = path or summary_path()
    if not path:
        return None
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(path + ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                doc = json.load(f)
            if not isinstance(doc.get("tiers"), dict):
                raise ValueError
        except (OSError, ValueError, AttributeError):
            doc = {"tiers": {}}
        for tier, res in per_tier.items():
            doc["tiers"][tier] = dict(counts(tier, res), date=date, results=os.path.abspath(results_file),
                                      matrix=os.path.join(REPO, MATRIX))
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)
    return path
