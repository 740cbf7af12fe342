/* Recipes FROM base or a snapshot (build_live.h): one sandbox for the
 * whole build, snapshotted at the end. */
#include "image/build_live.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image.h"
#include "image/layers.h"
#include "lib/template.h"
#include "lib/util.h"
#include "proto/client.h"

/* a COPY's files travel as one tar on the tar's stdin, held in memory */
#define COPY_MAX (512u << 20)

int pd_live_parent(struct pd_state *st, const char *name, char *ident, size_t size)
{
        char p[PATH_MAX], buf[1024];
        if (pd_template_name_check(name) < 0)
                return 0;
        if (!strcmp(name, "base")) {
                struct pd_error e;
                if (pd_template_ensure_base(st, &e) < 0)
                        return 0;
                ssize_t n = pd_read_file_at(st->dirfd, "templates/base/version", buf, sizeof buf - 1);
                buf[n > 0 ? n : 0] = '\0';
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(ident, size, "base:%s", buf);
                return 1;
        }
        if (pd_template_is_image(st, name))
                return 0;
        snprintf(p, sizeof p, "templates/%s", name);
        if (faccessat(st->dirfd, p, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        /* a snapshot's record says when and from what sandbox it was
         * taken: another snapshot of that name is another record */
        snprintf(p, sizeof p, "templates/%s/snapshot", name);
        ssize_t n = pd_read_file_at(st->dirfd, p, buf, sizeof buf - 1);
        if (n < 0) {
                snprintf(p, sizeof p, "templates/%s/version", name);
                n = pd_read_file_at(st->dirfd, p, buf, sizeof buf - 1);
        }
        buf[n > 0 ? n : 0] = '\0';
        snprintf(ident, size, "template:%s:%s", name, buf);
        return 1;
}

int pd_live_sandbox(struct pd_live *l, struct pd_error *err)
{
        if (l->sb)
                return 0;
        struct pd_spec spec;
        pd_spec_defaults(&spec);
        spec.isolation = PD_ISO_CONTAINER;
        spec.template_name = l->parent;
        spec.memory_bytes = 2048ull << 20;
        spec.disk_bytes = 2048ull << 20;
        spec.pids = 4096;
        /* the build's network, as for a RUN sandbox of an image build */
        pd_image_run_net(l->o, &spec);
        struct pd_sandbox *sb = NULL;
        int r = pd_sandbox_new(l->st, &spec, &sb, err);
        if (r < 0)
                return pd_error_prefix(err, "the build's sandbox of '%s'", l->parent);
        /* it dies with us (a killed build leaves no sandbox), and the host
         * keeps a view of its writable layer for the snapshot */
        sb->die_with_parent = true;
        sb->keep_stage = true;
        if ((r = pd_sandbox_create(sb, err)) < 0) {
                pd_sandbox_free(sb);
                return pd_error_prefix(err, "the build's sandbox of '%s'", l->parent);
        }
        l->sb = sb;
        pd_image_run_net_said(l->o, sb);
        return 0;
}

void pd_live_end(struct pd_live *l)
{
        if (l->sb) {
                struct pd_error e;
                (void)pd_sandbox_destroy(l->sb, &e);
                l->sb = NULL;
        }
}

struct cap {
        char *buf;
        size_t size, n;
};

static void cap_out(void *ctx, uint32_t stream, uint64_t offset, const uint8_t *data, size_t n)
{
        (void)stream;
        (void)offset;
        struct cap *c = ctx;
        if (!c->buf || !c->size)
                return;
        /* keep the last size-1 bytes */
        if (n >= c->size - 1) {
                data += n - (c->size - 1);
                n = c->size - 1;
        }
        if (c->n + n > c->size - 1) {
                size_t cut = c->n + n - (c->size - 1);
                memmove(c->buf, c->buf + cut, c->n - cut);
                c->n -= cut;
        }
        memcpy(c->buf + c->n, data, n);
        c->n += n;
        c->buf[c->n] = '\0';
}

int pd_live_exec(struct pd_live *l, const char *const *argv, const void *in, size_t in_len, char *out,
                 size_t out_size, int *code, struct pd_error *err)
{
        int r = pd_live_sandbox(l, err);
        if (r < 0)
                return r;
        if (out && out_size)
                out[0] = '\0';
        size_t argc = 0;
        while (argv[argc])
                argc++;
        const char *env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                              "LANG=C.UTF-8" };
        uint32_t g = 0;
        const struct pd_spawn_opts o = { .argv = argv, .argc = argc, .env = env, .envc = 3, .cwd = "/",
                                         .groups = &g, .n_groups = 1, .stdin_open = in != NULL };
        struct cap c = { .buf = out, .size = out_size };
        const struct pd_run_io io = { .on_output = cap_out, .ctx = &c, .stdin_data = in, .stdin_len = in_len,
                                      .timeout_ms = 600000 };
        int fd = pd_sandbox_connect(l->sb, err);
        if (fd < 0)
                return fd;
        struct pd_client cl;
        uint32_t pid = 0;
        struct pd_exit x;
        *code = -1;
        if ((r = pd_client_connect(&cl, fd, "paddock-build", err)) == 0 &&
            (r = pd_client_run(&cl, &o, &io, &pid, &x, err)) == 0 && x.has_code)
                *code = (int)x.code;
        pd_client_close(&cl);
        return r < 0 ? pd_error_prefix(err, "'%s' in the build's sandbox", argv[0]) : 0;
}

static char *read_in(struct pd_live *l, const char *path)
{
        size_t size = 1u << 20;
        char *buf = malloc(size);
        int code;
        const char *argv[] = { "/bin/cat", path, NULL };
        if (buf && (pd_live_exec(l, argv, NULL, 0, buf, size, &code, NULL) < 0 || code != 0))
                buf[0] = '\0';
        return buf;
}

int pd_live_user(struct pd_live *l, const char *spec, json_t **out, struct pd_error *err)
{
        _pd_cleanup_free_ char *pw = read_in(l, "/etc/passwd");
        _pd_cleanup_free_ char *gr = read_in(l, "/etc/group");
        return pd_image_resolve_user(spec, pw, gr, out, err);
}

/* ---- COPY ---- */

struct membuf {
        char *p;
        size_t n, cap;
        bool big;
};

static la_ssize_t mem_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
        (void)a;
        struct membuf *m = ctx;
        if (m->n + n > COPY_MAX) {
                m->big = true;
                return -1;
        }
        if (m->n + n > m->cap) {
                size_t cap = (m->n + n) * 2;
                char *p = realloc(m->p, cap);
                if (!p)
                        return -1;
                m->p = p;
                m->cap = cap;
        }
        memcpy(m->p + m->n, buf, n);
        m->n += n;
        return (la_ssize_t)n;
}

/* tree (made by pd_copyin: owners in the store's range) as a tar with the
 * image's own ids, paths relative to the image's root. */
static int tar_tree(const char *tree, struct membuf *m, struct pd_error *err)
{
        struct archive *w = archive_write_new(), *d = archive_read_disk_new();
        struct archive_entry *e = archive_entry_new();
        int r = 0;
        if (!w || !d || !e) {
                r = pd_error_set(err, ENOMEM, "tar");
                goto out;
        }
        archive_write_set_format_pax_restricted(w);
        archive_write_set_bytes_in_last_block(w, 1);
        archive_read_disk_set_symlink_physical(d);
        if (archive_write_open(w, m, NULL, mem_write, NULL) != ARCHIVE_OK ||
            archive_read_disk_open(d, tree) != ARCHIVE_OK) {
                r = pd_error_setx(err, EIO, "tar: %s", archive_error_string(w) ?: archive_error_string(d) ?: "?");
                goto out;
        }
        size_t tl = strlen(tree);
        for (;;) {
                int k = archive_read_next_header2(d, e);
                if (k == ARCHIVE_EOF)
                        break;
                if (k != ARCHIVE_OK) {
                        r = pd_error_setx(err, EIO, "tar: %s", archive_error_string(d));
                        goto out;
                }
                archive_read_disk_descend(d);
                const char *path = archive_entry_pathname(e);
                if (!path || strncmp(path, tree, tl))
                        continue;
                const char *rel = path + tl;
                while (*rel == '/')
                        rel++;
                if (!*rel)
                        continue;       /* the root: the sandbox's own "/" stays as it is */
                char relbuf[PATH_MAX];
                snprintf(relbuf, sizeof relbuf, "%s", rel);
                archive_entry_set_pathname(e, relbuf);
                int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
                archive_entry_set_uid(e, uid >= PD_STORE_UID_BASE ? uid - PD_STORE_UID_BASE : 0);
                archive_entry_set_gid(e, gid >= PD_STORE_UID_BASE ? gid - PD_STORE_UID_BASE : 0);
                archive_entry_set_uname(e, NULL);
                archive_entry_set_gname(e, NULL);
                archive_entry_xattr_clear(e);
                if (archive_write_header(w, e) != ARCHIVE_OK) {
                        r = m->big ? pd_error_setx(err, EFBIG, "COPY: more than %u MiB to copy", COPY_MAX >> 20)
                                   : pd_error_setx(err, EIO, "tar: %s", archive_error_string(w));
                        goto out;
                }
                if (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0) {
                        char buf[65536];
                        la_ssize_t n;
                        while ((n = archive_read_data(d, buf, sizeof buf)) > 0)
                                if (archive_write_data(w, buf, (size_t)n) != n) {
                                        r = m->big ? pd_error_setx(err, EFBIG, "COPY: more than %u MiB to copy",
                                                                   COPY_MAX >> 20)
                                                   : pd_error_setx(err, EIO, "tar: %s", archive_error_string(w));
                                        goto out;
                                }
                        if (n < 0) {
                                r = pd_error_setx(err, EIO, "tar: %s", archive_error_string(d));
                                goto out;
                        }
                }
        }
        if (archive_write_close(w) != ARCHIVE_OK)
                r = pd_error_setx(err, EIO, "tar: %s", archive_error_string(w));
out:
        if (e)
                archive_entry_free(e);
        if (d)
                archive_read_free(d);
        if (w)
                archive_write_free(w);
        return r;
}

int pd_live_copy(struct pd_live *l, const struct pd_copyin *c, struct pd_error *err)
{
        char tmp[PATH_MAX], tree[PATH_MAX + 8];
        int r = pd_live_sandbox(l, err);
        if (r < 0 || (r = pd_layers_begin(l->st, tmp, sizeof tmp, err)) < 0)
                return r;
        snprintf(tree, sizeof tree, "%s/tree", tmp);
        struct membuf m = { 0 };
        {
                _pd_cleanup_close_ int root = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                uint64_t bytes = 0;
                if (root < 0)
                        r = pd_error_set(err, errno, "open '%s'", tree);
                else if ((r = pd_copyin(c, root, NULL, &bytes, err)) == 0)
                        r = tar_tree(tree, &m, err);
        }
        pd_rm_rf(tmp, NULL);
        if (r == 0) {
                /* unpacked by the sandbox's own tar, as root: directories
                 * that exist keep their owners and modes, and a symlink to
                 * a directory (/bin -> usr/bin) stays one */
                const char *argv[] = { "tar", "-x", "-f", "-", "-C", "/", "--numeric-owner", "-p",
                                       "--no-overwrite-dir", "--keep-directory-symlink", NULL };
                char out[600];
                int code;
                r = pd_live_exec(l, argv, m.p ? m.p : "", m.n, out, sizeof out, &code, err);
                if (r == 0 && code != 0)
                        r = pd_error_setx(err, EIO, "unpacking the copied files in the build's sandbox (its tar) "
                                          "failed with status %d: %.300s", code, out);
        }
        free(m.p);
        return r;
}

/* ---- the result ---- */

int pd_live_finish(struct pd_live *l, const char *name, json_t *doc, struct pd_error *err)
{
        int r = pd_live_sandbox(l, err);
        if (r < 0)
                return r;
        char p[PATH_MAX], who[80];
        snprintf(p, sizeof p, "templates/%s", name);
        bool old = faccessat(l->st->dirfd, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        if (old) {
                /* a build replaces its own template: an image template or
                 * a snapshot an earlier build made, not anything else */
                if (!pd_template_is_image(l->st, name) && !pd_template_is_built_snapshot(l->st, name))
                        return pd_error_setx(err, EEXIST, "a template or snapshot named '%s' exists (not one a "
                                             "build made): pick another name", name);
                /* said now, not after the snapshot (pd_snapshot_swap checks
                 * again under its lock) */
                if (pd_template_user(l->st, name, who, sizeof who))
                        return pd_error_setx(err, EBUSY, "replace template '%s': it is in use by %s%s (remove that "
                                             "first)", name, who[0] == '@' ? "snapshot " : "sandbox ",
                                             who + (who[0] == '@'));
        }
        /* built under a name of its own and swapped in at the end: until
         * then the old template stays whole and usable, and a failure on
         * the way (the snapshot, its config) leaves it as it was. A dead
         * build's leftover goes with `paddock template prune`/gc. */
        char tmpname[65];
        snprintf(tmpname, sizeof tmpname, "paddock-build-%d-new", (int)getpid());
        struct pd_error e2;
        (void)pd_image_remove(l->st, tmpname, &e2);
        if ((r = pd_sandbox_snapshot(l->sb, tmpname, err)) < 0)
                return r;
        /* written whole, then renamed: template_run.c reads a full one
         * (its presence marks the snapshot as a built template) */
        char tmp[PATH_MAX], dst[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/templates/%s/.config.json.%d", l->st->dir, tmpname, (int)getpid());
        snprintf(dst, sizeof dst, "%s/templates/%s/config.json", l->st->dir, tmpname);
        errno = 0;
        if (json_dump_file(doc, tmp, JSON_COMPACT) < 0 || rename(tmp, dst) < 0) {
                (void)unlink(tmp);
                r = pd_error_set(err, errno ? errno : EIO, "write '%s'", dst);
                (void)pd_image_remove(l->st, tmpname, &e2);
                return r;
        }
        if ((r = pd_snapshot_swap(l->st, tmpname, name, err)) < 0) {
                (void)pd_image_remove(l->st, tmpname, &e2);
                return pd_error_prefix(err, "replace template '%s'", name);
        }
        /* the old one, now under tmpname */
        if (old)
                (void)pd_image_remove(l->st, tmpname, &e2);
        return 0;
}
