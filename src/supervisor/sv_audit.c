/* The supervisor's audit lines: <state>/audit/<id>.jsonl, the file the
 * server's audit.c writes too. Both append with O_APPEND and whole lines
 * per write(), so lines never interleave.
 *
 * The hot path does not allocate and does not write per call: lines go to a
 * buffer that main/broker flush whenever they are about to wait for more
 * work (and when it fills). A flood is capped: SV_AUDIT_RATE lines per
 * second are written in full; the rest of that second is counted and
 * reported in one "supervisor.suppressed" line, so a loop of opens cannot
 * fill the disk. The JSON is produced by hand (fixed keys, escaped values):
 * jansson would allocate several times per brokered call. */
#include <errno.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/sv.h"

static char line[6 * PATH_MAX + 2048];
static size_t line_len;
static bool line_open;

void sv_audit_init(struct sv_audit *a, int fd, const char *sandbox)
{
        memset(a, 0, sizeof *a);
        a->fd = fd;
        a->sandbox = sandbox;
}

static void put(const char *s, size_t n)
{
        if (line_len + n >= sizeof line - 2)
                n = sizeof line - 2 - line_len;
        memcpy(line + line_len, s, n);
        line_len += n;
}

static void put_escaped(const char *s, size_t n)
{
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < n && line_len < sizeof line - 8; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '"' || c == '\\') {
                        line[line_len++] = '\\';
                        line[line_len++] = (char)c;
                } else if (c < 0x20 || c >= 0x7f) {
                        /* Bytes, not characters: a path need not be UTF-8,
                         * and \u00XX keeps the line valid JSON. */
                        line[line_len++] = '\\';
                        line[line_len++] = 'u';
                        line[line_len++] = '0';
                        line[line_len++] = '0';
                        line[line_len++] = hex[c >> 4];
                        line[line_len++] = hex[c & 15];
                } else {
                        line[line_len++] = (char)c;
                }
        }
}

static const char *timestamp(struct sv_audit *a)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (ts.tv_sec != a->ts_sec || !a->ts[0]) {
                struct tm tm;
                gmtime_r(&ts.tv_sec, &tm);
                strftime(a->ts, sizeof a->ts, "%Y-%m-%dT%H:%M:%S", &tm);
                a->ts_sec = ts.tv_sec;
        }
        static char out[48];
        snprintf(out, sizeof out, "%s.%03ldZ", a->ts, ts.tv_nsec / 1000000);
        return out;
}

static uint64_t mono_ns(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void append_line(struct sv_audit *a)
{
        if (a->len + line_len > sizeof a->buf)
                sv_audit_flush(a);
        if (!a->len)
                a->first_ns = mono_ns();
        memcpy(a->buf + a->len, line, line_len);
        a->len += line_len;
}

static void head(struct sv_audit *a, const char *event)
{
        line_len = 0;
        put("{\"ts\":\"", 7);
        const char *t = timestamp(a);
        put(t, strlen(t));
        put("\",\"sandbox\":\"", 13);
        put_escaped(a->sandbox, strlen(a->sandbox));
        put("\",\"key\":\"supervisor\",\"event\":\"", 30);
        put(event, strlen(event));
        put("\"", 1);
}

bool sv_audit_begin(struct sv_audit *a, const char *event)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t sec = (uint64_t)now.tv_sec;
        if (sec != a->window) {
                if (a->suppressed) {
                        head(a, "supervisor.suppressed");
                        char n[64];
                        snprintf(n, sizeof n, ",\"count\":%lu,\"rate_limit\":%d}\n", a->suppressed,
                                 SV_AUDIT_RATE);
                        put(n, strlen(n));
                        append_line(a);
                }
                a->window = sec;
                a->in_window = 0;
                a->suppressed = 0;
        }
        if (a->in_window >= SV_AUDIT_RATE) {
                a->suppressed++;
                a->suppressed_total++;
                line_open = false;
                return false;
        }
        a->in_window++;
        head(a, event);
        line_open = true;
        return true;
}

void sv_audit_strn(struct sv_audit *a, const char *key, const char *val, size_t n)
{
        (void)a;
        if (!line_open)
                return;
        put(",\"", 2);
        put(key, strlen(key));
        put("\":\"", 3);
        put_escaped(val, n);
        put("\"", 1);
}

void sv_audit_str(struct sv_audit *a, const char *key, const char *val)
{
        sv_audit_strn(a, key, val, strlen(val));
}

void sv_audit_int(struct sv_audit *a, const char *key, long long v)
{
        (void)a;
        if (!line_open)
                return;
        char n[96];
        snprintf(n, sizeof n, ",\"%s\":%lld", key, v);
        put(n, strlen(n));
}

void sv_audit_raw(struct sv_audit *a, const char *text)
{
        (void)a;
        if (line_open)
                put(text, strlen(text));
}

void sv_audit_end(struct sv_audit *a)
{
        if (!line_open)
                return;
        line_open = false;
        line[line_len++] = '}';
        line[line_len++] = '\n';
        append_line(a);
}

void sv_audit_flush(struct sv_audit *a)
{
        size_t off = 0;
        while (off < a->len) {
                ssize_t w = write(a->fd, a->buf + off, a->len - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        break;  /* disk full or gone: the lines are lost (logged by nobody; see docs) */
                off += (size_t)w;
        }
        a->len = 0;
}

int sv_audit_due_ms(const struct sv_audit *a)
{
        if (!a->len)
                return -1;
        uint64_t age = mono_ns() - a->first_ns, delay = (uint64_t)SV_AUDIT_DELAY_MS * 1000000u;
        if (age >= delay || a->len > sizeof a->buf / 2)
                return 0;
        return (int)((delay - age) / 1000000u) + 1;
}

void sv_audit_flush_line(struct sv_audit *a)
{
        sv_audit_flush(a);
}

void sv_audit_list(struct sv_audit *a, const char *key, const char *const *vals, const size_t *lens, unsigned n)
{
        (void)a;
        if (!line_open)
                return;
        put(",\"", 2);
        put(key, strlen(key));
        put("\":[", 3);
        for (unsigned i = 0; i < n; i++) {
                put(i ? ",\"" : "\"", i ? 2 : 1);
                put_escaped(vals[i], lens[i]);
                put("\"", 1);
        }
        put("]", 1);
}

/* The syscall's name, for the record. */
const char *sv_syscall_name(int nr)
{
        switch (nr) {
        case SYS_open: return "open";
        case SYS_openat: return "openat";
        case SYS_openat2: return "openat2";
        case SYS_creat: return "creat";
        case SYS_connect: return "connect";
        case SYS_execve: return "execve";
        case SYS_execveat: return "execveat";
        case SYS_mkdir: return "mkdir";
        case SYS_mkdirat: return "mkdirat";
        case SYS_mknod: return "mknod";
        case SYS_mknodat: return "mknodat";
        case SYS_rmdir: return "rmdir";
        case SYS_unlink: return "unlink";
        case SYS_unlinkat: return "unlinkat";
        case SYS_symlink: return "symlink";
        case SYS_symlinkat: return "symlinkat";
        case SYS_link: return "link";
        case SYS_linkat: return "linkat";
        case SYS_rename: return "rename";
        case SYS_renameat: return "renameat";
        case SYS_renameat2: return "renameat2";
        case SYS_chmod: return "chmod";
        case SYS_fchmod: return "fchmod";
        case SYS_fchmodat: return "fchmodat";
        case SYS_chown: return "chown";
        case SYS_lchown: return "lchown";
        case SYS_fchown: return "fchown";
        case SYS_fchownat: return "fchownat";
        case SYS_truncate: return "truncate";
        case SYS_ftruncate: return "ftruncate";
        case SYS_fallocate: return "fallocate";
        case SYS_setxattr: return "setxattr";
        case SYS_lsetxattr: return "lsetxattr";
        case SYS_fsetxattr: return "fsetxattr";
        case SYS_removexattr: return "removexattr";
        case SYS_lremovexattr: return "lremovexattr";
        case SYS_fremovexattr: return "fremovexattr";
        case SYS_utime: return "utime";
        case SYS_utimes: return "utimes";
        case SYS_futimesat: return "futimesat";
        case SYS_utimensat: return "utimensat";
        case SYS_bind: return "bind";
        case SYS_sendto: return "sendto";
        case SYS_sendmsg: return "sendmsg";
        case SYS_sendmmsg: return "sendmmsg";
        default: return "other";
        }
}
