/* linux.sysctl: only sysctls of a namespace the container owns.
 *
 * The init writes /proc/sys from inside the container's namespaces, but
 * most of /proc/sys is not namespaced at all: vm.swappiness or
 * kernel.core_pattern written there are the host's, and the init of a
 * container without a user namespace is host root. runc and crun accept a
 * sysctl only when the namespace it belongs to is the container's own;
 * paddock-oci follows the same table and refuses everything else at create,
 * before anything exists:
 *
 *   kernel.msg{max,mnb,mni}, kernel.sem, kernel.shm{all,max,mni},
 *   kernel.shm_rmid_forced, fs.mqueue.*      the IPC namespace
 *   net.*                                     the network namespace
 *   kernel.domainname                         the UTS namespace
 *   kernel.hostname                           refused: the `hostname` field
 *
 * "The container's own" means listed in linux.namespaces, new, or joined by
 * path when that path is not the runtime's own namespace (runc's check for
 * the network; paddock applies it to IPC and UTS as well). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "oci/oci.h"
#include "lib/util.h"

static const char *const ipc_sysctls[] = {
        "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem", "kernel.shmall",
        "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
};

/* The key in dotted form ('/' accepted as a separator, as runc does), every
 * component non-empty and neither "." nor "..". */
static int normalize(const char *key, char *out, size_t size, struct pd_error *err)
{
        size_t n = strlen(key);
        if (n == 0 || n >= size)
                return pd_error_setx(err, EINVAL, "config.json: bad sysctl '%s'", key);
        for (size_t i = 0; i <= n; i++)
                out[i] = key[i] == '/' ? '.' : key[i];
        for (const char *c = out; ; ) {
                const char *e = strchrnul(c, '.');
                size_t len = (size_t)(e - c);
                if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return pd_error_setx(err, EINVAL, "config.json: bad sysctl '%s'", key);
                if (!*e)
                        break;
                c = e + 1;
        }
        return 0;
}

/* Whether the namespace at path is the runtime's own (then it is the
 * host's, as far as this container is concerned). */
static int is_runtime_ns(const char *path, const char *name, bool *out, struct pd_error *err)
{
        char self[64];
        snprintf(self, sizeof self, "/proc/self/ns/%s", name);
        struct stat a, b;
        if (stat(path, &a) < 0)
                return pd_error_set(err, errno, "config.json: namespace %s: '%s'", name, path);
        if (stat(self, &b) < 0)
                return pd_error_set(err, errno, "stat '%s'", self);
        *out = a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        return 0;
}

/* 1 if the container has its own namespace of this kind, 0 if not. */
static int owns(const struct oci_config *c, int flag, struct pd_error *err)
{
        int i = oci_ns_flag(c, flag);
        if (i < 0)
                return 0;
        if (!c->ns[i].path)
                return 1;
        bool host;
        int r = is_runtime_ns(c->ns[i].path, flag == CLONE_NEWNET ? "net" : oci_ns_name(flag), &host, err);
        if (r < 0)
                return r;
        return !host;
}

static int check_one(const struct oci_config *c, const char *key, struct pd_error *err)
{
        char k[PATH_MAX];
        int r = normalize(key, k, sizeof k, err);
        if (r < 0)
                return r;
        bool ipc = strncmp(k, "fs.mqueue.", 10) == 0;
        for (size_t i = 0; !ipc && i < sizeof ipc_sysctls / sizeof ipc_sysctls[0]; i++)
                ipc = strcmp(k, ipc_sysctls[i]) == 0;
        if (ipc) {
                if ((r = owns(c, CLONE_NEWIPC, err)) < 0)
                        return r;
                return r ? 0 : pd_error_setx(err, EPERM, "config.json: sysctl '%s' needs the container's own ipc "
                                             "namespace (it would change the host's); refused", key);
        }
        if (strncmp(k, "net.", 4) == 0) {
                if ((r = owns(c, CLONE_NEWNET, err)) < 0)
                        return r;
                return r ? 0 : pd_error_setx(err, EPERM, "config.json: sysctl '%s' needs the container's own network "
                                             "namespace (it would change the host's); refused", key);
        }
        if (strcmp(k, "kernel.hostname") == 0)
                return pd_error_setx(err, EPERM, "config.json: sysctl 'kernel.hostname': set the 'hostname' field "
                                     "instead; refused");
        if (strcmp(k, "kernel.domainname") == 0) {
                if ((r = owns(c, CLONE_NEWUTS, err)) < 0)
                        return r;
                return r ? 0 : pd_error_setx(err, EPERM, "config.json: sysctl '%s' needs the container's own uts "
                                             "namespace (it would change the host's); refused", key);
        }
        return pd_error_setx(err, EPERM, "config.json: sysctl '%s' is not namespaced: it would change the host's "
                             "value; refused (only ipc, net.* and kernel.domainname sysctls of the container's "
                             "own namespaces are allowed)", key);
}

int oci_sysctl_check(const struct oci_config *c, struct pd_error *err)
{
        if (!c->sysctl)
                return 0;
        if (!json_is_object(c->sysctl))
                return pd_error_setx(err, EINVAL, "config.json: linux.sysctl must be an object");
        const char *key;
        json_t *v;
        json_object_foreach(c->sysctl, key, v) {
                if (!json_is_string(v))
                        return pd_error_setx(err, EINVAL, "config.json: bad sysctl '%s': the value must be a string",
                                             key);
                int r = check_one(c, key, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* In the init, inside the container's namespaces and after pivot_root:
 * /proc/sys/net and the ipc entries follow the writer's namespaces. */
int oci_sysctl_apply(const struct oci_config *c, struct pd_error *err)
{
        const char *key;
        json_t *v;
        json_object_foreach(c->sysctl, key, v) {
                char path[PATH_MAX] = "/proc/sys/";
                size_t n = strlen(path);
                for (const char *s = key; *s && n < sizeof path - 1; s++)
                        path[n++] = *s == '.' ? '/' : *s;
                path[n] = '\0';
                int r = pd_write_file_at(AT_FDCWD, path, json_string_value(v), err);
                if (r < 0)
                        return pd_error_prefix(err, "sysctl %s", key);
        }
        return 0;
}
