/* The tars a key sends for templates (templates.h): a build context
 * (tpl_builds.c pd_tpl_untar, E2B's file uploads) and an image archive
 * (tpl_upload.c). Both are read with libarchive, and every entry passes
 * one check before anything looks at it: a relative path without a '..'
 * component, a regular file, directory or symlink, no hard link, no sparse
 * file, a bounded count; an image archive's symlinks must also stay
 * inside it (a context's are copied as symlinks, never followed: the
 * unpack opens each parent O_NOFOLLOW). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/util.h"
#include "server/api/templates.h"

struct archive *pd_tpl_tar_open(int fd, bool *opened)
{
        struct archive *a = archive_read_new();
        archive_read_support_format_tar(a);
        archive_read_support_format_gnutar(a);
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_none(a);
        *opened = fd >= 0 && lseek(fd, 0, SEEK_SET) == 0 && archive_read_open_fd(a, fd, 65536) == ARCHIVE_OK;
        return a;
}

/* Relative, no ".." component, short enough to make under a directory. */
static bool name_ok(const char *p)
{
        if (!*p || p[0] == '/' || strlen(p) >= PATH_MAX - 512)
                return false;
        for (const char *c = p; c; c = strchr(c, '/')) {
                if (*c == '/')
                        c++;
                if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || !c[2]))
                        return false;
        }
        return true;
}

/* Whether a symlink at name pointing to target stays inside the archive. */
static bool link_inside(const char *name, const char *target)
{
        if (!*target || target[0] == '/')
                return false;
        int depth = 0;
        for (const char *c = name; (c = strchr(c, '/')); c++)
                depth++;        /* the link's own directory */
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s", target);
        char *save = NULL;
        for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
                if (!strcmp(t, ".."))
                        depth--;
                else if (strcmp(t, "."))
                        depth++;
                if (depth < 0)
                        return false;
        }
        return true;
}

int pd_tpl_tar_next(struct archive *a, struct pd_tpl_tar_walk *w, struct archive_entry **e, const char **name,
                    char *why, size_t whysz)
{
        for (;;) {
                int k = archive_read_next_header(a, e);
                if (k == ARCHIVE_EOF)
                        return 0;
                if (k != ARCHIVE_OK) {
                        snprintf(why, whysz, "the %s is not a valid tar archive: %s", w->what, archive_error_string(a));
                        return -EINVAL;
                }
                const char *n = archive_entry_pathname(*e);
                mode_t type = archive_entry_filetype(*e);
                while (n && n[0] == '.' && n[1] == '/')
                        n += 2;
                if (!n || !*n || !strcmp(n, ".") || !strcmp(n, "./"))
                        continue;
                const char *bad = NULL;
                if (++w->count > w->max_entries) {
                        snprintf(why, whysz, "the %s has more than %u entries", w->what, w->max_entries);
                        return -EINVAL;
                } else if (!name_ok(n)) {
                        bad = "absolute paths and '..' are refused";
                } else if (pd_path_depth(n) > PD_TREE_DEPTH_MAX) {
                        snprintf(why, whysz, "%s entry '%.120s...' is nested %u levels deep (at most %d)", w->entry, n,
                                 pd_path_depth(n), PD_TREE_DEPTH_MAX);
                        return -EINVAL;
                } else if (archive_entry_hardlink(*e)) {
                        bad = "hard links are refused";
                } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
                        bad = "only files, directories and symlinks";
                } else if (w->links_inside && type == AE_IFLNK && !link_inside(n, archive_entry_symlink(*e) ?: "")) {
                        bad = "a symlink out of the archive";
                } else if (archive_entry_sparse_count(*e) > 0) {
                        bad = "sparse files are refused";
                }
                if (bad) {
                        snprintf(why, whysz, "%s entry '%.200s': %s", w->entry, n, bad);
                        return -EINVAL;
                }
                *name = n;
                return 1;
        }
}

void pd_tpl_hold_chunk(int fd, uint64_t *len, const char *what, struct pd_deferred_error *fail, const char *chunk,
                       size_t n)
{
        /* refused already: the rest of the body is read and dropped, so
         * the answer goes out when the client has sent it */
        if (fail->status)
                return;
        if (*len + n > PD_TPL_CONTEXT_MAX) {
                pd_deferred_fail(fail, 413, "too_large", "%s is over %llu bytes", what,
                                 (unsigned long long)PD_TPL_CONTEXT_MAX);
                return;
        }
        if (pd_write_all(fd, chunk, n) < 0)
                pd_deferred_fail(fail, 500, "internal", "cannot hold the upload");
        *len += n;
}
