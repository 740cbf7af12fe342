/* The runtime root: <root>/<id>/{state.json,config.json,exec.fifo}.
 * Status is derived from kernel facts each time it is asked for (crun's
 * pattern): a pid whose start time still matches, the fifo's existence, the
 * freezer's state. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/state.h"
#include "oci/oci.h"
#include "lib/util.h"

int oci_id_check(const char *id, struct pd_error *err)
{
        size_t n = id ? strlen(id) : 0;
        if (n == 0)
                return pd_error_setx(err, EINVAL, "container id missing");
        if (n > 200)
                return pd_error_setx(err, EINVAL, "container id longer than 200 characters");
        for (const char *p = id; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '_' || *p == '-' || *p == '.' || *p == '+'))
                        return pd_error_setx(err, EINVAL, "invalid container id '%s' (allowed: [A-Za-z0-9_.+-])", id);
        /* A leading dot is ours (.seccomp-cache) and covers "." and "..". */
        if (id[0] == '.')
                return pd_error_setx(err, EINVAL, "invalid container id '%s'", id);
        return 0;
}

int oci_state_dir(const struct oci_global *g, const char *id, char *out, size_t size, struct pd_error *err)
{
        int r = oci_id_check(id, err);
        if (r < 0)
                return r;
        if ((size_t)snprintf(out, size, "%s/%s", g->root, id) >= size)
                return pd_error_setx(err, ENAMETOOLONG, "root path too long");
        return 0;
}

static bool pid_zombie(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        if (pd_read_file_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
                return true;
        char *p = strrchr(buf, ')');
        return p && (p[2] == 'Z' || p[2] == 'X');
}

bool oci_pid_alive(pid_t pid, uint64_t start)
{
        if (pid <= 0)
                return false;
        uint64_t now = pd_proc_starttime(pid);
        return now != 0 && now == start && !pid_zombie(pid);
}

int oci_pid_wait_gone(pid_t pid, uint64_t start, int timeout_ms)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return 0;
        if (!oci_pid_alive(pid, start)) {
                close(fd);
                return 0;
        }
        /* A pidfd polls readable when the process exits (zombie counts). */
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r;
        do
                r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        close(fd);
        return r > 0 ? 0 : -ETIMEDOUT;
}

static void copy_str(char *dst, size_t size, json_t *v)
{
        snprintf(dst, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

int oci_state_load(const struct oci_global *g, const char *id, struct oci_state *st, struct pd_error *err)
{
        memset(st, 0, sizeof *st);
        int r = oci_state_dir(g, id, st->dir, sizeof st->dir, err);
        if (r < 0)
                return r;
        snprintf(st->id, sizeof st->id, "%s", id);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/state.json", st->dir);
        json_error_t je;
        json_t *o = json_load_file(path, 0, &je);
        if (!o) {
                struct stat sb;
                if (stat(st->dir, &sb) < 0)
                        return pd_error_setx(err, ENOENT, "container '%s' does not exist", id);
                return pd_error_setx(err, EIO, "container '%s': state unreadable: %s", id, je.text);
        }
        st->pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
        st->pid_start = (uint64_t)json_integer_value(json_object_get(o, "pid_start"));
        copy_str(st->bundle, sizeof st->bundle, json_object_get(o, "bundle"));
        copy_str(st->rootfs, sizeof st->rootfs, json_object_get(o, "rootfs"));
        copy_str(st->created, sizeof st->created, json_object_get(o, "created"));
        copy_str(st->cgroup, sizeof st->cgroup, json_object_get(o, "cgroup"));
        st->supervisor = (pid_t)json_integer_value(json_object_get(o, "supervisor"));
        st->supervisor_start = (uint64_t)json_integer_value(json_object_get(o, "supervisor_start"));
        st->annotations = json_incref(json_object_get(o, "annotations"));
        json_decref(o);
        snprintf(path, sizeof path, "%s/config.json", st->dir);
        st->config = json_load_file(path, 0, &je);
        return 0;
}

int oci_state_save(const struct oci_state *st, struct pd_error *err)
{
        json_t *o = json_pack("{s:I,s:I,s:s,s:s,s:s,s:s}", "pid", (json_int_t)st->pid, "pid_start",
                              (json_int_t)st->pid_start, "bundle", st->bundle, "rootfs", st->rootfs, "created",
                              st->created, "cgroup", st->cgroup);
        if (!o)
                return pd_error_setx(err, ENOMEM, "state");
        if (st->annotations)
                json_object_set(o, "annotations", st->annotations);
        if (st->supervisor > 0) {
                json_object_set_new(o, "supervisor", json_integer(st->supervisor));
                json_object_set_new(o, "supervisor_start", json_integer((json_int_t)st->supervisor_start));
        }
        char path[PATH_MAX], tmp[PATH_MAX];
        snprintf(path, sizeof path, "%s/state.json", st->dir);
        snprintf(tmp, sizeof tmp, "%s/.state.json.tmp", st->dir);
        int r = json_dump_file(o, tmp, JSON_COMPACT);
        json_decref(o);
        if (r < 0 || rename(tmp, path) < 0)
                return pd_error_set(err, errno ? errno : EIO, "write '%s'", path);
        return 0;
}

void oci_state_free(struct oci_state *st)
{
        json_decref(st->annotations);
        json_decref(st->config);
        st->annotations = st->config = NULL;
}

enum oci_status oci_state_status(const struct oci_state *st)
{
        if (st->pid <= 0)
                return OCI_CREATING;
        if (!oci_pid_alive(st->pid, st->pid_start))
                return OCI_STOPPED;
        char fifo[PATH_MAX];
        snprintf(fifo, sizeof fifo, "%s/exec.fifo", st->dir);
        if (access(fifo, F_OK) == 0)
                return OCI_CREATED;
        if (st->cgroup[0] && oci_cgroup_frozen(st->cgroup))
                return OCI_PAUSED;
        /* microvm: its guest stopped by QMP (vm_create.c) */
        snprintf(fifo, sizeof fifo, "%s/vm.paused", st->dir);
        if (access(fifo, F_OK) == 0)
                return OCI_PAUSED;
        return OCI_RUNNING;
}

const char *oci_status_name(enum oci_status s)
{
        static const char *const n[] = { "creating", "created", "running", "paused", "stopped" };
        return n[s];
}

json_t *oci_state_json(const struct oci_state *st, enum oci_status s)
{
        json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "ociVersion", "1.1.0", "id", st->id, "status",
                              oci_status_name(s), "bundle", st->bundle);
        if (s != OCI_STOPPED && st->pid > 0)
                json_object_set_new(o, "pid", json_integer(st->pid));
        else
                json_object_set_new(o, "pid", json_integer(0));
        json_object_set_new(o, "rootfs", json_string(st->rootfs));
        json_object_set_new(o, "created", json_string(st->created));
        json_object_set_new(o, "owner", json_string(""));
        json_object_set_new(o, "annotations", st->annotations ? json_incref(st->annotations) : json_object());
        return o;
}

/* The creation time the state JSON carries: RFC 3339, UTC, nanoseconds. */
void oci_now_rfc3339(char *buf, size_t n)
{
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + k, n - k, ".%09ldZ", ts.tv_nsec);
}

/* --pid-file, written whole or not at all (temp + rename): an engine may
 * read it the moment it appears. */
int oci_write_pid_file(const char *path, pid_t pid, struct pd_error *err)
{
        char tmp[PATH_MAX], buf[32];
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()) >= sizeof tmp)
                return pd_error_setx(err, ENAMETOOLONG, "pid file path too long");
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return pd_error_set(err, errno, "pid file '%s'", path);
        int n = snprintf(buf, sizeof buf, "%d", (int)pid);
        int r = pd_write_all(fd, buf, (size_t)n);
        close(fd);
        if (r < 0 || rename(tmp, path) < 0) {
                unlink(tmp);
                return pd_error_set(err, r < 0 ? -r : errno, "pid file '%s'", path);
        }
        return 0;
}
