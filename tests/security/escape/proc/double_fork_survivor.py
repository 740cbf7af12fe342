"""Survive teardown: setsid + double fork, ignore SIGTERM/SIGHUP, carry the
run's marker in argv; the runner looks for the marker on the host after the
run ends."""
# mode: isolated
# host-check: no-marker-processes
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        os.closerange(0, 3)
        os.execv("/bin/sh", ["sh", "-c", "trap '' TERM HUP INT; while :; do sleep 1; done; : " + CTX["marker"]])
    os._exit(0)
time.sleep(0.5)
blocked("left running", "the runner checks the host for the marker after teardown")
