/* The container tier (DESIGN §1): user, mount, pid, ipc, uts, net and cgroup
 * namespaces; pivot_root onto an overlay of the template; no capabilities
 * in the host's view; seccomp allowlist; cgroup limits; paddock-agent as
 * PID 1.
 *
 * Start sequence (parent = paddock run or the server, child = the sandbox):
 *   parent: sandbox dir, agent socket (bound + listening), uid range,
 *           cgroups, seccomp filter (cached), clone3(all namespaces)
 *   child:  waits for the parent's message
 *   parent: uid/gid maps, child -> agent cgroup, idmapped template trees
 *           (open_tree + mount_setattr, needs host root), sends them
 *   child:  mounts + pivot_root, hostname, loopback, caps, seccomp, exec agent
 *   parent: sees the sync socket close (exec succeeded) or an error record. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <grp.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "jail/agent_inproc.h"
#include "jail/caps.h"
#include "jail/fds.h"
#include "tiers/host.h"
#include "jail/cgroup.h"
#include "jail/mount.h"
#include "net/sbnet.h"
#include "lib/sandbox.h"
#include "jail/seccomp-policy.h"
#include "tiers/snapshot.h"
#include "jail/supervisor_launch.h"
#include "lib/template.h"
#include "net/policy.h"
#include "lib/trace.h"
#include "jail/userns.h"
#include "lib/util.h"
#include "lib/volume.h"
#include "tiers/facts.h"

/* root and grafts, each with its snapshot layers (an image template's
 * root: its store layers too); volumes; sudo; resolv.conf */
#define MAX_TREES ((1 + PD_MAX_GRAFTS) * (1 + PD_MAX_STACK) + 1 + PD_MAX_IMAGE_LAYERS + PD_MAX_VOLUMES + 2)

struct child_args {
        struct pd_sandbox *sb;
        int sync_fd;
        int listen_fd;
        int agent_fd;
        int cg_fds[PD_CG_MAX_CTRL];
        int n_cg;
        struct pd_bpf filter;
        struct pd_bpf filter_paths;     /* supervised: also the calls that change paths (plan.need_broker) */
        struct pd_mount_plan plan;      /* tree fds filled in after the parent's message */
        unsigned n_trees;
        pid_t parent;
        bool supervised;                /* supervised tier: a listener for the supervisor */
        bool keep_stage;                /* hand the host a clone of the writable layer's mount */
};

static int send_fds(int sync_fd, char tag, const int *fds, unsigned n, struct pd_error *err);

/* ---- child side: no malloc, no stdio, errors go back on sync_fd ---- */

static _Noreturn void child_fail(struct child_args *a, const struct pd_error *e)
{
        (void)pd_write_all(a->sync_fd, e, sizeof *e);
        _exit(125);
}

/* Receive one message from the parent: a tag byte ('G' trees, 'C' cgroup
 * fds; 'X' = abort) and exactly n fds. */
static int recv_fds(struct child_args *a, char want, int *fds, unsigned n, struct pd_error *err)
{
        char ctrl[CMSG_SPACE(sizeof(int) * MAX_TREES)];
        char byte;
        struct iovec iov = { &byte, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
        ssize_t r;
        do
                r = recvmsg(a->sync_fd, &mh, MSG_CMSG_CLOEXEC);
        while (r < 0 && errno == EINTR);
        if (r != 1)
                return pd_error_set(err, r < 0 ? errno : EPIPE, "wait for the host's go-ahead");
        if (byte != want)
                return pd_error_setx(err, ECANCELED, "host aborted the start");
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        if (n == 0)
                return 0;
        if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int) * n))
                return pd_error_setx(err, EPROTO, "host sent the wrong descriptors");
        memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
        return 0;
}

static int loopback_up(struct pd_error *err)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return pd_error_set(err, errno, "socket for loopback");
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        memcpy(ifr.ifr_name, "lo", 3);
        ifr.ifr_flags = IFF_UP | IFF_RUNNING;
        int r = ioctl(s, SIOCSIFFLAGS, &ifr);
        close(s);
        return r < 0 ? pd_error_set(err, errno, "bring up loopback") : 0;
}

static _Noreturn void child_main(struct child_args *a)
{
        struct pd_error err = { 0 };
        int needed[] = { a->sync_fd, a->listen_fd, a->agent_fd };
        if (pd_fds_close_except(needed, 3) < 0) {
                pd_error_set(&err, errno, "close inherited fds");
                child_fail(a, &err);
        }
        int trees[MAX_TREES];
        if (recv_fds(a, 'G', trees, a->n_trees, &err) < 0)
                child_fail(a, &err);
        pd_trace("child: got trees");
        unsigned t = 0;
        a->plan.root.tree_fd = trees[t++];
        for (unsigned k = 0; k < a->plan.root.n_stack; k++)
                a->plan.root.stack_fds[k] = trees[t++];
        for (unsigned i = 0; i < a->plan.n_grafts; i++) {
                a->plan.grafts[i].tree_fd = trees[t++];
                for (unsigned k = 0; k < a->plan.grafts[i].n_stack; k++)
                        a->plan.grafts[i].stack_fds[k] = trees[t++];
        }
        for (unsigned i = 0; i < a->plan.n_binds; i++)
                a->plan.binds[i].tree_fd = trees[t++];
        int stagefd = pd_mount_stage(&a->plan, &err);
        if (stagefd < 0)
                child_fail(a, &err);
        pd_trace("child: stage tmpfs");
        if (a->keep_stage) {
                /* The writable layer becomes unreachable by path after
                 * pivot_root; a clone of its mount, attached by the host at
                 * <sandbox dir>/mnt, is what snapshots copy from. */
                int sfd = (int)syscall(SYS_open_tree, stagefd, "",
                                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (sfd < 0) {
                        pd_error_set(&err, errno, "clone the writable layer's mount");
                        child_fail(a, &err);
                }
                if (send_fds(a->sync_fd, 'S', &sfd, 1, &err) < 0)
                        child_fail(a, &err);
                close(sfd);
        }
        /* The parent wrote our maps: become root of the new namespace. */
        /* Raw syscalls: glibc's set*id() in a process it believes has other
         * threads (the server's, copied by clone3 without them) signals
         * those threads and waits forever. */
        if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
            syscall(SYS_setresuid, 0, 0, 0) < 0) {
                pd_error_set(&err, errno, "become root in the user namespace");
                child_fail(a, &err);
        }
        /* Only now: any change of euid resets the parent-death signal. A
         * parent that died before this point shows as a hang-up on sync_fd
         * (getppid() is 0 in a new pid namespace). */
        if (a->sb->die_with_parent) {
                struct pollfd pf = { .fd = a->sync_fd, .events = POLLIN };
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || (poll(&pf, 1, 0) > 0 && (pf.revents & POLLHUP)))
                        _exit(125);
        }
        pd_trace("child: setresuid");
        if (pd_mount_build(&a->plan, stagefd, &err) < 0)
                child_fail(a, &err);
        pd_trace("child: mounts + pivot");
        const char *hn = a->sb->spec.hostname ? a->sb->spec.hostname : "paddock";
        if (sethostname(hn, strlen(hn)) < 0) {
                pd_error_set(&err, errno, "set hostname");
                child_fail(a, &err);
        }
        if (loopback_up(&err) < 0)
                child_fail(a, &err);
        pd_trace("child: hostname + lo");
        if (setsid() < 0) {
                pd_error_set(&err, errno, "setsid");
                child_fail(a, &err);
        }
        /* Meanwhile the parent made our cgroups and moved us into the agent
         * cgroup; it sends the workload's cgroup.procs fds. Root the cgroup
         * namespace there, so the sandbox sees no host cgroup names. */
        if (recv_fds(a, 'C', a->cg_fds, (unsigned)a->n_cg, &err) < 0)
                child_fail(a, &err);
        if (unshare(CLONE_NEWCGROUP) < 0) {
                pd_error_set(&err, errno, "create cgroup namespace");
                child_fail(a, &err);
        }
        pd_trace("child: cgroups");
        /* fds: 0-2 /dev/null, 3 the agent socket, 4.. cgroup.procs of the
         * workload; everything else is CLOEXEC (sync_fd closes at exec and
         * tells the parent the exec happened). */
        pd_trace("child: before exec");
        /* Whatever the caller of paddock left open without CLOEXEC must
         * not reach the sandbox: the agent gets 0-2, its socket and the
         * workload's cgroup fds, nothing else. */
        int *keep[] = { &a->agent_fd, &a->sync_fd };
        int r = pd_fds_for_agent(a->listen_fd, a->cg_fds, a->n_cg, keep, 2);
        if (r < 0) {
                pd_error_set(&err, -r, "arrange the agent's fds");
                child_fail(a, &err);
        }
        /* the in-process agent: what the exec would have cleaned up */
        bool inproc = a->sb->agent_inproc && !a->supervised;
        if (inproc && pd_agent_inproc_prepare(a->n_cg, a->sync_fd, &err) < 0)
                child_fail(a, &err);
        if (pd_rlimits_apply(&err) < 0 || pd_caps_restrict(pd_caps_default_set(), &err) < 0)
                child_fail(a, &err);
        /* no_new_privs is set: the filter needs no CAP_SYS_ADMIN. Last step
         * before exec, since the filter forbids what setup used (mount). */
        if (a->supervised) {
                /* From here on our own opens and execs wait for the
                 * supervisor: hand the listener to the parent first. */
                /* The policy's mounts enforce its ro and deny rules, or
                 * the supervisor must see the calls that change paths. */
                const struct pd_bpf *f = a->plan.need_broker && a->filter_paths.insns ? &a->filter_paths
                                                                                      : &a->filter;
                int lfd = pd_seccomp_install_listener(f);
                if (lfd < 0) {
                        pd_error_set(&err, -lfd, "install seccomp filter with a listener");
                        child_fail(a, &err);
                }
                /* With it, the identities of the files the policy's deny
                 * mounts cover: the supervisor refuses them under any other
                 * name (src/jail/policy_mounts.c). Their numbers go as plain
                 * bytes and the host takes the fds with pidfd_getfd: the
                 * filter now hands sendmsg to the supervisor (a policy with
                 * connect rules), which is not running yet. We keep them
                 * open meanwhile: our execveat waits for the supervisor,
                 * which the host starts with them. */
                int lfds[2] = { lfd, -1 };
                if (a->plan.n_deny_inodes || a->plan.deny_inodes_truncated) {
                        /* a record of all ones: the walk was cut short */
                        static const struct pd_deny_inode cut = { UINT64_MAX, UINT64_MAX };
                        lfds[1] = memfd_create("pd-deny-inodes", MFD_CLOEXEC);
                        size_t len = a->plan.n_deny_inodes * sizeof a->plan.deny_inodes[0];
                        if (lfds[1] < 0 || pd_write_all(lfds[1], a->plan.deny_inodes, len) < 0 ||
                            (a->plan.deny_inodes_truncated && pd_write_all(lfds[1], &cut, sizeof cut) < 0)) {
                                pd_error_set(&err, errno, "record the denied files");
                                child_fail(a, &err);
                        }
                }
                char msg[1 + sizeof lfds];
                msg[0] = 'L';
                memcpy(msg + 1, lfds, sizeof lfds);
                if (pd_write_all(a->sync_fd, msg, sizeof msg) < 0) {
                        pd_error_set(&err, errno, "hand the listener to the host");
                        child_fail(a, &err);
                }
        } else {
                r = pd_seccomp_install(&a->filter);
                if (r < 0) {
                        pd_error_set(&err, -r, "install seccomp filter");
                        child_fail(a, &err);
                }
        }
        if (inproc)
                pd_agent_inproc_run(a->sb->agent_inproc, a->sync_fd, a->n_cg, "--sudo-socket",
                                    "/run/paddock/sudo.sock");
        r = pd_fds_exec_agent(a->agent_fd, a->n_cg, "--sudo-socket", "/run/paddock/sudo.sock");
        pd_error_set(&err, -r, "execute paddock-agent");
        child_fail(a, &err);
}

/* ---- parent side ---- */

/* A detached copy of a host tree whose ids read, inside the sandbox, as
 * they do on the host (0..65535 -> the sandbox's range): the template's
 * read-only trees, never a volume (volume_tree). */
static int idmapped_tree(const char *path, int userns_fd, bool readonly, bool recursive, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open_tree(AT_FDCWD, path,
                                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
        if (fd < 0)
                return pd_error_set(err, errno, "clone mount of '%s'", path);
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            (readonly ? MOUNT_ATTR_RDONLY : 0),
                .userns_fd = (uint64_t)userns_fd,
        };
        if (mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof attr) < 0)
                return pd_error_set(err, errno, "idmap '%s' (does its filesystem support idmapped mounts?)", path);
        return PD_TAKE_FD(fd);
}

/* A volume's tree: idmapped not by the sandbox's own user namespace (which
 * would make host root the sandbox's root) but by one of its own, made from
 * the volume's owner as the host sees it now (volume.h): `user` is that
 * account, every other sandbox id its own range, host root nobody. The
 * child that made the user namespace is left in *holder, to be reaped. */
static int volume_tree(const struct pd_volume *v, uint32_t base, struct pd_userns_holder *holder,
                       struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open_tree(AT_FDCWD, v->host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "clone mount of '%s'", v->host);
        /* the owner of what was cloned, not of what the path names later */
        struct stat st;
        if (fstat(fd, &st) < 0)
                return pd_error_set(err, errno, "stat volume '%s'", v->host);
        struct pd_volume_ids ids;
        int r = pd_volume_resolve(v, st.st_uid, st.st_gid, &ids, err);
        if (r < 0)
                return r;
        char umap[128], gmap[128];
        if (pd_volume_map_text(base, PD_USER_UID, ids.uid_mapped, ids.uid, umap, sizeof umap) < 0 ||
            pd_volume_map_text(base, PD_USER_UID, ids.gid_mapped, ids.gid, gmap, sizeof gmap) < 0)
                return pd_error_setx(err, EINVAL, "volume '%s': no idmapping for uid %u gid %u", v->host,
                                     ids.uid, ids.gid);
        _pd_cleanup_close_ int userns = pd_userns_make(umap, gmap, holder, err);
        if (userns < 0)
                return pd_error_prefix(err, "volume '%s'", v->host);
        /* nosuid, nodev: inside the sandbox no_new_privs makes setuid inert
         * anyway; on the host a setuid bit can only ever name `user`'s
         * account or the range (docs/security.md). */
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            (v->readonly ? MOUNT_ATTR_RDONLY : 0),
                .userns_fd = (uint64_t)userns,
        };
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
                return pd_error_set(err, errno, "idmap '%s' (does its filesystem support idmapped mounts?)",
                                    v->host);
        return PD_TAKE_FD(fd);
}

/* The snapshot layers of one overlay (graft NULL = the root), top first. */
static int stack_trees(struct pd_sandbox *sb, const struct pd_template *t, const char *graft, int userns,
                       int *trees, unsigned *n, struct pd_error *err)
{
        for (unsigned k = 0; k < t->n_stack; k++) {
                char path[PATH_MAX];
                pd_snapshot_layer_path(sb->state, t->stack[k], graft, path, sizeof path);
                int fd = idmapped_tree(path, userns, true, false, err);
                if (fd < 0)
                        return pd_error_prefix(err, "snapshot '%s'", t->stack[k]);
                trees[(*n)++] = fd;
        }
        return 0;
}

/* An image template's root (template.h): its own layer over its store
 * layers, top first, idmapped from the store's id range (not the host's
 * 0..65535) into the sandbox's by a user namespace of their own. The
 * bottom layer goes last: it is the plan's tree_fd. */
static int image_trees(struct pd_sandbox *sb, const struct pd_template *t, struct pd_userns_holder *holder,
                       int *trees, unsigned *n, struct pd_error *err)
{
        char map[64];
        snprintf(map, sizeof map, "%u %u %u\n", PD_STORE_UID_BASE, pd_host(sb)->uids.base, PD_STORE_ID_RANGE);
        _pd_cleanup_close_ int userns = pd_userns_make(map, map, holder, err);
        if (userns < 0)
                return pd_error_prefix(err, "template '%s'", t->bottom);
        int fd = idmapped_tree(t->rootfs, userns, true, false, err);
        if (fd < 0)
                return pd_error_prefix(err, "template '%s'", t->bottom);
        trees[(*n)++] = fd;
        for (unsigned k = 0; k < t->n_layers; k++) {
                char path[PATH_MAX];
                pd_template_layer_path(sb->state, t->layers[k], path, sizeof path);
                if ((fd = idmapped_tree(path, userns, true, false, err)) < 0)
                        return pd_error_prefix(err, "template '%s': layer %.12s", t->bottom, t->layers[k]);
                trees[(*n)++] = fd;
        }
        return 0;
}

static int send_fds(int sync_fd, char tag, const int *fds, unsigned n, struct pd_error *err)
{
        char ctrl[CMSG_SPACE(sizeof(int) * MAX_TREES)];
        memset(ctrl, 0, sizeof ctrl);
        char byte = tag;
        struct iovec iov = { &byte, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n > 0) {
                mh.msg_control = ctrl;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        }
        if (sendmsg(sync_fd, &mh, MSG_NOSIGNAL) != 1)
                return pd_error_set(err, errno, "send descriptors to the sandbox");
        return 0;
}

/* The volumes' mount points, and a refusal of any volume its owner forbids
 * (volume.h) before anything is made; volume_tree decides again on what it
 * actually clones. */
static int plan_volumes(const struct pd_spec *spec, struct pd_mount_plan *plan, struct pd_error *err)
{
        plan->n_binds = spec->n_volumes;
        for (unsigned i = 0; i < spec->n_volumes; i++) {
                const struct pd_volume *v = &spec->volumes[i];
                struct pd_volume_ids ids;
                struct stat st;
                if (stat(v->host, &st) < 0)
                        return pd_error_set(err, errno, "volume source '%s'", v->host);
                int r = pd_volume_resolve(v, st.st_uid, st.st_gid, &ids, err);
                if (r < 0)
                        return r;
                snprintf(plan->binds[i].target, sizeof plan->binds[i].target, "%s", v->target);
                plan->binds[i].is_dir = S_ISDIR(st.st_mode);
                plan->binds[i].readonly = v->readonly;
        }
        return 0;
}

static int namespaces_error(int e, struct pd_error *err)
{
        if (e == EPERM || e == ENOSPC || e == EUSERS || e == EINVAL)
                return pd_error_set(err, e,
                                    "cannot create the sandbox's namespaces (user, mount, pid, net...); this host "
                                    "forbids them to paddock (inside an unprivileged container? "
                                    "/proc/sys/user/max_user_namespaces = 0?); the `process` tier, which needs "
                                    "no namespaces, will run here once available");
        return pd_error_set(err, e, "clone the sandbox");
}

static int create_tier(struct pd_sandbox *sb, bool supervised, struct pd_error *err)
{
        /* On the heap, not the stack: calloc hands over fresh pages without
         * writing them, where `= { ... }` zeroed all 46 KiB of it (the
         * supervised tier's deny list) and faulted every page in, each
         * fault then copied again after the clone (bench/README.md, "Where
         * the CPU goes"). */
        _pd_cleanup_free_ struct child_args *a = calloc(1, sizeof *a);
        if (!a)
                return pd_error_set(err, ENOMEM, "allocate the start's arguments");
        *a = (struct child_args){ .sb = sb, .sync_fd = -1, .listen_fd = -1, .agent_fd = -1,
                                  .supervised = supervised };
        int sync[2] = { -1, -1 }, userns = -1, trees[MAX_TREES];
        struct pd_userns_holder holders[PD_MAX_VOLUMES] = { 0 };  /* volume_tree's exiting children */
        struct pd_userns_holder image_holder = { 0 };
        unsigned n_trees = 0;
        int r;
        struct pd_sbnet net = { 0 };
        struct pd_template tpl;

        if (geteuid() != 0)
                return pd_error_setx(err, EPERM,
                                     "the container tier needs root (uid ranges, cgroups, idmapped mounts); "
                                     "run paddock as root");
        if ((r = pd_template_resolve(sb->state, &sb->spec, &tpl, err)) < 0)
                return r;
        if ((r = plan_volumes(&sb->spec, &a->plan, err)) < 0)
                return r;
        snprintf(sb->template_buf, sizeof sb->template_buf, "%s", sb->spec.template_dir ? "" : tpl.name);
        pd_trace("template");
        /* Writable layer on tmpfs, charged to the sandbox's memory: keep it
         * below the memory limit so filling it is ENOSPC, never an OOM kill. */
        uint64_t cap = sb->spec.memory_bytes > (96ull << 20) ? sb->spec.memory_bytes - (64ull << 20)
                                                              : sb->spec.memory_bytes / 2;
        sb->writable_bytes = sb->spec.disk_bytes < cap ? sb->spec.disk_bytes : cap;

        if (mkdir(sb->dir, 0700) < 0)
                return pd_error_set(err, errno, "create sandbox dir '%s'", sb->dir);
        sb->dirfd = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sb->dirfd < 0)
                return pd_error_set(err, errno, "open sandbox dir '%s'", sb->dir);
        if (mkdirat(sb->dirfd, "mnt", 0700) < 0)
                return pd_error_set(err, errno, "create '%s/mnt'", sb->dir);
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/mnt", sb->dir);

        char owner[64];
        snprintf(owner, sizeof owner, "%s:%s", sb->state->instance, sb->id);
        if ((r = pd_uidrange_alloc(owner, &pd_host(sb)->uids, err)) < 0)
                return r;
        pd_host(sb)->have_uids = true;
        pd_trace("uid range");
        if ((r = pd_cgroup_init(&pd_host(sb)->cg, sb->state->instance, sb->id, err)) < 0)
                return r;
        pd_host(sb)->have_cgroup = true;
        /* Record what teardown needs before anything else can leak. */
        if ((r = pd_sandbox_save(sb, err)) < 0)
                return r;
        /* Its snapshot layers must outlive it (pd_snapshot_delete checks). */
        if ((r = pd_snapshot_use(sb->state, &tpl, sb->id, err)) < 0)
                return r;
        pd_trace("record");

        char cache[PATH_MAX];
        snprintf(cache, sizeof cache, "%s/cache", sb->state->dir);
        struct pd_seccomp_opts so = { .deny_udp_raw = false, .notify = supervised };
        /* supervised: the policy's path rules as mounts, and what else the
         * filter hands to the supervisor (src/jail/supervisor_launch.c) */
        if (supervised && (r = pd_supervisor_plan(sb, &a->plan, &so, err)) < 0)
                goto out;
        bool paths = so.notify_paths;
        so.notify_paths = false;
        if ((r = pd_seccomp_load(cache, &so, &a->filter, err)) < 0)
                goto out;
        so.notify_paths = true;
        if (paths && (r = pd_seccomp_load(cache, &so, &a->filter_paths, err)) < 0)
                goto out;
        /* The cgroups themselves are made while the child builds its mounts;
         * the child needs only their count now. */
        for (unsigned i = 0; i < pd_host(sb)->cg.n; i++)
                a->n_cg += pd_host(sb)->cg.h[i].split;
        if ((r = a->listen_fd = pd_host_listen_socket(sb, err)) < 0)
                goto out;
        char agent_path[PATH_MAX];
        if ((r = pd_agent_path(agent_path, sizeof agent_path, err)) < 0)
                goto out;
        a->agent_fd = open(agent_path, O_PATH | O_CLOEXEC);
        if (a->agent_fd < 0) {
                r = pd_error_set(err, errno, "open agent '%s'", agent_path);
                goto out;
        }
        a->plan.stage_dir = stage;
        a->plan.disk_bytes = sb->writable_bytes;
        a->plan.n_grafts = tpl.n_grafts;
        /* an image template: its own layer and all but the bottom store
         * layer stack over that one (image_trees) */
        a->plan.root.n_stack = tpl.n_stack + (tpl.image ? tpl.n_layers : 0);
        for (unsigned i = 0; i < tpl.n_grafts; i++) {
                snprintf(a->plan.grafts[i].target, sizeof a->plan.grafts[i].target, "%s", tpl.grafts[i].target);
                a->plan.grafts[i].n_stack = tpl.n_stack;
        }
        /* The agent binary doubles as `sudo` inside (it asks the agent). */
        struct pd_mount_bind *sudo = &a->plan.binds[a->plan.n_binds++];
        snprintf(sudo->target, sizeof sudo->target, "/usr/bin/sudo");
        sudo->is_dir = false;
        sudo->readonly = true;
        /* Network: a slot in the router before the clone, since the
         * sandbox's resolv.conf names the router's address (src/net). */
        if (sb->spec.net != PD_NET_NONE) {
                if ((r = pd_sbnet_prepare(sb, &net, err)) < 0)
                        goto out;
                struct pd_mount_bind *rc = &a->plan.binds[a->plan.n_binds++];
                snprintf(rc->target, sizeof rc->target, "/etc/resolv.conf");
                rc->is_dir = false;
                rc->readonly = true;
                pd_trace("network slot");
        }
        a->n_trees = (1 + a->plan.n_grafts) * (1 + tpl.n_stack) + (tpl.image ? tpl.n_layers : 0) + a->plan.n_binds;
        a->keep_stage = !sb->die_with_parent || sb->keep_stage;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
                r = pd_error_set(err, errno, "socketpair");
                goto out;
        }
        a->sync_fd = sync[1];
        a->parent = getpid();

        pd_trace("prepared (seccomp, socket, fds)");
        struct clone_args ca = {
                .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                         CLONE_NEWNET | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&sb->agent_pidfd,
                .exit_signal = SIGCHLD,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
        if (pid < 0) {
                r = namespaces_error(errno, err);
                goto out;
        }
        if (pid == 0) {
                close(sync[0]);
                child_main(a);
        }
        sb->agent_pid = pid;
        pd_trace("clone3");
        close(sync[1]);
        sync[1] = -1;

        if ((r = pd_userns_write_maps(pid, pd_host(sb)->uids.base, err)) < 0)
                goto abort_child;
        pd_trace("uid/gid maps");
        char nspath[64];
        snprintf(nspath, sizeof nspath, "/proc/%d/ns/user", (int)pid);
        userns = open(nspath, O_RDONLY | O_CLOEXEC);
        if (userns < 0) {
                r = pd_error_set(err, errno, "open '%s'", nspath);
                goto abort_child;
        }
        if (tpl.image) {
                /* top first: snapshots, then the image's layers; the
                 * bottom store layer is the plan's tree_fd, sent first */
                int img[1 + PD_MAX_IMAGE_LAYERS];
                unsigned n_img = 0;
                r = image_trees(sb, &tpl, &image_holder, img, &n_img, err);
                if (r == 0) {
                        trees[n_trees++] = img[n_img - 1];
                        r = stack_trees(sb, &tpl, NULL, userns, trees, &n_trees, err);
                        for (unsigned k = 0; k + 1 < n_img; k++)
                                trees[n_trees++] = img[k];
                } else {
                        for (unsigned k = 0; k < n_img; k++)
                                close(img[k]);
                }
                if (r < 0)
                        goto abort_child;
        } else {
                if ((r = trees[n_trees] = idmapped_tree(tpl.rootfs, userns, true, false, err)) < 0)
                        goto abort_child;
                n_trees++;
                if ((r = stack_trees(sb, &tpl, NULL, userns, trees, &n_trees, err)) < 0)
                        goto abort_child;
        }
        for (unsigned i = 0; i < tpl.n_grafts; i++) {
                if ((r = trees[n_trees] = idmapped_tree(tpl.grafts[i].source, userns, true, false, err)) < 0)
                        goto abort_child;
                n_trees++;
                if ((r = stack_trees(sb, &tpl, tpl.grafts[i].target, userns, trees, &n_trees, err)) < 0)
                        goto abort_child;
        }
        for (unsigned i = 0; i < sb->spec.n_volumes; i++) {
                if ((r = trees[n_trees] = volume_tree(&sb->spec.volumes[i], pd_host(sb)->uids.base, &holders[i],
                                                      err)) < 0)
                        goto abort_child;
                n_trees++;
        }
        pd_trace("template and volume trees");
        if ((r = trees[n_trees] = idmapped_tree(agent_path, userns, true, false, err)) < 0)
                goto abort_child;
        n_trees++;
        if (net.reserved) {
                if ((r = trees[n_trees] = idmapped_tree(net.resolv_path, userns, true, false, err)) < 0)
                        goto abort_child;
                n_trees++;
        }
        if ((r = send_fds(sync[0], 'G', trees, n_trees, err)) < 0)
                goto abort_child;
        /* While the child mounts: cgroups, limits, the agent's membership,
         * and the workload cgroup fds it passes on to the agent. */
        struct pd_cgroup_limits lim = { sb->spec.memory_bytes, sb->spec.pids, sb->spec.millicpus,
                                        PD_AGENT_MEMORY + sb->writable_bytes };
        int cg_fds[PD_CG_MAX_CTRL];
        if ((r = pd_cgroup_create(&pd_host(sb)->cg, &lim, err)) < 0 ||
            (r = pd_cgroup_attach(&pd_host(sb)->cg, "agent", pid, err)) < 0)
                goto abort_child;
        if ((r = pd_cgroup_open_procs(&pd_host(sb)->cg, "work", false, cg_fds, PD_CG_MAX_CTRL, err)) < 0)
                goto abort_child;
        if (r != a->n_cg) {
                for (int i = 0; i < r; i++)
                        close(cg_fds[i]);
                r = pd_error_setx(err, EPROTO, "cgroup hierarchies changed during start");
                goto abort_child;
        }
        r = send_fds(sync[0], 'C', cg_fds, (unsigned)a->n_cg, err);
        for (int i = 0; i < a->n_cg; i++)
                close(cg_fds[i]);
        if (r < 0)
                goto abort_child;
        pd_trace("cgroups made and sent");
        /* While the child finishes its mounts: its veth, addresses, route
         * and rules (the netns exists since the clone). */
        if (net.reserved) {
                if ((r = pd_sbnet_attach(sb, &net, pid, err)) < 0)
                        goto abort_child;
                pd_trace("network attached");
        }
        pd_trace("idmapped trees sent");
        if ((r = pd_host_wait_exec(sb, sync[0], err)) < 0)
                goto abort_child;
        pd_trace("child set up and exec'd agent");
        sb->agent_start = pd_proc_starttime(pid);
        /* Record the agent's pid and start time: the server re-adopts by
         * them, and gc can kill a sandbox whose creator crashed. */
        r = pd_sandbox_save(sb, err);
        goto out;

abort_child:
        if (sync[0] >= 0) {
                char no = 'X';
                (void)send(sync[0], &no, 1, MSG_NOSIGNAL);
        }
out:
        if (r < 0 && net.reserved) {
                struct pd_error e2;
                (void)pd_sbnet_release(sb->state, sb->id, &e2);
        }
        pd_sbnet_close(&net);
        for (unsigned i = 0; i < n_trees; i++)
                close(trees[i]);
        for (unsigned i = 0; i < PD_MAX_VOLUMES; i++)
                pd_userns_reap(&holders[i]);
        pd_userns_reap(&image_holder);
        if (userns >= 0)
                close(userns);
        if (sync[0] >= 0)
                close(sync[0]);
        if (sync[1] >= 0)
                close(sync[1]);
        if (a->listen_fd >= 0)
                close(a->listen_fd);
        if (a->agent_fd >= 0)
                close(a->agent_fd);
        pd_bpf_free(&a->filter);
        pd_bpf_free(&a->filter_paths);
        return r < 0 ? r : 0;
}

static int container_create(struct pd_sandbox *sb, struct pd_error *err)
{
        return create_tier(sb, false, err);
}

static int supervised_create(struct pd_sandbox *sb, struct pd_error *err)
{
        return create_tier(sb, true, err);
}

static int container_pause(struct pd_sandbox *sb, struct pd_error *err)
{
        return pd_host_freeze(sb, true, err);
}

static int teardown(struct pd_sandbox *sb, bool unuse, struct pd_error *err);

/* A filesystem-only pause outlives the server (adopt.c): the runtime dir
 * stays, holding only the record (files_paused=1, the snapshot as its
 * template, no agent) and the network policy in force, in this file. The
 * record there also keeps the snapshot's users/<id> entry alive. */
#define FILES_NETPOL "files-netpol.json"

static int files_record_save(struct pd_sandbox *sb, struct pd_error *err)
{
        struct pd_host_data *h = pd_host(sb);
        if (mkdir(sb->dir, 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create sandbox dir '%s'", sb->dir);
        if (h->files_netpol) {
                char p[PATH_MAX + 32];
                snprintf(p, sizeof p, "%s/" FILES_NETPOL, sb->dir);
                _pd_cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 || pd_write_all(fd, h->files_netpol, strlen(h->files_netpol)) < 0)
                        return pd_error_set(err, errno ? errno : EIO, "write '%s'", p);
        }
        sb->agent_pid = 0;
        sb->agent_start = 0;
        sb->supervisor_pid = 0;
        sb->supervisor_start = 0;
        /* the record last: its files_paused=1 is what adoption reads */
        return pd_sandbox_save(sb, err);
}

static void container_save(const struct pd_sandbox *sb, struct pd_record *rec)
{
        pd_host_save(sb, rec);
        if (pd_host(sb)->files_paused)
                pd_record_add(rec, "files_paused", "1");
}

static void container_load(struct pd_sandbox *sb, const struct pd_record *rec)
{
        pd_host_load(sb, rec);
        struct pd_host_data *h = pd_host(sb);
        uint64_t v;
        if (pd_record_get_u64(rec, "files_paused", &v) < 0 || v != 1 || !sb->template_buf[0])
                return;
        h->files_paused = true;
        snprintf(h->files_snapshot, sizeof h->files_snapshot, "%s", sb->template_buf);
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/" FILES_NETPOL, sb->dir);
        /* as written (JSON text; resume parses it); at most 1 MiB */
        _pd_cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (1 << 20))
                return;
        char *text = malloc((size_t)st.st_size + 1);
        if (!text)
                return;
        ssize_t n = pd_read_all(fd, text, (size_t)st.st_size);
        if (n != st.st_size) {
                free(text);
                return;
        }
        text[n] = '\0';
        h->files_netpol = text;
}

/* Paused keeping the filesystem only: nothing runs to find, resume boots
 * it (container_resume). */
static int container_adopt(struct pd_sandbox *sb, struct pd_error *err)
{
        if (pd_host(sb)->files_paused) {
                sb->paused = sb->paused_files = true;
                return 0;
        }
        return pd_host_adopt(sb, err);
}

/* Filesystem-only pause (E2B's keepMemory: false): the writable layer is
 * saved as an unlisted snapshot on the state dir's disk (as a fork's),
 * then everything else goes as on delete: processes, cgroups, uid range,
 * network slot, and the tmpfs layer with the memory it held. Resume
 * creates the sandbox again, same id, on that snapshot: a fresh boot with
 * its files. The snapshot names this sandbox as its user meanwhile, so
 * nothing removes it; it goes with the sandbox's delete. What resume needs
 * is on disk (files_record_save), for a server started after this one. */
static int container_pause_files(struct pd_sandbox *sb, struct pd_error *err)
{
        struct pd_host_data *h = pd_host(sb);
        char name[65];
        pd_snapshot_fork_name(sb->id, name);
        int r = pd_container_snapshot(sb, name, err);
        struct pd_spec spec = sb->spec;
        spec.template_name = name;
        spec.template_dir = NULL;
        struct pd_template t;
        if (r == 0 && (r = pd_template_resolve(sb->state, &spec, &t, err)) == 0 &&
            (r = pd_snapshot_use(sb->state, &t, sb->id, err)) < 0)
                pd_snapshot_release(sb->state, name, NULL);
        if (r < 0)
                return pd_error_prefix(err, "pause keeping the filesystem only");
        /* the policy in force (updates included) for the new boot */
        free(h->files_netpol);
        h->files_netpol = NULL;
        struct pd_net_info ni = { 0 };
        struct pd_error ne = { 0 };
        if (sb->spec.net != PD_NET_NONE && pd_host_net_info(sb, &ni, &ne) == 0 && ni.policy_json)
                h->files_netpol = strdup(ni.policy_json);
        pd_net_info_clear(&ni);
        if (sb->spec.net != PD_NET_NONE && !h->files_netpol) {
                pd_snapshot_release(sb->state, name, NULL);
                return pd_error_setx(err, EIO, "pause keeping the filesystem only: cannot read the network "
                                               "policy in force (%s)", ne.msg);
        }
        sb->paused = true;              /* before the agent ends: the server's watcher checks it */
        snprintf(h->files_snapshot, sizeof h->files_snapshot, "%s", name);
        h->files_paused = true;
        /* the old layers stay: the snapshot stacks on them */
        struct pd_error e2 = { 0 };
        if (teardown(sb, true, &e2) < 0)
                pd_trace("pause files: teardown incomplete (gc finishes it)");
        snprintf(sb->template_buf, sizeof sb->template_buf, "%s", name);
        sb->agent_start = 0;
        /* paused now whatever this says: a server restart before the
         * resume is what loses it (the sandbox is then marked failed) */
        if (files_record_save(sb, &e2) < 0)
                pd_trace("pause files: the record for a restart not written");
        return 0;
}

static int container_resume(struct pd_sandbox *sb, struct pd_error *err)
{
        struct pd_host_data *h = pd_host(sb);
        if (!h->files_paused)
                return pd_host_freeze(sb, false, err);
        sb->spec.template_name = h->files_snapshot;
        sb->spec.template_dir = NULL;
        struct pd_netpol np = { 0 };
        int r = 0;
        /* the mode the policy says (a sandbox adopted by a new server has
         * nothing else to go by) */
        sb->spec.net = PD_NET_NONE;
        if (h->files_netpol) {
                if ((r = pd_netpol_from_json_str(h->files_netpol, strlen(h->files_netpol), &np, err)) < 0)
                        return pd_error_prefix(err, "resume: the saved network policy");
                sb->spec.net = np.mode == PD_NETPOL_OPEN ? PD_NET_OPEN
                             : np.mode == PD_NETPOL_POLICY ? PD_NET_POLICY : PD_NET_NONE;
                sb->spec.netpol = sb->spec.net != PD_NET_NONE ? &np : NULL;
        }
        /* the pause's record goes: create makes the dir and its own */
        (void)pd_rm_rf(sb->dir, NULL);
        h->files_paused = false;
        r = create_tier(sb, sb->ops == &pd_tier_supervised, err);
        sb->spec.netpol = NULL;
        pd_netpol_free(&np);
        if (r < 0) {
                /* still paused, its files kept in the snapshot: a later
                 * resume may try again (also after a restart) */
                struct pd_error e2 = { 0 };
                (void)teardown(sb, false, &e2);
                h->files_paused = true;
                snprintf(sb->template_buf, sizeof sb->template_buf, "%s", h->files_snapshot);
                (void)files_record_save(sb, &e2);
                return pd_error_prefix(err, "resume (a fresh boot on the saved filesystem)");
        }
        h->files_paused = false;
        free(h->files_netpol);
        h->files_netpol = NULL;
        return 0;
}

/* Killing the agent (PID 1) makes the kernel kill the whole pid namespace,
 * and the agent's exit is reported only once every member is gone. */
static int container_destroy(struct pd_sandbox *sb, struct pd_error *err)
{
        free(pd_host(sb)->files_netpol);
        pd_host(sb)->files_netpol = NULL;
        return teardown(sb, true, err);
}

/* The agent is the pid namespace's init: its exit, which pd_host_kill_agent
 * waits for, is reported once every process in the namespace is gone. */
static int container_stop(struct pd_sandbox *sb, struct pd_error *err)
{
        (void)err;
        pd_host_kill_agent(sb);
        return 0;
}

/* supervised: the supervisor too, so that its audit lines are written
 * before the delete answers. */
static int supervised_stop(struct pd_sandbox *sb, struct pd_error *err)
{
        (void)err;
        pd_host_kill_agent(sb);
        pd_supervisor_stop(sb);
        return 0;
}

/* unuse: the sandbox stops using its template's snapshots (not while a
 * filesystem-only pause keeps its files in one). */
static int teardown(struct pd_sandbox *sb, bool unuse, struct pd_error *err)
{
        pd_host_kill_agent(sb);
        pd_supervisor_stop(sb);
        /* The host's clone of the writable layer (absent for paddock run). */
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/mnt", sb->dir);
        (void)umount2(stage, MNT_DETACH);
        if (unuse)
                pd_snapshot_unuse(sb->state, sb->template_buf, sb->id);
        pd_trace("destroy: agent killed, pid namespace gone");
        /* veth goes with the netns; its rules, slot and netd entry here */
        struct pd_error nerr;
        int nr = pd_sbnet_release(sb->state, sb->id, &nerr);
        pd_trace("destroy: network released");
        int r = pd_host_release(sb, err);
        if (nr < 0 && r >= 0) {
                *err = nerr;
                r = nr;
        }
        pd_trace("destroy: cgroups, uid range, runtime dir released");
        return r;
}

/* The cgroup's figures, and the writable layer's use: its tmpfs, attached
 * by the host at <sandbox dir>/mnt (keep_stage). Not attached (a one-shot
 * run): disk_used stays 0, unknown. */
static int container_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err)
{
        int r = pd_host_stats(sb, out, err);
        if (r < 0)
                return r;
        /* by path: an adopted sandbox has no dirfd */
        char mnt[PATH_MAX + 8];
        snprintf(mnt, sizeof mnt, "%s/mnt", sb->dir);
        int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct statfs fs;
        if (fd >= 0 && fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC)
                out->disk_used = (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
        if (fd >= 0)
                close(fd);
        return 0;
}

const struct pd_tier_ops pd_tier_container = {
        .name = "container",
        .isolates = PD_ISOLATES_CONTAINER,
        .host_check = pd_facts_container,
        .data_size = sizeof(struct pd_host_data),
        .save = container_save,
        .load = container_load,
        .close = pd_host_close,
        .gc = pd_host_gc,
        .net_info = pd_host_net_info,
        .net_update = pd_host_net_update,
        .create = container_create,
        .connect = pd_host_connect,
        .pause = container_pause,
        .pause_files = container_pause_files,
        .resume = container_resume,
        .snapshot = pd_container_snapshot,
        .stop = container_stop,
        .destroy = container_destroy,
        .stats = container_stats,
        .adopt = container_adopt,
};

/* supervised: the container tier plus a supervisor brokering opens and
 * connects and auditing execs (src/jail/supervisor_launch.c). */
const struct pd_tier_ops pd_tier_supervised = {
        .name = "supervised",
        .isolates = PD_ISOLATES_SUPERVISED,
        .host_check = pd_facts_container,
        .caps = PD_TIER_POLICY_FILE,
        .data_size = sizeof(struct pd_host_data),
        .save = container_save,
        .load = container_load,
        .close = pd_host_close,
        .gc = pd_host_gc,
        .net_info = pd_host_net_info,
        .net_update = pd_host_net_update,
        .create = supervised_create,
        .connect = pd_host_connect,
        .pause = container_pause,
        .pause_files = container_pause_files,
        .resume = container_resume,
        .snapshot = pd_container_snapshot,
        .stop = supervised_stop,
        .destroy = container_destroy,
        .stats = container_stats,
        .adopt = container_adopt,
};
