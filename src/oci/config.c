/* config.json: parsed once, validated before anything is created, so a bad
 * bundle is a clear error that changes nothing. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include "oci/oci.h"

#define CONFIG_MAX_BYTES (4u << 20)

static const struct { const char *name; int flag; } ns_table[] = {
        { "pid", CLONE_NEWPID },   { "network", CLONE_NEWNET }, { "mount", CLONE_NEWNS },
        { "ipc", CLONE_NEWIPC },   { "uts", CLONE_NEWUTS },     { "user", CLONE_NEWUSER },
        { "cgroup", CLONE_NEWCGROUP }, { "time", CLONE_NEWTIME },
};

const char *oci_ns_name(int flag)
{
        for (size_t i = 0; i < sizeof ns_table / sizeof ns_table[0]; i++)
                if (ns_table[i].flag == flag)
                        return ns_table[i].name;
        return "?";
}

int oci_ns_flag(const struct oci_config *c, int flag)
{
        for (size_t i = 0; i < c->n_ns; i++)
                if (c->ns[i].flag == flag)
                        return (int)i;
        return -1;
}

static const char *const cap_names[] = {
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
        "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
        "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
        "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
        "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
};

int oci_cap_from_name(const char *name)
{
        for (size_t i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
                if (strcasecmp(name, cap_names[i]) == 0 || strcasecmp(name, cap_names[i] + 4) == 0)
                        return (int)i;
        return -1;
}

static const struct { const char *name; int res; } rlimit_table[] = {
        { "RLIMIT_AS", RLIMIT_AS },         { "RLIMIT_CORE", RLIMIT_CORE },
        { "RLIMIT_CPU", RLIMIT_CPU },       { "RLIMIT_DATA", RLIMIT_DATA },
        { "RLIMIT_FSIZE", RLIMIT_FSIZE },   { "RLIMIT_LOCKS", RLIMIT_LOCKS },
        { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK }, { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
        { "RLIMIT_NICE", RLIMIT_NICE },     { "RLIMIT_NOFILE", RLIMIT_NOFILE },
        { "RLIMIT_NPROC", RLIMIT_NPROC },   { "RLIMIT_RSS", RLIMIT_RSS },
        { "RLIMIT_RTPRIO", RLIMIT_RTPRIO }, { "RLIMIT_RTTIME", RLIMIT_RTTIME },
        { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING }, { "RLIMIT_STACK", RLIMIT_STACK },
};

int oci_signal_parse(const char *s)
{
        static const struct { const char *n; int sig; } t[] = {
                { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ILL", SIGILL },
                { "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "IOT", SIGIOT }, { "BUS", SIGBUS },
                { "FPE", SIGFPE }, { "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },
                { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
                { "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP },
                { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU }, { "URG", SIGURG },
                { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },
                { "WINCH", SIGWINCH }, { "IO", SIGIO }, { "PWR", SIGPWR }, { "SYS", SIGSYS },
        };
        if (!s || !*s)
                return -EINVAL;
        char *end;
        long v = strtol(s, &end, 10);
        if (*end == '\0')
                return v > 0 && v < NSIG ? (int)v : -EINVAL;
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
                if (strcasecmp(s, t[i].n) == 0)
                        return t[i].sig;
        if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
                long off = s[5] ? strtol(s + 5, &end, 10) : 0;
                if (s[5] && *end)
                        return -EINVAL;
                int sig = strncasecmp(s, "RTMIN", 5) == 0 ? SIGRTMIN + (int)off : SIGRTMAX + (int)off;
                return sig >= SIGRTMIN && sig <= SIGRTMAX ? sig : -EINVAL;
        }
        return -EINVAL;
}

static char *str_or_null(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_string(v) ? (char *)json_string_value(v) : NULL;
}

static int string_array(json_t *a, const char *what, char ***out, struct pd_error *err)
{
        *out = NULL;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return pd_error_setx(err, EINVAL, "config.json: %s must be an array of strings", what);
        char **v = calloc(json_array_size(a) + 1, sizeof *v);
        if (!v)
                return pd_error_set(err, ENOMEM, "config.json");
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
                if (!json_is_string(e)) {
                        free(v);
                        return pd_error_setx(err, EINVAL, "config.json: %s[%zu] is not a string", what, i);
                }
                v[i] = (char *)json_string_value(e);
        }
        *out = v;
        return 0;
}

static int caps_set(json_t *a, const char *what, uint64_t *out, struct pd_error *err)
{
        *out = 0;
        if (!a)
                return 0;
        if (!json_is_array(a))
                return pd_error_setx(err, EINVAL, "config.json: process.capabilities.%s must be an array", what);
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
                int c = json_is_string(e) ? oci_cap_from_name(json_string_value(e)) : -1;
                if (c < 0) {
                        /* A capability this kernel or table does not know: runc
                         * ignores it with a warning; so do we. */
                        oci_warn("unknown capability %s in %s, ignored",
                                 json_is_string(e) ? json_string_value(e) : "(not a string)", what);
                        continue;
                }
                *out |= 1ull << c;
        }
        return 0;
}

int oci_process_parse(json_t *p, struct oci_process *out, struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        if (!json_is_object(p))
                return pd_error_setx(err, EINVAL, "config.json: process must be an object");
        int r = string_array(json_object_get(p, "args"), "process.args", &out->args, err);
        if (r < 0)
                return r;
        if (!out->args || !out->args[0] || !out->args[0][0])
                return pd_error_setx(err, EINVAL, "config.json: process.args must name a program");
        r = string_array(json_object_get(p, "env"), "process.env", &out->env, err);
        if (r < 0)
                return r;
        if (!out->env && !(out->env = calloc(1, sizeof(char *))))
                return -ENOMEM;
        out->cwd = str_or_null(p, "cwd");
        if (!out->cwd)
                out->cwd = "/";
        if (out->cwd[0] != '/')
                return pd_error_setx(err, EINVAL, "config.json: process.cwd '%s' must be absolute", out->cwd);
        json_t *u = json_object_get(p, "user");
        if (u) {
                json_t *v = json_object_get(u, "uid");
                if (v && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX - 1))
                        return pd_error_setx(err, EINVAL, "config.json: process.user.uid is not a valid uid");
                out->uid = v ? (uid_t)json_integer_value(v) : 0;
                v = json_object_get(u, "gid");
                if (v && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX - 1))
                        return pd_error_setx(err, EINVAL, "config.json: process.user.gid is not a valid gid");
                out->gid = v ? (gid_t)json_integer_value(v) : 0;
                v = json_object_get(u, "umask");
                if (json_is_integer(v)) {
                        out->umask = (mode_t)json_integer_value(v) & 07777;
                        out->has_umask = true;
                }
                json_t *g = json_object_get(u, "additionalGids");
                if (json_is_array(g) && json_array_size(g) > 0) {
                        out->gids = calloc(json_array_size(g), sizeof(gid_t));
                        if (!out->gids)
                                return -ENOMEM;
                        size_t i;
                        json_t *e;
                        json_array_foreach(g, i, e) {
                                if (!json_is_integer(e) || json_integer_value(e) < 0)
                                        return pd_error_setx(err, EINVAL, "config.json: bad additionalGids[%zu]", i);
                                out->gids[out->n_gids++] = (gid_t)json_integer_value(e);
                        }
                }
        }
        json_t *caps = json_object_get(p, "capabilities");
        if (caps) {
                if (!json_is_object(caps))
                        return pd_error_setx(err, EINVAL, "config.json: process.capabilities must be an object");
                out->has_caps = true;
                if ((r = caps_set(json_object_get(caps, "bounding"), "bounding", &out->caps.bounding, err)) < 0 ||
                    (r = caps_set(json_object_get(caps, "effective"), "effective", &out->caps.effective, err)) < 0 ||
                    (r = caps_set(json_object_get(caps, "inheritable"), "inheritable", &out->caps.inheritable, err)) < 0 ||
                    (r = caps_set(json_object_get(caps, "permitted"), "permitted", &out->caps.permitted, err)) < 0 ||
                    (r = caps_set(json_object_get(caps, "ambient"), "ambient", &out->caps.ambient, err)) < 0)
                        return r;
        }
        json_t *rl = json_object_get(p, "rlimits");
        if (json_is_array(rl) && json_array_size(rl) > 0) {
                out->rlimits = calloc(json_array_size(rl), sizeof *out->rlimits);
                if (!out->rlimits)
                        return -ENOMEM;
                size_t i;
                json_t *e;
                json_array_foreach(rl, i, e) {
                        const char *type = str_or_null(e, "type");
                        int res = -1;
                        for (size_t k = 0; type && k < sizeof rlimit_table / sizeof rlimit_table[0]; k++)
                                if (strcmp(type, rlimit_table[k].name) == 0)
                                        res = rlimit_table[k].res;
                        if (res < 0)
                                return pd_error_setx(err, EINVAL, "config.json: unknown rlimit type '%s'",
                                                     type ? type : "(none)");
                        json_t *soft = json_object_get(e, "soft"), *hard = json_object_get(e, "hard");
                        if (!json_is_integer(soft) || !json_is_integer(hard))
                                return pd_error_setx(err, EINVAL, "config.json: rlimit %s needs soft and hard", type);
                        out->rlimits[out->n_rlimits++] = (struct pd_rlimit){
                                res, (uint64_t)json_integer_value(soft), (uint64_t)json_integer_value(hard) };
                }
        }
        out->no_new_privs = json_is_true(json_object_get(p, "noNewPrivileges"));
        out->terminal = json_is_true(json_object_get(p, "terminal"));
        json_t *oom = json_object_get(p, "oomScoreAdj");
        if (oom) {
                if (!json_is_integer(oom) || json_integer_value(oom) < -1000 || json_integer_value(oom) > 1000)
                        return pd_error_setx(err, EINVAL, "config.json: process.oomScoreAdj must be in -1000..1000");
                out->oom_score_adj = (int)json_integer_value(oom);
                out->has_oom_score_adj = true;
        }
        json_t *cs = json_object_get(p, "consoleSize");
        if (cs) {
                out->console_h = (unsigned)json_integer_value(json_object_get(cs, "height"));
                out->console_w = (unsigned)json_integer_value(json_object_get(cs, "width"));
        }
        out->apparmor_profile = str_or_null(p, "apparmorProfile");
        out->selinux_label = str_or_null(p, "selinuxLabel");
        oci_lsm_check(out);
        return 0;
}

static const struct { const char *name; bool clear; unsigned long flag; } mount_opts[] = {
        { "ro", false, MS_RDONLY },        { "rw", true, MS_RDONLY },
        { "nosuid", false, MS_NOSUID },    { "suid", true, MS_NOSUID },
        { "nodev", false, MS_NODEV },      { "dev", true, MS_NODEV },
        { "noexec", false, MS_NOEXEC },    { "exec", true, MS_NOEXEC },
        { "sync", false, MS_SYNCHRONOUS }, { "async", true, MS_SYNCHRONOUS },
        { "dirsync", false, MS_DIRSYNC },  { "remount", false, MS_REMOUNT },
        { "mand", false, MS_MANDLOCK },    { "nomand", true, MS_MANDLOCK },
        { "atime", true, MS_NOATIME },     { "noatime", false, MS_NOATIME },
        { "diratime", true, MS_NODIRATIME }, { "nodiratime", false, MS_NODIRATIME },
        { "relatime", false, MS_RELATIME }, { "norelatime", true, MS_RELATIME },
        { "strictatime", false, MS_STRICTATIME }, { "nostrictatime", true, MS_STRICTATIME },
        { "defaults", false, 0 },
};

static const struct { const char *name; unsigned long flag; } prop_opts[] = {
        { "shared", MS_SHARED },         { "rshared", MS_SHARED | MS_REC },
        { "slave", MS_SLAVE },           { "rslave", MS_SLAVE | MS_REC },
        { "private", MS_PRIVATE },       { "rprivate", MS_PRIVATE | MS_REC },
        { "unbindable", MS_UNBINDABLE }, { "runbindable", MS_UNBINDABLE | MS_REC },
};

static int parse_mount_fields(json_t *m, size_t idx, struct oci_mount *out, struct pd_error *err)
{
        if (!json_is_object(m))
                return pd_error_setx(err, EINVAL, "config.json: mounts[%zu] must be an object", idx);
        out->destination = str_or_null(m, "destination");
        if (!out->destination || out->destination[0] != '/')
                return pd_error_setx(err, EINVAL, "config.json: mounts[%zu].destination must be an absolute path", idx);
        out->type = str_or_null(m, "type");
        out->source = str_or_null(m, "source");
        json_t *opts = json_object_get(m, "options");
        size_t cap = 1;
        size_t i;
        json_t *e;
        if (json_is_array(opts))
                json_array_foreach(opts, i, e)
                        if (json_is_string(e))
                                cap += strlen(json_string_value(e)) + 1;
        out->data = calloc(1, cap);
        if (!out->data)
                return -ENOMEM;
        if (opts && !json_is_array(opts))
                return pd_error_setx(err, EINVAL, "config.json: mounts[%zu].options must be an array", idx);
        json_array_foreach(opts, i, e) {
                const char *o = json_string_value(e);
                if (!o)
                        return pd_error_setx(err, EINVAL, "config.json: mounts[%zu].options[%zu] is not a string", idx, i);
                bool known = false;
                if (strcmp(o, "bind") == 0 || strcmp(o, "rbind") == 0) {
                        out->bind = true;
                        out->rec |= o[0] == 'r';
                        known = true;
                }
                for (size_t k = 0; !known && k < sizeof mount_opts / sizeof mount_opts[0]; k++)
                        if (strcmp(o, mount_opts[k].name) == 0) {
                                if (mount_opts[k].clear) {
                                        out->clear_flags |= mount_opts[k].flag;
                                        out->flags &= ~mount_opts[k].flag;
                                } else {
                                        out->flags |= mount_opts[k].flag;
                                        out->clear_flags &= ~mount_opts[k].flag;
                                }
                                known = true;
                        }
                for (size_t k = 0; !known && k < sizeof prop_opts / sizeof prop_opts[0]; k++)
                        if (strcmp(o, prop_opts[k].name) == 0) {
                                out->propagation = prop_opts[k].flag;
                                known = true;
                        }
                /* Options runc handles itself that have no kernel meaning here. */
                if (!known && (strcmp(o, "tmpcopyup") == 0 || strncmp(o, "idmap", 5) == 0 ||
                               strncmp(o, "ridmap", 6) == 0 || strcmp(o, "copy-symlink") == 0))
                        known = true;
                if (!known) {
                        if (out->data[0])
                                strcat(out->data, ",");
                        strcat(out->data, o);
                }
        }
        if (out->type && strcmp(out->type, "bind") == 0)
                out->bind = true;
        if (out->type && strcmp(out->type, "rbind") == 0)
                out->bind = out->rec = true;
        if (out->bind && (!out->source || !*out->source))
                return pd_error_setx(err, EINVAL, "config.json: bind mount on '%s' has no source", out->destination);
        if (!out->bind && (!out->type || !*out->type))
                return pd_error_setx(err, EINVAL, "config.json: mount on '%s' has no type", out->destination);
        return 0;
}

/* One mount; on failure nothing stays allocated: the caller counts only the
 * mounts that parsed (n_mounts), so oci_config_free never sees this one. */
static int parse_mount(json_t *m, size_t idx, struct oci_mount *out, struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        int r = parse_mount_fields(m, idx, out, err);
        if (r < 0) {
                free(out->data);
                out->data = NULL;
        }
        return r;
}

static int parse_ids(json_t *a, const char *what, char **out, struct pd_error *err)
{
        *out = NULL;
        if (!a || json_array_size(a) == 0)
                return 0;
        if (!json_is_array(a))
                return pd_error_setx(err, EINVAL, "config.json: linux.%s must be an array", what);
        size_t n = json_array_size(a), i;
        char *s = calloc(n, 64);
        if (!s)
                return -ENOMEM;
        json_t *e;
        size_t off = 0;
        json_array_foreach(a, i, e) {
                json_t *c = json_object_get(e, "containerID"), *h = json_object_get(e, "hostID"),
                       *z = json_object_get(e, "size");
                if (!json_is_integer(c) || !json_is_integer(h) || !json_is_integer(z) || json_integer_value(z) <= 0 ||
                    json_integer_value(c) < 0 || json_integer_value(h) < 0) {
                        free(s);
                        return pd_error_setx(err, EINVAL, "config.json: linux.%s[%zu] needs containerID, hostID, size", what, i);
                }
                off += (size_t)snprintf(s + off, n * 64 - off, "%lld %lld %lld\n", (long long)json_integer_value(c),
                                        (long long)json_integer_value(h), (long long)json_integer_value(z));
        }
        *out = s;
        return 0;
}

static int parse_linux(json_t *l, struct oci_config *c, struct pd_error *err)
{
        if (!l)
                return 0;
        if (!json_is_object(l))
                return pd_error_setx(err, EINVAL, "config.json: linux must be an object");
        json_t *nss = json_object_get(l, "namespaces");
        if (nss && !json_is_array(nss))
                return pd_error_setx(err, EINVAL, "config.json: linux.namespaces must be an array");
        size_t i;
        json_t *e;
        json_array_foreach(nss, i, e) {
                const char *type = str_or_null(e, "type");
                int flag = 0;
                for (size_t k = 0; type && k < sizeof ns_table / sizeof ns_table[0]; k++)
                        if (strcmp(type, ns_table[k].name) == 0)
                                flag = ns_table[k].flag;
                if (!flag)
                        return pd_error_setx(err, EINVAL, "config.json: unknown namespace type '%s'",
                                             type ? type : "(none)");
                if (oci_ns_flag(c, flag) >= 0)
                        return pd_error_setx(err, EINVAL, "config.json: namespace '%s' listed twice", type);
                const char *path = str_or_null(e, "path");
                if (path && path[0] != '/')
                        return pd_error_setx(err, EINVAL, "config.json: namespace '%s' path must be absolute", type);
                c->ns[c->n_ns++] = (struct oci_ns){ flag, (char *)(path && *path ? path : NULL) };
        }
        int r;
        if ((r = parse_ids(json_object_get(l, "uidMappings"), "uidMappings", &c->uid_map, err)) < 0 ||
            (r = parse_ids(json_object_get(l, "gidMappings"), "gidMappings", &c->gid_map, err)) < 0)
                return r;
        int user = oci_ns_flag(c, CLONE_NEWUSER);
        if ((c->uid_map || c->gid_map) && (user < 0 || c->ns[user].path))
                return pd_error_setx(err, EINVAL, "config.json: uid/gid mappings need a new user namespace");
        if (user >= 0 && !c->ns[user].path && (!c->uid_map || !c->gid_map))
                return pd_error_setx(err, EINVAL, "config.json: a new user namespace needs uidMappings and gidMappings");
        c->cgroups_path = str_or_null(l, "cgroupsPath");
        if ((r = oci_resources_parse(json_object_get(l, "resources"), &c->res, err)) < 0)
                return r;
        if (c->res.rdma)
                oci_warn("linux.resources.rdma not applied: paddock-oci does not support it");
        c->seccomp = json_object_get(l, "seccomp");
        c->sysctl = json_object_get(l, "sysctl");
        c->devices = json_object_get(l, "devices");
        c->masked = json_object_get(l, "maskedPaths");
        c->readonly_paths = json_object_get(l, "readonlyPaths");
        const char *rp = str_or_null(l, "rootfsPropagation");
        c->rootfs_propagation = MS_SLAVE | MS_REC;
        if (rp && *rp) {
                bool ok = false;
                for (size_t k = 0; k < sizeof prop_opts / sizeof prop_opts[0]; k++)
                        if (strcmp(rp, prop_opts[k].name) == 0) {
                                c->rootfs_propagation = prop_opts[k].flag;
                                ok = true;
                        }
                if (!ok)
                        return pd_error_setx(err, EINVAL, "config.json: unknown rootfsPropagation '%s'", rp);
                if (c->rootfs_propagation & MS_SHARED)
                        oci_warn("rootfsPropagation %s: shared within the container only; paddock never "
                                 "propagates the container's mounts to the host", rp);
        }
        return oci_sysctl_check(c, err);
}

int oci_config_parse(json_t *root, const char *bundle, struct oci_config *c, struct pd_error *err)
{
        memset(c, 0, sizeof *c);
        c->json = root;
        if (!json_is_object(root))
                return pd_error_setx(err, EINVAL, "config.json: not a JSON object");
        const char *ver = str_or_null(root, "ociVersion");
        if (!ver)
                return pd_error_setx(err, EINVAL, "config.json: ociVersion missing");
        if (strncmp(ver, "1.", 2) != 0)
                return pd_error_setx(err, EINVAL, "config.json: unsupported ociVersion '%s' (1.x accepted)", ver);
        c->bundle = realpath(bundle, NULL);
        if (!c->bundle)
                return pd_error_set(err, errno, "bundle '%s'", bundle);
        json_t *rootj = json_object_get(root, "root");
        const char *rp = str_or_null(rootj, "path");
        if (!rp || !*rp)
                return pd_error_setx(err, EINVAL, "config.json: root.path missing");
        char tmp[PATH_MAX * 2];
        if (rp[0] == '/')
                snprintf(tmp, sizeof tmp, "%s", rp);
        else
                snprintf(tmp, sizeof tmp, "%s/%s", c->bundle, rp);
        c->rootfs = realpath(tmp, NULL);
        if (!c->rootfs)
                return pd_error_set(err, errno, "rootfs '%s'", tmp);
        c->root_readonly = json_is_true(json_object_get(rootj, "readonly"));
        json_t *p = json_object_get(root, "process");
        int r;
        if (!p)
                return pd_error_setx(err, EINVAL, "config.json: process missing");
        if ((r = oci_process_parse(p, &c->proc, err)) < 0)
                return r;
        c->hostname = str_or_null(root, "hostname");
        c->domainname = str_or_null(root, "domainname");
        json_t *mounts = json_object_get(root, "mounts");
        if (mounts && !json_is_array(mounts))
                return pd_error_setx(err, EINVAL, "config.json: mounts must be an array");
        if (json_array_size(mounts)) {
                c->mounts = calloc(json_array_size(mounts), sizeof *c->mounts);
                if (!c->mounts)
                        return -ENOMEM;
                size_t i;
                json_t *m;
                json_array_foreach(mounts, i, m) {
                        if ((r = parse_mount(m, i, &c->mounts[i], err)) < 0)
                                return r;
                        c->n_mounts++;
                }
        }
        if ((r = parse_linux(json_object_get(root, "linux"), c, err)) < 0)
                return r;
        if (c->hostname && oci_ns_flag(c, CLONE_NEWUTS) < 0)
                return pd_error_setx(err, EINVAL, "config.json: hostname needs a uts namespace");
        c->hooks = json_object_get(root, "hooks");
        c->annotations = json_object_get(root, "annotations");
        c->isolation = str_or_null(c->annotations, "run.oci.paddock.isolation");
        if (!c->isolation)
                c->isolation = "container";
        if (strcmp(c->isolation, "container") != 0 && strcmp(c->isolation, "supervised") != 0 &&
            strcmp(c->isolation, "microvm") != 0)
                return pd_error_setx(err, EINVAL,
                                     "annotation run.oci.paddock.isolation='%s': 'container', 'supervised' "
                                     "or 'microvm'", c->isolation);
        if (strcmp(c->isolation, "supervised") == 0 && !c->uid_map)
                return pd_error_setx(err, EINVAL, "run.oci.paddock.isolation=supervised needs a new user namespace "
                                     "with uidMappings (the supervisor maps the container's ids to a host range)");
        if (strcmp(c->isolation, "supervised") == 0 && !c->proc.no_new_privs) {
                /* The supervisor's filter is installed without CAP_SYS_ADMIN
                 * in the host's view: paddock's policy wins, and says so. */
                oci_warn("run.oci.paddock.isolation=supervised: process.noNewPrivileges forced on");
                c->proc.no_new_privs = true;
        }
        return 0;
}

int oci_config_load(const char *bundle, struct oci_config *c, struct pd_error *err)
{
        char path[PATH_MAX];
        memset(c, 0, sizeof *c);
        snprintf(path, sizeof path, "%s/config.json", bundle);
        FILE *f = fopen(path, "re");
        if (!f)
                return pd_error_set(err, errno, "open '%s'", path);
        json_error_t je;
        json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
        long size = ftell(f);
        fclose(f);
        if (!root)
                return pd_error_setx(err, EINVAL, "%s: malformed JSON at line %d: %s", path, je.line, je.text);
        if (size > (long)CONFIG_MAX_BYTES) {
                json_decref(root);
                return pd_error_setx(err, EFBIG, "%s: larger than %u bytes", path, CONFIG_MAX_BYTES);
        }
        return oci_config_parse(root, bundle, c, err);
}

void oci_config_free(struct oci_config *c)
{
        free(c->proc.args);
        free(c->proc.env);
        free(c->proc.gids);
        free(c->proc.rlimits);
        for (size_t i = 0; i < c->n_mounts; i++)
                free(c->mounts[i].data);
        free(c->mounts);
        free(c->uid_map);
        free(c->gid_map);
        oci_resources_free(&c->res);
        free(c->bundle);
        free(c->rootfs);
        if (c->json)
                json_decref(c->json);
        memset(c, 0, sizeof *c);
}
