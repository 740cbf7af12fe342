/* paddock-supervisor, the broker: performs opens and connects for the
 * sandbox's processes (see sv.h for why it is a separate process).
 *
 * Set-up, in this order (each step needs the previous one's privileges):
 *   1. open the host's /proc and our own /proc/PID/fd (reopening through
 *      our own fds is how we act on exactly what we resolved);
 *   2. setns into the sandbox's user namespace: capabilities now exist
 *      only there, and capable_wrt_inode_uidgid() treats the caller's
 *      CAP_DAC_OVERRIDE etc. exactly as it would for the caller;
 *   3. become the namespace's root (ids 0 = the sandbox's uid base);
 *   4. chroot to the sandbox's root: '..' and absolute symlinks met in a
 *      relative lookup stop and start there;
 *   5. no_new_privs and a Landlock domain whose only rule grants every
 *      filesystem right beneath the sandbox's root: a confused resolution
 *      still cannot open a host file.
 * Per call: take on the caller's fsuid, fsgid, groups, umask and effective
 * capabilities (single-threaded, so the raw syscalls change exactly our
 * credentials), resolve with openat2(RESOLVE_NO_MAGICLINKS, and
 * RESOLVE_IN_ROOT against the caller's root for absolute paths) to an
 * O_PATH fd, decide on the path of that fd (its /proc/self/fd link), then
 * reopen that very fd with the caller's flags and inject the result with
 * ADDFD+SEND (itself the check that the caller is still the caller: inject).
 * A read-only O_DIRECTORY open is resolved and opened in one step
 * (open_dir_direct). Nothing read from the caller's memory is read
 * again: a racing thread can change what the path string says, not what we
 * opened. Calls that may block (a FIFO without O_NONBLOCK, any connect) are
 * finished by a forked child, so one blocked caller stalls only itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/openat2.h"
#include "supervisor/broker.h"

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC 0x9fa0
#endif
#define PROC_ROOT_INO 1
#define WALK_MAX_LINKS 40               /* the kernel's MAXSYMLINKS */

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

struct broker B;

static _Noreturn void setup_fail(const char *what)
{
        char msg[256];
        snprintf(msg, sizeof msg, "%s: %s", what, strerror(errno));
        (void)!send(B.a->sock, msg, strlen(msg), MSG_NOSIGNAL);
        _exit(1);
}

int sv_b_capset_eff(uint64_t eff)
{
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct d[2] = {
                { .effective = (uint32_t)eff, .permitted = (uint32_t)B.permitted },
                { .effective = (uint32_t)(eff >> 32), .permitted = (uint32_t)(B.permitted >> 32) },
        };
        return (int)syscall(SYS_capset, &h, d);
}

static int landlock(int rootfd)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi < 1) {
                errno = EOPNOTSUPP;
                return -1;
        }
        uint64_t handled = (1ULL << 13) - 1;     /* ABI 1: EXECUTE .. MAKE_SYM */
        if (abi >= 2)
                handled |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        /* Only filesystem rights: the broker connects for the caller, and
         * the sandbox's network namespace bounds where that can go. */
        uint64_t attr = handled;
        int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
        if (rs < 0)
                return -1;
        struct {
                uint64_t allowed_access;
                int32_t parent_fd;
        } __attribute__((packed)) pb = { handled, rootfd };
        if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0 ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
                int e = errno;
                close(rs);
                errno = e;
                return -1;
        }
        close(rs);
        return 0;
}

static void setup(const struct sv_broker_args *a)
{
        B.a = a;
        B.pid = getpid();
        sv_audit_init(&B.audit, a->audit_fd, a->sandbox);
        /* Not ptrace-able, no core dumps: we hold the sandbox's listener. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        /* Children finishing blocking calls reap themselves. */
        signal(SIGCHLD, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        B.hostproc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (B.hostproc < 0)
                setup_fail("open /proc");
        B.selffd = openat(B.hostproc, "self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (B.selffd < 0)
                setup_fail("open /proc/self/fd");
        if (setns(a->userns, CLONE_NEWUSER) < 0)
                setup_fail("join the sandbox's user namespace");
        close(a->userns);
        if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
            syscall(SYS_setresuid, 0, 0, 0) < 0)
                setup_fail("become the sandbox's root");
        if (fchdir(a->rootfd) < 0 || chroot(".") < 0)
                setup_fail("chroot to the sandbox's root");
        B.sandroot = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (B.sandroot < 0)
                setup_fail("open the sandbox's root");
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) < 0)
                setup_fail("capget");
        B.permitted = d[0].permitted | (uint64_t)d[1].permitted << 32;
        if (landlock(a->rootfd) < 0)
                setup_fail("restrict the broker with Landlock");
        /* Before the sandbox's first process runs (it waits for "R"). */
        sv_b_find_denied(a->policy);
        if (send(a->sock, "R", 1, MSG_NOSIGNAL) != 1)
                _exit(1);
}

/* Become the caller, as far as the filesystem can tell. */
static int apply_creds(const struct sv_creds *c)
{
        if (!B.have_cur || memcmp(&B.cur, c, offsetof(struct sv_creds, umask))) {
                gid_t g[SV_MAX_GROUPS];
                for (uint32_t i = 0; i < c->ngroups; i++)
                        g[i] = c->groups[i];
                B.have_cur = false;
                /* Back to full capabilities (still in permitted: real and
                 * saved uid stay the namespace's root), then down again. */
                if (sv_b_capset_eff(B.permitted) < 0 || syscall(SYS_setgroups, c->ngroups, g) < 0 ||
                    syscall(SYS_setresgid, -1, c->fsgid, -1) < 0 || syscall(SYS_setresuid, -1, c->fsuid, -1) < 0 ||
                    sv_b_capset_eff(c->cap_eff & B.permitted) < 0)
                        return -errno;
                B.cur = *c;
                B.have_cur = true;
        }
        if (B.cur_umask != c->umask + 1) {
                umask((mode_t)c->umask);
                B.cur_umask = c->umask + 1;
        }
        return 0;
}

void sv_b_respond(uint64_t id, int error)
{
        struct seccomp_notif_resp r = { .id = id, .error = error ? -error : 0 };
        (void)ioctl(B.a->listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
}

void sv_b_respond_val(uint64_t id, int64_t val)
{
        struct seccomp_notif_resp r = { .id = id, .val = val };
        (void)ioctl(B.a->listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
}

bool sv_b_id_valid(uint64_t id)
{
        return ioctl(B.a->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Before an action whose effect outlives a failed ADDFD (creating,
 * truncating or opening for write, opening a device or a FIFO, ...): what
 * main read (memory, credentials, /proc/TID objects) was the caller's, i.e.
 * the notification is still pending. Main checked already for connects. A
 * read-only open of a regular file or directory needs no such check: its
 * result is handed over only by ADDFD, checked right before (inject). */
bool sv_b_still_valid(struct sv_job *j)
{
        if (j->validated)
                return true;
        if (!sv_b_id_valid(j->id))
                return false;
        j->validated = 1;
        return true;
}

/* Where fd is, as the sandbox names it (we are chrooted to its root). */
void sv_b_fd_path(int fd, char *buf, size_t size)
{
        char n[16];
        snprintf(n, sizeof n, "%d", fd);
        ssize_t l = readlinkat(B.selffd, n, buf, size - 1);
        buf[l > 0 ? l : 0] = '\0';
}

static void audit_open(const struct sv_job *j, const char *resolved, const char *decision, int e)
{
        bool deny = !strcmp(decision, "deny");
        if (!sv_audit_begin(&B.audit, deny ? "supervisor.deny" : "supervisor.open"))
                return;
        sv_audit_int(&B.audit, "pid", j->ns_pid);
        sv_audit_str(&B.audit, "syscall", sv_syscall_name(j->nr));
        if (resolved && resolved[0])
                sv_audit_str(&B.audit, "path", resolved);
        else
                sv_audit_str(&B.audit, "requested", j->path);
        sv_audit_int(&B.audit, "flags", (long long)j->flags);
        sv_audit_int(&B.audit, "uid", j->creds.fsuid);
        sv_audit_str(&B.audit, "decision", decision);
        if (e)
                sv_audit_int(&B.audit, "errno", e);
        sv_audit_end(&B.audit);
}

/* Hand fd to the caller as its syscall's return value. ADDFD is itself
 * the check that what main read (memory, credentials, /proc/TID objects)
 * was the caller's: the kernel injects only while that very notification
 * is pending (else ENOENT, nothing injected), and a notification that
 * stopped being pending never is again (ids are not reused), so it was
 * pending all along, its thread pinned. A separate ID_VALID right before
 * would check the same thing one system call earlier. */
static int inject(const struct sv_job *j, int fd)
{
        struct seccomp_notif_addfd af = { .id = j->id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (uint32_t)fd,
                                          .newfd_flags = j->cloexec ? O_CLOEXEC : 0 };
        if (ioctl(B.a->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &af) < 0) {
                int e = errno;
                if (e != ENOENT)
                        sv_b_respond(j->id, e);      /* e.g. EMFILE: the caller's table is full */
                return -e;
        }
        return 0;
}

static bool wants_write(uint64_t flags)
{
        /* (glibc's __O_TMPFILE includes O_DIRECTORY: compare all of it) */
        return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT)) ||
               (flags & __O_TMPFILE) == __O_TMPFILE;
}

/* A path rule's verdict for this access: 0 or EACCES. */
static int policy_check(const char *path, uint64_t flags)
{
        enum sv_access acc = sv_policy_path(B.a->policy, path);
        if (acc == SV_ACC_DENY || (acc == SV_ACC_RO && wants_write(flags)))
                return EACCES;
        return 0;
}

/* O_PATH resolution of the job's path the way the caller would resolve it. */
int sv_b_resolve(const struct sv_job *j, int root, int dir, const char *path, uint64_t extra_flags)
{
        struct open_how how = { .flags = O_PATH | O_CLOEXEC | extra_flags,
                                .resolve = j->resolve | RESOLVE_NO_MAGICLINKS };
        int base = dir;
        if (path[0] == '/' && root >= 0) {
                base = root;
                how.resolve |= RESOLVE_IN_ROOT;
        }
        return pd_openat2(base, path, &how);
}

/* Is fd the root directory of a procfs? */
static bool is_proc_root(int fd)
{
        struct statfs sf;
        struct stat st;
        return fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC && fstat(fd, &st) == 0 &&
               st.st_ino == PROC_ROOT_INO;
}

static bool same_dir(int a, int b)
{
        struct stat x, y;
        return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* sv_b_resolve()'s slow path, for a lookup that failed with ENOENT after
 * meeting a symlink: the same lookup one name at a time, following
 * symlinks ourselves, so that procfs's "self" and "thread-self" name the
 * caller (to us, in a procfs of a pid namespace we are not in, they name
 * nothing): /proc/net -> self/net, /proc/mounts -> self/mounts,
 * /etc/mtab -> ../proc/self/mounts, a symlink to /proc/self/status, a
 * relative "self/status" or "net/dev" from a cwd in /proc.
 *
 * Each step opens one name O_PATH|O_NOFOLLOW in the directory the previous
 * step opened, under the caller's credentials, and each symlink is read
 * once: a racing rename or symlink swap changes where we arrive, and where
 * we arrive is what do_open decides on and reopens, as with sv_b_resolve().
 * ".." stops at the lookup's root (absolute symlinks restart there); a
 * magic link (a procfs symlink outside a procfs's root directory: fd/N,
 * exe, cwd, root, ns/...) fails with ELOOP as RESOLVE_NO_MAGICLINKS does.
 * Returns an O_PATH fd, or -1 with errno. */
static int walk(const struct sv_job *j, int root, int dir, const char *path, uint64_t probe)
{
        static char rest[PATH_MAX], tmp[PATH_MAX], target[PATH_MAX];
        char name[NAME_MAX + 1];
        size_t plen = strlen(path);
        if (plen >= sizeof rest) {
                errno = ENAMETOOLONG;
                return -1;
        }
        memcpy(rest, path, plen + 1);
        int lroot = root >= 0 ? root : B.sandroot;
        int cur = fcntl(rest[0] == '/' ? lroot : dir, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -1;
        unsigned links = 0;
        size_t pos = 0;
        int e;
        for (;;) {
                while (rest[pos] == '/')
                        pos++;
                if (!rest[pos])
                        return cur;
                size_t len = strcspn(rest + pos, "/");
                if (len > NAME_MAX) {
                        e = ENAMETOOLONG;
                        goto fail;
                }
                memcpy(name, rest + pos, len);
                name[len] = '\0';
                pos += len;
                bool slash = rest[pos] == '/';
                size_t after = pos;
                while (rest[after] == '/')
                        after++;
                bool last = !rest[after];
                if (!strcmp(name, "."))
                        continue;
                if (!strcmp(name, "..")) {
                        if (same_dir(cur, lroot))
                                continue;
                        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (up < 0) {
                                e = errno;
                                goto fail;
                        }
                        close(cur);
                        cur = up;
                        continue;
                }
                int next = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;
                if (next < 0 || fstat(next, &st) < 0) {
                        e = errno;
                        if (next >= 0)
                                close(next);
                        goto fail;
                }
                bool follow = !last || slash || !(probe & O_NOFOLLOW);
                if (!S_ISLNK(st.st_mode) || !follow) {
                        close(cur);
                        cur = next;
                        if (last && (slash || (probe & O_DIRECTORY)) && !S_ISDIR(st.st_mode)) {
                                e = ENOTDIR;
                                goto fail;
                        }
                        if (last)
                                return cur;
                        continue;
                }
                /* A symlink to follow. */
                ssize_t tl;
                struct statfs sf;
                bool on_proc = fstatfs(next, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
                bool proc_root = on_proc && is_proc_root(cur);
                if (++links > WALK_MAX_LINKS || (on_proc && !proc_root)) {
                        close(next);
                        e = ELOOP;
                        goto fail;
                }
                if (proc_root && !strcmp(name, "self"))
                        tl = snprintf(target, sizeof target, "%d", j->ns_tgid);
                else if (proc_root && !strcmp(name, "thread-self"))
                        tl = snprintf(target, sizeof target, "%d/task/%d", j->ns_tgid, j->ns_pid);
                else
                        tl = readlinkat(next, "", target, sizeof target - 1);
                e = errno;
                close(next);
                if (tl < 0)
                        goto fail;
                if (proc_root && j->ns_tgid <= 0) {
                        e = ENOENT;
                        goto fail;
                }
                target[tl] = '\0';
                if (!tl) {
                        e = ENOENT;
                        goto fail;
                }
                int n = snprintf(tmp, sizeof tmp, "%s%s", target, rest + pos);
                if (n < 0 || (size_t)n >= sizeof tmp) {
                        e = ENAMETOOLONG;
                        goto fail;
                }
                memcpy(rest, tmp, (size_t)n + 1);
                pos = 0;
                if (rest[0] == '/') {
                        int r = fcntl(lroot, F_DUPFD_CLOEXEC, 3);
                        if (r < 0) {
                                e = errno;
                                goto fail;
                        }
                        close(cur);
                        cur = r;
                }
        }
fail:
        close(cur);
        errno = e;
        return -1;
}

/* Finish in a child: the call may block for as long as it likes there.
 * 1 in the child, 0 in the parent, -errno if there is no child. */
int sv_b_fork_child(void)
{
        pid_t p = fork();
        if (p < 0)
                return -errno;
        if (p > 0)
                return 0;
        B.audit.len = 0;
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != B.pid)
                _exit(0);
        return 1;
}

/* A read-only O_DIRECTORY open (find's, ls's, every directory walk): one
 * openat2 with the caller's flags, resolved as sv_b_resolve does, instead
 * of resolving to O_PATH, fstat, reopening through /proc/self/fd and
 * closing. Opening a directory for reading has no effect to undo (O_DIRECTORY:
 * the kernel opens nothing that is not one), so deciding right after the
 * open is deciding before anything happened; the decision is on the path
 * of what was opened, as in the general path. -1 on any failure: the
 * general path then runs and answers what the caller would have had
 * (/proc/self walks, /dev/fd/N, errnos). */
static int open_dir_direct(const struct sv_job *j, int root, int dir)
{
        uint64_t flags = j->flags;
        if (!(flags & O_DIRECTORY) || (flags & O_PATH) || wants_write(flags) || (flags & ~(uint64_t)0xffffffff))
                return -1;
        struct open_how how = { .flags = flags | O_NOCTTY | O_CLOEXEC,
                                .resolve = j->resolve | RESOLVE_NO_MAGICLINKS };
        int base = dir;
        if (j->path[0] == '/' && root >= 0) {
                base = root;
                how.resolve |= RESOLVE_IN_ROOT;
        }
        return pd_openat2(base, j->path, &how);
}

static void do_open(struct sv_job *j, int root, int dir, int extra)
{
        char resolved[PATH_MAX];
        resolved[0] = '\0';
        uint64_t flags = j->flags;
        int e, fd = -1;
        /* O_CREAT|O_EXCL never follows a final symlink. */
        uint64_t probe = flags & (O_NOFOLLOW | O_DIRECTORY);
        if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
                probe |= O_NOFOLLOW;
        if (flags & ~(uint64_t)0xffffffff || j->mode & ~(uint64_t)07777) {
                e = EINVAL;     /* what openat2 says to unknown flags or mode bits */
                goto fail;
        }
        fd = open_dir_direct(j, root, dir);
        if (fd >= 0) {
                sv_b_fd_path(fd, resolved, sizeof resolved);
                if ((e = policy_check(resolved, flags)) != 0) {
                        close(fd);
                        goto deny;
                }
                goto done;
        }
        int opath = sv_b_resolve(j, root, dir, j->path, probe);
        if (opath < 0 && (errno == ELOOP || errno == ENOENT || errno == EACCES) && extra >= 0) {
                /* /dev/stdin and friends (their /proc/self is not ours:
                 * ENOENT, or ELOOP at the magic link; the caller's
                 * /proc/PID/fd is behind a ptrace check we fail: EACCES):
                 * main opened the caller's own fd for us. */
                opath = fcntl(extra, F_DUPFD_CLOEXEC, 3);
        } else if (opath < 0 && errno == ENOENT && !j->resolve) {
                /* A symlink on the way may have led to procfs's "self"
                 * (ours: nothing). Only then (the same lookup refusing every
                 * symlink fails with ELOOP, not ENOENT) the slow walk. */
                struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
                int base = dir;
                if (j->path[0] == '/') {
                        base = root >= 0 ? root : B.sandroot;
                        how.resolve |= RESOLVE_IN_ROOT;
                }
                int probe2 = pd_openat2(base, j->path, &how);
                if (probe2 >= 0) {
                        close(probe2);  /* it appeared meanwhile: walk anyway */
                        opath = walk(j, root, dir, j->path, probe);
                } else if (errno == ELOOP) {
                        opath = walk(j, root, dir, j->path, probe);
                } else {
                        errno = ENOENT;
                }
        }
        if (opath < 0) {
                e = errno;
                if (e != ENOENT || !(flags & O_CREAT))
                        goto fail;
                /* Create: resolve the parent, decide on parent/name, then
                 * create the name in that very directory, refusing a symlink
                 * planted there meanwhile (ELOOP, where the kernel would
                 * have followed a dangling one). */
                char parent[PATH_MAX], *slash = strrchr(j->path, '/');
                const char *name;
                if (!slash) {
                        strcpy(parent, ".");
                        name = j->path;
                } else {
                        size_t pl = (size_t)(slash - j->path);
                        memcpy(parent, j->path, pl ? pl : 1);
                        parent[pl ? pl : 1] = '\0';
                        name = slash + 1;
                }
                if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
                        e = EISDIR;
                        goto fail;
                }
                int pfd = sv_b_resolve(j, root, dir, parent, O_DIRECTORY);
                if (pfd < 0) {
                        e = errno;
                        goto fail;
                }
                sv_b_fd_path(pfd, resolved, sizeof resolved);
                size_t rl = strlen(resolved);
                snprintf(resolved + rl, sizeof resolved - rl, "%s%s", rl && resolved[rl - 1] == '/' ? "" : "/",
                         name);
                if ((e = policy_check(resolved, flags)) != 0) {
                        close(pfd);
                        goto deny;
                }
                struct open_how how = {
                        .flags = (flags | O_NOCTTY | O_CLOEXEC | O_NONBLOCK) & ~(uint64_t)O_NOFOLLOW,
                        .mode = j->mode,
                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                };
                if (!sv_b_still_valid(j)) {
                        close(pfd);
                        return;
                }
                fd = pd_openat2(pfd, name, &how);
                e = errno;
                close(pfd);
                if (fd < 0)
                        goto fail;
                if (!(flags & O_NONBLOCK))
                        (void)fcntl(fd, F_SETFL, (int)(flags & ~(uint64_t)O_NONBLOCK));
                goto done;
        }
        struct stat st;
        if (fstat(opath, &st) < 0) {
                e = errno;
                close(opath);
                goto fail;
        }
        sv_b_fd_path(opath, resolved, sizeof resolved);
        /* ro keeps the filesystem as it is; writing to a device, a FIFO or
         * a socket changes nothing in it (an ro mount allows it too), so
         * under ro they open as asked: /dev/null stays usable under a
         * "/" "**" ro rule. */
        uint64_t decided = flags;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
                decided &= ~(uint64_t)(O_ACCMODE | O_TRUNC | O_CREAT);
        if ((e = policy_check(resolved, decided)) != 0) {
                close(opath);
                goto deny;
        }
        /* A file a deny rule covers, reached by another name (a hard link
         * made before the sandbox started). */
        if (S_ISREG(st.st_mode) && sv_b_denied_inode(st.st_dev, st.st_ino)) {
                close(opath);
                e = EACCES;
                goto deny;
        }
        if (flags & O_PATH) {
                /* openat2 with O_PATH (open/openat with O_PATH continue in
                 * main). ADDFD cannot inject an O_PATH file, and continuing
                 * would let the kernel reread how.flags from memory the
                 * caller can change. So hand out the nearest real open: a
                 * directory or regular file opened for reading (decided as
                 * a read), anything else is refused with EACCES. */
                close(opath);
                if ((e = policy_check(resolved, O_RDONLY)) != 0)
                        goto deny;
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
                        e = EACCES;
                        goto fail;
                }
                flags = (flags & (O_CLOEXEC | O_NOFOLLOW | O_DIRECTORY)) | O_RDONLY | O_NONBLOCK;
                opath = sv_b_resolve(j, root, dir, j->path, flags & (O_NOFOLLOW | O_DIRECTORY));
                if (opath < 0) {
                        e = errno;
                        goto fail;
                }
                struct stat st2;
                if (fstat(opath, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
                        close(opath);
                        e = EAGAIN;
                        goto fail;
                }
        }
        if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
                close(opath);
                e = EEXIST;
                goto fail;
        }
        if (S_ISLNK(st.st_mode)) {      /* O_NOFOLLOW met a symlink */
                close(opath);
                e = ELOOP;
                goto fail;
        }
        /* Reopen exactly what we resolved and decided on. O_NOCTTY: the
         * broker must never acquire a controlling terminal. */
        char n[16];
        snprintf(n, sizeof n, "%d", opath);
        int oflags = (int)((flags & ~(uint64_t)(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_NOCTTY | O_CLOEXEC);
        if ((wants_write(flags) || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) && !sv_b_still_valid(j)) {
                close(opath);
                return;
        }
        if (S_ISFIFO(st.st_mode) && !(flags & O_NONBLOCK) && (flags & O_ACCMODE) != O_RDWR) {
                /* Opening a FIFO waits for the other end: not here. */
                int fc = sv_b_fork_child();
                if (fc < 0) {
                        close(opath);
                        e = -fc;
                        goto fail;
                }
                if (fc > 0) {
                        char cn[32];
                        snprintf(cn, sizeof cn, "self/fd/%d", opath);
                        fd = openat(B.hostproc, cn, oflags);
                        e = errno;
                        if (fd < 0) {
                                if (sv_b_id_valid(j->id))
                                        sv_b_respond(j->id, e);
                                audit_open(j, resolved, "error", e);
                        } else {
                                int r = inject(j, fd);
                                audit_open(j, resolved, r == 0 ? "allow" : "error", r == 0 ? 0 : -r);
                        }
                        sv_audit_flush(&B.audit);
                        _exit(0);
                }
                close(opath);
                return;
        }
        fd = openat(B.selffd, n, oflags);
        e = errno;
        close(opath);
        if (fd < 0)
                goto fail;
done: {
        int r = inject(j, fd);
        close(fd);
        audit_open(j, resolved, r == 0 ? "allow" : "error", r == 0 ? 0 : -r);
        return;
}
deny:
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_open(j, resolved, "deny", e);
        return;
fail:
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_open(j, resolved, "error", e);
}

static void format_addr(const struct sv_job *j, const char *resolved, char *out, size_t size)
{
        const struct sockaddr *sa = (const void *)j->addr;
        char ip[INET6_ADDRSTRLEN] = "?";
        if (j->addrlen < sizeof(sa_family_t)) {
                snprintf(out, size, "(none)");
        } else if (sa->sa_family == AF_INET && j->addrlen >= sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *s = (const void *)sa;
                inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
                snprintf(out, size, "%s:%u", ip, ntohs(s->sin_port));
        } else if (sa->sa_family == AF_INET6 && j->addrlen >= sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *s = (const void *)sa;
                inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
                snprintf(out, size, "[%s]:%u", ip, ntohs(s->sin6_port));
        } else if (sa->sa_family == AF_UNIX) {
                if (j->addrlen <= 2)
                        snprintf(out, size, "unix:(unnamed)");
                else if (j->addr[2] == '\0')
                        snprintf(out, size, "unix-abstract:%.*s", (int)(j->addrlen - 3), (const char *)j->addr + 3);
                else
                        snprintf(out, size, "unix:%s", resolved && *resolved ? resolved : j->path);
        } else {
                snprintf(out, size, "family:%u", sa->sa_family);
        }
}

static void audit_connect(const struct sv_job *j, const char *resolved, const char *decision, int e)
{
        bool deny = !strcmp(decision, "deny");
        if (!sv_audit_begin(&B.audit, deny ? "supervisor.deny" : "supervisor.connect"))
                return;
        char addr[PATH_MAX + 64];
        format_addr(j, resolved, addr, sizeof addr);
        sv_audit_int(&B.audit, "pid", j->ns_pid);
        sv_audit_str(&B.audit, "syscall", "connect");
        sv_audit_str(&B.audit, "address", addr);
        sv_audit_int(&B.audit, "uid", j->creds.fsuid);
        sv_audit_str(&B.audit, "decision", decision);
        if (e)
                sv_audit_int(&B.audit, "errno", e);
        sv_audit_end(&B.audit);
}

static void do_connect(struct sv_job *j, int root, int dir, int sock)
{
        char resolved[PATH_MAX] = "";
        const struct sockaddr *sa = (const void *)j->addr;
        int e = 0, opath = -1;
        if (j->path[0]) {
                /* A named unix socket: resolve inside the sandbox and
                 * connect through our fd of the socket inode. */
                opath = sv_b_resolve(j, root, dir, j->path, 0);
                if (opath < 0) {
                        e = errno;
                        if (sv_b_id_valid(j->id))
                                sv_b_respond(j->id, e);
                        audit_connect(j, NULL, "error", e);
                        return;
                }
                sv_b_fd_path(opath, resolved, sizeof resolved);
                if (sv_policy_path(B.a->policy, resolved) == SV_ACC_DENY ||
                    sv_policy_path(B.a->policy, resolved) == SV_ACC_RO)
                        e = EACCES;
        } else if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
                if (!sv_policy_connect(B.a->policy, sa, j->addrlen))
                        e = EACCES;
        }
        if (e) {
                if (opath >= 0)
                        close(opath);
                if (sv_b_id_valid(j->id))
                        sv_b_respond(j->id, e);
                audit_connect(j, resolved, "deny", e);
                return;
        }
        int fc = sv_b_fork_child();
        if (fc <= 0) {
                if (opath >= 0)
                        close(opath);
                if (fc < 0) {
                        if (sv_b_id_valid(j->id))
                                sv_b_respond(j->id, -fc);
                        audit_connect(j, resolved, "error", -fc);
                }
                return;
        }
        /* child: connect the caller's own socket to what we copied */
        int r;
        if (opath >= 0) {
                char cn[32];
                snprintf(cn, sizeof cn, "self/fd");
                int cfd = openat(B.hostproc, cn, O_PATH | O_DIRECTORY | O_CLOEXEC);
                struct sockaddr_un su = { .sun_family = AF_UNIX };
                snprintf(su.sun_path, sizeof su.sun_path, "%d", opath);
                r = (cfd >= 0 && fchdir(cfd) == 0)
                            ? connect(sock, (struct sockaddr *)&su,
                                      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(su.sun_path) + 1))
                            : -1;
        } else {
                r = connect(sock, sa, j->addrlen);
        }
        e = r < 0 ? errno : 0;
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
        audit_connect(j, resolved, e ? "error" : "allow", e);
        sv_audit_flush(&B.audit);
        _exit(0);
}

/* A job off the wire (main.c's sv_send_job): the fields up to path, then
 * path, path2 (each NUL-terminated) and tail_len bytes of tail. */
static bool unpack(struct sv_job *j, const uint8_t *raw, size_t n)
{
        size_t head = offsetof(struct sv_job, path);
        if (n < head + 2)
                return false;
        memcpy(j, raw, head);
        const uint8_t *p = raw + head, *end = raw + n;
        const uint8_t *z = memchr(p, '\0', (size_t)(end - p));
        if (!z || (size_t)(z - p) >= sizeof j->path)
                return false;
        memcpy(j->path, p, (size_t)(z - p) + 1);
        p = z + 1;
        z = memchr(p, '\0', (size_t)(end - p));
        if (!z || (size_t)(z - p) >= sizeof j->path2)
                return false;
        memcpy(j->path2, p, (size_t)(z - p) + 1);
        p = z + 1;
        if (j->tail_len > sizeof j->tail || (size_t)(end - p) != j->tail_len)
                return false;
        memcpy(j->tail, p, j->tail_len);
        return true;
}

_Noreturn void sv_broker_main(const struct sv_broker_args *a)
{
        setup(a);
        static struct sv_job job;
        static uint8_t raw[sizeof job];
        static char ctrl[CMSG_SPACE(SV_JOB_FDS * sizeof(int))];
        for (;;) {
                /* Audit lines go out in bursts (sv_audit_due_ms), written
                 * while no job waits, and all of them when main goes. */
                if (B.audit.len && sv_audit_due_ms(&B.audit) == 0)
                        sv_audit_flush(&B.audit);
                struct iovec iov = { raw, sizeof raw };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
                                     .msg_controllen = sizeof ctrl };
                ssize_t n = recvmsg(a->sock, &mh, MSG_CMSG_CLOEXEC | (B.audit.len ? MSG_DONTWAIT : 0));
                if (n < 0 && errno == EAGAIN && B.audit.len) {
                        struct pollfd p = { .fd = a->sock, .events = POLLIN };
                        int due = sv_audit_due_ms(&B.audit);
                        if (due == 0 || poll(&p, 1, due) == 0)
                                sv_audit_flush(&B.audit);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        /* main is gone: so are we (and the listener with us). */
                        sv_audit_flush(&B.audit);
                        _exit(0);
                }
                int fds[SV_JOB_FDS], nf = 0;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                nf = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                                if (nf > SV_JOB_FDS)
                                        nf = SV_JOB_FDS;
                                memcpy(fds, CMSG_DATA(c), (size_t)nf * sizeof(int));
                        }
                if (!unpack(&job, raw, (size_t)n) || (uint32_t)nf != job.nfds || job.nrights > SV_RIGHTS_MAX ||
                    job.has_root + job.has_dir + job.has_dir2 + job.has_extra + (int)job.nrights != nf ||
                    (job.sandbox_root && job.has_root)) {
                        for (int i = 0; i < nf; i++)
                                close(fds[i]);
                        continue;
                }
                int k = 0;
                int root = job.has_root ? fds[k++] : job.sandbox_root ? B.sandroot : -1;
                int dir = job.has_dir ? fds[k++] : -1;
                int dir2 = job.has_dir2 ? fds[k++] : -1;
                int extra = job.has_extra ? fds[k++] : -1;
                int r = apply_creds(&job.creds);
                if (r < 0) {
                        if (sv_b_id_valid(job.id))
                                sv_b_respond(job.id, EPERM);
                } else if (job.op == SV_OPEN) {
                        do_open(&job, root, dir, extra);
                } else if (job.op == SV_CONNECT && extra >= 0) {
                        do_connect(&job, root, dir, extra);
                } else if (job.op == SV_PATHOP) {
                        sv_do_pathop(&job, root, dir, dir2, extra);
                } else if (job.op == SV_SEND && extra >= 0) {
                        sv_do_send(&job, root, dir, extra, fds + k);
                } else if (sv_b_id_valid(job.id)) {
                        sv_b_respond(job.id, ENOSYS);
                }
                for (int i = 0; i < nf; i++)
                        close(fds[i]);
        }
}
