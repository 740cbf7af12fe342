/* The process tier (DESIGN §1, docs/security.md "`process` tier"): for hosts
 * that forbid namespaces (an unprivileged Docker container, a Kubernetes
 * pod). The agent and everything it starts run in the host's namespaces,
 * enclosed by Landlock, the container tier's seccomp allowlist (minus inet
 * sockets, SysV IPC, POSIX message queues, bind() and unix sockets other
 * than stream and seqpacket pairs), rlimits, no_new_privs, one host uid of its own
 * (when paddock runs as root) and a cgroup when one can be made.
 *
 * There is no mount namespace: the sandbox's home, working directory and
 * temporary directory live in its workspace, <state dir>/workspaces/<id>,
 * and the agent (--home) maps /home/user and /root onto it.
 *
 * Start sequence (parent = paddock run or the server, child = the agent):
 *   parent: sandbox dir, uid, cgroups, record, workspace, Landlock ruleset,
 *           seccomp filter, agent socket, clone3 (no namespaces)
 *   child:  waits for the parent's go-ahead
 *   parent: child -> agent cgroup, Landlock audit reader (lsm_audit.h,
 *           root and ABI >= 7), go-ahead
 *   child:  setsid, fds, drop to the sandbox's uid, rlimits, no_new_privs,
 *           Landlock (logging denials after exec too), seccomp,
 *           exec paddock-agent --home WORKSPACE
 *   parent: sees the sync socket close (exec happened) or an error record. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "jail/caps.h"
#include "jail/fds.h"
#include "tiers/host.h"
#include "jail/cgroup.h"
#include "jail/landlock.h"
#include "jail/lsm_audit.h"
#include "lib/sandbox.h"
#include "jail/seccomp-policy.h"
#include "lib/trace.h"
#include "lib/util.h"
#include "tiers/facts.h"

/* Supplementary group of every process-tier sandbox uid: the one group
 * allowed to search (never list) the state dir, so a sandbox can reach its
 * own workspace below it. Outside every uid range (they start at
 * PD_UID_BASE). */
#define PD_WS_GID (PD_UID_BASE - 1)

struct proc_data {
        char workspace[PATH_MAX];
        struct pd_landlock_info ll;
        bool no_cgroup;
        char no_cgroup_why[160];
        struct pd_lsm_audit audit;      /* the Landlock audit reader (lsm_audit.h) */
};

struct child_args {
        struct pd_sandbox *sb;
        int sync_fd, listen_fd, agent_fd, ruleset_fd;
        unsigned ll_flags;              /* landlock_restrict_self() flags */
        int cg_fds[PD_CG_MAX_CTRL];
        int n_cg;
        bool root;
        uid_t uid;
        struct pd_bpf filter;
        const char *workspace;
        pid_t parent;
};

/* ---- child side: no malloc, no stdio, errors go back on sync_fd ---- */

static _Noreturn void child_fail(struct child_args *a, const struct pd_error *e)
{
        (void)pd_write_all(a->sync_fd, e, sizeof *e);
        _exit(125);
}

/* Root: give up every capability for good. Bounding set first (dropping
 * needs CAP_SETPCAP, which setuid is about to take away), then the ids;
 * leaving uid 0 clears the permitted and effective sets. */
static int drop_to_uid(uid_t uid, struct pd_error *err)
{
        for (int c = 0; c < 64; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return pd_error_set(err, errno, "drop capability %d from the bounding set", c);
        gid_t g = PD_WS_GID;
        /* Raw syscalls: glibc's set*id() in a process it believes has other
         * threads (a server's, copied without them) waits for them forever. */
        if (syscall(SYS_setgroups, 1, &g) < 0)
                return pd_error_set(err, errno, "setgroups");
        if (syscall(SYS_setresgid, uid, uid, uid) < 0)
                return pd_error_set(err, errno, "setresgid %u", (unsigned)uid);
        if (syscall(SYS_setresuid, uid, uid, uid) < 0)
                return pd_error_set(err, errno, "setresuid %u", (unsigned)uid);
        return 0;
}

static _Noreturn void child_main(struct child_args *a)
{
        struct pd_error err = { 0 };
        int needed[4 + PD_CG_MAX_CTRL] = { a->sync_fd, a->listen_fd, a->agent_fd, a->ruleset_fd };
        for (int i = 0; i < a->n_cg; i++)
                needed[4 + i] = a->cg_fds[i];
        if (pd_fds_close_except(needed, 4 + a->n_cg) < 0) {
                pd_error_set(&err, errno, "close inherited fds");
                child_fail(a, &err);
        }
        char go;
        ssize_t n;
        do
                n = read(a->sync_fd, &go, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1 || go != 'G') {
                pd_error_setx(&err, ECANCELED, "host aborted the start");
                child_fail(a, &err);
        }
        if (setsid() < 0) {
                pd_error_set(&err, errno, "setsid");
                child_fail(a, &err);
        }
        /* fds: 0-2 /dev/null, 3 the agent socket, 4.. cgroup.procs of the
         * workload; all else CLOEXEC (sync_fd closes at exec: the parent's
         * signal that the exec happened; the ruleset fd is CLOEXEC too). */
        /* Whatever the caller of paddock left open without CLOEXEC must
         * not reach the sandbox: the agent gets 0-2, its socket and the
         * workload's cgroup fds, nothing else. */
        int *keep[] = { &a->agent_fd, &a->sync_fd, &a->ruleset_fd };
        int r = pd_fds_for_agent(a->listen_fd, a->cg_fds, a->n_cg, keep, 3);
        if (r < 0) {
                pd_error_set(&err, -r, "arrange the agent's fds");
                child_fail(a, &err);
        }
        if (a->root && drop_to_uid(a->uid, &err) < 0)
                child_fail(a, &err);
        /* After the uid switch: a credential change resets the parent-death
         * signal. A parent gone before this point shows in getppid(). */
        if (a->sb->die_with_parent) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != a->parent)
                        _exit(125);
        }
        if (pd_rlimits_apply(&err) < 0)
                child_fail(a, &err);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                pd_error_set(&err, errno, "set no_new_privs");
                child_fail(a, &err);
        }
        /* Landlock before seccomp: the filter denies landlock_*() (the
         * domain is ours to set); both need no_new_privs. */
        if ((r = pd_lsm_audit_restrict(a->ruleset_fd, a->ll_flags)) < 0) {
                pd_error_set(&err, -r, "enforce the Landlock ruleset");
                child_fail(a, &err);
        }
        if ((r = pd_seccomp_install(&a->filter)) < 0) {
                pd_error_set(&err, -r, "install seccomp filter");
                child_fail(a, &err);
        }
        r = pd_fds_exec_agent(a->agent_fd, a->n_cg, "--home", a->workspace);
        pd_error_set(&err, -r, "execute paddock-agent");
        child_fail(a, &err);
}

/* ---- parent side ---- */

static void workspace_path(const struct pd_sandbox *sb, char *buf, size_t size)
{
        snprintf(buf, size, "%s/workspaces/%s", sb->state->dir, sb->id);
}



/* May the sandbox's uid (member of PD_WS_GID) search directory fd? */
static bool searchable(const struct stat *st)
{
        return (st->st_mode & S_IXOTH) || (st->st_gid == PD_WS_GID && (st->st_mode & S_IXGRP));
}

/* The sandbox's uid must be able to reach its workspace by path (HOME and
 * the cwd are paths): the state dir, usually 0700 root, becomes group
 * PD_WS_GID with group search only (0710); every ancestor above it must
 * already be searchable by others. Landlock still denies the sandbox
 * everything in the state dir but its own workspace. */
static int open_path_to_workspaces(struct pd_sandbox *sb, struct pd_error *err)
{
        const char *dir = sb->state->dir;
        struct stat st;
        char up[PATH_MAX];
        snprintf(up, sizeof up, "%s", dir);
        for (char *slash = strrchr(up, '/'); slash; slash = strrchr(up, '/')) {
                *slash = '\0';
                const char *p = up[0] ? up : "/";
                if (stat(p, &st) < 0)
                        return pd_error_set(err, errno, "stat '%s'", p);
                if (!(st.st_mode & S_IXOTH))
                        return pd_error_setx(err, EACCES,
                                             "the process tier's sandboxes cannot reach their workspaces under '%s': "
                                             "'%s' (mode %04o) is not searchable by other users; use a --state-dir "
                                             "whose parent directories are (e.g. /var/lib/paddock)",
                                             dir, p, st.st_mode & 07777);
                if (!up[0])
                        break;
        }
        if (fstat(sb->state->dirfd, &st) < 0)
                return pd_error_set(err, errno, "stat '%s'", dir);
        if (!searchable(&st)) {
                if (st.st_uid != 0)
                        return pd_error_setx(err, EACCES, "state dir '%s' is not root's and not searchable by "
                                             "the sandbox's uid", dir);
                int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return pd_error_set(err, errno, "open '%s'", dir);
                int r = 0;
                if (fchown(fd, (uid_t)-1, PD_WS_GID) < 0 || fchmod(fd, (st.st_mode & 07700) | 0010) < 0)
                        r = pd_error_set(err, errno, "let sandboxes search the state dir '%s'", dir);
                close(fd);
                if (r < 0)
                        return r;
        }
        if (mkdirat(sb->state->dirfd, "workspaces", 0710) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/workspaces'", dir);
        if (fchownat(sb->state->dirfd, "workspaces", 0, PD_WS_GID, AT_SYMLINK_NOFOLLOW) < 0 ||
            fchmodat(sb->state->dirfd, "workspaces", 0710, 0) < 0)
                return pd_error_set(err, errno, "set owner of '%s/workspaces'", dir);
        return 0;
}

static int make_workspace(struct pd_sandbox *sb, struct proc_data *pd, bool root, uid_t uid,
                          struct pd_error *err)
{
        int r;
        if (root) {
                if ((r = open_path_to_workspaces(sb, err)) < 0)
                        return r;
        } else if (mkdirat(sb->state->dirfd, "workspaces", 0700) < 0 && errno != EEXIST) {
                return pd_error_set(err, errno, "create '%s/workspaces'", sb->state->dir);
        }
        workspace_path(sb, pd->workspace, sizeof pd->workspace);
        if (mkdir(pd->workspace, 0700) < 0)
                return pd_error_set(err, errno, "create workspace '%s'", pd->workspace);
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s/.tmp", pd->workspace);
        if (mkdir(tmp, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        if (root && (chown(tmp, uid, uid) < 0 || chown(pd->workspace, uid, uid) < 0))
                return pd_error_set(err, errno, "give workspace '%s' to uid %u", pd->workspace, (unsigned)uid);
        return 0;
}


/* What this tier adds to the sandbox's record (beside the common one). */
static int save_info(struct pd_sandbox *sb, struct proc_data *pd, struct pd_error *err)
{
        struct pd_record rec;
        pd_record_init(&rec);
        pd_record_add(&rec, "workspace", "%s", pd->workspace);
        pd_record_add(&rec, "landlock_abi", "%d", pd->ll.abi);
        pd_record_add(&rec, "landlock_weaker", "%s", pd->ll.weaker[0] ? pd->ll.weaker : "none");
        pd_record_add(&rec, "cgroup", "%s", pd->no_cgroup ? pd->no_cgroup_why : "yes");
        pd_record_add(&rec, "uid", "%u", pd_host(sb)->have_uids ? pd_host(sb)->uids.base : (unsigned)geteuid());
        /* Landlock denials in the audit log: "yes", or "no (why)". The
         * reader's pid and start time are what teardown and gc stop. */
        if (pd->audit.status[0])        /* absent until the reader's fate is known */
                pd_record_add(&rec, "lsm_audit", "%s", pd->audit.status);
        if (pd->audit.pid > 0) {
                pd_record_add(&rec, "lsm_audit_pid", "%d", (int)pd->audit.pid);
                pd_record_add(&rec, "lsm_audit_start", "%llu", (unsigned long long)pd->audit.start);
        }
        return pd_record_write(sb->dirfd, "process", &rec, err);
}

static int process_create(struct pd_sandbox *sb, struct pd_error *err)
{
        struct child_args a = { .sb = sb, .sync_fd = -1, .listen_fd = -1, .agent_fd = -1, .ruleset_fd = -1 };
        int sync[2] = { -1, -1 };
        int r;
        bool root = geteuid() == 0;
        if (sb->spec.net != PD_NET_NONE)
                return pd_error_setx(err, ENOTSUP,
                                     "the process tier shares the host's network namespace, so it runs with "
                                     "network none only (use the container or supervised tier for open or policy)");
        struct proc_data *pd = calloc(1, sizeof *pd);
        if (!pd)
                return pd_error_set(err, ENOMEM, "allocate sandbox");
        pd_host(sb)->priv = pd;

        if (sb->spec.n_volumes > 0)
                return pd_error_setx(err, ENOTSUP, "the process tier has no volumes (no mount namespace); "
                                     "put files in the workspace instead");
        /* An image's tree cannot become this sandbox's root: that needs a
         * chroot or pivot_root, so namespaces, which this tier exists to do
         * without; Landlock confines paths but resolves them in the host's
         * root (docs/templates.md). */
        if (sb->spec.template_dir || (sb->spec.template_name && strcmp(sb->spec.template_name, "base")))
                return pd_error_setx(err, ENOTSUP, "the process tier runs on the host's own system paths "
                                     "(template 'base' only): an image or template tree would have to become "
                                     "the sandbox's root, which needs the namespaces this tier does without; "
                                     "use --isolation container, supervised or microvm for template '%s'",
                                     sb->spec.template_name ? sb->spec.template_name : sb->spec.template_dir);
        if (mkdir(sb->dir, 0700) < 0)
                return pd_error_set(err, errno, "create sandbox dir '%s'", sb->dir);
        sb->dirfd = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sb->dirfd < 0)
                return pd_error_set(err, errno, "open sandbox dir '%s'", sb->dir);

        if (root) {
                char owner[64];
                snprintf(owner, sizeof owner, "%s:%s", sb->state->instance, sb->id);
                if ((r = pd_uidrange_alloc(owner, &pd_host(sb)->uids, err)) < 0)
                        return r;
                pd_host(sb)->have_uids = true;
                a.uid = pd_host(sb)->uids.base;
        } else {
                a.uid = geteuid();
        }
        a.root = root;
        /* A cgroup when one can be made (inside a container cgroupfs is
         * often read-only); without one the record says why. */
        struct pd_error cgerr = { 0 };
        if ((r = pd_cgroup_init(&pd_host(sb)->cg, sb->state->instance, sb->id, &cgerr)) == 0) {
                pd_host(sb)->have_cgroup = true;
                struct pd_cgroup_limits lim = { sb->spec.memory_bytes, sb->spec.pids, sb->spec.millicpus, 0 };
                if ((r = pd_cgroup_create(&pd_host(sb)->cg, &lim, &cgerr)) < 0) {
                        pd_cgroup_close(&pd_host(sb)->cg);
                        pd_host(sb)->have_cgroup = false;
                }
        }
        if (!pd_host(sb)->have_cgroup) {
                pd->no_cgroup = true;
                snprintf(pd->no_cgroup_why, sizeof pd->no_cgroup_why, "none (%s)", cgerr.msg);
        }
        pd_trace("uid + cgroups");
        /* Record what teardown needs before anything else can leak. */
        if ((r = pd_sandbox_save(sb, err)) < 0)
                return r;
        if ((r = make_workspace(sb, pd, root, a.uid, err)) < 0)
                return r;
        a.workspace = pd->workspace;

        char agent_path[PATH_MAX];
        if ((r = pd_agent_path(agent_path, sizeof agent_path, err)) < 0)
                return r;
        struct pd_landlock_opts lo = { .workspace = pd->workspace, .agent_path = agent_path,
                                       .allow_weaker = sb->spec.allow_weaker };
        if ((r = a.ruleset_fd = pd_landlock_ruleset(&lo, &pd->ll, err)) < 0)
                goto out;
        a.ll_flags = pd_lsm_audit_restrict_flags(pd->ll.abi);
        if ((r = save_info(sb, pd, err)) < 0)
                goto out;
        pd_trace("workspace + landlock");

        char cache[PATH_MAX];
        snprintf(cache, sizeof cache, "%s/cache", sb->state->dir);
        /* Network none in the host's network namespace: no inet sockets at
         * all (a listen() without bind() would expose a port otherwise).
         * The host's ipc namespace: no SysV IPC or POSIX message queues
         * (host objects readable, the sandbox's outliving it). The host's
         * abstract unix names: no named unix socket (a sandbox could squat
         * a name a host client connects to; Landlock's scope only stops
         * the sandbox connecting out). The agent needs none of these: its
         * socket is made and bound here, before the filter. */
        struct pd_seccomp_opts so = { .deny_udp_raw = sb->spec.net == PD_NET_NONE,
                                      .deny_inet = sb->spec.net == PD_NET_NONE,
                                      .deny_ipc = true,
                                      .deny_unix_names = true };
        if ((r = pd_seccomp_load(cache, &so, &a.filter, err)) < 0)
                goto out;
        if (pd_host(sb)->have_cgroup) {
                if ((r = pd_cgroup_open_procs(&pd_host(sb)->cg, "work", false, a.cg_fds, PD_CG_MAX_CTRL, err)) < 0)
                        goto out;
                a.n_cg = r;
        }
        if ((r = a.listen_fd = pd_host_listen_socket(sb, err)) < 0)
                goto out;
        a.agent_fd = open(agent_path, O_PATH | O_CLOEXEC);
        if (a.agent_fd < 0) {
                r = pd_error_set(err, errno, "open agent '%s'", agent_path);
                goto out;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
                r = pd_error_set(err, errno, "socketpair");
                goto out;
        }
        a.sync_fd = sync[1];
        a.parent = getpid();

        struct clone_args ca = {
                .flags = CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&sb->agent_pidfd,
                .exit_signal = SIGCHLD,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
        if (pid < 0) {
                r = pd_error_set(err, errno, "start the sandbox's agent");
                goto out;
        }
        if (pid == 0) {
                close(sync[0]);
                child_main(&a);
        }
        sb->agent_pid = pid;
        close(sync[1]);
        sync[1] = -1;
        pd_trace("clone3");
        if (pd_host(sb)->have_cgroup && (r = pd_cgroup_attach(&pd_host(sb)->cg, "agent", pid, err)) < 0) {
                char no = 'X';
                (void)send(sync[0], &no, 1, MSG_NOSIGNAL);
                goto out;
        }
        /* The Landlock audit reader listens before the child enforces its
         * domain (after the go-ahead), so no denial is missed. Kernel audit
         * records can be read by root only (CAP_AUDIT_READ); the domain's
         * logging flags exist from ABI 7. */
        if (root && pd->ll.abi >= 7)
                pd_lsm_audit_start(sb, pid, a.uid, &pd->audit);
        else
                snprintf(pd->audit.status, sizeof pd->audit.status, "no (%s)",
                         root ? "Landlock ABI < 7 logs no denial"
                              : "paddock is not root: the kernel's audit records need CAP_AUDIT_READ");
        if ((r = save_info(sb, pd, err)) < 0) {
                char no = 'X';
                (void)send(sync[0], &no, 1, MSG_NOSIGNAL);
                goto out;
        }
        char go = 'G';
        if (send(sync[0], &go, 1, MSG_NOSIGNAL) != 1) {
                r = pd_error_set(err, errno, "start the sandbox's agent");
                goto out;
        }
        if ((r = pd_host_wait_exec(sb, sync[0], err)) < 0)
                goto out;
        pd_trace("child set up and exec'd agent");
        sb->agent_start = pd_proc_starttime(pid);
        r = pd_sandbox_save(sb, err);
out:
        if (sync[0] >= 0)
                close(sync[0]);
        if (sync[1] >= 0)
                close(sync[1]);
        for (int i = 0; i < a.n_cg; i++)
                close(a.cg_fds[i]);
        if (a.listen_fd >= 0)
                close(a.listen_fd);
        if (a.agent_fd >= 0)
                close(a.agent_fd);
        if (a.ruleset_fd >= 0)
                close(a.ruleset_fd);
        pd_bpf_free(&a.filter);
        return r < 0 ? r : 0;
}




/* Kill every descendant of root_pid. The agent is a child subreaper
 * (--home), so orphans, double-forked daemons included, stay its
 * descendants: walk /proc, SIGKILL all found, repeat until a walk finds none
 * (a process killed in one round cannot fork in the next). Without a cgroup
 * this is what teardown rests on; with one, the cgroup sweep follows. */
struct pp {
        pid_t pid, ppid;
        char state;
};

static int pp_cmp(const void *a, const void *b)
{
        const struct pp *x = a, *y = b;
        return (x->pid > y->pid) - (x->pid < y->pid);
}

static pid_t ppid_of(const struct pp *v, size_t n, pid_t pid)
{
        struct pp key = { pid, 0, 0 };
        const struct pp *e = bsearch(&key, v, n, sizeof *v, pp_cmp);
        return e ? e->ppid : 0;
}

static void kill_descendants(pid_t root_pid)
{
        for (int round = 0; round < 100; round++) {
                DIR *d = opendir("/proc");
                if (!d)
                        return;
                size_t n = 0, cap = 0;
                struct pp *v = NULL;
                struct dirent *de;
                while ((de = readdir(d))) {
                        char *end;
                        long pid = strtol(de->d_name, &end, 10);
                        if (*end || pid <= 0)
                                continue;
                        char path[64], buf[512];
                        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
                        if (pd_read_file_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
                                continue;
                        char *rp = strrchr(buf, ')');
                        int ppid;
                        char state;
                        if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
                                continue;
                        if (n == cap) {
                                size_t nc = cap ? cap * 2 : 1024;
                                struct pp *nv = realloc(v, nc * sizeof *nv);
                                if (!nv)
                                        break;
                                v = nv;
                                cap = nc;
                        }
                        v[n++] = (struct pp){ (pid_t)pid, (pid_t)ppid, state };
                }
                closedir(d);
                qsort(v, n, sizeof *v, pp_cmp);
                int found = 0;
                for (size_t i = 0; i < n; i++) {
                        pid_t p = v[i].ppid;
                        for (int depth = 0; p > 1 && p != root_pid && depth < 256; depth++)
                                p = ppid_of(v, n, p);
                        /* zombies are dead already; the agent reaps them */
                        if (p == root_pid && v[i].pid != root_pid && v[i].state != 'Z' && v[i].state != 'X') {
                                kill(v[i].pid, SIGKILL);
                                found++;
                        }
                }
                free(v);
                if (!found)
                        return;
                struct timespec ts = { 0, 2 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
}

static void kill_agent(struct pd_sandbox *sb)
{
        bool alive = sb->agent_pidfd >= 0 ||
                     (sb->agent_pid > 0 && sb->agent_start && pd_proc_starttime(sb->agent_pid) == sb->agent_start);
        /* No pid namespace here: the agent's death kills nobody else. */
        if (pd_host(sb)->have_cgroup)
                (void)pd_cgroup_freeze(&pd_host(sb)->cg, false, NULL);
        if (alive && sb->agent_pid > 0)
                kill_descendants(sb->agent_pid);
        pd_host_kill_agent(sb);
}

/* The Landlock audit reader, from this process's data or (gc, a new
 * server) from the tier's record. */
static void stop_audit_reader(struct pd_sandbox *sb)
{
        struct proc_data *pd = pd_host(sb)->priv;
        pid_t pid = 0;
        uint64_t start = 0;
        if (pd) {
                pid = pd->audit.pid;
                start = pd->audit.start;
                pd->audit.pid = 0;
        } else {
                int dfd = sb->dirfd >= 0 ? sb->dirfd : open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                struct pd_record rec;
                uint64_t v;
                int r = dfd >= 0 ? pd_record_read(dfd, "process", &rec, NULL) : -1;
                if (dfd >= 0 && dfd != sb->dirfd)
                        close(dfd);
                if (r == 0 &&
                    pd_record_get_u64(&rec, "lsm_audit_pid", &v) == 0 && v > 0 &&
                    pd_record_get_u64(&rec, "lsm_audit_start", &start) == 0)
                        pid = (pid_t)v;
        }
        pd_lsm_audit_stop(pid, start);
}

static int process_destroy(struct pd_sandbox *sb, struct pd_error *err)
{
        kill_agent(sb);
        /* After the sandbox's processes are gone: it writes their last
         * denials, then exits. */
        stop_audit_reader(sb);
        int ret = pd_host_release(sb, err);
        char ws[PATH_MAX];
        workspace_path(sb, ws, sizeof ws);
        int r = pd_rm_rf(ws, ret == 0 ? err : NULL);
        if (r < 0 && ret == 0)
                ret = r;
        free(pd_host(sb)->priv);
        pd_host(sb)->priv = NULL;
        return ret;
}

static int process_pause(struct pd_sandbox *sb, struct pd_error *err)
{
        return pd_host_freeze(sb, true, err);
}

static int process_resume(struct pd_sandbox *sb, struct pd_error *err)
{
        return pd_host_freeze(sb, false, err);
}

/* Process-tier workspaces live on the state dir's disk; records on tmpfs
 * do not survive a reboot, so gc sweeps them all. */
static int process_gc(struct pd_state *st, struct pd_error *err)
{
        int ret = pd_host_gc(st, err);
        char ws[PATH_MAX + 16];
        snprintf(ws, sizeof ws, "%s/workspaces", st->dir);
        if (pd_rm_rf(ws, NULL) < 0 && ret == 0)
                ret = pd_error_setx(err, EIO, "could not remove '%s'", ws);
        return ret;
}

const struct pd_tier_ops pd_tier_process = {
        .name = "process",
        .isolates = PD_ISOLATES_PROCESS,
        .host_check = pd_facts_process,
        .data_size = sizeof(struct pd_host_data),
        .save = pd_host_save,
        .load = pd_host_load,
        .close = pd_host_close,
        .gc = process_gc,
        .create = process_create,
        .connect = pd_host_connect,
        .pause = process_pause,
        .resume = process_resume,
        .destroy = process_destroy,
        .stats = pd_host_stats,
        .adopt = pd_host_adopt,
};
