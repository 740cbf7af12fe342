"""An ro rule against every way root inside changes a file without opening it
for writing: truncate, chmod, chown, setxattr, utime, mknod, mkdir, symlink,
unlink, rename, link, and the fd-based forms (fchmod, fchown, fsetxattr,
futimens) on an fd opened read-only, which no path check sees. The policy
makes /etc read-only; the supervised tier turns that into a read-only mount."""
# mode: isolated
# timeout: 30
# policy: {"paths": [{"glob": "/etc/**", "access": "ro"}]}
import stat
if CTX.get("tier") != "supervised":
    error("not applicable: policies are the supervised tier's", CTX.get("tier"))
T = "/etc/hostname"
st = os.stat(T)
calls = []
def t(name, fn):
    try:
        fn()
        calls.append((name, "ok"))
    except OSError as e:
        calls.append((name, en(e.errno)))
fd = os.open(T, os.O_RDONLY)
t("fchmod", lambda: os.fchmod(fd, 0o600))
t("fchown", lambda: os.fchown(fd, st.st_uid, st.st_gid))
t("fsetxattr", lambda: os.setxattr(fd, "user.pd", b"v"))
t("futimens", lambda: os.utime(fd, (1, 1)))
t("truncate", lambda: os.truncate(T, 0))
t("chmod", lambda: os.chmod(T, 0o600))
t("chown", lambda: os.chown(T, st.st_uid, st.st_gid))
t("setxattr", lambda: os.setxattr(T, "user.pd", b"v"))
t("utime", lambda: os.utime(T, (1, 1)))
t("mknod", lambda: os.mknod("/etc/pd-fifo", stat.S_IFIFO | 0o644))
t("mkdir", lambda: os.mkdir("/etc/pd-dir"))
t("symlink", lambda: os.symlink("x", "/etc/pd-link"))
t("link", lambda: os.link(T, "/etc/pd-hard"))
t("rename", lambda: os.rename(T, "/etc/pd-renamed"))
t("unlink", lambda: os.unlink(T))
detail = ", ".join("%s=%s" % c for c in calls)
ok = [n for n, r in calls if r == "ok"]
if ok:
    escaped("%s changed an ro path" % ",".join(ok), detail)
if all(r == "EROFS" for n, r in calls):
    blocked("EROFS (read-only mount)", detail)
blocked("refused", detail)
