/* The boot assets' cache key, remembered. Finding the key of the cached
 * assets costs a dpkg-query (fork + exec, and it parses the whole package
 * database) and reading the agent twice: ~50 ms on a quiet host, several
 * hundred on a loaded one, on every microvm start (a one-shot `paddock run`
 * is a new process each time, so an in-process cache would not do). The
 * key depends only on files whose identity we can read with stat(): the
 * agent, the template builder, the package database dpkg-query reads, the
 * guest kernel's release. When none of them changed (device, inode, size,
 * mtime and ctime: a rebuild, an upgrade or a copy changes at least one,
 * and no process can set a ctime back), the key is the one computed last
 * time. The memo lives in the state dir (root's, 0700) beside the assets. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"
#include "vm/vm.h"

#define MEMO_NAME "assets.memo"

void pd_vm_assets_sig(char *buf, size_t size, const char *const *paths, const char *extra)
{
        size_t len = 0;
        buf[0] = '\0';
        for (int i = 0; paths[i] && len < size; i++) {
                struct stat st;
                int n;
                if (stat(paths[i], &st) < 0)
                        n = snprintf(buf + len, size - len, "%s:missing\n", paths[i]);
                else
                        n = snprintf(buf + len, size - len, "%s:%llu:%llu:%lld:%lld.%09ld:%lld.%09ld\n", paths[i],
                                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                                     (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                                     (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
                if (n < 0)
                        return;
                len += (size_t)n;
        }
        if (len < size)
                snprintf(buf + len, size - len, "%s\n", extra);
}

int pd_vm_assets_memo_get(const char *vmdir, const char *sig, uint64_t *h, uint64_t *hr)
{
        char p[PATH_MAX + 32], buf[4096 + 64];
        snprintf(p, sizeof p, "%s/" MEMO_NAME, vmdir);
        _pd_cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = pd_read_all(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        size_t sl = strlen(sig);
        /* the signature, then one line "keys H HR" */
        if ((size_t)n <= sl || memcmp(buf, sig, sl) != 0)
                return 0;
        return sscanf(buf + sl, "keys %" SCNx64 " %" SCNx64 "\n", h, hr) == 2 ? 1 : 0;
}

void pd_vm_assets_memo_put(const char *vmdir, const char *sig, uint64_t h, uint64_t hr)
{
        char p[PATH_MAX + 32], tmp[PATH_MAX + 48], line[64];
        snprintf(p, sizeof p, "%s/" MEMO_NAME, vmdir);
        snprintf(tmp, sizeof tmp, "%s.%d", p, (int)getpid());
        snprintf(line, sizeof line, "keys %016" PRIx64 " %016" PRIx64 "\n", h, hr);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return;         /* a memo only: the next start computes the key again */
        bool ok = pd_write_all(fd, sig, strlen(sig)) == 0 && pd_write_all(fd, line, strlen(line)) == 0;
        close(fd);
        if (!ok || rename(tmp, p) < 0)
                unlink(tmp);
}
