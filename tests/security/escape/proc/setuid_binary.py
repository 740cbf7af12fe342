"""Setuid binaries under no_new_privs: as a non-root uid, run the setuid-root
/usr/bin/su (it waits for a password on a pipe) and read its effective uid
from /proc while it waits. euid 0 = the setuid bit took effect."""
# mode: batch
import subprocess
uid = drop_to_user()
st = read_file("/proc/self/status").decode()
nnp = [l.split()[1] for l in st.splitlines() if l.startswith("NoNewPrivs:")]
if uid == 0:
    error("cannot drop root", "")
if not os.path.exists("/usr/bin/su"):
    blocked("no setuid binary", "")
try:
    p = subprocess.Popen(["/usr/bin/su", "root"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
except OSError as e:
    blocked(en(e.errno), "exec su")
time.sleep(0.7)
try:
    uids = [l for l in read_file("/proc/%d/status" % p.pid).decode().splitlines() if l.startswith("Uid:")][0].split()[1:]
except (OSError, IndexError):
    uids = ["?"]
p.kill()
out = p.communicate()[0].decode("utf-8", "replace").strip()
if len(uids) > 1 and uids[1] == "0":
    escaped("setuid bit honoured (euid 0)", "Uid: %s" % uids)
blocked("no_new_privs (setuid inert)", "su ran with Uid: %s, NoNewPrivs=%s, output %r" % (" ".join(uids), nnp, out[:80]))
