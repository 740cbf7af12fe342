"""Capabilities: read CapEff/CapBnd, then capset() to raise every capability
(CAP_SYS_ADMIN, CAP_SYS_MODULE...), and prctl(PR_CAP_AMBIENT_RAISE)."""
# mode: batch
st = dict(l.split(":\t", 1) for l in read_file("/proc/self/status").decode().splitlines() if ":\t" in l)
eff = int(st["CapEff"], 16)
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3
data = (ctypes.c_uint32 * 6)(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff)
r, e = sc(NR["capset"], ctypes.byref(hdr), ctypes.byref(data))
st2 = dict(l.split(":\t", 1) for l in read_file("/proc/self/status").decode().splitlines() if ":\t" in l)
eff2 = int(st2["CapEff"], 16)
ctypes.set_errno(0)
amb = libc.prctl(47, 2, 21, 0, 0)       # PR_CAP_AMBIENT, RAISE, CAP_SYS_ADMIN
ae = ctypes.get_errno()
DANGEROUS = {21: "SYS_ADMIN", 16: "SYS_MODULE", 17: "SYS_RAWIO", 19: "SYS_PTRACE", 25: "SYS_TIME", 22: "SYS_BOOT", 12: "NET_ADMIN", 24: "SYS_RESOURCE"}
got = [n for b, n in DANGEROUS.items() if eff2 >> b & 1]
detail = "CapEff %s -> %s, capset=%s, ambient raise=%s, CapBnd %s" % (st["CapEff"].strip(), st2["CapEff"].strip(), en(e) if r else "ok", en(ae) if amb else "ok", st["CapBnd"].strip())
if got:
    escaped("holds " + ",".join(got), detail)
blocked(label(e) if r else "capset ok but no dangerous capability", detail)
