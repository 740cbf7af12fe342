/* The gvisor tier (docs/gvisor.md): the user-space-kernel route. Each
 * sandbox is a runsc sandbox (Debian's `runsc`, --platform=ptrace) whose
 * init is the paddock agent; the workload's system calls are served by the
 * Sentry, a kernel written in Go running as an ordinary host process.
 *
 * Host side per sandbox, all under <rundir>/sandboxes/<id>:
 *   root/      mount point: the template's tree with its grafts (/usr, ...),
 *              bound read-only in a private mount namespace runsc starts in
 *              (so nothing is mounted in the host's namespace and it all goes
 *              with runsc's last process); runsc's --overlay2=root:memory
 *              puts a writable layer over it in the Sentry's memory
 *   sock/      a small tmpfs (host namespace), bound into the sandbox as
 *              /.paddock/sock: the agent binds agent.sock there itself
 *              (--host-uds=create) and the host connects to it as to a
 *              container tier's agent; why not stdio: docs/gvisor.md
 *   runsc/     runsc's --root (its state), runsc.log its logs
 *   bundle/    the OCI config.json paddock writes
 * The Sentry and the gofer run in the sandbox's cgroup ("work" leaf, runsc
 * with --ignore-cgroups): its limits are the sandbox's plus a headroom for
 * gVisor's own tasks and memory (GV_*_HEADROOM). The record keeps the Sentry
 * as the "agent" process. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "lib/sandbox.h"
#include "lib/template.h"
#include "lib/util.h"
#include "tiers/gvisor.h"
#include "tiers/gvisor_int.h"
#include "tiers/host.h"
#include "tiers/facts.h"
#include "net/sbnet.h"

/* What gVisor itself needs beside the workload's limits (docs/gvisor.md):
 * an idle sandbox is ~34 MB (Sentry + gofer) and 30-80 host tasks (Sentry
 * threads, gofer, ptrace stubs), and each workload process costs a
 * ptrace stub and Sentry threads: the host's pids limit is 2 * --pids +
 * GV_PIDS_HEADROOM. */
#define GV_MEMORY_HEADROOM (128ull << 20)
#define GV_PIDS_HEADROOM 256u
#define GV_START_TIMEOUT_MS 60000
#define GV_SOCK_TMPFS "size=64k,nr_inodes=16,mode=0700"
#define GV_IN_DIR "/.paddock"

static const char *const gv_caps[] = {
        /* Docker's default set: root inside can install packages into its
         * overlay, as on the container tier */
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID",
        "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP",
};

int pd_gvisor_runsc(char *buf, size_t size, struct pd_error *err)
{
        const char *e = getenv("PADDOCK_RUNSC");
        if (e && *e) {
                if (e[0] != '/' || access(e, X_OK) < 0)
                        return pd_error_setx(err, ENOENT, "the gvisor tier needs gVisor's runsc, not found at "
                                                          "PADDOCK_RUNSC='%s': install the Debian package "
                                                          "'runsc' (apt-get install runsc)", e);
                snprintf(buf, size, "%s", e);
                return 0;
        }
        static const char *const where[] = { "/usr/sbin/runsc", "/usr/bin/runsc", "/usr/local/bin/runsc" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(where); i++)
                if (access(where[i], X_OK) == 0) {
                        snprintf(buf, size, "%s", where[i]);
                        return 0;
                }
        return pd_error_setx(err, ENOENT, "the gvisor tier needs gVisor's runsc, which is not installed: "
                                          "install the Debian package 'runsc' (apt-get install runsc)");
}

static void sock_dir(const struct pd_sandbox *sb, char *buf, size_t size)
{
        snprintf(buf, size, "%s/sock", sb->dir);
}

static void set_socket_path(struct pd_sandbox *sb)
{
        snprintf(sb->socket_path, sizeof sb->socket_path, "%s/sock/agent.sock", sb->dir);
}

/* runsc's flags before the subcommand, the same for every call. */
static int global_args(const struct pd_sandbox *sb, const char *runsc, char **argv, char *store, size_t size)
{
        int n = snprintf(store, size, "%s/runsc%c--log=%s/runsc.log", sb->dir, 0, sb->dir);
        if (n < 0 || (size_t)n + 32 >= size)
                return -ENAMETOOLONG;
        int a = 0;
        argv[a++] = (char *)runsc;
        argv[a++] = "--root";
        argv[a++] = store;
        argv[a++] = store + strlen(store) + 1;
        /* chosen at create (gvisor_platform.c), kept in the record */
        char *plat = store + n + 1;
        snprintf(plat, 24, "--platform=%s", pd_gv(sb)->platform[0] ? pd_gv(sb)->platform : "ptrace");
        argv[a++] = plat;
        /* a network: runsc's netstack over the veth of the netns runsc
         * starts in (launch); none: loopback in the Sentry only */
        argv[a++] = pd_gv(sb)->net ? "--network=sandbox" : "--network=none";
        argv[a++] = "--host-uds=create";
        argv[a++] = "--overlay2=root:memory";
        argv[a++] = "--ignore-cgroups";
        return a;
}

/* Run runsc SUBCOMMAND ARGS... and wait; its stderr (the last of it) goes
 * into the error message when it fails. */
int pd_gv_runsc_call(struct pd_sandbox *sb, const char *const *sub, int nsub, struct pd_error *err)
{
        char runsc[PATH_MAX], store[2 * PATH_MAX + 16];
        int r = pd_gvisor_runsc(runsc, sizeof runsc, err);
        if (r < 0)
                return r;
        char *argv[32];
        int a = global_args(sb, runsc, argv, store, sizeof store);
        if (a < 0)
                return pd_error_setx(err, ENAMETOOLONG, "sandbox path too long");
        for (int i = 0; i < nsub && a < (int)PD_ARRAY_SIZE(argv) - 1; i++)
                argv[a++] = (char *)sub[i];
        argv[a] = NULL;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return pd_error_set(err, errno, "pipe");
        pid_t pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                return pd_error_set(err, errno, "fork");
        }
        if (pid == 0) {
                int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(p[1], 2) < 0)
                        _exit(125);
                execv(runsc, argv);
                _exit(127);
        }
        close(p[1]);
        char out[512];
        size_t have = 0;
        for (;;) {
                char tmp[512];
                ssize_t n = read(p[0], tmp, sizeof tmp);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                /* keep the tail: runsc's last line says what failed */
                for (ssize_t i = 0; i < n; i++) {
                        if (have == sizeof out - 1) {
                                memmove(out, out + 1, have - 1);
                                have--;
                        }
                        out[have++] = tmp[i];
                }
        }
        close(p[0]);
        out[have] = '\0';
        while (have && (out[have - 1] == '\n' || out[have - 1] == ' '))
                out[--have] = '\0';
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return pd_error_set(err, errno, "wait for runsc");
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return pd_error_setx(err, EIO, "runsc %s failed: %s", sub[0], have ? out : "(no message)");
        return 0;
}

static int add_mount(json_t *mounts, const char *dst, const char *type, const char *src, const char *const *opts,
                     size_t nopts)
{
        json_t *m = json_object(), *o = json_array();
        for (size_t i = 0; i < nopts; i++)
                json_array_append_new(o, json_string(opts[i]));
        json_object_set_new(m, "destination", json_string(dst));
        json_object_set_new(m, "type", json_string(type));
        json_object_set_new(m, "source", json_string(src));
        json_object_set_new(m, "options", o);
        return json_array_append_new(mounts, m);
}

/* <dir>/bundle/config.json: the agent as the container's init. */
static int write_bundle(struct pd_sandbox *sb, const char *agent, const char *resolv, struct pd_error *err)
{
        char bdir[PATH_MAX + 16], root[PATH_MAX + 16], sock[PATH_MAX + 16], cfg[PATH_MAX + 32];
        snprintf(bdir, sizeof bdir, "%s/bundle", sb->dir);
        snprintf(root, sizeof root, "%s/root", sb->dir);
        sock_dir(sb, sock, sizeof sock);
        snprintf(cfg, sizeof cfg, "%s/config.json", bdir);
        if (mkdir(bdir, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", bdir);
        json_t *doc = json_object(), *proc = json_object(), *user = json_object(), *caps = json_object();
        json_t *args = json_pack("[s s s]", GV_IN_DIR "/agent", "--listen-path", GV_IN_DIR "/sock/agent.sock");
        json_t *env = json_pack("[s s]", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                "HOME=/root");
        json_t *capl = json_array();
        for (size_t i = 0; i < PD_ARRAY_SIZE(gv_caps); i++)
                json_array_append_new(capl, json_string(gv_caps[i]));
        static const char *const sets[] = { "bounding", "effective", "permitted" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(sets); i++)
                json_object_set(caps, sets[i], capl);
        json_decref(capl);
        json_object_set_new(user, "uid", json_integer(0));
        json_object_set_new(user, "gid", json_integer(0));
        json_object_set_new(proc, "terminal", json_false());
        json_object_set_new(proc, "user", user);
        json_object_set_new(proc, "args", args);
        json_object_set_new(proc, "env", env);
        json_object_set_new(proc, "cwd", json_string("/"));
        json_object_set_new(proc, "capabilities", caps);
        json_object_set_new(proc, "noNewPrivileges", json_true());
        /* The pids limit inside: the Sentry refuses a fork past it with
         * EAGAIN (RLIMIT_NPROC; root inside is exempt, as on Linux). The
         * host's pids cgroup only backs it up: every workload process costs
         * the Sentry host tasks too (a ptrace stub, threads), and a fork
         * the host refuses kills the Sentry (docs/gvisor.md). */
        json_object_set_new(proc, "rlimits", json_pack("[{s s s I s I}]", "type", "RLIMIT_NPROC", "hard",
                                                       (json_int_t)sb->spec.pids, "soft", (json_int_t)sb->spec.pids));
        json_object_set_new(doc, "ociVersion", json_string("1.0.2"));
        json_object_set_new(doc, "process", proc);
        json_object_set_new(doc, "root", json_pack("{s s s b}", "path", root, "readonly", 0));
        json_object_set_new(doc, "hostname", json_string("paddock"));
        json_t *mounts = json_array();
        static const char *const ro[] = { "rbind", "ro", "nosuid", "nodev" };
        static const char *const rw[] = { "rbind", "rw", "nosuid", "nodev", "noexec" };
        static const char *const sysopts[] = { "nosuid", "noexec", "nodev", "ro" };
        add_mount(mounts, "/proc", "proc", "proc", NULL, 0);
        add_mount(mounts, "/sys", "sysfs", "sysfs", sysopts, PD_ARRAY_SIZE(sysopts));
        add_mount(mounts, GV_IN_DIR "/agent", "bind", agent, ro, PD_ARRAY_SIZE(ro));
        add_mount(mounts, GV_IN_DIR "/sock", "bind", sock, rw, PD_ARRAY_SIZE(rw));
        if (resolv) {
                static const char *const rofile[] = { "bind", "ro", "nosuid", "nodev", "noexec" };
                add_mount(mounts, "/etc/resolv.conf", "bind", resolv, rofile, PD_ARRAY_SIZE(rofile));
        }
        json_object_set_new(doc, "mounts", mounts);
        /* With a network, the Sentry's netns is the one runsc starts in,
         * which holds the router's veth (launch), named by path: without
         * one, runsc would give the Sentry a new, empty one */
        json_t *ns = resolv ? json_pack("[{s s} {s s s s} {s s} {s s} {s s}]", "type", "pid", "type", "network",
                                        "path", "/proc/self/ns/net", "type", "ipc", "type", "uts", "type", "mount")
                            : json_pack("[{s s} {s s} {s s} {s s} {s s}]", "type", "pid", "type", "network", "type",
                                        "ipc", "type", "uts", "type", "mount");
        json_object_set_new(doc, "linux", json_pack("{s o}", "namespaces", ns));
        int r = json_dump_file(doc, cfg, JSON_COMPACT);
        json_decref(doc);
        if (r < 0)
                return pd_error_setx(err, EIO, "write '%s'", cfg);
        return 0;
}

/* In the child, before exec: a private mount namespace holding the
 * template's tree at <dir>/root, read-only. Async-signal-safe calls only
 * (the creator may be the threaded server). */
static int bind_ro(const char *src, const char *dst)
{
        if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return -1;
        return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

/* The template's top-level entries, read before the fork (the child may
 * not allocate): the child rebuilds the root's top level on a tmpfs and
 * binds each entry, because runsc creates the mount points of the spec's
 * mounts (/.paddock/...) in the root tree as host root, before it makes
 * the root read-only: never in a template's own directory. */
#define GV_MAX_TOP 64
struct gv_top {
        char name[256];
        char link[PATH_MAX];    /* a symlink's target; "" for a directory or file */
        bool dir;
};

struct gv_launch {
        char root[PATH_MAX + 16];
        struct gv_top top[GV_MAX_TOP];
        unsigned n_top;
        const struct pd_template *tpl;
        char graft_dst[PD_MAX_GRAFTS][PATH_MAX + 80];
        int cg_fds[PD_CG_MAX_CTRL];
        int n_cg;
        int log_fd;
        /* with a network: the child unshares its netns, says 'N' on
         * net_fd and waits for 'G' (the host has wired the veth) */
        bool net;
        int net_fd;
        const char *runsc;
        char **argv;
        /* a root stacked from layers (gvisor_root.c), or NULL: the tree
         * and grafts bound as above */
        const struct pd_gv_stack *stack;
};

/* a + b + c into out (truncated), async-signal-safe */
static void pd_strjoin3(char *out, size_t size, const char *a, const char *b, const char *c)
{
        size_t o = 0;
        for (const char *p = a; *p && o + 1 < size; p++)
                out[o++] = *p;
        for (const char *p = b; *p && o + 1 < size; p++)
                out[o++] = *p;
        for (const char *p = c; *p && o + 1 < size; p++)
                out[o++] = *p;
        out[o] = '\0';
}

static int read_top(const char *rootfs, struct gv_launch *l, struct pd_error *err)
{
        DIR *d = opendir(rootfs);
        if (!d)
                return pd_error_set(err, errno, "open template '%s'", rootfs);
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (l->n_top == GV_MAX_TOP) {
                        r = pd_error_setx(err, E2BIG, "template '%s' has more than %d top-level entries",
                                          rootfs, GV_MAX_TOP);
                        break;
                }
                struct gv_top *t = &l->top[l->n_top];
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                snprintf(t->name, sizeof t->name, "%s", de->d_name);
                t->link[0] = '\0';
                t->dir = S_ISDIR(st.st_mode);
                if (S_ISLNK(st.st_mode)) {
                        ssize_t n = readlinkat(dirfd(d), de->d_name, t->link, sizeof t->link - 1);
                        if (n <= 0)
                                continue;
                        t->link[n] = '\0';
                } else if (!t->dir && !S_ISREG(st.st_mode)) {
                        continue;       /* no devices, FIFOs or sockets from a template */
                }
                l->n_top++;
        }
        closedir(d);
        return r;
}

static void child(const struct gv_launch *l)
{
        /* the sandbox's cgroup first: runsc's Sentry and gofer inherit it */
        for (int i = 0; i < l->n_cg; i++)
                if (write(l->cg_fds[i], "0", 1) != 1)
                        _exit(121);
        if (setsid() < 0)
                _exit(122);
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(l->log_fd, 2) < 0)
                _exit(123);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            (!l->stack && mount("paddock-gvisor-root", l->root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0))
                _exit(124);
        /* runsc refuses --network=sandbox in what it takes for the root
         * netns: it tests for /proc/sys/net/core/rmem_default, which every
         * netns has on this kernel. A read-only empty tmpfs over
         * /proc/sys/net, in this mount namespace only, passes the test; the
         * netns is the sandbox's own, with the router's veth */
        if (l->net) {
                char c = 'N';
                if (unshare(CLONE_NEWNET) < 0 || write(l->net_fd, &c, 1) != 1 || read(l->net_fd, &c, 1) != 1 ||
                    c != 'G' || mount("paddock-gvisor-net", "/proc/sys/net", "tmpfs", MS_RDONLY | MS_NOSUID |
                                      MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1") < 0)
                        _exit(120);
        }
        if (l->stack) {
                static const char msg[] = "paddock: cannot build the sandbox's layered root (overlay)\n";
                if (pd_gv_stack_mount(l->stack, l->root) < 0) {
                        (void)!write(2, msg, sizeof msg - 1);
                        _exit(125);
                }
                execv(l->runsc, l->argv);
                _exit(127);
        }
        char src[PATH_MAX + 300], dst[PATH_MAX + 300];
        for (unsigned i = 0; i < l->n_top; i++) {
                const struct gv_top *t = &l->top[i];
                pd_strjoin3(dst, sizeof dst, l->root, "/", t->name);
                if (t->link[0]) {
                        if (symlink(t->link, dst) < 0)
                                _exit(124);
                        continue;
                }
                pd_strjoin3(src, sizeof src, l->tpl->rootfs, "/", t->name);
                int fd = t->dir ? mkdir(dst, 0755) : open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                if (fd < 0 || (!t->dir && close(fd) < 0) || bind_ro(src, dst) < 0)
                        _exit(124);
        }
        if (mount(NULL, l->root, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0)
                _exit(124);
        for (unsigned i = 0; i < l->tpl->n_grafts; i++)
                if (bind_ro(l->tpl->grafts[i].source, l->graft_dst[i]) < 0)
                        _exit(126);
        execv(l->runsc, l->argv);
        _exit(127);
}

/* Wait for the agent's socket to accept: the agent binds it once the Sentry
 * has booted. Returns 0, or -errno if the Sentry died or time ran out. */
static int wait_agent(struct pd_sandbox *sb, int ino, struct pd_error *err)
{
        uint64_t end = pd_now_ms() + GV_START_TIMEOUT_MS;
        for (;;) {
                int fd = pd_host_connect(sb, NULL);
                if (fd >= 0) {
                        close(fd);
                        return 0;
                }
                uint64_t now = pd_now_ms();
                if (now > end)
                        return pd_error_setx(err, ETIMEDOUT, "the agent in the gVisor sandbox did not start "
                                                             "(see %s/runsc.log)", sb->dir);
                struct pollfd p[2] = { { .fd = ino, .events = POLLIN }, { .fd = sb->agent_pidfd, .events = POLLIN } };
                /* a socket that exists but does not listen yet: look again soon */
                int wait = access(sb->socket_path, F_OK) == 0 ? 5 : (int)(end - now);
                if (poll(p, 2, wait) < 0 && errno != EINTR)
                        return pd_error_set(err, errno, "poll");
                if (p[1].revents)
                        return pd_error_setx(err, ECHILD, "the gVisor sandbox exited while starting "
                                                          "(see %s/runsc.log)", sb->dir);
                char buf[4096];
                while (read(ino, buf, sizeof buf) > 0)
                        ;
        }
}

/* The last line of runsc's log, for an error message. */
static void log_tail(const struct pd_sandbox *sb, char *out, size_t size)
{
        char p[PATH_MAX + 16], buf[1024];
        snprintf(p, sizeof p, "%s/runsc.log", sb->dir);
        out[0] = '\0';
        _pd_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        off_t off = st.st_size > (off_t)sizeof buf - 1 ? st.st_size - (off_t)sizeof buf + 1 : 0;
        ssize_t n = pread(fd, buf, sizeof buf - 1, off);
        if (n <= 0)
                return;
        buf[n] = '\0';
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                buf[--n] = '\0';
        char *nl = strrchr(buf, '\n');
        snprintf(out, size, "%s", nl ? nl + 1 : buf);
}

static int read_pid(struct pd_sandbox *sb, pid_t *out, struct pd_error *err)
{
        char p[PATH_MAX + 8], buf[32];
        snprintf(p, sizeof p, "%s/pid", sb->dir);
        ssize_t n = pd_read_file_at(AT_FDCWD, p, buf, sizeof buf);
        long v = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (v <= 1)
                return pd_error_setx(err, EIO, "runsc wrote no sandbox pid to '%s'", p);
        *out = (pid_t)v;
        return 0;
}

/* cgroup.procs of every hierarchy for runsc ("all": runsc joins nothing by
 * itself, so the unsplit ones — cpu, freezer — are opened too, at the
 * sandbox level; memory and pids at the "work" leaf). */
static int open_procs(const struct pd_cgroup *cg, int *fds, int max, struct pd_error *err)
{
        return pd_cgroup_open_procs(cg, "work", true, fds, max, err);
}

/* Fork the child that builds the root in a private mount namespace and
 * execs `runsc run --detach` (or `runsc restore` from the checkpoint in
 * directory image); wait for it, then for the agent. */
static int launch(struct pd_sandbox *sb, const struct pd_template *tpl, const char *runsc, const char *root,
                  const char *sock, const char *image, struct pd_sbnet *net, struct pd_error *err)
{
        /* large (the top-level list): not on the stack of a server thread */
        _pd_cleanup_free_ struct gv_launch *l = calloc(1, sizeof *l);
        if (!l)
                return pd_error_set(err, ENOMEM, "allocate");
        int r;
        l->tpl = tpl;
        l->runsc = runsc;
        l->log_fd = -1;
        snprintf(l->root, sizeof l->root, "%s", root);
        /* large too (layer paths): freed after the child is done */
        _pd_cleanup_free_ struct pd_gv_stack *stack = NULL;
        if (pd_gv_stacked(tpl)) {
                if (!(stack = calloc(1, sizeof *stack)))
                        return pd_error_set(err, ENOMEM, "allocate");
                if ((r = pd_gv_stack_prepare(sb, tpl, root, stack, err)) < 0) {
                        pd_gv_stack_close(stack);
                        return r;
                }
                l->stack = stack;
        } else if ((r = read_top(tpl->rootfs, l, err)) < 0) {
                return r;
        }
        for (unsigned i = 0; i < tpl->n_grafts; i++)
                snprintf(l->graft_dst[i], sizeof l->graft_dst[i], "%s/%s", root, tpl->grafts[i].target);
        char store[2 * PATH_MAX + 16], pidf[PATH_MAX + 8], bundle[PATH_MAX + 16];
        char *argv[32];
        int a = global_args(sb, runsc, argv, store, sizeof store);
        if (a < 0)
                return pd_error_setx(err, ENAMETOOLONG, "sandbox path too long");
        snprintf(pidf, sizeof pidf, "%s/pid", sb->dir);
        unlink(pidf);   /* a restore's: not the Sentry that was */
        snprintf(bundle, sizeof bundle, "%s/bundle", sb->dir);
        if (image) {
                argv[a++] = "restore";
                argv[a++] = "--image-path";
                argv[a++] = (char *)image;
        } else
                argv[a++] = "run";
        argv[a++] = "--detach";
        argv[a++] = "--bundle";
        argv[a++] = bundle;
        argv[a++] = "--pid-file";
        argv[a++] = pidf;
        argv[a++] = sb->id;
        argv[a] = NULL;
        l->argv = argv;
        char logp[PATH_MAX + 16];
        snprintf(logp, sizeof logp, "%s/runsc.log", sb->dir);
        _pd_cleanup_close_ int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (logfd < 0)
                return pd_error_set(err, errno, "create '%s'", logp);
        l->log_fd = logfd;
        if ((r = open_procs(&pd_host(sb)->cg, l->cg_fds, (int)PD_ARRAY_SIZE(l->cg_fds), err)) < 0)
                return r;
        l->n_cg = r;
        _pd_cleanup_close_ int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ino < 0 || inotify_add_watch(ino, sock, IN_CREATE) < 0) {
                r = pd_error_set(err, errno, "inotify on '%s'", sock);
                goto out_fds;
        }
        int nsync[2] = { -1, -1 };
        l->net = net != NULL;
        if (l->net && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nsync) < 0) {
                r = pd_error_set(err, errno, "socketpair");
                goto out_fds;
        }
        l->net_fd = nsync[1];
        pid_t pid = fork();
        if (pid < 0) {
                r = pd_error_set(err, errno, "fork");
                if (l->net) {
                        close(nsync[0]);
                        close(nsync[1]);
                }
                goto out_fds;
        }
        if (pid == 0)
                child(l);
        if (l->net) {
                /* its veth, addresses, routes and rules, in the netns it
                 * just made; then it goes on (a failure: it exits) */
                close(nsync[1]);
                char c = 0;
                if (read(nsync[0], &c, 1) != 1 || c != 'N')
                        r = pd_error_setx(err, EIO, "the gVisor sandbox's launcher did not make its network namespace");
                else if ((r = pd_sbnet_attach(sb, net, pid, err)) == 0 && write(nsync[0], "G", 1) != 1)
                        r = pd_error_set(err, errno, "start the gVisor sandbox's launcher");
                close(nsync[0]);
                if (r < 0) {
                        kill(pid, SIGKILL);
                        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                        goto out_fds;
                }
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                char tail[400];
                log_tail(sb, tail, sizeof tail);
                r = pd_error_setx(err, EIO, "runsc run failed (status %d%s): %s", code,
                                  code >= 120 && code <= 127 ? ": its setup failed before runsc ran" : "",
                                  tail[0] ? tail : "(runsc logged nothing)");
                goto out_fds;
        }
        if ((r = read_pid(sb, &sb->agent_pid, err)) < 0)
                goto out_fds;
        sb->agent_start = pd_proc_starttime(sb->agent_pid);
        sb->agent_pidfd = (int)syscall(SYS_pidfd_open, sb->agent_pid, 0);
        if (sb->agent_pidfd < 0 || pd_proc_starttime(sb->agent_pid) != sb->agent_start) {
                r = pd_error_setx(err, ESRCH, "the gVisor sandbox exited at once (see %s/runsc.log)", sb->dir);
                goto out_fds;
        }
        if ((r = pd_sandbox_save(sb, err)) < 0)
                goto out_fds;
        /* restored: the agent let go of its socket before the checkpoint
         * (gvisor_ckpt.c); it binds it again on SIGUSR2 */
        if (image) {
                const char *sub[] = { "kill", sb->id, "USR2" };
                if ((r = pd_gv_runsc_call(sb, sub, 3, err)) < 0)
                        goto out_fds;
        }
        if ((r = wait_agent(sb, ino, err)) < 0)
                goto out_fds;
        r = 0;
out_fds:
        for (int i = 0; i < l->n_cg; i++)
                close(l->cg_fds[i]);
        if (stack)
                pd_gv_stack_close(stack);
        return r;
}

int pd_gv_create(struct pd_sandbox *sb, const char *image, struct pd_error *err)
{
        int r;
        char runsc[PATH_MAX], agent[PATH_MAX];
        if ((r = pd_gvisor_runsc(runsc, sizeof runsc, err)) < 0)
                return r;
        if ((r = pd_gvisor_platform(runsc, pd_gv(sb)->platform, sizeof pd_gv(sb)->platform, err)) < 0)
                return r;
        if (sb->spec.n_volumes)
                return pd_error_setx(err, ENOTSUP, "the gvisor tier refuses volumes: gVisor's gofer does the "
                                                   "sandbox's file I/O as host root, so root inside would be "
                                                   "host root on a volume's files (docs/gvisor.md)");
        if (sb->spec.net != PD_NET_NONE && image)
                return pd_error_setx(err, ENOTSUP, "the gvisor tier cannot restore a checkpoint into a sandbox "
                                                   "with a network (docs/gvisor.md)");
        if (sb->spec.policy_file)
                return pd_error_setx(err, ENOTSUP, "the gvisor tier takes no policy file (that is the supervised "
                                                   "tier's)");
        struct pd_template tpl;
        const char *tname = sb->spec.template_name, *tdir = sb->spec.template_dir;
        char root_name[65] = "", root_dir[PATH_MAX] = "";
        /* a gvisor snapshot or fork: its checkpoint over the tree its
         * source started from */
        if (image && (r = pd_gv_image_root(sb, image, root_name, root_dir, err)) < 0)
                return r;
        if (image) {
                sb->spec.template_name = root_dir[0] ? NULL : root_name;
                sb->spec.template_dir = root_dir[0] ? root_dir : NULL;
        }
        struct pd_gv_data *g = pd_gv(sb);
        snprintf(g->root_name, sizeof g->root_name, "%s",
                 sb->spec.template_dir ? "" : sb->spec.template_name ? sb->spec.template_name : "base");
        snprintf(g->root_dir, sizeof g->root_dir, "%s", sb->spec.template_dir ? sb->spec.template_dir : "");
        r = pd_template_resolve(sb->state, &sb->spec, &tpl, err);
        sb->spec.template_name = tname;
        sb->spec.template_dir = tdir;
        if (r < 0)
                return r;
        /* a container or supervised snapshot, an image template: its layers
         * must outlive it (pd_snapshot_delete checks), as on those tiers.
         * Under a gvisor snapshot (template_buf names it) that snapshot is
         * what it uses. */
        if (pd_gv_stacked(&tpl) && (!sb->template_buf[0] || !strcmp(sb->template_buf, tpl.name))) {
                snprintf(sb->template_buf, sizeof sb->template_buf, "%s", tpl.name);
                if ((r = pd_snapshot_use(sb->state, &tpl, sb->id, err)) < 0)
                        return r;
        }
        if ((r = pd_agent_path(agent, sizeof agent, err)) < 0)
                return r;
        set_socket_path(sb);
        if (mkdir(sb->dir, 0700) < 0)
                return pd_error_set(err, errno, "create sandbox dir '%s'", sb->dir);
        sb->dirfd = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sb->dirfd < 0)
                return pd_error_set(err, errno, "open '%s'", sb->dir);
        struct pd_host_data *h = pd_host(sb);
        if ((r = pd_cgroup_init(&h->cg, sb->state->instance, sb->id, err)) < 0)
                return r;
        h->have_cgroup = true;
        struct pd_cgroup_limits lim = { sb->spec.memory_bytes + GV_MEMORY_HEADROOM, 2 * sb->spec.pids + GV_PIDS_HEADROOM,
                                        sb->spec.millicpus, 0 };
        if ((r = pd_cgroup_create(&h->cg, &lim, err)) < 0)
                return r;
        /* the writable layer lives in the Sentry's memory (overlay2
         * root:memory): it is bounded by --memory, not --disk */
        sb->writable_bytes = sb->spec.memory_bytes;
        char sock[PATH_MAX + 16], root[PATH_MAX + 16];
        sock_dir(sb, sock, sizeof sock);
        snprintf(root, sizeof root, "%s/root", sb->dir);
        if (mkdir(sock, 0700) < 0 || mkdir(root, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", sock);
        /* a tiny tmpfs: the gofer writes here as host root for the agent
         * (--host-uds=create), so it must not be able to fill /run */
        if (mount("paddock-gvisor", sock, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, GV_SOCK_TMPFS) < 0)
                return pd_error_set(err, errno, "mount a tmpfs on '%s'", sock);
        struct pd_sbnet net = { 0 };
        pd_gv(sb)->net = sb->spec.net != PD_NET_NONE;
        /* a slot in the router first: the sandbox's resolv.conf names the
         * router's address */
        if (pd_gv(sb)->net && (r = pd_sbnet_prepare(sb, &net, err)) < 0) {
                pd_sbnet_close(&net);
                return r;
        }
        if ((r = pd_sandbox_save(sb, err)) == 0 && (r = write_bundle(sb, agent, net.reserved ? net.resolv_path : NULL,
                                                                     err)) == 0)
                r = launch(sb, &tpl, runsc, root, sock, image, net.reserved ? &net : NULL, err);
        if (r < 0 && net.reserved)
                (void)pd_sbnet_release(sb->state, sb->id, NULL);
        pd_sbnet_close(&net);
        return r;
}

int pd_gv_relaunch(struct pd_sandbox *sb, const char *image, struct pd_error *err)
{
        char runsc[PATH_MAX], sock[PATH_MAX + 16], root[PATH_MAX + 16];
        int r = pd_gvisor_runsc(runsc, sizeof runsc, err);
        if (r < 0)
                return r;
        struct pd_gv_data *g = pd_gv(sb);
        struct pd_spec spec = sb->spec;
        spec.template_name = g->root_dir[0] ? NULL : g->root_name[0] ? g->root_name : "base";
        spec.template_dir = g->root_dir[0] ? g->root_dir : NULL;
        struct pd_template tpl;
        if ((r = pd_template_resolve(sb->state, &spec, &tpl, err)) < 0)
                return r;
        sock_dir(sb, sock, sizeof sock);
        snprintf(root, sizeof root, "%s/root", sb->dir);
        return launch(sb, &tpl, runsc, root, sock, image, NULL, err);
}

static void gvisor_save(const struct pd_sandbox *sb, struct pd_record *rec)
{
        pd_host_save(sb, rec);
        const struct pd_gv_data *g = pd_gv(sb);
        if (g->platform[0])
                pd_record_add(rec, "gv_platform", "%s", g->platform);
        if (g->net)
                pd_record_add(rec, "gv_net", "1");
        if (g->root_dir[0])
                pd_record_add(rec, "gv_root_dir", "%s", g->root_dir);
        else if (g->root_name[0])
                pd_record_add(rec, "gv_root", "%s", g->root_name);
}

static int gvisor_create(struct pd_sandbox *sb, struct pd_error *err)
{
        char image[PATH_MAX];
        int r = pd_gv_snapshot_image(sb, image, sizeof image, err);
        if (r < 0)
                return r;
        return pd_gv_create(sb, r ? image : NULL, err);
}

static int gvisor_connect(struct pd_sandbox *sb, struct pd_error *err)
{
        set_socket_path(sb);
        return pd_host_connect(sb, err);
}

static int gvisor_pause(struct pd_sandbox *sb, struct pd_error *err)
{
        const char *sub[] = { "pause", sb->id };
        return pd_gv_runsc_call(sb, sub, 2, err);
}

int pd_gv_resume_memory(struct pd_sandbox *sb, struct pd_error *err)
{
        const char *sub[] = { "resume", sb->id };
        return pd_gv_runsc_call(sb, sub, 2, err);
}

void pd_gv_umount_sock(const struct pd_sandbox *sb)
{
        char sock[PATH_MAX + 16];
        sock_dir(sb, sock, sizeof sock);
        while (umount2(sock, MNT_DETACH) == 0)
                ;
}

static int gvisor_destroy(struct pd_sandbox *sb, struct pd_error *err)
{
        /* The Sentry first (the pidfd pins it), then whatever else is in
         * the cgroup (the gofer, the ptrace stubs): pd_host_release kills
         * and removes it. runsc's state is in <dir>/runsc, removed with
         * the dir; its mounts were in the namespace that died with it. */
        pd_host_kill_agent(sb);
        if (pd_host(sb)->have_cgroup)
                (void)pd_cgroup_freeze(&pd_host(sb)->cg, false, NULL);
        pd_gv_umount_sock(sb);
        pd_gv_forget(sb);
        /* the netns died with runsc's processes; the router's slot, rules
         * and netd entry go here (none: nothing to do) */
        struct pd_error nerr;
        int nr = pd_sbnet_release(sb->state, sb->id, &nerr);
        int r = pd_host_release(sb, err);
        if (nr < 0 && r >= 0) {
                if (err)
                        *err = nerr;
                r = nr;
        }
        return r;
}

static void gvisor_load(struct pd_sandbox *sb, const struct pd_record *rec)
{
        pd_host_load(sb, rec);
        struct pd_gv_data *g = pd_gv(sb);
        (void)pd_record_get(rec, "gv_root", g->root_name, sizeof g->root_name);
        (void)pd_record_get(rec, "gv_root_dir", g->root_dir, sizeof g->root_dir);
        (void)pd_record_get(rec, "gv_platform", g->platform, sizeof g->platform);
        char net[4] = "";
        g->net = pd_record_get(rec, "gv_net", net, sizeof net) >= 0 && net[0] == '1';
        set_socket_path(sb);
}

/* Sock tmpfs mounts a crash left under this state dir's runtime dir (their
 * sandbox dirs had no record): before pd_gc's sweep, nothing else
 * unmounts them. And the checkpoint images of <state>/gvisor: every
 * sandbox of the state dir is destroyed by now (a paused one removes its
 * own), so what is left there is a fork's or a pause's that a crash cut
 * short. Snapshots are templates: not touched. */
static int gvisor_gc(struct pd_state *st, struct pd_error *err)
{
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (f) {
                char line[4096], prefix[PATH_MAX + 16];
                int pl = snprintf(prefix, sizeof prefix, "%s/sandboxes/", st->rundir);
                while (fgets(line, sizeof line, f)) {
                        char mp[PATH_MAX];
                        if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strncmp(mp, prefix, (size_t)pl) &&
                            strstr(line, " - tmpfs paddock-gvisor "))
                                (void)umount2(mp, MNT_DETACH);
                }
                fclose(f);
        }
        char images[PATH_MAX + 16];
        snprintf(images, sizeof images, "%s/gvisor", st->dir);
        (void)pd_rm_rf(images, NULL);
        return pd_host_gc(st, err);
}

static void gvisor_describe(const struct pd_sandbox *sb, struct pd_tier_info *out)
{
        /* gVisor's platform: how the Sentry intercepts system calls */
        snprintf(out->accel, sizeof out->accel, "%s", pd_gv(sb)->platform[0] ? pd_gv(sb)->platform : "ptrace");
}

const struct pd_tier_ops pd_tier_gvisor = {
        .name = "gvisor",
        .isolates = PD_ISOLATES_GVISOR,
        .host_check = pd_gvisor_host_check,
        .caps = PD_TIER_PAUSE_DISK | PD_TIER_SNAPSHOT_MEMORY,
        .data_size = sizeof(struct pd_gv_data),
        .save = gvisor_save,
        .load = gvisor_load,
        .close = pd_host_close,
        .gc = gvisor_gc,
        .describe = gvisor_describe,
        .net_info = pd_host_net_info,
        .net_update = pd_host_net_update,
        .create = gvisor_create,
        .connect = gvisor_connect,
        .pause = gvisor_pause,
        .pause_to_disk = pd_gv_pause_to_disk,
        .resume = pd_gv_resume,
        .snapshot = pd_gv_snapshot,
        .fork = pd_gv_fork,
        .destroy = gvisor_destroy,
        .stats = pd_host_stats,
        .adopt = pd_gv_adopt,
};
