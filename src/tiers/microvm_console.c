/* The console log of a microvm guest that failed to start (issue 20).
 * QEMU writes the guest's console into the sandbox's runtime dir, which
 * goes with the sandbox, and a failed create destroys the sandbox at once:
 * the log that says why the guest did not come up (a kernel panic, the
 * agent's own error) would be gone before anyone reads it. So it is copied
 * first into <state>/vm/failed/<id>-<time>.console.log, named in the error.
 * At most FAILED_KEEP of them are kept (a crash loop cannot fill the disk),
 * and `paddock gc` removes those older than FAILED_DAYS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tiers/microvm_int.h"
#include "lib/state.h"
#include "lib/util.h"

#define FAILED_DIR "vm/failed"
#define FAILED_KEEP 32
#define FAILED_DAYS 7
#define COPY_MAX (4u << 20)     /* the relay caps the log at 1 MiB by default */

static bool is_kept_log(const char *name)
{
        size_t n = strlen(name), s = strlen(".console.log");
        return n > s && strcmp(name + n - s, ".console.log") == 0;
}

struct kept {
        char name[256];
        time_t mtime;
};

static int by_mtime(const void *a, const void *b)
{
        const struct kept *x = a, *y = b;
        return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Remove kept logs older than max_age seconds (< 0: none by age), then the
 * oldest beyond keep. Returns how many are left, or -errno. */
static int prune(int dfd, long long max_age, int keep)
{
        DIR *d = fdopendir(dup(dfd));
        if (!d)
                return -errno;
        struct kept *v = NULL;
        int n = 0, cap = 0;
        time_t now = time(NULL);
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                if (!is_kept_log(de->d_name) || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                if (max_age >= 0 && (long long)(now - st.st_mtime) > max_age) {
                        (void)unlinkat(dfd, de->d_name, 0);
                        continue;
                }
                if (n == cap) {
                        struct kept *nv = realloc(v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *v);
                        if (!nv)
                                break;
                        v = nv;
                }
                snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
                v[n++].mtime = st.st_mtime;
        }
        closedir(d);
        int left = n;
        if (n > keep) {
                qsort(v, (size_t)n, sizeof *v, by_mtime);
                for (int i = 0; i < n - keep; i++)
                        (void)unlinkat(dfd, v[i].name, 0);
                left = keep;
        }
        free(v);
        return left;
}

void pd_microvm_keep_console(struct pd_sandbox *sb, char *out, size_t size)
{
        char src[PATH_MAX + 32], dir[PATH_MAX + 32], name[128];
        snprintf(src, sizeof src, "%s/vm/console.log", sb->dir);
        snprintf(dir, sizeof dir, "%s/" FAILED_DIR, sb->state->dir);
        snprintf(name, sizeof name, "%s-%lld.console.log", sb->id, (long long)time(NULL));
        _pd_cleanup_close_ int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0) {
                snprintf(out, size, "no console log: %s: %s", src, strerror(errno));
                return;
        }
        struct pd_error e;
        _pd_cleanup_close_ int dfd = -1;
        if (pd_mkdir_p(dir, 0700, &e) < 0 || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                snprintf(out, size, "its console log could not be kept: create '%s': %s", dir, strerror(errno));
                return;
        }
        (void)prune(dfd, -1, FAILED_KEEP - 1);
        _pd_cleanup_close_ int o = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (o < 0) {
                snprintf(out, size, "its console log could not be kept: create '%s/%s': %s", dir, name,
                         strerror(errno));
                return;
        }
        /* the guest's output is untrusted text: copied as it is, never parsed.
         * On the heap: as a static __thread buffer these 64 KiB were every
         * thread's TLS, zeroed (and faulted in) by the dynamic loader at
         * each start of every binary linking libpd, `paddock run` included
         * (bench/README.md, "Where the CPU goes"). */
        enum { BUF = 65536 };
        _pd_cleanup_free_ char *buf = malloc(BUF);
        if (!buf) {
                snprintf(out, size, "its console log could not be kept: out of memory");
                return;
        }
        size_t total = 0;
        ssize_t n;
        while (total < COPY_MAX && (n = read(in, buf, BUF)) > 0) {
                if (pd_write_all(o, buf, (size_t)n) < 0)
                        break;
                total += (size_t)n;
        }
        snprintf(out, size, "console log kept in %s/%s", dir, name);
}

int pd_microvm_console_gc(struct pd_state *st)
{
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/" FAILED_DIR, st->dir);
        _pd_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? 0 : -errno;
        int left = prune(dfd, (long long)FAILED_DAYS * 86400, FAILED_KEEP);
        if (left == 0)
                (void)rmdir(dir);
        return left;
}
