#include "lib/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int pd_write_all(int fd, const void *buf, size_t n)
{
        const char *p = buf;
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

ssize_t pd_read_all(int fd, void *buf, size_t n)
{
        char *p = buf;
        size_t got = 0;
        while (got < n) {
                ssize_t r = read(fd, p + got, n - got);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r == 0)
                        break;
                got += (size_t)r;
        }
        return (ssize_t)got;
}

int pd_write_file_at(int dirfd, const char *path, const char *s, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return pd_error_set(err, errno, "open '%s'", path);
        int r = pd_write_all(fd, s, strlen(s));
        if (r < 0)
                return pd_error_set(err, -r, "write '%s' to '%s'", s, path);
        return 0;
}

ssize_t pd_read_file_at(int dirfd, const char *path, char *buf, size_t size)
{
        if (size == 0)
                return -EINVAL;
        _pd_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        ssize_t n = pd_read_all(fd, buf, size - 1);
        if (n < 0)
                return n;
        buf[n] = '\0';
        return n;
}

/* Parse a decimal number with an optional fraction; rest points past it. */
static int parse_decimal(const char *s, long double *out, const char **rest)
{
        if (!isdigit((unsigned char)*s) && !(*s == '.' && isdigit((unsigned char)s[1])))
                return -EINVAL;
        long double v = 0;
        while (isdigit((unsigned char)*s))
                v = v * 10 + (*s++ - '0');
        if (*s == '.') {
                s++;
                long double scale = 0.1L;
                if (!isdigit((unsigned char)*s))
                        return -EINVAL;
                while (isdigit((unsigned char)*s)) {
                        v += (*s++ - '0') * scale;
                        scale /= 10;
                }
        }
        *out = v;
        *rest = s;
        return 0;
}

int pd_parse_size(const char *s, uint64_t *out, struct pd_error *err)
{
        static const struct { const char *suffix; uint64_t mult; } units[] = {
                { "", 1 }, { "b", 1 },
                { "k", 1ull << 10 }, { "kb", 1ull << 10 }, { "kib", 1ull << 10 },
                { "m", 1ull << 20 }, { "mb", 1ull << 20 }, { "mib", 1ull << 20 },
                { "g", 1ull << 30 }, { "gb", 1ull << 30 }, { "gib", 1ull << 30 },
                { "t", 1ull << 40 }, { "tb", 1ull << 40 }, { "tib", 1ull << 40 },
        };
        long double v;
        const char *rest;
        if (!s || parse_decimal(s, &v, &rest) < 0)
                goto bad;
        for (size_t i = 0; i < PD_ARRAY_SIZE(units); i++) {
                if (strcasecmp(rest, units[i].suffix) == 0) {
                        long double bytes = v * units[i].mult;
                        if (bytes >= 18446744073709551615.0L)
                                return pd_error_setx(err, ERANGE, "size '%s' is too large", s);
                        *out = (uint64_t)bytes;
                        return 0;
                }
        }
bad:
        return pd_error_setx(err, EINVAL,
                             "invalid size '%s' (expected a number with an optional unit: K, M, G, T, e.g. 512M)",
                             s ? s : "");
}

int pd_parse_duration_ms(const char *s, uint64_t *out, struct pd_error *err)
{
        static const struct { const char *suffix; uint64_t mult; } units[] = {
                { "", 1000 }, { "s", 1000 }, { "ms", 1 }, { "m", 60000 }, { "h", 3600000 },
        };
        long double v;
        const char *rest;
        if (!s || parse_decimal(s, &v, &rest) < 0)
                goto bad;
        for (size_t i = 0; i < PD_ARRAY_SIZE(units); i++) {
                if (strcmp(rest, units[i].suffix) == 0) {
                        long double ms = v * units[i].mult;
                        if (ms > 1e15L)
                                return pd_error_setx(err, ERANGE, "duration '%s' is too long", s);
                        *out = (uint64_t)ms;
                        return 0;
                }
        }
bad:
        return pd_error_setx(err, EINVAL,
                             "invalid duration '%s' (expected seconds, or a number with ms, s, m or h)",
                             s ? s : "");
}

int pd_parse_cpus(const char *s, uint64_t *out, struct pd_error *err)
{
        long double v;
        const char *rest;
        if (!s || parse_decimal(s, &v, &rest) < 0 || *rest || v <= 0 || v > 4096)
                return pd_error_setx(err, EINVAL,
                                     "invalid cpu count '%s' (expected a positive number such as 1 or 0.5)",
                                     s ? s : "");
        uint64_t m = (uint64_t)(v * 1000 + 0.5L);
        if (m == 0)
                m = 1;
        *out = m;
        return 0;
}

uint64_t pd_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct pd_fd_path pd_fd_path(int fd)
{
        struct pd_fd_path p;
        snprintf(p.s, sizeof p.s, "/proc/self/fd/%d", fd);
        return p;
}

int pd_mkdir_p(const char *path, mode_t mode, struct pd_error *err)
{
        char buf[4096];
        size_t len = strlen(path);
        if (len == 0 || len >= sizeof buf)
                return pd_error_setx(err, ENAMETOOLONG, "path '%s' is empty or too long", path);
        memcpy(buf, path, len + 1);
        for (char *p = buf + 1; ; p++) {
                if (*p == '/' || *p == '\0') {
                        char c = *p;
                        *p = '\0';
                        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                                return pd_error_set(err, errno, "mkdir '%s'", buf);
                        *p = c;
                        if (c == '\0')
                                break;
                }
        }
        return 0;
}

unsigned pd_path_depth(const char *path)
{
        unsigned n = 0;
        for (const char *p = path; *p;) {
                size_t len = strcspn(p, "/");
                if (len && !(len == 1 && p[0] == '.'))
                        n++;
                p += len;
                p += strspn(p, "/");
        }
        return n;
}

static int rm_rf_at(int dfd, const char *name, dev_t dev, int depth)
{
        if (depth > PD_RM_RF_DEPTH_MAX)
                return -ELOOP;
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (st.st_dev != dev)
                return -EXDEV; /* never cross into a mount */
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                int q = rm_rf_at(dirfd(d), de->d_name, dev, depth + 1);
                if (q < 0 && r == 0)
                        r = q;
        }
        closedir(d);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

DIR *pd_opendirat(int dirfd, const char *path)
{
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                errno = e;
        }
        return d;
}

int pd_rm_rf(const char *path, struct pd_error *err)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : pd_error_set(err, errno, "stat '%s'", path);
        int r = rm_rf_at(AT_FDCWD, path, st.st_dev, 0);
        if (r < 0)
                return pd_error_set(err, -r, "remove '%s'", path);
        return 0;
}
