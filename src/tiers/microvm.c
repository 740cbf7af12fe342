/* The microvm tier (DESIGN §1): a QEMU `microvm` guest per sandbox whose
 * init is the paddock agent. A sandbox is a clone restored from a template
 * snapshot (guest RAM in a file mapped copy-on-write, device state saved
 * with x-ignore-shared), built on first use by booting the guest once.
 * Host processes per sandbox: QEMU (jailed, src/vm/qemu.c) and
 * paddock-vm-relay (its channel multiplexer). The record keeps QEMU as the
 * "agent" and the relay as the "supervisor" helper. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "jail/helper_proc.h"
#include "tiers/host.h"
#include "tiers/microvm_int.h"
#include "proto/client.h"
#include "lib/sandbox.h"
#include "net/sbnet.h"
#include "lib/template.h"
#include "lib/trace.h"
#include "lib/util.h"
#include "vm/vm.h"
#include "tiers/facts.h"

#define VM_BOOT_TIMEOUT_MS 120000       /* TCG on a busy host: a cold boot is seconds */
#define VM_CLONE_TIMEOUT_MS 30000
/* the template's version, in its name: its warm-up (warm_template) and the
 * guest kernel's command line (src/vm/qemu.c; w3: tsc=reliable), both saved
 * in the snapshot */
#define WARM_TAG "-w3"
#define QEMU_OVERHEAD (384ull << 20)    /* QEMU's own memory beside the guest's (TCG cache) */

struct vm_tpl {
        char dir[PATH_MAX];
        char mem[PATH_MAX + 8];
        char state[PATH_MAX + 8];
        char stamp[PATH_MAX + 8];
};

/* QEMU's own files (its sockets, the console log): <dir>/vm, owned by
 * its uid; its jail's root is <dir>/jail. */
static void qemu_dir(struct pd_sandbox *sb, char *buf, size_t size)
{
        snprintf(buf, size, "%s/vm", sb->dir);
}

/* The relay is started as soon as QEMU is (relay_spawn), so that its exec
 * and its connection to QEMU's serial socket (bound by paddock before QEMU
 * starts: the connection waits in the backlog) overlap QEMU's own start-up
 * and the state load; relay_wait then waits for its SYNC with the guest's
 * agent. Its pid is recorded at once: a failure in between (destroy of the
 * failed create, or the caller's error path) stops it with stop_relay. */
/* netarg: the relay's --net=HEX for a guest with a NIC (vmnet.c), or NULL */
static int relay_spawn(struct pd_sandbox *sb, const char *netarg, int *ready_out, struct pd_error *err)
{
        char relay[PATH_MAX], serial[PATH_MAX + 16];
        if (pd_helper_path("paddock-vm-relay", "PADDOCK_VM_RELAY", relay, sizeof relay, err) < 0)
                return -1;
        snprintf(serial, sizeof serial, "%s/vm/serial.sock", sb->dir);
        if (sb->dirfd < 0) {    /* loaded from its record (a new server) */
                sb->dirfd = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (sb->dirfd < 0)
                        return pd_error_set(err, errno, "open '%s'", sb->dir);
        }
        unlink(sb->socket_path);
        _pd_cleanup_close_ int lfd = pd_host_listen_socket(sb, err);
        if (lfd < 0)
                return lfd;
        /* the console log's cap: 1 MiB, or PADDOCK_VM_CONSOLE_MAX (tests) */
        char cmax[48] = "";
        const char *ce = getenv("PADDOCK_VM_CONSOLE_MAX");
        if (ce && *ce && strspn(ce, "0123456789") == strlen(ce) && strlen(ce) < 20)
                snprintf(cmax, sizeof cmax, "--console-max=%s", ce);
        char *argv[4] = { "paddock-vm-relay", serial, NULL, NULL };
        int ac = 2;
        if (netarg)
                argv[ac++] = (char *)netarg;
        if (cmax[0])
                argv[ac++] = cmax;
        const char *step = "";
        pid_t pid = pd_helper_spawn(relay, argv, sb->dirfd, "relay.log", &lfd, 1, ready_out, &step);
        if (pid < 0)
                return pd_error_set(err, (int)-pid, "start paddock-vm-relay (%s)", step);
        sb->supervisor_pid = pid;
        sb->supervisor_start = pd_proc_starttime(pid);
        return 0;
}

static int relay_wait(struct pd_sandbox *sb, int ready, int timeout_ms, struct pd_error *err)
{
        char msg[8];
        ssize_t n = 0;
        int r = pd_helper_wait_ready(ready, timeout_ms, msg, sizeof msg, &n);
        close(ready);
        if (r <= 0 || n != 1 || msg[0] != 'R') {
                pd_helper_kill(sb->supervisor_pid);
                sb->supervisor_pid = 0;
                char kept[PATH_MAX + 64];
                pd_microvm_keep_console(sb, kept, sizeof kept);
                return pd_error_setx(err, r == 0 ? ETIMEDOUT : EIO, "the guest's agent did not answer%s (%s)",
                                     r == 0 ? " in time" : "", kept);
        }
        return 0;
}

static int start_relay(struct pd_sandbox *sb, int timeout_ms, const char *netarg, struct pd_error *err)
{
        int ready = -1;
        if (relay_spawn(sb, netarg, &ready, err) < 0)
                return -1;
        return relay_wait(sb, ready, timeout_ms, err);
}

static void stop_relay(struct pd_sandbox *sb)
{
        if (sb->supervisor_pid > 0)
                pd_helper_stop(sb->supervisor_pid, sb->supervisor_start, SIGTERM, 1000, 2000);
        sb->supervisor_pid = 0;
}

/* PADDOCK_VM_APPEND: words added to the guest kernel's command line of a
 * template boot, for debugging a guest and for tests (a guest that cannot
 * start: "rdinit=/nonexistent"). The environment of paddock is its
 * operator's; still only plain words are taken. NULL when unset. */
static bool append_ok(const char *e)
{
        if (strlen(e) > 256)
                return false;
        for (const char *c = e; *c; c++)
                if (*c < ' ' || *c > '~' || *c == '"' || *c == '\\')
                        return false;
        return true;
}

static const char *append_extra(void)
{
        const char *e = getenv("PADDOCK_VM_APPEND");
        return e && *e && append_ok(e) ? e : NULL;      /* refused by microvm_create when not ok */
}

static int start_qemu(struct pd_sandbox *sb, const struct pd_vm_assets *as, const char *mem_file, gid_t mem_gid,
                      bool shared, bool incoming, struct pd_error *err)
{
        char qdir[PATH_MAX + 8], jail[PATH_MAX + 8];
        qemu_dir(sb, qdir, sizeof qdir);
        snprintf(jail, sizeof jail, "%s/jail", sb->dir);
        (void)mkdir(jail, 0700);
        if (mkdir(qdir, 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s'", qdir);
        if (chown(qdir, pd_host(sb)->uids.base, mem_gid) < 0)
                return pd_error_set(err, errno, "chown '%s'", qdir);
        struct pd_vm_launch l = {
                .assets = as, .dir = qdir, .memory_bytes = sb->spec.memory_bytes, .jail_root = jail,
                .vcpus = sb->spec.millicpus > 1000 ? (sb->spec.millicpus + 999) / 1000 : 1,
                .disk_bytes = sb->writable_bytes, .pids = sb->spec.pids, .mem_file = mem_file,
                .mem_shared = shared,
                .incoming = incoming, .die_with_parent = sb->die_with_parent, .mem_anon = !mem_file,
                .nic = sb->spec.net != PD_NET_NONE, .append_extra = append_extra(),
        };
        if (pd_host(sb)->have_cgroup) {
                int r = pd_cgroup_open_procs(&pd_host(sb)->cg, "agent", true, l.cg_fds, (int)PD_ARRAY_SIZE(l.cg_fds), err);
                if (r < 0)
                        return r;
                l.n_cg = r;
        }
        /* its own uid; the group of the template whose RAM file it maps */
        l.uid = pd_host(sb)->uids.base;
        l.gid = mem_gid;
        int r = pd_vm_qemu_start(&l, &sb->agent_pid, &sb->agent_pidfd, err);
        for (int i = 0; i < l.n_cg; i++)
                close(l.cg_fds[i]);
        if (r < 0)
                return r;
        sb->agent_start = pd_proc_starttime(sb->agent_pid);
        return 0;
}

static int qmp_path(struct pd_sandbox *sb, char *buf, size_t size)
{
        return snprintf(buf, size, "%s/vm/qmp.sock", sb->dir);
}

static int open_qmp(struct pd_sandbox *sb, struct pd_qmp **q, struct pd_error *err)
{
        char p[PATH_MAX + 16];
        qmp_path(sb, p, sizeof p);
        return pd_qmp_open(p, 10000, q, err);
}

/* Save the running guest's device state into fd (RAM stays in its file
 * when x-ignore-shared is on). The guest is stopped first. paddock writes
 * fd, not QEMU (src/vm/savefile.c): the save never counts against QEMU's
 * own memory limit, also when the state dir is on a tmpfs. */
static int save_state(struct pd_qmp *q, int fd, bool ignore_shared, struct pd_error *err)
{
        /* a clone was restored with x-ignore-shared, and the capability
         * travels in the stream: a full save must turn it off */
        if (pd_qmp_cmd(q, "migrate-set-capabilities",
                       ignore_shared ? "{\"capabilities\":[{\"capability\":\"x-ignore-shared\",\"state\":true}]}"
                                     : "{\"capabilities\":[{\"capability\":\"x-ignore-shared\",\"state\":false}]}",
                       err) < 0 ||
            pd_qmp_cmd(q, "stop", NULL, err) < 0 ||
            /* 7.2 caps migration at 128 MiB/s by default */
            pd_qmp_cmd(q, "migrate-set-parameters", "{\"max-bandwidth\":17179869184}", err) < 0)
                return -1;
        return pd_vm_migrate_to_file(q, fd, 600000, err);
}

static int restore_state(struct pd_qmp *q, int fd, bool ignore_shared, struct pd_error *err)
{
        if (ignore_shared &&
            pd_qmp_cmd(q, "migrate-set-capabilities",
                       "{\"capabilities\":[{\"capability\":\"x-ignore-shared\",\"state\":true}]}", err) < 0)
                return -1;
        if (pd_qmp_getfd(q, "load", fd, err) < 0 || pd_qmp_cmd(q, "migrate-incoming", "{\"uri\":\"fd:load\"}", err) < 0 ||
            pd_qmp_wait_migration(q, 600000, err) < 0)
                return -1;
        return pd_qmp_cmd(q, "cont", NULL, err);
}

static void tpl_paths(struct pd_sandbox *sb, const struct pd_vm_assets *as, const char *vmdir, struct vm_tpl *t)
{
        /* the guest's kernel command line (disk, pids) is in the snapshot */
        /* and its devices: a guest with a network has a NIC from the start
         * (a restore needs the same devices), unconfigured until a clone's
         * agent gets its NETCFG */
        /* a command line changed by PADDOCK_VM_APPEND: a template of its own */
        const char *ax = append_extra();
        char atag[32] = "";
        if (ax)
                snprintf(atag, sizeof atag, "-a%016" PRIx64, pd_vm_hash(PD_VM_HASH_INIT, ax, strlen(ax)));
        snprintf(t->dir, sizeof t->dir, "%s/tpl-%s-m%" PRIu64 "-d%" PRIu64 "-c%u-p%u%s%s" WARM_TAG, vmdir, as->key,
                 sb->spec.memory_bytes >> 20, sb->writable_bytes >> 20, sb->spec.millicpus, sb->spec.pids,
                 sb->spec.net != PD_NET_NONE ? "-net" : "", atag);
        snprintf(t->mem, sizeof t->mem, "%s/mem", t->dir);
        snprintf(t->state, sizeof t->state, "%s/state", t->dir);
        snprintf(t->stamp, sizeof t->stamp, "%s/stamp", t->dir);
}

/* The group of this state dir's template RAM files: an id above every
 * uid range paddock hands out (userns.h), one per state dir, so no
 * sandbox process of any tier ever has it. */
#define VM_TPL_GID_BASE 3700000000u
#define VM_TPL_GID_SPAN 500000000u
static gid_t tpl_gid(const struct pd_state *st)
{
        _Static_assert((uint64_t)PD_UID_BASE + (uint64_t)PD_UID_SLOTS * PD_UID_RANGE <= VM_TPL_GID_BASE,
                       "template group ids overlap the uid ranges");
        uint64_t h = pd_vm_hash(PD_VM_HASH_INIT, st->instance, strlen(st->instance));
        return (gid_t)(VM_TPL_GID_BASE + h % VM_TPL_GID_SPAN);
}

/* The template's RAM file as it was saved: QEMU 7.2 opens a share=off
 * RAM file read-write, so a clone whose QEMU was taken over could write
 * it. Any write moves its ctime, which no unprivileged process can set
 * back: checked before every clone (docs/security.md). */
static int tpl_stamp(const char *mem, char *buf, size_t size, struct pd_error *err)
{
        struct stat st;
        if (stat(mem, &st) < 0)
                return pd_error_set(err, errno, "stat '%s'", mem);
        snprintf(buf, size, "ino=%llu size=%lld mtime=%lld.%09ld ctime=%lld.%09ld uid=%u gid=%u mode=%o\n",
                 (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, st.st_uid, st.st_gid,
                 st.st_mode);
        return 0;
}

/* 1 if the template is intact, 0 if it is absent or was changed (then
 * removed, to be built again), -errno on error. */
static int tpl_check(const struct vm_tpl *t, gid_t *gid, struct pd_error *err)
{
        char want[256] = "", have[256];
        _pd_cleanup_close_ int fd = open(t->stamp, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT)
                        return pd_error_set(err, errno, "open '%s'", t->stamp);
                return pd_rm_rf(t->dir, err) < 0 ? -1 : 0;     /* half-made: start over */
        }
        ssize_t n = read(fd, want, sizeof want - 1);
        if (n <= 0)
                return pd_error_set(err, EIO, "read '%s'", t->stamp);
        want[n] = '\0';
        unsigned g = 0;
        if (tpl_stamp(t->mem, have, sizeof have, NULL) == 0 && strcmp(want, have) == 0 &&
            sscanf(strstr(have, "gid="), "gid=%u", &g) == 1 && access(t->state, R_OK) == 0) {
                *gid = g;
                return 1;
        }
        fprintf(stderr, "paddock: warning: the microvm template '%s' changed since it was saved; "
                        "discarding it\n", t->dir);
        if (pd_rm_rf(t->dir, err) < 0)
                return -1;
        return 0;
}

/* Before the template is saved: run what the first commands of every
 * clone run (an external command, a login shell), so that all they read
 * (binaries, libraries, profile files) and their lookups are in the
 * guest's page and dentry caches, which the
 * clones then share copy-on-write instead of each reading them from the
 * erofs disk again (under TCG the guest reads slowly: virtio and erofs
 * code run emulated). QEMU's translated code itself cannot be saved: each
 * clone's QEMU translates anew. WARM_TAG is in the template's name: a
 * template saved after another warm-up is not reused. Not python3 -c pass:
 * it doubled the template's boot under TCG (every test state dir pays it),
 * and python's files are read (cat above) already. */
static int warm_template(struct pd_sandbox *sb, struct pd_error *err)
{
        static const char script[] =
                "cd /usr/lib/x86_64-linux-gnu && cat /usr/bin/bash /usr/bin/echo /usr/bin/python3.11 "
                "ld-linux-x86-64.so.2 libc.so.6 libtinfo.so.6 libm.so.6 libz.so.1 libexpat.so.1 >/dev/null; "
                "cd / && /usr/bin/echo >/dev/null && /bin/bash -l -c true; true";
        int fd = pd_host_connect(sb, err);
        if (fd < 0)
                return fd;
        struct pd_client c;
        static const char *const argv[] = { "/bin/sh", "-c", script };
        /* its entry is in every clone's process table: the server hides it by this tag */
        const struct pd_spawn_opts o = { .argv = argv, .argc = PD_ARRAY_SIZE(argv), .cwd = "/",
                                         .tag = "paddock-template-warmup" };
        const struct pd_run_io io = { .timeout_ms = 120000 };    /* until its EXIT; output dropped */
        uint32_t pid;
        struct pd_exit x;
        int r = pd_client_connect(&c, fd, "paddock-template", err);
        if (r == 0)
                r = pd_client_run(&c, &o, &io, &pid, &x, err);
        pd_client_close(&c);
        return r < 0 ? pd_error_prefix(err, "warm-up") : 0;
}

/* Templates of older boot assets (another agent, kernel or package set):
 * never used again. A clone still running from one holds its RAM file's
 * inode. */
static void drop_stale_templates(struct pd_sandbox *sb, const struct pd_vm_assets *as)
{
        char vmdir[PATH_MAX], keep[64];
        snprintf(vmdir, sizeof vmdir, "%s/vm", sb->state->dir);
        snprintf(keep, sizeof keep, "tpl-%s-", as->key);
        DIR *d = opendir(vmdir);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, "tpl-", 4) || !strncmp(de->d_name, keep, strlen(keep)) ||
                    strstr(de->d_name, ".tmp"))
                        continue;
                char p[PATH_MAX + 300];
                snprintf(p, sizeof p, "%s/%s", vmdir, de->d_name);
                (void)pd_rm_rf(p, NULL);
        }
        closedir(d);
}

/* Boot the guest once with its RAM in tpl's file, wait for the agent, and
 * save the device state beside it. Runs as this sandbox (its QEMU, relay,
 * cgroup), then tears them down. */
static int build_template(struct pd_sandbox *sb, const struct pd_vm_assets *as, const struct vm_tpl *t,
                          bool image, struct pd_error *err)
{
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", t->dir);
        pd_rm_rf(tmp, NULL);
        if (mkdir(tmp, 0700) < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        char mem[PATH_MAX + 16], state[PATH_MAX + 16], stamp[PATH_MAX + 16];
        snprintf(mem, sizeof mem, "%s/mem", tmp);
        snprintf(state, sizeof state, "%s/state", tmp);
        snprintf(stamp, sizeof stamp, "%s/stamp", tmp);
        /* The RAM file belongs to root and to the templates' own group:
         * every clone's QEMU runs with it as its gid, and nothing else can
         * open the file. */
        gid_t gid = tpl_gid(sb->state);
        {
                _pd_cleanup_close_ int mfd = open(mem, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
                if (mfd < 0 || fchown(mfd, 0, gid) < 0 || fchmod(mfd, 0660) < 0 ||
                    ftruncate(mfd, (off_t)sb->spec.memory_bytes) < 0)
                        return pd_error_set(err, errno, "create '%s'", mem);
        }
        fprintf(stderr, "paddock: booting the microvm template (first use; %s)...\n",
                pd_vm_have_kvm() ? "KVM" : "TCG, no hardware virtualization");
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r = 0;
        struct pd_qmp *q = NULL;
        _pd_cleanup_close_ int sfd = -1;
        if ((r = start_qemu(sb, as, mem, gid, true, false, err)) < 0 || (r = open_qmp(sb, &q, err)) < 0 ||
            (r = pd_qmp_cmd(q, "migrate-set-capabilities",
                            "{\"capabilities\":[{\"capability\":\"x-ignore-shared\",\"state\":true}]}", err)) < 0 ||
            (r = start_relay(sb, VM_BOOT_TIMEOUT_MS, NULL, err)) < 0 || (r = warm_template(sb, err)) < 0)
                goto out;
        /* no host connection may be open in the snapshot */
        stop_relay(sb);
        sfd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (sfd < 0) {
                r = pd_error_set(err, errno, "create '%s'", state);
                goto out;
        }
        if ((r = save_state(q, sfd, true, err)) < 0 || (r = fsync(sfd)) < 0)
                goto out;
        pd_host_kill_agent(sb);
        /* QEMU filled the RAM file through its shared mapping: on a tmpfs
         * its pages would stay charged to this sandbox for as long as the
         * template lives */
        if ((r = pd_vm_recharge_file(mem, err)) < 0)
                goto out;
        char st[256];
        if ((r = tpl_stamp(mem, st, sizeof st, err)) < 0)
                goto out;
        {
                _pd_cleanup_close_ int stfd = open(stamp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (stfd < 0 || pd_write_all(stfd, st, strlen(st)) < 0 || fsync(stfd) < 0) {
                        r = pd_error_set(err, errno, "write '%s'", stamp);
                        goto out;
                }
        }
        if (chmod(tmp, 0711) < 0 || rename(tmp, t->dir) < 0) {
                r = pd_error_set(err, errno, "install template '%s'", t->dir);
                goto out;
        }
        /* an image template's snapshots live in its own directory and go
         * with it; these are the base template's */
        if (!image)
                drop_stale_templates(sb, as);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        fprintf(stderr, "paddock: microvm template ready (%.1f s)\n",
                (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
out:
        pd_qmp_close(q);
        stop_relay(sb);
        pd_host_kill_agent(sb);
        if (r < 0) {
                pd_rm_rf(tmp, NULL);
                return pd_error_prefix(err, "microvm template");
        }
        /* the next QEMU of this sandbox makes new sockets */
        char p[PATH_MAX + 16];
        qmp_path(sb, p, sizeof p);
        unlink(p);
        snprintf(p, sizeof p, "%s/vm/serial.sock", sb->dir);
        unlink(p);
        return 0;
}

/* The host side every sandbox of this tier has before its QEMU starts:
 * runtime dir, cgroup (QEMU's memory and pids), its own uid. */
static int host_setup(struct pd_sandbox *sb, struct pd_error *err)
{
        int r;
        if (mkdir(sb->dir, 0700) < 0)
                return pd_error_set(err, errno, "create sandbox dir '%s'", sb->dir);
        sb->dirfd = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sb->dirfd < 0)
                return pd_error_set(err, errno, "open '%s'", sb->dir);
        if ((r = pd_cgroup_init(&pd_host(sb)->cg, sb->state->instance, sb->id, err)) < 0)
                return r;
        pd_host(sb)->have_cgroup = true;
        struct pd_cgroup_limits lim = { sb->spec.memory_bytes + QEMU_OVERHEAD, sb->spec.pids, sb->spec.millicpus,
                                        sb->spec.memory_bytes + QEMU_OVERHEAD };
        if ((r = pd_cgroup_create(&pd_host(sb)->cg, &lim, err)) < 0)
                return r;
        char owner[64];
        snprintf(owner, sizeof owner, "%s:%s", sb->state->instance, sb->id);
        if ((r = pd_uidrange_alloc(owner, &pd_host(sb)->uids, err)) < 0)
                return r;
        pd_host(sb)->have_uids = true;
        /* The writable layer is a tmpfs in guest RAM: at most half of it,
         * so filling it is ENOSPC for the writer, never the guest's OOM. */
        sb->writable_bytes = sb->spec.disk_bytes < sb->spec.memory_bytes / 2 ? sb->spec.disk_bytes
                                                                             : sb->spec.memory_bytes / 2;
        return 0;
}

/* Start a QEMU that loads a full save (RAM included) from fd, then its
 * relay (whose SYNC resets the guest's clock and reseeds its RNG). */
static int restore_full(struct pd_sandbox *sb, const struct pd_vm_assets *as, int fd, struct pd_error *err)
{
        struct pd_qmp *q = NULL;
        int r, ready = -1;
        if ((r = start_qemu(sb, as, NULL, (gid_t)pd_host(sb)->uids.base, false, true, err)) < 0)
                return r;
        if ((r = relay_spawn(sb, NULL, &ready, err)) < 0 || (r = open_qmp(sb, &q, err)) < 0 ||
            (r = restore_state(q, fd, false, err)) < 0) {
                pd_qmp_close(q);
                if (ready >= 0)
                        close(ready);
                stop_relay(sb);
                return r;
        }
        pd_qmp_close(q);
        return relay_wait(sb, ready, VM_CLONE_TIMEOUT_MS, err);
}

/* A guest with a NIC, also after a server restart (the record does not
 * keep the network mode; the router does). */
static bool has_network(struct pd_sandbox *sb)
{
        char *pol = NULL;
        if (sb->spec.net != PD_NET_NONE)
                return true;
        if (pd_router_policy_json(sb->state, sb->id, &pol) < 0)
                return false;
        free(pol);
        return true;
}

/* What a guest with a network cannot do yet: its saved state has a NIC
 * tied to a router slot (restores of it would need the slot re-attached
 * and the guest re-addressed). */
int pd_microvm_refuse_with_network(struct pd_sandbox *sb, const char *what, struct pd_error *err)
{
        if (!has_network(sb))
                return 0;
        return pd_error_setx(err, ENOTSUP, "%s of a microvm sandbox with a network is not supported yet "
                                           "(network none only)", what);
}

int pd_microvm_save_full(struct pd_sandbox *sb, int fd, struct pd_error *err)
{
        struct pd_qmp *q = NULL;
        int r = open_qmp(sb, &q, err);
        if (r == 0)
                r = save_state(q, fd, false, err);
        if (q && !sb->paused)
                (void)pd_qmp_cmd(q, "cont", NULL, r < 0 ? NULL : err);
        pd_qmp_close(q);
        return r;
}

int pd_microvm_start_from(struct pd_sandbox *sb, int fd, struct pd_error *err)
{
        struct pd_vm_assets as;
        int r;
        if ((r = pd_vm_assets_get(sb->state, &as, err)) < 0 || (r = host_setup(sb, err)) < 0 ||
            (r = restore_full(sb, &as, fd, err)) < 0)
                return r;
        return pd_sandbox_save(sb, err);
}

static int microvm_create(struct pd_sandbox *sb, struct pd_error *err)
{
        const char *ax = getenv("PADDOCK_VM_APPEND");
        if (ax && *ax && !append_ok(ax))
                return pd_error_setx(err, EINVAL, "PADDOCK_VM_APPEND: plain words for the guest kernel's command "
                                                  "line only (printable, no quotes or backslashes, at most 256 "
                                                  "characters)");
        if (sb->spec.template_dir || sb->spec.n_volumes)
                return pd_error_setx(err, ENOTSUP, "the microvm tier runs its own base template and its own "
                                                   "snapshots only (no --template DIR or volumes yet)");
        /* an image template (docs/templates.md): its own root image */
        bool image = sb->spec.template_name && pd_template_is_image(sb->state, sb->spec.template_name);
        /* snapshots are of guests without a NIC (pd_microvm_refuse_with_network) */
        if (sb->spec.net != PD_NET_NONE && sb->spec.template_name && strcmp(sb->spec.template_name, "base") != 0 &&
            !image)
                return pd_error_setx(err, ENOTSUP, "a microvm snapshot starts with network none only "
                                                   "(template '%s')", sb->spec.template_name);
        /* a named snapshot of a guest (microvm_snap.c): a full restore */
        int s = pd_microvm_create_from_snapshot(sb, err);
        if (s != 0)
                return s < 0 ? s : 0;
        if (sb->spec.template_name && strcmp(sb->spec.template_name, "base") != 0 && !image)
                return pd_error_setx(err, ENOTSUP, "the microvm tier runs its own base template, image templates "
                                                   "and its own snapshots, not template '%s' (a snapshot of "
                                                   "another tier or a directory copy)", sb->spec.template_name);
        struct pd_vm_assets as;
        int r;
        char vmdir[PATH_MAX];
        snprintf(vmdir, sizeof vmdir, "%s/vm", sb->state->dir);
        if (image) {
                struct pd_template it;
                if ((r = pd_template_resolve(sb->state, &sb->spec, &it, err)) < 0 ||
                    (r = pd_vm_image_assets(sb->state, &it, &as, vmdir, sizeof vmdir, err)) < 0)
                        return r;
                /* it may not be removed while this guest runs (destroy
                 * drops the entry) */
                snprintf(sb->template_buf, sizeof sb->template_buf, "%s", it.bottom);
                if ((r = pd_snapshot_use(sb->state, &it, sb->id, err)) < 0)
                        return r;
        } else if ((r = pd_vm_assets_get(sb->state, &as, err)) < 0) {
                return r;
        }
        pd_trace("microvm: boot assets found");
        if ((r = host_setup(sb, err)) < 0)
                return r;
        pd_trace("microvm: cgroup and uid range");
        struct vm_tpl t;
        tpl_paths(sb, &as, vmdir, &t);
        /* one template builder per state dir at a time */
        char lockp[PATH_MAX + 16];
        snprintf(lockp, sizeof lockp, "%s/vm/lock", sb->state->dir);
        _pd_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock < 0 || flock(lock, LOCK_SH) < 0)
                return pd_error_set(err, errno, "lock '%s'", lockp);
        gid_t gid = 0;
        if ((r = tpl_check(&t, &gid, err)) < 0)
                return r;
        if (r == 0) {
                flock(lock, LOCK_UN);
                if (flock(lock, LOCK_EX) < 0)
                        return pd_error_set(err, errno, "lock '%s'", lockp);
                if ((r = tpl_check(&t, &gid, err)) < 0)
                        return r;
                if (r == 0 && ((r = build_template(sb, &as, &t, image, err)) < 0 || (r = tpl_check(&t, &gid, err)) < 0))
                        return r;
                if (r == 0)
                        return pd_error_setx(err, EIO, "microvm template '%s' changed while it was built", t.dir);
        }
        _pd_cleanup_close_ int sfd = open(t.state, O_RDONLY | O_CLOEXEC);
        if (sfd < 0)
                return pd_error_set(err, errno, "open '%s'", t.state);
        /* a clone: the template's RAM mapped private (copy-on-write) */
        struct pd_qmp *q = NULL;
        pd_trace("microvm: assets, cgroup, template checked");
        /* network: a router slot (released by destroy, also of a failed
         * create), then QEMU's netns attached as a container's is and
         * bridged to the guest's tap (src/vm/vmnet.c) */
        struct pd_sbnet net = { 0 };
        char netarg[80] = "";
        if (sb->spec.net != PD_NET_NONE && (r = pd_sbnet_prepare(sb, &net, err)) < 0) {
                pd_sbnet_close(&net);
                return r;
        }
        if ((r = start_qemu(sb, &as, t.mem, gid, false, true, err)) < 0) {
                pd_sbnet_close(&net);
                return r;
        }
        pd_trace("microvm: QEMU started (jailed)");
        if (sb->spec.net != PD_NET_NONE) {
                r = pd_sbnet_attach(sb, &net, sb->agent_pid, err);
                if (r >= 0)
                        r = pd_vm_net_bridge(sb->agent_pid, err);
                if (r >= 0)
                        pd_vm_net_relay_arg(net.slot.sb_addr, net.slot.prefix, net.slot.gw_addr, netarg,
                                            sizeof netarg);
                pd_sbnet_close(&net);
                if (r < 0)
                        return r;
                pd_trace("microvm: network attached");
        }
        int ready = -1;
        if ((r = relay_spawn(sb, netarg[0] ? netarg : NULL, &ready, err)) < 0)
                return r;
        pd_trace("microvm: relay started");
        if ((r = open_qmp(sb, &q, err)) < 0) {
                pd_qmp_close(q);
                close(ready);
                return r;       /* the relay: stopped by the destroy of this failed create */
        }
        pd_trace("microvm: QMP connected");
        if ((r = restore_state(q, sfd, true, err)) < 0) {
                pd_qmp_close(q);
                close(ready);
                return r;
        }
        pd_trace("microvm: device state restored, guest running");
        pd_qmp_close(q);
        flock(lock, LOCK_UN);
        if ((r = relay_wait(sb, ready, VM_CLONE_TIMEOUT_MS, err)) < 0)
                return r;
        pd_trace("microvm: relay synced with the guest");
        return pd_sandbox_save(sb, err);
}

static int microvm_connect(struct pd_sandbox *sb, struct pd_error *err)
{
        return pd_host_connect(sb, err);
}

static int microvm_pause(struct pd_sandbox *sb, struct pd_error *err)
{
        struct pd_qmp *q = NULL;
        int r = open_qmp(sb, &q, err);
        if (r == 0)
                r = pd_qmp_cmd(q, "stop", NULL, err);
        pd_qmp_close(q);
        return r;
}

/* A paused-to-disk sandbox's saved state: on the state dir's disk (the
 * runtime dir is tmpfs), <state>/vm/paused/<id>. */
static void paused_path(struct pd_sandbox *sb, char *buf, size_t size)
{
        snprintf(buf, size, "%s/vm/paused/%s", sb->state->dir, sb->id);
}

static int microvm_pause_to_disk(struct pd_sandbox *sb, struct pd_error *err)
{
        char dir[PATH_MAX], file[PATH_MAX + 16], tmp[PATH_MAX + 16];
        paused_path(sb, dir, sizeof dir);
        snprintf(file, sizeof file, "%s/state", dir);
        snprintf(tmp, sizeof tmp, "%s/state.tmp", dir);
        if (access(file, F_OK) == 0)
                return pd_error_setx(err, EALREADY, "sandbox %s is already paused to disk", sb->id);
        if (pd_microvm_refuse_with_network(sb, "pause to disk", err) < 0)
                return -1;
        if (pd_mkdir_p(dir, 0700, err) < 0)
                return -1;
        _pd_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        struct pd_qmp *q = NULL;
        int r = open_qmp(sb, &q, err);
        /* a clone's RAM is private (share=off): the save carries all of it */
        if (r == 0)
                r = save_state(q, fd, false, err);
        if (r == 0 && fsync(fd) < 0)
                r = pd_error_set(err, errno, "fsync '%s'", tmp);
        if (r == 0 && rename(tmp, file) < 0)
                r = pd_error_set(err, errno, "rename '%s'", tmp);
        if (r < 0) {
                /* leave it running as it was */
                if (q)
                        (void)pd_qmp_cmd(q, "cont", NULL, NULL);
                pd_qmp_close(q);
                unlink(tmp);
                return pd_error_prefix(err, "pause to disk");
        }
        pd_qmp_close(q);
        sb->paused = true;              /* before QEMU exits: the server's watcher checks it */
        stop_relay(sb);
        pd_host_kill_agent(sb);         /* QEMU: its memory goes back to the host */
        sb->agent_start = 0;
        return pd_sandbox_save(sb, err);
}

static int microvm_resume(struct pd_sandbox *sb, struct pd_error *err)
{
        char dir[PATH_MAX], file[PATH_MAX + 16];
        paused_path(sb, dir, sizeof dir);
        snprintf(file, sizeof file, "%s/state", dir);
        _pd_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT)
                        return pd_error_set(err, errno, "open '%s'", file);
                struct pd_qmp *q = NULL;
                int r = open_qmp(sb, &q, err);
                if (r == 0)
                        r = pd_qmp_cmd(q, "cont", NULL, err);
                pd_qmp_close(q);
                return r;
        }
        struct pd_vm_assets as;
        int r;
        if ((r = pd_vm_assets_get(sb->state, &as, err)) < 0)
                return r;
        /* after a host reboot its runtime dir, cgroup and uid range are
         * gone (pd_sandbox_revive): made anew, as for a create */
        if (access(sb->dir, F_OK) < 0 && (r = host_setup(sb, err)) < 0)
                return pd_error_prefix(err, "resume from disk after a reboot");
        /* sockets of the QEMU that saved it */
        char p[PATH_MAX + 16];
        qmp_path(sb, p, sizeof p);
        unlink(p);
        snprintf(p, sizeof p, "%s/vm/serial.sock", sb->dir);
        unlink(p);
        if ((r = restore_full(sb, &as, fd, err)) < 0) {
                stop_relay(sb);
                pd_host_kill_agent(sb);
                return pd_error_prefix(err, "resume from disk");
        }
        pd_rm_rf(dir, NULL);
        return pd_sandbox_save(sb, err);
}

/* fork N: the source's memory and devices (its disk is a tmpfs in that
 * memory) saved once, each copy restored from it; the source runs on. */
static int microvm_fork(struct pd_sandbox *src, struct pd_sandbox *const *dst, unsigned n, struct pd_error *err)
{
        if (pd_microvm_refuse_with_network(src, "fork", err) < 0)
                return -1;
        char file[PATH_MAX + 32];
        snprintf(file, sizeof file, "%s/vm/fork-%s.state", src->state->dir, src->id);
        _pd_cleanup_close_ int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s'", file);
        unlink(file);   /* nobody else needs its name */
        struct pd_qmp *q = NULL;
        int r = open_qmp(src, &q, err);
        if (r == 0)
                r = save_state(q, fd, false, err);
        /* the source goes on as it was: running, or paused in memory */
        if (q && !src->paused)
                (void)pd_qmp_cmd(q, "cont", NULL, r < 0 ? NULL : err);
        pd_qmp_close(q);
        if (r < 0)
                return pd_error_prefix(err, "fork: save the source");
        struct pd_vm_assets as;
        if ((r = pd_vm_assets_get(src->state, &as, err)) < 0)
                return r;
        for (unsigned i = 0; i < n; i++) {
                struct pd_sandbox *d = dst[i];
                d->die_with_parent = src->die_with_parent;
                int dfd = open(pd_fd_path(fd).s, O_RDONLY | O_CLOEXEC);     /* own file offset per restore */
                if (dfd < 0)
                        return pd_error_set(err, errno, "reopen the fork's state");
                r = host_setup(d, err);
                if (r == 0)
                        r = restore_full(d, &as, dfd, err);
                close(dfd);
                if (r == 0)
                        r = pd_sandbox_save(d, err);
                if (r < 0)
                        return pd_error_prefix(err, "fork %u of %u", i + 1, n);
        }
        return 0;
}

static int microvm_destroy(struct pd_sandbox *sb, struct pd_error *err)
{
        stop_relay(sb);
        pd_host_kill_agent(sb);
        /* started from a snapshot: no longer one of its users */
        if (sb->template_buf[0])
                pd_snapshot_unuse(sb->state, sb->template_buf, sb->id);
        char dir[PATH_MAX];
        paused_path(sb, dir, sizeof dir);
        (void)pd_rm_rf(dir, NULL);
        /* QEMU's netns (veth, tap, bridge) died with it; its rules, slot
         * and netd entry here (none: nothing to do) */
        struct pd_error nerr;
        int nr = pd_sbnet_release(sb->state, sb->id, &nerr);
        int r = pd_host_release(sb, err);
        if (nr < 0 && r >= 0) {
                *err = nerr;
                r = nr;
        }
        return r;
}

static int microvm_stats(struct pd_sandbox *sb, struct pd_sandbox_stats *out, struct pd_error *err)
{
        int r = pd_host_stats(sb, out, err);
        if (r < 0 || sb->agent_pid <= 0 || pd_proc_starttime(sb->agent_pid) != sb->agent_start)
                return r;       /* paused to disk: no QEMU, nothing resident */
        /* The workload is the guest: what its QEMU holds and has run. */
        char p[64], buf[1024];
        unsigned long long size = 0, rss = 0, ut = 0, st = 0;
        snprintf(p, sizeof p, "/proc/%d/statm", (int)sb->agent_pid);
        if (pd_read_file_at(AT_FDCWD, p, buf, sizeof buf) > 0 && sscanf(buf, "%llu %llu", &size, &rss) == 2)
                out->memory_current = rss * (uint64_t)sysconf(_SC_PAGESIZE);
        snprintf(p, sizeof p, "/proc/%d/stat", (int)sb->agent_pid);
        const char *f = pd_read_file_at(AT_FDCWD, p, buf, sizeof buf) > 0 ? strrchr(buf, ')') : NULL;
        /* after "pid (comm)": fields 3.. ; utime and stime are 14 and 15 */
        if (f && sscanf(f + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
                out->cpu_ns = (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
        if (out->memory_peak < out->memory_current)
                out->memory_peak = out->memory_current;
        return 0;
}

static int microvm_adopt(struct pd_sandbox *sb, struct pd_error *err)
{
        /* paused to disk: no QEMU to find, resume starts one */
        char dir[PATH_MAX], file[PATH_MAX + 16];
        paused_path(sb, dir, sizeof dir);
        snprintf(file, sizeof file, "%s/state", dir);
        if (access(file, R_OK) == 0) {
                sb->paused = true;
                return 0;
        }
        return pd_host_adopt(sb, err);
}

/* Its cgroups and uid ranges, and the saved guests of the state dir. */
static int microvm_gc(struct pd_state *st, struct pd_error *err)
{
        int ret = pd_host_gc(st, err);
        if (pd_vm_gc(st, ret == 0 ? err : NULL) < 0 && ret == 0)
                ret = -EIO;
        /* the console logs of failed starts stay for their retention */
        (void)pd_microvm_console_gc(st);
        return ret;
}

/* The host's CPU cannot change while we run: read /proc/cpuinfo once, not
 * for every sandbox's info (a benign race sets the same value twice). */
static void microvm_describe(const struct pd_sandbox *sb, struct pd_tier_info *out)
{
        static int kvm = -1;
        int k = __atomic_load_n(&kvm, __ATOMIC_RELAXED);
        if (k < 0) {
                k = pd_vm_have_kvm();
                __atomic_store_n(&kvm, k, __ATOMIC_RELAXED);
        }
        /* emulated (tcg) or hardware virtualization (kvm) */
        snprintf(out->accel, sizeof out->accel, "%s", k ? "kvm" : "tcg");
}

const struct pd_tier_ops pd_tier_microvm = {
        .name = "microvm",
        .isolates = PD_ISOLATES_MICROVM,
        .host_check = pd_facts_microvm,
        .create = microvm_create,
        .connect = microvm_connect,
        .caps = PD_TIER_PAUSE_DISK | PD_TIER_SNAPSHOT_MEMORY | PD_TIER_OWN_TEMPLATES | PD_TIER_POOL_WARMUP,
        /* the guest kernel keeps ~47 MiB: 96M boots with ~49 MiB for the
         * agent and the command (measured, TCG, Debian's kernel); 80M does
         * not reach the agent */
        .memory_min = 96ull << 20,
        .data_size = sizeof(struct pd_host_data),
        .save = pd_host_save,
        .load = pd_host_load,
        .close = pd_host_close,
        .gc = microvm_gc,
        .net_info = pd_host_net_info,
        .net_update = pd_host_net_update,
        .describe = microvm_describe,
        .pause = microvm_pause,
        .pause_to_disk = microvm_pause_to_disk,
        .resume = microvm_resume,
        .fork = microvm_fork,
        .snapshot = pd_microvm_snapshot,
        .destroy = microvm_destroy,
        .stats = microvm_stats,
        .adopt = microvm_adopt,
};
