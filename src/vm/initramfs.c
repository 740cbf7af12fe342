/* The guest's initramfs, written as a cpio "newc" archive: the agent as
 * /init, the kernel modules it loads before it can see its root disk, and
 * the few directories and device nodes it needs before devtmpfs is up. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/util.h"
#include "vm/vm.h"

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

static const char *base_name(const char *m)
{
        const char *b = strrchr(m, '/');
        return b ? b + 1 : m;
}

/* The guest has no modprobe: the list must be in dependency order. Check
 * it against each module's own `depends=` (its .modinfo strings), so a new
 * kernel package that adds a dependency fails here, clearly, and not as a
 * guest that cannot find its disk. */
static int check_order(const char *moddir, const char *const *modules, struct pd_error *err)
{
        for (size_t i = 0; modules[i]; i++) {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "%s/%s.ko", moddir, modules[i]);
                _pd_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0)
                        return pd_error_set(err, errno, "open '%s'", path);
                _pd_cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
                if (!buf || pd_read_all(fd, buf, (size_t)st.st_size) != (ssize_t)st.st_size)
                        return pd_error_set(err, EIO, "read '%s'", path);
                buf[st.st_size] = '\0';
                static const char key[] = "\0depends=";
                char *d = memmem(buf, (size_t)st.st_size, key, sizeof key - 1);
                if (!d)
                        continue;
                char deps[256];
                snprintf(deps, sizeof deps, "%s", d + sizeof key - 1);
                for (char *save = NULL, *dep = strtok_r(deps, ",", &save); dep; dep = strtok_r(NULL, ",", &save)) {
                        bool before = false;
                        for (size_t j = 0; j < i && !before; j++) {
                                const char *b = base_name(modules[j]);
                                /* module names use '_' where file names may use '-' */
                                size_t n = strlen(b);
                                before = strlen(dep) == n;
                                for (size_t k = 0; before && k < n; k++)
                                        before = (b[k] == '-' ? '_' : b[k]) == (dep[k] == '-' ? '_' : dep[k]);
                        }
                        if (!before)
                                return pd_error_setx(err, ENOEXEC, "guest module %s needs %s, which the initramfs "
                                                     "does not load before it", base_name(modules[i]), dep);
                }
        }
        return 0;
}

int pd_vm_initramfs_write(const char *out_path, const char *agent, const char *moddir,
                          const char *const *modules, struct pd_error *err)
{
        if (check_order(moddir, modules, err) < 0)
                return -1;
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
                snprintf(name, sizeof name, "modules/%02zu-%s.ko", i, base_name(modules[i]));
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
