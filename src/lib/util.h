/* Small helpers shared by every part: cleanup attributes, full reads and
 * writes, size and duration parsing. */
#pragma once
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "lib/error.h"

static inline void pd_closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void pd_freep(void *p)
{
        free(*(void **)p);
}
#define _pd_cleanup_close_ __attribute__((cleanup(pd_closep)))
#define _pd_cleanup_free_ __attribute__((cleanup(pd_freep)))

/* Hand an fd or pointer over to the caller: the local no longer owns it. */
#define PD_TAKE_FD(fd) ({ int _t = (fd); (fd) = -1; _t; })
#define PD_TAKE_PTR(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })

#define PD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Write/read all bytes, retrying on EINTR and short counts.
 * Return 0 / bytes read (< n only at EOF) or -errno. */
int pd_write_all(int fd, const void *buf, size_t n);
ssize_t pd_read_all(int fd, void *buf, size_t n);

/* Write a short string to a file (sysfs/procfs/cgroupfs style). */
int pd_write_file_at(int dirfd, const char *path, const char *s, struct pd_error *err);
/* Read a small file into buf (NUL-terminated). Returns length or -errno. */
ssize_t pd_read_file_at(int dirfd, const char *path, char *buf, size_t size);

/* "512M", "1G", "1.5GiB", "4096", "64k": bytes. Refuses garbage like "12Q". */
int pd_parse_size(const char *s, uint64_t *out, struct pd_error *err);
/* "300", "300s", "5m", "1h", "250ms": milliseconds. 0 is allowed. */
int pd_parse_duration_ms(const char *s, uint64_t *out, struct pd_error *err);
/* "1", "0.5", "2": milli-CPUs (1000 = one CPU). */
int pd_parse_cpus(const char *s, uint64_t *out_millicpus, struct pd_error *err);

/* CLOCK_MONOTONIC in nanoseconds / milliseconds: deadlines and durations. */
uint64_t pd_now_ns(void);
static inline uint64_t pd_now_ms(void) { return pd_now_ns() / 1000000u; }

/* "/proc/self/fd/<fd>": a path to what fd refers to, for the calls that take
 * a path only (mount(2) targets and sources, reopening with other flags). A
 * struct, so it can be used inline: mount(src, pd_fd_path(fd).s, ...). No
 * malloc: a post-clone child may use it. */
struct pd_fd_path {
        char s[32];
};
struct pd_fd_path pd_fd_path(int fd);

/* mkdir -p with mode; existing directories are fine. */
int pd_mkdir_p(const char *path, mode_t mode, struct pd_error *err);
/* How deep a tree paddock makes from what it is sent may nest: an archive
 * entry (an image layer, a template upload, a build context) has at most
 * this many path components, and the trees made of them (layers, their
 * flattening, copies into a layer) stop there. pd_rm_rf removes trees
 * PD_RM_RF_DEPTH_MAX deep: every such tree plus the state dir's own levels
 * above it (templates/NAME/rootfs, layers/HEX/...), so whatever was made
 * can be removed. One constant: a limit that let more in than rm -rf takes
 * out left trees nobody could clean up. */
#define PD_TREE_DEPTH_MAX 512
#define PD_RM_RF_DEPTH_MAX (PD_TREE_DEPTH_MAX + 32)
/* The number of components of a relative path ("a/b/c" is 3; empty ones
 * and "." do not count). */
unsigned pd_path_depth(const char *path);
/* rm -rf of a directory tree, not crossing mount points. Missing is fine.
 * Deeper than PD_RM_RF_DEPTH_MAX: ELOOP (what is above is still removed). */
int pd_rm_rf(const char *path, struct pd_error *err);
/* opendir of path under dirfd (O_NOFOLLOW on the last part: a directory,
 * not a link to one); NULL with errno set. closedir() closes it. */
DIR *pd_opendirat(int dirfd, const char *path);
