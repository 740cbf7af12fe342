/* The microvm tier's host-side parts (src/vm/): the guest's boot assets
 * (kernel, initramfs, root image), QEMU's command line and its jail, and a
 * QMP client. src/tiers/microvm.c puts them together. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"

struct pd_state;

/* Everything a guest boots from; cached under <state>/vm/ by content hash. */
struct pd_vm_assets {
        char kernel[PATH_MAX];          /* uncompressed vmlinux (PVH entry) */
        char initrd[PATH_MAX];          /* cpio newc: agent as /init + modules */
        char rootfs[PATH_MAX];          /* erofs image of the base tree */
        char key[17];                   /* hex content hash of all three */
};

/* Find or build the assets; prints a progress line on stderr while it
 * builds (the first use takes seconds). */
int pd_vm_assets_get(struct pd_state *st, struct pd_vm_assets *out, struct pd_error *err);
/* For a stopping server: end the asset builders running now (each one's
 * whole process group) and refuse new ones; their builds fail. */
void pd_vm_builders_stop(void);
/* assets_memo.c: the assets' key remembered per state dir, keyed by a
 * signature (stat identity of paths, NULL-terminated, and extra text) of
 * what the key is computed from. get: 1 when sig matches the memo. */
void pd_vm_assets_sig(char *buf, size_t size, const char *const *paths, const char *extra);
int pd_vm_assets_memo_get(const char *vmdir, const char *sig, uint64_t *h, uint64_t *hr);
void pd_vm_assets_memo_put(const char *vmdir, const char *sig, uint64_t h, uint64_t hr);
/* The kernel and initramfs only (rootfs left empty, key of those two):
 * for guests whose root image is their own (paddock-oci's microvm). */
int pd_vm_boot_assets_get(struct pd_state *st, struct pd_vm_assets *out, struct pd_error *err);

/* The assets of an image template (template.h): the boot assets and its
 * own erofs root image, made on first use under templates/<name>/vm/
 * (its path in vmdir; the tier's snapshots of it go there too). */
struct pd_template;
int pd_vm_image_assets(struct pd_state *st, const struct pd_template *t, struct pd_vm_assets *out, char *vmdir,
                       size_t vmdir_size, struct pd_error *err);

/* Remove the cached template snapshots (paddock gc frees their group ids). */
int pd_vm_gc(struct pd_state *st, struct pd_error *err);

/* kernel.c: the xz stream of a bzImage, decompressed to out_path. */
int pd_vm_kernel_extract(const char *bzimage, const char *out_path, struct pd_error *err);
/* The guest kernel package's root ($PADDOCK_GUEST_DIR, else
 * /var/cache/paddock/guest) and its kernel release. */
int pd_vm_guest_kernel(char *dir, size_t dsize, char *release, size_t rsize, struct pd_error *err);

/* initramfs.c: a cpio (newc) with the agent as /init and the modules, named
 * NN-name.ko in the order given (dependency order). */
int pd_vm_initramfs_write(const char *out_path, const char *agent, const char *moddir,
                          const char *const *modules, struct pd_error *err);

/* 64-bit FNV-1a, fed incrementally (content hashes of cache entries). */
uint64_t pd_vm_hash(uint64_t h, const void *p, size_t n);
int pd_vm_hash_file(uint64_t *h, const char *path, struct pd_error *err);
#define PD_VM_HASH_INIT 0xcbf29ce484222325ull

/* How a QEMU for one sandbox is started (qemu.c). */
struct pd_vm_launch {
        const struct pd_vm_assets *assets;
        const char *dir;                /* the sandbox's runtime dir (sockets, log) */
        uint64_t memory_bytes;
        unsigned vcpus;
        uint64_t disk_bytes;            /* guest tmpfs for the writable layer */
        unsigned pids;                  /* the guest workload cgroup's pids.max */
        const char *mem_file;           /* guest RAM in this file (template/clone) */
        bool mem_shared;                /* template: share=on; clone: share=off */
        bool mem_anon;                  /* no mem_file: anonymous RAM, same backend id
                                         * (restores of full saves: resume, fork) */
        bool incoming;                  /* -incoming defer (restore) */
        /* a virtio-net NIC whose backend is tap0, made by QEMU's child in
         * its own new netns before it drops privileges (vmnet.c wires it) */
        bool nic;
        bool die_with_parent;
        const char *append_extra;       /* more guest kernel command line (PADDOCK_VM_APPEND) */
        /* jail: run QEMU as this uid/gid (0 = keep root: tests of the jail
         * itself only) in a mount namespace whose root (a tmpfs on
         * jail_root) holds only /usr, a few device nodes, the assets, the
         * RAM file and dir */
        uid_t uid;
        gid_t gid;
        const char *jail_root;
        int cg_fds[8];                  /* cgroup.procs fds to join */
        int n_cg;
};

/* Fork + exec QEMU, jailed; returns its pid and a pidfd. */
int pd_vm_qemu_start(const struct pd_vm_launch *l, pid_t *pid, int *pidfd, struct pd_error *err);
bool pd_vm_have_kvm(void);

/* vmnet.c: in the netns of QEMU (pid), whose eth0 the router attached
 * (src/net/sbnet.h): make it a pure L2 bridge between eth0 and tap0, the
 * guest owning the sandbox's address (docs/network.md, "microvm"). */
int pd_vm_net_bridge(pid_t qemu_pid, struct pd_error *err);
/* The relay's --net=HEX argument (vmmux.h NETCFG) for a guest with
 * address addr/prefix, gateway and resolver gw. */
void pd_vm_net_relay_arg(const uint8_t addr[4], int prefix, const uint8_t gw[4], char *buf, size_t size);

/* qmp.c: one QMP session on <dir>/qmp.sock. */
struct pd_qmp;
int pd_qmp_open(const char *path, int timeout_ms, struct pd_qmp **out, struct pd_error *err);
/* Run a command (args: a JSON object text or NULL); fails on an error reply. */
int pd_qmp_cmd(struct pd_qmp *q, const char *cmd, const char *args_json, struct pd_error *err);
/* Pass fd with getfd under name. */
int pd_qmp_getfd(struct pd_qmp *q, const char *name, int fd, struct pd_error *err);
/* Wait until query-migrate says completed (or failed). */
int pd_qmp_wait_migration(struct pd_qmp *q, int timeout_ms, struct pd_error *err);
/* query-migrate once: 1 completed, 0 still going (st says how), -1 failed
 * or cancelled (err set). */
int pd_qmp_migration_status(struct pd_qmp *q, char *st, size_t size, struct pd_error *err);

/* savefile.c: a guest's saved state is written to its file by paddock,
 * never by QEMU. A file's pages are charged to the memory cgroup of the
 * process that writes them, and on a tmpfs (a state dir under a tmpfs
 * /tmp) they cannot be reclaimed: written by QEMU they would fill its own
 * limit and get it OOM-killed on the save or on the resume. */
/* Save the stopped guest into fd: QEMU migrates into a pipe that this
 * process copies into fd, so the file is charged to this process's cgroup. */
int pd_vm_migrate_to_file(struct pd_qmp *q, int fd, int timeout_ms, struct pd_error *err);
/* A file QEMU wrote (a template's RAM): if it is on a tmpfs, copy it into a
 * fully allocated file (no holes; owner and mode kept) and rename the copy
 * over it, so all its pages belong to this process's cgroup rather than to
 * QEMU's or a clone's. 1 if copied, 0 if not on a tmpfs. */
int pd_vm_recharge_file(const char *path, struct pd_error *err);
/* Wait until query-status says running (after an incoming migration + cont). */
void pd_qmp_close(struct pd_qmp *q);
