/* FILE_READ and FILE_WRITE: bulk transfers as DATA frames. Reads are
 * generated lazily when the connection has room, so a huge file never sits
 * in memory; writes go to a temporary file renamed over the target at the
 * end, so a failed upload changes nothing.
 *
 * A read is of the inode opened when the request came, whatever happens to
 * the path afterwards (a file replaced by rename keeps its old contents for
 * us). With DESCRIBE, the host learns from FILE_OPENED how many bytes will
 * come, taken from that same fd, before the first of them; if the file
 * shrinks meanwhile (truncated in place) the read ends with ERROR, never
 * with fewer bytes than announced. Files of pseudo filesystems (procfs,
 * sysfs, ...) report a size that is not their content (0, 4096): their
 * length is announced as unknown, and they are read to their end, up to
 * PSEUDO_MAX. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

#define PSEUDO_MAX (64u << 20)  /* a procfs file has no size: at most this much */
#define OPEN_TRIES 3            /* the path replaced between the two opens */

struct ag_fread {
        struct ag_fread *next;
        uint32_t id;
        int fd;
        uint64_t off, left, sent;
        uint64_t promised;      /* announced in FILE_OPENED (UINT64_MAX: none) */
        bool pseudo;            /* no size: read to the end, up to PSEUDO_MAX */
        char path[PATH_MAX];
};

/* Filesystems whose st_size is not the content's length. */
static bool pseudo_fs(int fd)
{
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0)
                return false;
        switch ((unsigned long)sf.f_type) {
        case PROC_SUPER_MAGIC:
        case SYSFS_MAGIC:
        case DEBUGFS_MAGIC:
        case TRACEFS_MAGIC:
        case SECURITYFS_MAGIC:
        case CGROUP_SUPER_MAGIC:
        case CGROUP2_SUPER_MAGIC:
        case BPF_FS_MAGIC:
        case EFIVARFS_MAGIC:
        case PSTOREFS_MAGIC:
                return true;
        default:
                return false;
        }
}

struct ag_fwrite {
        struct ag_fwrite *next;
        uint32_t id;
        int fd, dirfd;
        bool append, failed;
        uint32_t uid, gid;
        char name[NAME_MAX + 1], tmp[64], abs[PATH_MAX];
};

static uint8_t io_buf[PD_DATA_CHUNK];
static unsigned tmp_counter;

/* Open a regular file for reading; anything else is refused before any
 * read can block or touch a device. */
static int open_regular_once(struct agent *ag, const char *abs, struct stat *st, struct pd_error *err)
{
        _pd_cleanup_close_ int pfd = ag_open_in_root(ag, abs, O_PATH, 0);
        if (pfd < 0)
                return pd_error_set(err, -pfd, "open '%s'", abs);
        struct stat ps;
        if (fstat(pfd, &ps) < 0)
                return pd_error_set(err, errno, "stat '%s'", abs);
        if (S_ISDIR(ps.st_mode))
                return pd_error_setx(err, EISDIR, "'%s' is a directory", abs);
        if (!S_ISREG(ps.st_mode))
                return pd_error_setx(err, EINVAL, "'%s' is not a regular file", abs);
        _pd_cleanup_close_ int fd = ag_open_in_root(ag, abs, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return pd_error_set(err, -fd, "open '%s'", abs);
        if (fstat(fd, st) < 0)
                return pd_error_set(err, errno, "stat '%s'", abs);
        if (st->st_dev != ps.st_dev || st->st_ino != ps.st_ino || !S_ISREG(st->st_mode))
                return pd_error_setx(err, EAGAIN, "'%s' changed while opening", abs);
        return PD_TAKE_FD(fd);
}

/* A file replaced by rename between the two opens is a race the caller
 * did not lose: open what the path names now. */
static int open_regular(struct agent *ag, const char *abs, struct stat *st, struct pd_error *err)
{
        int fd = -EAGAIN;
        for (int i = 0; i < OPEN_TRIES && fd == -EAGAIN; i++)
                fd = open_regular_once(ag, abs, st, err);
        return fd;
}

int ag_req_file_read(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid;
        uint64_t off = 0, len = UINT64_MAX;
        char abs[PATH_MAX];
        int k = ag_req_creds(r->payload, r->h->len, &uid, &gid, r->err);
        if (k < 0 || (k = ag_get_path(r, PD_A_PATH, uid, abs, sizeof abs)) < 0)
                return k;
        uint32_t describe = 0;
        if ((k = ag_get_u64(r, PD_A_OFFSET, &off)) < 0 || (k = ag_get_u64(r, PD_A_LENGTH, &len)) < 0 ||
            (k = ag_get_u32(r, PD_A_DESCRIBE, &describe)) < 0)
                return k;
        struct ag_fsid f;
        struct stat st;
        ag_fsid_enter(&f, uid, gid);
        int fd = open_regular(ag, abs, &st, r->err);
        ag_fsid_leave(&f);
        if (fd < 0)
                return fd;
        struct ag_fread *fr = calloc(1, sizeof *fr);
        if (!fr) {
                close(fd);
                return pd_error_set(r->err, ENOMEM, "read '%s'", abs);
        }
        fr->id = r->h->id;
        fr->fd = fd;
        fr->off = off;
        fr->left = len;
        fr->promised = UINT64_MAX;
        snprintf(fr->path, sizeof fr->path, "%s", abs);
        if (describe) {
                fr->pseudo = pseudo_fs(fd);
                struct pd_msg m;
                pd_msg_init(&m);
                if (!fr->pseudo) {
                        /* the size of this inode, not of whatever the path names later */
                        uint64_t size = (uint64_t)st.st_size;
                        uint64_t rest = size > off ? size - off : 0;
                        fr->left = fr->promised = rest < len ? rest : len;
                        pd_msg_put_u64(&m, PD_A_SIZE, fr->promised);
                }
                ag_conn_send(ag, c, PD_T_FILE_OPENED, 0, fr->id, 0, m.buf, m.len);
                pd_msg_free(&m);
        }
        /* append at the tail: transfers run in request order */
        struct ag_fread **pp = &c->reads;
        while (*pp)
                pp = &(*pp)->next;
        *pp = fr;
        return AG_DONE;
}

void ag_fread_generate(struct agent *ag, struct ag_conn *c)
{
        while (c->reads && !c->dead && ag_buf_used(&c->out) < AG_OUT_LOW) {
                struct ag_fread *fr = c->reads;
                size_t want = fr->left < sizeof io_buf ? (size_t)fr->left : sizeof io_buf;
                ssize_t n = want ? pread(fr->fd, io_buf, want, (off_t)fr->off) : 0;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n > 0 && fr->pseudo && fr->sent + (uint64_t)n > PSEUDO_MAX) {
                        errno = EFBIG;
                        n = -1;
                }
                if (n == 0 && fr->promised != UINT64_MAX && fr->sent < fr->promised) {
                        /* truncated while we read it: what was announced cannot come */
                        errno = ESTALE;
                        n = -1;
                }
                if (n > 0) {
                        fr->off += (uint64_t)n;
                        fr->left -= (uint64_t)n;
                        fr->sent += (uint64_t)n;
                        ag_conn_send(ag, c, PD_T_DATA, 0, fr->id, 0, io_buf, (size_t)n);
                        continue;
                }
                if (n < 0) {
                        struct pd_error err;
                        if (errno == EFBIG)
                                pd_error_setx(&err, EFBIG, "'%s' has no size and goes on past %u MiB", fr->path,
                                              PSEUDO_MAX >> 20);
                        else if (errno == ESTALE)
                                pd_error_setx(&err, ESTALE, "'%s' shrank while it was read", fr->path);
                        else
                                pd_error_set(&err, errno, "read '%s'", fr->path);
                        ag_conn_send(ag, c, PD_T_DATA, PD_F_END, fr->id, 0, NULL, 0);
                        ag_conn_send_error(ag, c, fr->id, &err);
                } else {
                        struct pd_msg m;
                        pd_msg_init(&m);
                        pd_msg_put_u64(&m, PD_A_SIZE, fr->sent);
                        ag_conn_send(ag, c, PD_T_DATA, PD_F_END, fr->id, 0, NULL, 0);
                        ag_conn_send(ag, c, PD_T_REPLY, 0, fr->id, 0, m.buf, m.len);
                        pd_msg_free(&m);
                }
                c->reads = fr->next;
                close(fr->fd);
                free(fr);
        }
}

static void fwrite_free(struct ag_fwrite *w, bool unlink_tmp)
{
        if (w->fd >= 0)
                close(w->fd);
        if (unlink_tmp && !w->append && w->tmp[0]) {
                struct ag_fsid f;
                ag_fsid_enter(&f, w->uid, w->gid);
                unlinkat(w->dirfd, w->tmp, 0);
                ag_fsid_leave(&f);
        }
        if (w->dirfd >= 0)
                close(w->dirfd);
        free(w);
}

static int fwrite_open(struct agent *ag, struct ag_fwrite *w, mode_t mode, bool has_mode,
                       struct pd_error *err)
{
        w->dirfd = ag_open_parent(ag, w->abs, w->name, sizeof w->name, err);
        if (w->dirfd < 0)
                return w->dirfd;
        if (!w->name[0])
                return pd_error_setx(err, EISDIR, "'/' is a directory");
        struct stat st;
        if (fstatat(w->dirfd, w->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISDIR(st.st_mode))
                        return pd_error_setx(err, EISDIR, "'%s' is a directory", w->abs);
                if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        return pd_error_setx(err, EINVAL, "'%s' is not a regular file", w->abs);
                if (!has_mode && S_ISREG(st.st_mode))
                        mode = st.st_mode & 07777;
        }
        if (w->append) {
                int fd = ag_open_in_root(ag, w->abs, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK |
                                         O_NOCTTY, mode);
                if (fd < 0)
                        return pd_error_set(err, -fd, "open '%s'", w->abs);
                w->fd = fd;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        return pd_error_setx(err, EINVAL, "'%s' is not a regular file", w->abs);
                return 0;
        }
        snprintf(w->tmp, sizeof w->tmp, ".paddock-upload-%d-%u.tmp", (int)getpid(), ++tmp_counter);
        w->fd = openat(w->dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (w->fd < 0) {
                int e = errno;
                w->tmp[0] = '\0';
                return pd_error_set(err, e, "create a file in the directory of '%s'", w->abs);
        }
        fchmod(w->fd, mode);    /* past the umask */
        return 0;
}

int ag_req_file_write(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t mode = 0644, append = 0;
        int k;
        for (struct ag_fwrite *w = c->writes; w; w = w->next)
                if (w->id == r->h->id)
                        return pd_error_setx(r->err, EBUSY, "request id %" PRIu32 " already in use",
                                             r->h->id);
        struct ag_fwrite *w = calloc(1, sizeof *w);
        if (!w)
                return pd_error_set(r->err, ENOMEM, "write");
        w->fd = w->dirfd = -1;
        w->id = r->h->id;
        if ((k = ag_req_creds(r->payload, r->h->len, &w->uid, &w->gid, r->err)) < 0 ||
            (k = ag_get_path(r, PD_A_PATH, w->uid, w->abs, sizeof w->abs)) < 0 ||
            (k = ag_get_u32(r, PD_A_MODE, &mode)) < 0 || (k = ag_get_u32(r, PD_A_APPEND, &append)) < 0) {
                free(w);
                return k;
        }
        struct pd_attr ma;
        bool has_mode = pd_msg_find(r->payload, r->h->len, PD_A_MODE, &ma);
        if (mode & ~07777u) {
                free(w);
                return pd_error_setx(r->err, EINVAL, "bad mode %o", mode);
        }
        w->append = append != 0;
        struct ag_fsid f;
        ag_fsid_enter(&f, w->uid, w->gid);
        k = fwrite_open(ag, w, (mode_t)mode, has_mode, r->err);
        /* metadata on the new file before its bytes: refused, nothing changed */
        struct pd_attr mk;
        if (k >= 0 && pd_msg_find(r->payload, r->h->len, PD_A_META_KEY, &mk))
                k = w->append ? pd_error_setx(r->err, EINVAL, "metadata cannot be set by an append")
                              : ag_meta_apply(r, w->fd, w->abs, r->err);
        ag_fsid_leave(&f);
        if (k < 0) {
                fwrite_free(w, true);
                return k;
        }
        w->next = c->writes;
        c->writes = w;
        return AG_DONE;
}

static void fwrite_unlink(struct ag_conn *c, struct ag_fwrite *w)
{
        for (struct ag_fwrite **pp = &c->writes; *pp; pp = &(*pp)->next)
                if (*pp == w) {
                        *pp = w->next;
                        return;
                }
}

int ag_fwrite_data(struct agent *ag, struct ag_conn *c, const struct pd_frame_hdr *h,
                   const uint8_t *payload)
{
        struct ag_fwrite *w = c->writes;
        while (w && w->id != h->id)
                w = w->next;
        if (!w)
                return 0;
        bool end = h->flags & PD_F_END;
        struct pd_error err = { 0 };
        if (!w->failed && h->len) {
                int k = pd_write_all(w->fd, payload, h->len);
                if (k < 0) {
                        pd_error_set(&err, -k, "write '%s'", w->abs);
                        ag_conn_send_error(ag, c, w->id, &err);
                        w->failed = true;
                        /* drop the partial upload now; the rest of its DATA is discarded */
                        close(w->fd);
                        w->fd = -1;
                        struct ag_fsid f;
                        ag_fsid_enter(&f, w->uid, w->gid);
                        if (!w->append && w->tmp[0])
                                unlinkat(w->dirfd, w->tmp, 0);
                        ag_fsid_leave(&f);
                        w->tmp[0] = '\0';
                }
        }
        if (!end)
                return 1;
        fwrite_unlink(c, w);
        if (w->failed) {
                fwrite_free(w, false);
                return 1;
        }
        int k = 0;
        if (close(w->fd) < 0)
                k = pd_error_set(&err, errno, "write '%s'", w->abs);
        w->fd = -1;
        struct ag_fsid f;
        ag_fsid_enter(&f, w->uid, w->gid);
        if (k == 0 && !w->append && renameat(w->dirfd, w->tmp, w->dirfd, w->name) < 0)
                k = pd_error_set(&err, errno, "rename into '%s'", w->abs);
        struct pd_msg m;
        pd_msg_init(&m);
        if (k == 0) {
                w->tmp[0] = '\0';
                k = ag_put_entry(&m, w->dirfd, w->name, w->abs, &err);
        }
        ag_fsid_leave(&f);
        if (k < 0)
                ag_conn_send_error(ag, c, w->id, &err);
        else
                ag_conn_send(ag, c, PD_T_REPLY, 0, w->id, 0, m.buf, m.len);
        pd_msg_free(&m);
        fwrite_free(w, true);
        return 1;
}

void ag_fileio_conn_free(struct agent *ag, struct ag_conn *c)
{
        while (c->reads) {
                struct ag_fread *fr = c->reads;
                c->reads = fr->next;
                close(fr->fd);
                free(fr);
        }
        while (c->writes) {
                struct ag_fwrite *w = c->writes;
                c->writes = w->next;
                fwrite_free(w, true);
        }
}
