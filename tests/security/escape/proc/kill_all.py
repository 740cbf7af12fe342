"""kill(-1, SIGTERM): every process the caller may signal. In a pid
namespace it reaches only the sandbox's own processes (the driver ignores
SIGTERM; PID 1 is immune); on the host it must not reach a victim the test
runs under the sandbox's own host uid, nor break the sandbox's agent."""
# mode: isolated
# host-check: victim-alive
signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    os.kill(-1, signal.SIGTERM)
    r = "delivered"
except OSError as e:
    r = en(e.errno)
time.sleep(0.3)
blocked("contained" if r == "delivered" else r, "kill(-1)=%s; the runner checks the host victim" % r)
