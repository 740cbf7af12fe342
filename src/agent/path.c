/* Request paths: validation, resolution inside the root with openat2, and
 * running each file operation under the caller's fsuid/fsgid. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdbool.h>
#include "lib/openat2.h"
#include "agent/agent.h"
#include "lib/spec.h"
#include "lib/util.h"

static gid_t saved_groups[256];
static int nsaved = -1;

const char *ag_home;

static bool under(const char *in, const char *dir, const char **rest)
{
        size_t n = strlen(dir);
        if (strncmp(in, dir, n) || (in[n] && in[n] != '/'))
                return false;
        *rest = in + n;
        return true;
}

int ag_map_home(const char *in, char *out, size_t size)
{
        const char *rest;
        int n;
        if (ag_home && (under(in, "/home/user", &rest) || under(in, "/root", &rest)))
                n = snprintf(out, size, "%s%s", ag_home, rest);
        else
                n = snprintf(out, size, "%s", in);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

uint32_t ag_map_uid(uint32_t uid)
{
        return ag_home && (uid == 0 || uid == PD_USER_UID) ? (uint32_t)geteuid() : uid;
}

uint32_t ag_map_gid(uint32_t gid)
{
        return ag_home && (gid == 0 || gid == PD_USER_UID) ? (uint32_t)getegid() : gid;
}

int ag_req_creds(const uint8_t *payload, size_t len, uint32_t *uid, uint32_t *gid,
                 struct pd_error *err)
{
        struct pd_attr a;
        *uid = geteuid();
        *gid = getegid();
        if (pd_msg_find(payload, len, PD_A_UID, &a) && !pd_attr_u32(&a, uid))
                return pd_error_setx(err, EINVAL, "UID must be 4 bytes");
        if (pd_msg_find(payload, len, PD_A_GID, &a) && !pd_attr_u32(&a, gid))
                return pd_error_setx(err, EINVAL, "GID must be 4 bytes");
        *uid = ag_map_uid(*uid);
        *gid = ag_map_gid(*gid);
        return 0;
}

/* The kernel checks file access against fsuid, fsgid and the supplementary
 * groups: as root we swap all three (single-threaded, so a raw setgroups
 * only affects this one thread, which is the whole agent). */
void ag_fsid_enter(struct ag_fsid *s, uint32_t uid, uint32_t gid)
{
        s->olduid = -1;
        s->oldgid = -1;
        s->by_euid = false;
        if (geteuid() != 0 || uid == 0)
                return;
        nsaved = getgroups(PD_ARRAY_SIZE(saved_groups), saved_groups);
        gid_t g = gid;
        syscall(SYS_setgroups, 1, &g);
        s->oldgid = setfsgid(gid);
        s->olduid = setfsuid(uid);
        if ((uid_t)setfsuid((uid_t)-1) == uid)
                return;
        /* gVisor's Sentry accepts setfsuid and changes nothing: swap the
         * effective ids instead (the saved uid stays 0, so leave can
         * swap back, and root's capabilities come back with it) */
        s->by_euid = true;
        s->oldgid = (int)getegid();
        s->olduid = 0;
        if (setresgid((gid_t)-1, gid, (gid_t)-1) < 0 || setresuid((uid_t)-1, uid, (uid_t)-1) < 0) {
                /* never half-switched: back to root as it was */
                (void)setresuid((uid_t)-1, 0, (uid_t)-1);
                (void)setresgid((gid_t)-1, (gid_t)s->oldgid, (gid_t)-1);
                s->by_euid = false;
                s->olduid = s->oldgid = -1;
        }
}

void ag_fsid_leave(struct ag_fsid *s)
{
        if (s->by_euid) {
                (void)setresuid((uid_t)-1, 0, (uid_t)-1);
                (void)setresgid((gid_t)-1, (gid_t)s->oldgid, (gid_t)-1);
                s->by_euid = false;
                s->olduid = s->oldgid = -1;
        }
        if (s->olduid >= 0)
                setfsuid((uid_t)s->olduid);
        if (s->oldgid >= 0)
                setfsgid((gid_t)s->oldgid);
        if (nsaved >= 0)
                syscall(SYS_setgroups, nsaved, saved_groups);
        nsaved = -1;
}

int ag_path_abs(const char *in, uint32_t uid, char *out, size_t size, struct pd_error *err)
{
        if (!in[0])
                return pd_error_setx(err, EINVAL, "empty path");
        int n;
        if (in[0] == '/') {
                n = ag_map_home(in, out, size) < 0 ? (int)size : (int)strlen(out);
        } else {
                char home[PATH_MAX];
                if (ag_home)
                        snprintf(home, sizeof home, "%s", ag_home);
                else if (ag_home_of(uid, home, sizeof home, NULL) < 0)
                        strcpy(home, "/");
                n = snprintf(out, size, "%s/%s", strcmp(home, "/") ? home : "", in);
        }
        if (n < 0 || (size_t)n >= size || (size_t)n >= PATH_MAX)
                return pd_error_setx(err, ENAMETOOLONG, "path too long");
        for (const char *p = out; *p;) {
                while (*p == '/')
                        p++;
                size_t l = strcspn(p, "/");
                if (l > NAME_MAX)
                        return pd_error_setx(err, ENAMETOOLONG, "path component of %zu bytes", l);
                p += l;
        }
        return 0;
}

/* Without openat2 (gVisor's Sentry in the packaged runsc answers ENOSYS):
 * walk the path one component at a time with O_NOFOLLOW and refuse any
 * symlink on the way (ELOOP), as RESOLVE_NO_SYMLINKS would: stricter than
 * RESOLVE_IN_ROOT, and never through a magic link. ".." at the root stays
 * there, as it does for a process's "/". */
static int open_walk(int rootfd, const char *path, int flags, mode_t mode)
{
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s", path);
        int dir = dup(rootfd);
        if (dir < 0)
                return -errno;
        char *save = NULL, *c = strtok_r(buf, "/", &save);
        if (!c) {
                int fd = openat(dir, ".", (flags & ~(O_CREAT | O_EXCL)) | O_CLOEXEC);
                int e = errno;
                close(dir);
                return fd < 0 ? -e : fd;
        }
        for (;;) {
                char *next = strtok_r(NULL, "/", &save);
                if (!next) {
                        int fd = openat(dir, c, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                        int e = errno;
                        close(dir);
                        /* O_NOFOLLOW on a symlink: ELOOP, or an O_PATH fd of it */
                        if (fd >= 0 && (flags & O_PATH)) {
                                struct stat st;
                                if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
                                        close(fd);
                                        return -ELOOP;
                                }
                        }
                        return fd < 0 ? -e : fd;
                }
                int nd = openat(dir, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int e = errno;
                close(dir);
                if (nd < 0)
                        return -e;      /* a symlink here: ENOTDIR or ELOOP */
                dir = nd;
                c = next;
        }
}

int ag_open_in_root(struct agent *ag, const char *abs, int flags, mode_t mode)
{
        static bool no_openat2;
        if (!no_openat2) {
                int fd = pd_open_in_root(ag->rootfd, abs, flags, mode, RESOLVE_IN_ROOT);
                if (fd != -ENOSYS)
                        return fd;
                no_openat2 = true;
        }
        return open_walk(ag->rootfd, abs, flags, mode);
}

int ag_open_parent(struct agent *ag, const char *abs, char *name, size_t size, struct pd_error *err)
{
        char dir[PATH_MAX];
        size_t len = strlen(abs);
        if (len >= sizeof dir)
                return pd_error_setx(err, ENAMETOOLONG, "path too long");
        memcpy(dir, abs, len + 1);
        while (len > 1 && dir[len - 1] == '/')
                dir[--len] = '\0';
        char *slash = strrchr(dir, '/');
        const char *base;
        if (!slash) {
                base = dir;
                dir[0] = '\0';
        } else {
                base = slash + 1;
        }
        if (snprintf(name, size, "%s", base) >= (int)size)
                return pd_error_setx(err, ENAMETOOLONG, "name too long");
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return pd_error_setx(err, EINVAL, "path '%s' must not end in '%s'", abs, name);
        if (slash)
                *slash = '\0';
        int fd = ag_open_in_root(ag, dir[0] ? dir : "/", O_PATH | O_DIRECTORY, 0);
        if (fd < 0)
                return pd_error_set(err, -fd, "open '%s'", dir[0] ? dir : "/");
        return fd;
}

int ag_put_entry(struct pd_msg *m, int dirfd, const char *name, const char *abspath,
                 struct pd_error *err)
{
        struct stat st;
        int fl = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);
        if (fstatat(dirfd, name, &st, fl) < 0)
                return pd_error_set(err, errno, "stat '%s'", abspath);
        uint32_t ft = S_ISREG(st.st_mode) ? PD_FT_FILE : S_ISDIR(st.st_mode) ? PD_FT_DIR :
                      S_ISLNK(st.st_mode) ? PD_FT_SYMLINK : PD_FT_OTHER;
        size_t mark = pd_msg_nest_begin(m, PD_A_ENTRY);
        const char *base = strrchr(abspath, '/');
        base = base && base[1] ? base + 1 : abspath;
        pd_msg_put_str(m, PD_A_NAME, base);
        pd_msg_put_str(m, PD_A_PATH, abspath);
        pd_msg_put_u32(m, PD_A_FTYPE, ft);
        pd_msg_put_u64(m, PD_A_SIZE, (uint64_t)st.st_size);
        pd_msg_put_u32(m, PD_A_MODE, st.st_mode & 07777);
        pd_msg_put_u32(m, PD_A_UID, st.st_uid);
        pd_msg_put_u32(m, PD_A_GID, st.st_gid);
        pd_msg_put_u64(m, PD_A_MTIME_NS, (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                       (uint64_t)st.st_mtim.tv_nsec);
        if (S_ISLNK(st.st_mode)) {
                char link[PATH_MAX];
                ssize_t n = readlinkat(dirfd, name, link, sizeof link - 1);
                if (n >= 0) {
                        link[n] = '\0';
                        pd_msg_put_str(m, PD_A_LINK, link);
                }
        }
        ag_put_meta(m, dirfd, name, &st);
        pd_msg_nest_end(m, mark);
        return 0;
}

int ag_get_path(const struct ag_req *r, uint16_t tag, uint32_t uid, char *out, size_t size)
{
        char raw[PATH_MAX + 1];
        struct pd_attr a;
        if (!pd_msg_find(r->payload, r->h->len, tag, &a))
                return ag_missing(r->err, tag == PD_A_PATH ? "PATH" : "PATH2");
        if (memchr(a.data, '\0', a.len))
                return pd_error_setx(r->err, EINVAL, "path contains a NUL byte");
        if (a.len >= sizeof raw)
                return pd_error_setx(r->err, ENAMETOOLONG, "path of %" PRIu32 " bytes", a.len);
        pd_attr_str(&a, raw, sizeof raw);
        return ag_path_abs(raw, uid, out, size, r->err);
}
