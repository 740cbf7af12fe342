/* The guest's initramfs, written as a cpio "newc" archive: the agent as
 * /init, the kernel modules it loads before it can see its root disk, and
 * the few directories and device nodes it needs before devtmpfs is up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"
#include "vm.h"

struct cpio {
        FILE *f;
        unsigned ino;
};

static int entry(struct cpio *c, const char *name, mode_t mode, unsigned rmaj, unsigned rmin,
                 const void *data, size_t size)
{
        size_t nl = strlen(name) + 1;
        static const char zero[4] = { 0 };
        fprintf(c->f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X",
                ++c->ino, (unsigned)mode, 0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u, size, 0u, 0u, rmaj, rmin,
                nl, 0u);
        fwrite(name, 1, nl, c->f);
        fwrite(zero, 1, (4 - (110 + nl) % 4) % 4, c->f);
        if (size) {
                fwrite(data, 1, size, c->f);
                fwrite(zero, 1, (4 - size % 4) % 4, c->f);
        }
        return ferror(c->f) ? -EIO : 0;
}

static int file_entry(struct cpio *c, const char *name, const char *path, mode_t mode, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return pd_error_set(err, errno, "open '%s'", path);
        _pd_cleanup_free_ void *buf = malloc((size_t)st.st_size ? (size_t)st.st_size : 1);
        if (!buf)
                return pd_error_set(err, ENOMEM, "read '%s'", path);
        if (pd_read_all(fd, buf, (size_t)st.st_size) != (ssize_t)st.st_size)
                return pd_error_set(err, EIO, "read '%s'", path);
        if (entry(c, name, S_IFREG | mode, 0, 0, buf, (size_t)st.st_size) < 0)
                return pd_error_set(err, EIO, "write initramfs");
        return 0;
}

int pd_vm_initramfs_write(const char *out_path, const char *agent, const char *moddir,
                          const char *const *modules, struct pd_error *err)
{
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
        struct cpio c = { .f = fopen(tmp, "we") };
        if (!c.f)
                return pd_error_set(err, errno, "create '%s'", tmp);
        static const char *const dirs[] = { "dev", "proc", "sys", "lower", "rw", "newroot", "modules" };
        int r = 0;
        for (size_t i = 0; i < PD_ARRAY_SIZE(dirs) && r == 0; i++)
                r = entry(&c, dirs[i], S_IFDIR | 0755, 0, 0, NULL, 0);
        if (r == 0)
                r = entry(&c, "dev/console", S_IFCHR | 0600, 5, 1, NULL, 0);
        if (r == 0)
                r = entry(&c, "dev/null", S_IFCHR | 0666, 1, 3, NULL, 0);
        if (r < 0)
                r = pd_error_set(err, EIO, "write initramfs");
        if (r == 0)
                r = file_entry(&c, "init", agent, 0755, err);
        for (size_t i = 0; modules[i] && r == 0; i++) {
                char name[128], path[PATH_MAX];
                const char *base = strrchr(modules[i], '/');
                snprintf(name, sizeof name, "modules/%02zu-%s.ko", i, base ? base + 1 : modules[i]);
                snprintf(path, sizeof path, "%s/%s.ko", moddir, modules[i]);
                r = file_entry(&c, name, path, 0644, err);
        }
        if (r == 0 && entry(&c, "TRAILER!!!", 0, 0, 0, NULL, 0) < 0)
                r = pd_error_set(err, EIO, "write initramfs");
        if (fclose(c.f) != 0 && r == 0)
                r = pd_error_set(err, errno, "write '%s'", tmp);
        if (r == 0 && rename(tmp, out_path) < 0)
                r = pd_error_set(err, errno, "rename '%s'", tmp);
        if (r < 0)
                unlink(tmp);
        return r;
}
