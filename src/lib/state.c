#include "lib/state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "lib/util.h"

static uint64_t fnv1a64(const char *s)
{
        uint64_t h = 0xcbf29ce484222325ull;
        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 0x100000001b3ull;
        }
        return h;
}

const char *pd_state_dir_default(void)
{
        const char *e = getenv("PADDOCK_STATE_DIR");
        return e && *e ? e : PD_DEFAULT_STATE_DIR;
}

/* mkdir that refuses a directory someone else made: in /dev/shm (world
 * writable) another user could have planted one, or a symlink. */
static int mkdir_private(const char *path, struct pd_error *err)
{
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s'", path);
        struct stat sb;
        if (lstat(path, &sb) < 0)
                return pd_error_set(err, errno, "stat '%s'", path);
        if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 022))
                return pd_error_setx(err, EPERM,
                                     "'%s' is not a directory owned by us and closed to others; refusing to use it",
                                     path);
        return 0;
}

static int open_rundir(struct pd_state *st, struct pd_error *err)
{
        const char *env = getenv("PADDOCK_RUNTIME_DIR");
        struct statfs sf;
        int r;
        if (env && *env) {
                if ((r = pd_mkdir_p(env, 0700, err)) < 0)
                        return r;
                snprintf(st->rundir, sizeof st->rundir, "%s/%s", env, st->instance);
        } else if (statfs("/run", &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
                if ((r = mkdir_private("/run/paddock", err)) < 0)
                        return r;
                snprintf(st->rundir, sizeof st->rundir, "/run/paddock/%s", st->instance);
        } else {
                if ((r = mkdir_private("/dev/shm/paddock", err)) < 0)
                        return r;
                snprintf(st->rundir, sizeof st->rundir, "/dev/shm/paddock/%s", st->instance);
        }
        if ((r = mkdir_private(st->rundir, err)) < 0)
                return r;
        st->rundirfd = open(st->rundir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (st->rundirfd < 0)
                return pd_error_set(err, errno, "open runtime directory '%s'", st->rundir);
        if (mkdirat(st->rundirfd, "sandboxes", 0700) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s/sandboxes'", st->rundir);
        return 0;
}

int pd_state_open(const char *path, struct pd_state *st, struct pd_error *err)
{
        memset(st, 0, sizeof *st);
        st->dirfd = -1;
        st->rundirfd = -1;
        if (!path || !*path)
                return pd_error_setx(err, EINVAL, "empty state directory path");
        int r = pd_mkdir_p(path, 0700, err);
        if (r < 0)
                return pd_error_prefix(err, "state directory");
        if (!realpath(path, st->dir))
                return pd_error_set(err, errno, "state directory '%s'", path);
        /* Sockets live in it: keep room for "/sandboxes/<id>/agent.sock". */
        st->dirfd = open(st->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (st->dirfd < 0)
                return pd_error_set(err, errno, "open state directory '%s'", st->dir);
        static const char *const subdirs[] = { "templates", "cache" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(subdirs); i++)
                if (mkdirat(st->dirfd, subdirs[i], 0700) < 0 && errno != EEXIST) {
                        r = pd_error_set(err, errno, "create '%s/%s'", st->dir, subdirs[i]);
                        pd_state_close(st);
                        return r;
                }
        snprintf(st->instance, sizeof st->instance, "%08" PRIx32,
                 (uint32_t)(fnv1a64(st->dir) ^ (fnv1a64(st->dir) >> 32)));
        if ((r = open_rundir(st, err)) < 0) {
                pd_state_close(st);
                return r;
        }
        return 0;
}

void pd_state_close(struct pd_state *st)
{
        if (st->dirfd >= 0)
                close(st->dirfd);
        if (st->rundirfd >= 0)
                close(st->rundirfd);
        st->dirfd = st->rundirfd = -1;
}

void pd_id_new(char out[PD_ID_LEN + 1])
{
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        unsigned char rnd[PD_ID_LEN];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
                uint64_t x = pd_now_ns() ^ ((uint64_t)getpid() << 32);
                for (size_t i = 0; i < sizeof rnd; i++) {
                        x = x * 6364136223846793005ull + 1442695040888963407ull;
                        rnd[i] = (unsigned char)(x >> 56);
                }
        }
        /* First character a letter, so an id never looks like a number. */
        out[0] = alphabet[rnd[0] % 26];
        for (size_t i = 1; i < PD_ID_LEN; i++)
                out[i] = alphabet[rnd[i] % 36];
        out[PD_ID_LEN] = '\0';
}

int pd_id_check(const char *s)
{
        size_t n = 0;
        for (; s[n]; n++)
                if (!(islower((unsigned char)s[n]) || isdigit((unsigned char)s[n])) || n >= 64)
                        return -EINVAL;
        return n ? 0 : -EINVAL;
}

void pd_record_init(struct pd_record *r)
{
        r->len = 0;
        r->text[0] = '\0';
}

void pd_record_add(struct pd_record *r, const char *key, const char *fmt, ...)
{
        if (r->len >= sizeof r->text)
                return;
        int n = snprintf(r->text + r->len, sizeof r->text - r->len, "%s=", key);
        if (n < 0 || (size_t)n >= sizeof r->text - r->len) {
                r->len = sizeof r->text;
                return;
        }
        r->len += (size_t)n;
        va_list ap;
        va_start(ap, fmt);
        n = vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n + 1 >= sizeof r->text - r->len) {
                r->len = sizeof r->text;
                return;
        }
        r->len += (size_t)n;
        r->text[r->len++] = '\n';
        r->text[r->len] = '\0';
}

int pd_record_write(int dirfd, const char *name, const struct pd_record *r, struct pd_error *err)
{
        if (r->len >= sizeof r->text)
                return pd_error_setx(err, EOVERFLOW, "record '%s' is too long", name);
        char tmp[256];
        snprintf(tmp, sizeof tmp, ".%s.tmp", name);
        _pd_cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        int q = pd_write_all(fd, r->text, r->len);
        if (q < 0) {
                unlinkat(dirfd, tmp, 0);
                return pd_error_set(err, -q, "write '%s'", name);
        }
        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                q = errno;
                unlinkat(dirfd, tmp, 0);
                return pd_error_set(err, q, "rename '%s'", name);
        }
        return 0;
}

int pd_record_read(int dirfd, const char *name, struct pd_record *r, struct pd_error *err)
{
        ssize_t n = pd_read_file_at(dirfd, name, r->text, sizeof r->text);
        if (n < 0)
                return pd_error_set(err, (int)-n, "read '%s'", name);
        r->len = (size_t)n;
        return 0;
}

int pd_record_get(const struct pd_record *r, const char *key, char *buf, size_t size)
{
        size_t klen = strlen(key);
        const char *p = r->text;
        while (p && *p) {
                const char *nl = strchr(p, '\n');
                size_t linelen = nl ? (size_t)(nl - p) : strlen(p);
                if (linelen > klen && !strncmp(p, key, klen) && p[klen] == '=') {
                        size_t vlen = linelen - klen - 1;
                        if (vlen >= size)
                                return -ENAMETOOLONG;
                        memcpy(buf, p + klen + 1, vlen);
                        buf[vlen] = '\0';
                        return 0;
                }
                p = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

int pd_record_get_u64(const struct pd_record *r, const char *key, uint64_t *out)
{
        char buf[32], *end;
        int q = pd_record_get(r, key, buf, sizeof buf);
        if (q < 0)
                return q;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf || *end)
                return -EINVAL;
        *out = v;
        return 0;
}

uint64_t pd_proc_starttime(pid_t pid)
{
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        if (pd_read_file_at(AT_FDCWD, path, buf, sizeof buf) < 0)
                return 0;
        /* comm may hold spaces and parens: skip to the last ')' */
        char *p = strrchr(buf, ')');
        if (!p)
                return 0;
        p += 2; /* now at field 3 */
        for (int field = 3; field < 22 && p; field++) {
                p = strchr(p, ' ');
                if (p)
                        p++;
        }
        return p ? strtoull(p, NULL, 10) : 0;
}
