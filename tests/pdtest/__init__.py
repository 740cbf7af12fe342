"""paddock's test fixtures, one module for every suite (tests/conftest.py
puts tests/ on sys.path, so `import pdtest` works from any test folder).

  pdtest.env      REPO, PADDOCK_BIN, PADDOCK_AGENT, child_env, instance_of,
                  runtime_dir, sandbox_dirs, leftovers, new_leftovers,
                  free_port, pid_alive, wait_until, kill_by_cmdline
  pdtest.cli      Paddock (the `paddock run` runner on one state dir),
                  parse_json_result; NETNS/WRAP/netns_prefix (run paddock
                  in a stand-in host netns: tests/network/_fakenet.py)
  pdtest.server   Server (one `paddock serve`: start, stop, finish = gc and
                  nothing left; request/json/api/create/exec/delete; .v1),
                  server_fixture, tmproot, run_paddock, server_env
  pdtest.pdproto  the agent protocol client; its numbers come from
                  src/proto/proto.h (pdtest.cheader reads C headers)
  pdtest.escape_summary  the escape suites' per-tier counts for `paddock
                  tiers` / GET /api/v1/tiers (<state>/tiers.escape.json)
"""
from .cli import NETNS, WRAP, Paddock, netns_prefix, parse_json_result  # noqa: F401
from .env import (DEFAULT_TIMEOUT, PADDOCK_AGENT, PADDOCK_BIN, REPO, UID_BASE, UID_REGISTRY, child_env,  # noqa: F401
                  free_port, instance_of, kill_by_cmdline, leftovers, wait_teardowns, new_leftovers, pid_alive, procs_with,
                  remove_cgroup_parents, runtime_dir, sandbox_dirs, wait_until)
