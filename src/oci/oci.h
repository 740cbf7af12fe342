/* paddock-oci: an OCI runtime with runc's command line (docs/oci.md).
 *
 * The runtime is one short-lived process per verb. `create` clones the
 * container's init, which builds the container (namespaces, mounts,
 * cgroups, capabilities, seccomp) and then blocks opening <root>/<id>/exec.fifo
 * for writing; `start` opens it for reading, which lets the init exec the
 * workload. Everything that outlives a verb is recorded under --root and
 * removed by `delete`. paddock-oci is single-threaded, so its children may
 * use malloc and stdio. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "jail/caps.h"
#include "jail/cgroup_limits.h"
#include "lib/error.h"

#define OCI_ROOT_DEFAULT "/run/paddock-oci"
#define OCI_MAX_NS 8

struct oci_global {
        const char *root;
        const char *log_path;
        bool log_json;
        bool debug;
        bool systemd_cgroup;
};

/* ---- log.c: --log / --log-format; errors also go to stderr ---- */
void oci_log_init(const struct oci_global *g);
void oci_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define oci_warn(...) oci_log("warning", __VA_ARGS__)
#define oci_debug(...) oci_log("debug", __VA_ARGS__)
#define oci_info(...) oci_log("info", __VA_ARGS__)
void oci_fail(const struct pd_error *err);

/* ---- config.c: config.json, validated up front ---- */
struct oci_process {
        char **args;                    /* NULL-terminated */
        char **env;                     /* NULL-terminated */
        char *cwd;
        uid_t uid;
        gid_t gid;
        gid_t *gids;
        size_t n_gids;
        mode_t umask;
        bool has_umask;
        struct pd_caps caps;
        bool has_caps;
        struct pd_rlimit *rlimits;
        size_t n_rlimits;
        bool no_new_privs;
        bool terminal;
        int oom_score_adj;
        bool has_oom_score_adj;
        unsigned console_h, console_w;
        const char *apparmor_profile;   /* NULL: unset, or not applied (lsm.c) */
        const char *selinux_label;
};

struct oci_mount {
        char *destination;
        char *type;
        char *source;
        unsigned long flags;            /* MS_* set */
        unsigned long clear_flags;      /* MS_* the options turn off (e.g. "rw") */
        unsigned long propagation;      /* MS_SHARED/SLAVE/PRIVATE/UNBINDABLE (| MS_REC) */
        bool bind, rec;
        char *data;                     /* the rest, comma separated */
};

struct oci_ns {
        int flag;                       /* CLONE_NEW* */
        char *path;                     /* NULL: a new one */
};

/* linux.resources, typed (resources.c): lim borrows the lists below and
 * the document's strings. */
struct oci_resources {
        struct pd_cg_limits lim;
        struct pd_cg_device *devices;
        struct pd_cg_blkio_dev *blkio;
        struct pd_cg_hugepage *hugepages;
        struct pd_cg_ifprio *prios;
        struct pd_cg_kv *unified;
        bool rdma;                      /* given; not supported (logged) */
};

struct oci_config {
        json_t *json;                   /* the whole document (owns the strings below) */
        char *bundle;                   /* absolute */
        char *rootfs;                   /* absolute */
        bool root_readonly;
        struct oci_process proc;
        char *hostname;
        char *domainname;
        struct oci_mount *mounts;
        size_t n_mounts;
        struct oci_ns ns[OCI_MAX_NS];
        size_t n_ns;
        char *uid_map, *gid_map;        /* "inside outside count\n" lines, NULL if none */
        char *cgroups_path;
        unsigned long rootfs_propagation;
        struct oci_resources res;
        json_t *seccomp, *hooks, *annotations, *sysctl, *devices;
        json_t *masked, *readonly_paths;
        char *isolation;                /* run.oci.paddock.isolation (default "container") */
};

int oci_config_load(const char *bundle, struct oci_config *c, struct pd_error *err);
int oci_config_parse(json_t *root, const char *bundle, struct oci_config *c, struct pd_error *err);
/* Parse a process object (config.json's "process", or exec --process). */
int oci_process_parse(json_t *p, struct oci_process *out, struct pd_error *err);
void oci_config_free(struct oci_config *c);
int oci_ns_flag(const struct oci_config *c, int flag);   /* index in c->ns, or -1 */
const char *oci_ns_name(int flag);
int oci_cap_from_name(const char *name);
/* ---- resources.c: linux.resources, checked, into typed limits ---- */
int oci_resources_parse(json_t *resources, struct oci_resources *res, struct pd_error *err);
void oci_resources_free(struct oci_resources *res);
int oci_signal_parse(const char *s);

/* ---- sysctl.c: linux.sysctl, only of namespaces the container owns ---- */
int oci_sysctl_check(const struct oci_config *c, struct pd_error *err);   /* at create, before anything exists */
int oci_sysctl_apply(const struct oci_config *c, struct pd_error *err);   /* in the init, after pivot_root */

/* ---- state.c: <root>/<id>/ ---- */
enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_PAUSED, OCI_STOPPED };

struct oci_state {
        char id[256];
        char dir[4096];                 /* <root>/<id> */
        pid_t pid;
        uint64_t pid_start;             /* /proc/<pid>/stat starttime, against reuse */
        char bundle[4096];
        char rootfs[4096];
        char created[64];               /* RFC 3339 */
        char cgroup[4096];              /* path below each hierarchy's root */
        pid_t supervisor;               /* supervised: paddock-supervisor, 0 = none */
        uint64_t supervisor_start;
        json_t *annotations;
        json_t *config;                 /* copy of config.json, kept for exec and hooks */
};

int oci_id_check(const char *id, struct pd_error *err);
int oci_state_dir(const struct oci_global *g, const char *id, char *out, size_t size, struct pd_error *err);
int oci_state_load(const struct oci_global *g, const char *id, struct oci_state *st, struct pd_error *err);
int oci_state_save(const struct oci_state *st, struct pd_error *err);
void oci_state_free(struct oci_state *st);
enum oci_status oci_state_status(const struct oci_state *st);
const char *oci_status_name(enum oci_status s);
/* The state JSON the runtime spec defines. */
json_t *oci_state_json(const struct oci_state *st, enum oci_status s);
void oci_now_rfc3339(char *buf, size_t n);
int oci_write_pid_file(const char *path, pid_t pid, struct pd_error *err);
bool oci_pid_alive(pid_t pid, uint64_t start);
/* Wait (on a pidfd) up to timeout_ms for pid to exit. 0, or -ETIMEDOUT. */
int oci_pid_wait_gone(pid_t pid, uint64_t start, int timeout_ms);

/* ---- cgroup.c: the container's cgroup at its path in every hierarchy,
 * through the jail's cgroup layer (jail/cgroupfs.h, jail/cgroup_limits.h) ---- */
int oci_cgroup_path(const struct oci_global *g, const struct oci_config *c, const char *id, char *out,
                    size_t size, struct pd_error *err);
/* Make the cgroup in every hierarchy, write lim (what this host cannot
 * enforce is logged), move pid in (if > 0). */
int oci_cgroup_setup(const char *path, const struct pd_cg_limits *lim, pid_t pid, struct pd_error *err);
int oci_cgroup_enter(const char *path, pid_t pid, struct pd_error *err);
/* pids in the cgroup (malloc'd array). */
int oci_cgroup_pids(const char *path, pid_t **out, size_t *n, struct pd_error *err);
int oci_cgroup_freeze(const char *path, bool frozen, struct pd_error *err);
bool oci_cgroup_frozen(const char *path);
/* Kill what is left and remove the directories; missing is fine. */
int oci_cgroup_destroy(const char *path, struct pd_error *err);
/* 2 or 1; 0: no cgroupfs. */
int oci_cgroup_version(void);
/* The hierarchies, found once per process: how many; *h gets them. */
unsigned oci_cgroup_hierarchies(const struct pd_cg_hier **h);

/* ---- rootfs.c: in the init, in its new mount namespace ---- */
int oci_rootfs_prepare(const struct oci_config *c, struct pd_error *err);
int oci_rootfs_pivot(const struct oci_config *c, struct pd_error *err);
int oci_rootfs_finish(const struct oci_config *c, struct pd_error *err);
/* Open path inside the rootfs dirfd without leaving it; EXDEV with a clear
 * message when a symlink points out of it. */
int oci_open_in_root(int rootfd, const char *path, int flags, struct pd_error *err);

/* ---- seccomp.c ---- */
struct pd_bpf;
/* The config's profile translated for libseccomp, or paddock's default
 * filter (src/jail/seccomp.c) when the config has none, as BPF built in
 * the runtime (cached under <root>/.seccomp-cache) for the child to
 * install with oci_seccomp_install. */
int oci_seccomp_prepare(json_t *seccomp, const char *root, struct pd_bpf *out, struct pd_error *err);
int oci_seccomp_install(const struct pd_bpf *f, struct pd_error *err);

/* ---- proc.c: what both the init and exec'd processes do before exec ---- */
/* The bounding set, user and groups, umask, then the capability sets. */
int oci_proc_become(const struct oci_process *p, struct pd_error *err);
/* Resolve args[0] through the process's PATH; out gets the file to exec. */
int oci_proc_find_exec(const struct oci_process *p, char *out, size_t size, struct pd_error *err);
/* terminal=true: a pty inside the container, the master sent over sock. */
int oci_proc_console(int sock, const struct oci_process *p, struct pd_error *err);

/* ---- lsm.c: process.apparmorProfile, process.selinuxLabel ---- */
/* In the runtime: drop (and log) a label whose LSM this host does not run. */
void oci_lsm_check(struct oci_process *p);
/* In the container, before exec: the labels for the exec. */
int oci_proc_set_lsm(const struct oci_process *p, struct pd_error *err);
int oci_console_connect(const char *path, struct pd_error *err);

/* ---- hooks.c ---- */
int oci_hooks_run(json_t *hooks, const char *which, json_t *state, struct pd_error *err);
/* The hooks of create, in order: prestart (deprecated; sees status "created",
 * as runtime-tools' hooks_stdin asserts and crun does), then createRuntime
 * (sees "creating"). */
int oci_hooks_run_create(json_t *hooks, const struct oci_state *st, struct pd_error *err);

/* ---- verbs ---- */
int oci_cmd_create(const struct oci_global *g, int argc, char **argv, bool run);
int oci_cmd_start(const struct oci_global *g, int argc, char **argv);
int oci_cmd_state(const struct oci_global *g, int argc, char **argv);
int oci_cmd_kill(const struct oci_global *g, int argc, char **argv);
int oci_cmd_delete(const struct oci_global *g, int argc, char **argv);
int oci_cmd_exec(const struct oci_global *g, int argc, char **argv);
int oci_cmd_ps(const struct oci_global *g, int argc, char **argv);
int oci_cmd_pause(const struct oci_global *g, int argc, char **argv, bool pause);
int oci_cmd_list(const struct oci_global *g, int argc, char **argv);
int oci_cmd_features(const struct oci_global *g, int argc, char **argv);
int oci_cmd_spec(const struct oci_global *g, int argc, char **argv);

/* Start an already created container (shared by start and run). */
int oci_start(const struct oci_global *g, const char *id, struct pd_error *err);
/* Delete; force kills a running one first. */
int oci_delete(const struct oci_global *g, const char *id, bool force, struct pd_error *err);
