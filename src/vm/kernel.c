/* The guest kernel: Debian's linux-image package unpacked by setup, booted
 * uncompressed through its PVH entry (the bzImage spends ~3 s decompressing
 * itself under TCG). The vmlinux is the xz stream inside the bzImage. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"
#include "vm/vm.h"

#define PD_GUEST_DIR_DEFAULT "/var/cache/paddock/guest"

int pd_vm_guest_kernel(char *dir, size_t dsize, char *release, size_t rsize, struct pd_error *err)
{
        const char *env = getenv("PADDOCK_GUEST_DIR");
        snprintf(dir, dsize, "%s", env && *env ? env : PD_GUEST_DIR_DEFAULT);
        char boot[PATH_MAX];
        snprintf(boot, sizeof boot, "%s/boot", dir);
        DIR *d = opendir(boot);
        if (!d)
                return pd_error_set(err, errno, "no guest kernel in '%s' (scripts/setup.sh unpacks "
                                    "Debian's linux-image package there)", dir);
        struct dirent *de;
        release[0] = '\0';
        while ((de = readdir(d)))
                if (strncmp(de->d_name, "vmlinuz-", 8) == 0 && strcmp(de->d_name + 8, release) > 0)
                        snprintf(release, rsize, "%s", de->d_name + 8);
        closedir(d);
        if (!release[0])
                return pd_error_setx(err, ENOENT, "no vmlinuz-* in '%s'", boot);
        return 0;
}

int pd_vm_kernel_extract(const char *bzimage, const char *out_path, struct pd_error *err)
{
        _pd_cleanup_close_ int fd = open(bzimage, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return pd_error_set(err, errno, "open '%s'", bzimage);
        uint8_t *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (img == MAP_FAILED)
                return pd_error_set(err, errno, "map '%s'", bzimage);
        static const uint8_t magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };
        uint8_t *xz = memmem(img, (size_t)st.st_size, magic, sizeof magic);
        if (!xz) {
                munmap(img, (size_t)st.st_size);
                return pd_error_setx(err, ENOEXEC, "'%s' holds no xz stream", bzimage);
        }
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
        _pd_cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0) {
                munmap(img, (size_t)st.st_size);
                return pd_error_set(err, errno, "create '%s'", tmp);
        }
        lzma_stream s = LZMA_STREAM_INIT;
        int ret = 0;
        if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) {
                ret = pd_error_setx(err, ENOMEM, "xz decoder");
                goto out;
        }
        static uint8_t buf[1 << 20];
        s.next_in = xz;
        s.avail_in = (size_t)(img + st.st_size - xz);
        for (;;) {
                s.next_out = buf;
                s.avail_out = sizeof buf;
                lzma_ret lr = lzma_code(&s, LZMA_RUN);
                size_t n = sizeof buf - s.avail_out;
                if (n && pd_write_all(out, buf, n) < 0) {
                        ret = pd_error_set(err, errno, "write '%s'", tmp);
                        break;
                }
                if (lr == LZMA_STREAM_END)
                        break;
                if (lr != LZMA_OK) {
                        ret = pd_error_setx(err, EINVAL, "xz stream of '%s': error %d", bzimage, (int)lr);
                        break;
                }
        }
        lzma_end(&s);
out:
        munmap(img, (size_t)st.st_size);
        if (ret == 0 && rename(tmp, out_path) < 0)
                ret = pd_error_set(err, errno, "rename '%s'", tmp);
        if (ret < 0)
                unlink(tmp);
        return ret;
}
