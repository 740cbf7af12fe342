"""File descriptors: open /dev/null until EMFILE; raise RLIMIT_NOFILE's hard
limit (needs CAP_SYS_RESOURCE in the host's namespace)."""
# mode: batch
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
raised = None
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 2, hard * 2))
    raised = "raised to %d" % (hard * 2)
except (OSError, ValueError) as e:
    raised = en(getattr(e, "errno", 0)) if isinstance(e, OSError) else "ValueError"
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
except (OSError, ValueError):
    pass
fds, err = [], None
while len(fds) < 2000000:
    try:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = e.errno
        break
detail = "RLIMIT_NOFILE %d/%d, hard raise: %s, opened %d then %s" % (soft, hard, raised, len(fds), en(err))
if raised and raised.startswith("raised"):
    escaped("raised the hard fd limit", detail)
if err == errno.EMFILE:
    blocked("EMFILE (RLIMIT_NOFILE)", detail)
if err == errno.ENFILE:
    escaped("exhausted the host's file table (ENFILE)", detail)
error(en(err), detail)
