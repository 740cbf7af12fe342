/* File metadata: E2B's `user.e2b.*` extended attributes (envd >= 0.6.2,
 * docs/e2b.md "File metadata"). Entries carry them as META_KEY/META_VAL
 * pairs (the key without the prefix); a FILE_WRITE that names some sets
 * them on its new file before any byte lands, so a filesystem that keeps
 * no user xattrs refuses the upload and changes nothing.
 *
 * Reading a user xattr needs read permission on the file, as getxattr(2)
 * does; so the file is opened for reading under the caller's fsuid and
 * an unreadable file simply shows no metadata. Only regular files and
 * directories are opened (user xattrs exist on nothing else), without
 * following links and non-blocking, so a path swapped for a FIFO or a
 * device meanwhile cannot block the agent. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

#define META_PREFIX "user.e2b."
#define META_PREFIX_LEN (sizeof META_PREFIX - 1)
#define META_NAMES_MAX 65536            /* listxattr's buffer */
#define META_VALUE_MAX 4096             /* envd's cap on one file's metadata */

void ag_put_meta(struct pd_msg *m, int dirfd, const char *name, const struct stat *st)
{
        if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
                return;
        int fd = openat(dirfd, name[0] ? name : ".",
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return;
        struct stat now;
        static char names[META_NAMES_MAX];
        ssize_t n = -1;
        /* the inode stat-ed, not one swapped in since */
        if (fstat(fd, &now) == 0 && now.st_ino == st->st_ino && now.st_dev == st->st_dev)
                n = flistxattr(fd, names, sizeof names);
        size_t total = 0;
        for (ssize_t i = 0; i < n;) {
                const char *x = names + i;
                size_t len = strnlen(x, (size_t)(n - i));
                i += (ssize_t)len + 1;
                if (len <= META_PREFIX_LEN || strncmp(x, META_PREFIX, META_PREFIX_LEN))
                        continue;
                char val[META_VALUE_MAX + 1];
                ssize_t v = fgetxattr(fd, x, val, META_VALUE_MAX);
                if (v < 0 || memchr(val, '\0', (size_t)v))
                        continue;       /* too large, gone, or not text: not shown */
                total += len + (size_t)v;
                if (total > 2 * META_VALUE_MAX)
                        break;          /* bounded reply, whatever was set out of band */
                val[v] = '\0';
                pd_msg_put_str(m, PD_A_META_KEY, x + META_PREFIX_LEN);
                pd_msg_put_str(m, PD_A_META_VAL, val);
        }
        close(fd);
}

int ag_meta_apply(const struct ag_req *r, int fd, const char *abs, struct pd_error *err)
{
        struct pd_msg_iter it;
        struct pd_attr a;
        char key[256], name[META_PREFIX_LEN + 256];
        bool have_key = false;
        pd_msg_iter_init(&it, r->payload, r->h->len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag == PD_A_META_KEY) {
                        if (have_key || !a.len || a.len >= sizeof key || memchr(a.data, '\0', a.len) ||
                            memchr(a.data, '/', a.len))
                                return pd_error_setx(err, EINVAL, "bad metadata key");
                        pd_attr_str(&a, key, sizeof key);
                        have_key = true;
                } else if (a.tag == PD_A_META_VAL) {
                        if (!have_key || a.len > META_VALUE_MAX || memchr(a.data, '\0', a.len))
                                return pd_error_setx(err, EINVAL, "bad metadata value");
                        snprintf(name, sizeof name, "%s%s", META_PREFIX, key);
                        if (fsetxattr(fd, name, a.data, a.len, 0) < 0) {
                                int e = errno;
                                if (e == ENOTSUP)
                                        return pd_error_setx(err, ENOTSUP,
                                                             "the filesystem of '%s' keeps no user extended "
                                                             "attributes: file metadata cannot be stored there",
                                                             abs);
                                return pd_error_set(err, e, "set metadata '%s' on '%s'", key, abs);
                        }
                        have_key = false;
                }
        }
        if (it.error || have_key)
                return pd_error_setx(err, EINVAL, "malformed metadata");
        return 0;
}
