/* POST /api/v1/templates/{name}/image (docs/templates.md "Templates over
 * HTTP"): the body an image archive (an oci-archive or a docker-archive
 * tarball, as `skopeo copy ... oci-archive:F`, `podman save`, `docker save`
 * write them), streamed to an unlinked file under the state dir with a
 * size limit (serve --template-upload-max), looked through (a tar of
 * plain files and directories with an oci-layout or a manifest.json at its
 * top, nothing that climbs out), then linked into the build record and
 * pulled by the same child as a registry image: `paddock template pull
 * --uploaded-archive`, which may read exactly that archive and removes it
 * when done. A refused archive leaves nothing: no record, no file. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image.h"
#include "lib/util.h"
#include "server/api/api.h"
#include "server/api/templates.h"
#include "server/core/log.h"

#define ARCHIVE_ENTRIES_MAX 100000
/* what a refused upload may still send before the connection is cut
 * (below it, the refusal answers when the body has ended; as core/http.c
 * does for buffered bodies) */
#define DISCARD_MAX (64u << 20)

struct upload {
        int fd;
        uint64_t len, max, discarded;
        bool shared;
        struct pd_deferred_error fail;
};

static void upload_free(struct pd_req *r, struct upload *u)
{
        if (u->fd >= 0)
                close(u->fd);
        free(u);
        r->route_state = NULL;
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

static bool name_ok(const char *p)
{
        if (!*p || p[0] == '/' || strlen(p) > 1024)
                return false;
        for (const char *c = p; c; c = strchr(c, '/')) {
                if (*c == '/')
                        c++;
                if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || !c[2]))
                        return false;
        }
        return true;
}

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

int pd_tpl_archive_kind(int fd, const char **transport, char *why, size_t whysz)
{
        bool opened;
        struct archive *a = pd_tpl_tar_open(fd, &opened);
        int r = 0;
        bool oci = false, docker = false;
        if (!opened) {
                snprintf(why, whysz, "the body is not a tar archive");
                r = -EINVAL;
        }
        struct archive_entry *e;
        unsigned count = 0;
        while (r == 0) {
                int k = archive_read_next_header(a, &e);
                if (k == ARCHIVE_EOF)
                        break;
                if (k != ARCHIVE_OK) {
                        snprintf(why, whysz, "the body is not a valid tar archive: %s", archive_error_string(a));
                        r = -EINVAL;
                        break;
                }
                const char *name = archive_entry_pathname(e);
                mode_t type = archive_entry_filetype(e);
                while (name && name[0] == '.' && name[1] == '/')
                        name += 2;
                if (!name || !*name || !strcmp(name, ".") || !strcmp(name, "./"))
                        continue;
                if (++count > ARCHIVE_ENTRIES_MAX) {
                        snprintf(why, whysz, "the archive has more than %u entries", ARCHIVE_ENTRIES_MAX);
                        r = -EINVAL;
                } else if (!name_ok(name)) {
                        snprintf(why, whysz, "archive entry '%.200s': absolute paths and '..' are refused", name);
                        r = -EINVAL;
                } else if (archive_entry_hardlink(e)) {
                        snprintf(why, whysz, "archive entry '%.200s': hard links are refused", name);
                        r = -EINVAL;
                } else if (type == AE_IFLNK && !link_inside(name, archive_entry_symlink(e) ?: "")) {
                        snprintf(why, whysz, "archive entry '%.200s': a symlink out of the archive", name);
                        r = -EINVAL;
                } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
                        snprintf(why, whysz, "archive entry '%.200s': only files, directories and symlinks",
                                 name);
                        r = -EINVAL;
                } else if (type == AE_IFREG && !strcmp(name, "oci-layout")) {
                        oci = true;
                } else if (type == AE_IFREG && !strcmp(name, "manifest.json")) {
                        docker = true;
                }
        }
        archive_read_free(a);
        if (r == 0 && !oci && !docker) {
                snprintf(why, whysz, "not an image archive: an oci-archive has an 'oci-layout' file at its top, a "
                                     "docker-archive a 'manifest.json'");
                r = -EINVAL;
        }
        /* docker save (25 and later) writes both: the OCI layout is the
         * whole truth there */
        if (r == 0)
                *transport = oci ? "oci-archive" : "docker-archive";
        return r;
}

/* The first call: who asks for what; the body's file. */
static void upload_begin(struct pd_req *r, struct upload *u)
{
        struct pd_error err = { 0 };
        char owner[40], p[PATH_MAX];
        const char *name = r->params[0], *sq = pd_req_query(r, "shared");
        u->shared = sq && (!strcmp(sq, "1") || !strcmp(sq, "true"));
        u->max = r->srv->cfg.template_upload_max ? r->srv->cfg.template_upload_max : PD_TPL_ARCHIVE_MAX_DEFAULT;
        const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
        if (pd_image_name_check(name, &err) < 0)
                pd_deferred_fail(&u->fail, 400, "bad_request", "%s", err.msg);
        else if (sq && !u->shared && strcmp(sq, "0") && strcmp(sq, "false"))
                pd_deferred_fail(&u->fail, 400, "bad_request", "shared is 1, true, 0 or false");
        else if (u->shared && !r->key.admin)
                pd_deferred_fail(&u->fail, 403, "forbidden", "only an admin key (`paddock key create --admin`) may "
                                 "make shared templates");
        else if (!u->shared && !pd_tpl_visible(r->srv, name, r->key.id, owner))
                pd_deferred_fail(&u->fail, 409, "conflict",
                                 "the name '%s' is taken (names are one namespace for all keys)", name);
        else if (cl && strtoull(cl, NULL, 10) > u->max)
                pd_deferred_fail(&u->fail, 413, "too_large", "the image archive is over %" PRIu64 " bytes (paddock "
                                 "serve --template-upload-max)", u->max);
        snprintf(p, sizeof p, "%s/template-builds", r->srv->state.dir);
        /* unlinked until it is whole and checked: a crash leaves nothing */
        if (!u->fail.status && (pd_mkdir_p(p, 0700, NULL) < 0 ||
                                (u->fd = open(p, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0))
                pd_deferred_fail(&u->fail, 500, "internal", "cannot hold the upload");
}

/* The end: check the archive, reserve the name, link the file in, start. */
static enum MHD_Result upload_end(struct pd_req *r, struct upload *u)
{
        const char *name = r->params[0], *transport = NULL;
        char why[640];
        if (pd_tpl_archive_kind(u->fd, &transport, why, sizeof why) < 0)
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        char source[64];
        snprintf(source, sizeof source, "upload (%s)", transport);
        unsigned st = pd_tpl_reserve_as(r->srv, name, &r->key, u->shared, source, why, sizeof why);
        if (st)
                return pd_reply_error(r, st, st == 409 ? "conflict" : st == 403 ? "forbidden" :
                                      st == 429 ? "too_many_requests" : "internal", "%s", why);
        char dir[PATH_MAX], path[PATH_MAX + 16], fdp[64], ref[PATH_MAX + 32];
        pd_tpl_dir(r->srv, name, dir, sizeof dir);
        snprintf(path, sizeof path, "%s/image.tar", dir);
        snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", u->fd);
        struct pd_error err = { 0 };
        int k = 0;
        if (linkat(AT_FDCWD, fdp, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0)
                k = pd_error_set(&err, errno, "keep the upload");
        snprintf(ref, sizeof ref, "%s:%s", transport, path);
        if (k == 0)
                k = pd_tpl_start(r->srv, name, ref, NULL, NULL, 0, &err);
        if (k < 0) {
                pd_tpl_unreserve(r->srv, name);
                return pd_reply_errno(r, k, err.msg);
        }
        pd_log("info", "template=%s create key=%s source=upload format=%s bytes=%" PRIu64 "%s", name, r->key.id,
               transport, u->len, u->shared ? " shared" : "");
        char log[160];
        snprintf(log, sizeof log, "/api/v1/templates/%s/log", name);
        return pd_reply_json(r, 202, json_pack("{s:s, s:s, s:s, s:b, s:s}", "name", name, "status", "queued", "log",
                                               log, "shared", u->shared, "format", transport));
}

enum MHD_Result pd_tpl_image_upload(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        struct upload *u = r->route_state;
        if (!chunk_len) {       /* the request ended early: only free */
                if (u)
                        upload_free(r, u);
                return MHD_NO;
        }
        if (!u) {
                if (!(u = calloc(1, sizeof *u)))
                        return MHD_NO;
                u->fd = -1;
                r->route_state = u;
                upload_begin(r, u);
        }
        if (chunk) {
                size_t n = *chunk_len;
                *chunk_len = 0;
                u->len += n;
                if (u->len > u->max && !u->fail.status)
                        pd_deferred_fail(&u->fail, 413, "too_large", "the image archive is over %" PRIu64 " bytes "
                                         "(paddock serve --template-upload-max)", u->max);
                if (u->fail.status) {
                        /* nothing more is kept; a client far past the
                         * limit is cut off rather than read to its end */
                        if (u->fd >= 0) {
                                close(u->fd);
                                u->fd = -1;
                        }
                        u->discarded += n;
                        return u->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
                }
                if (pd_write_all(u->fd, chunk, n) < 0)
                        pd_deferred_fail(&u->fail, 507, "insufficient_storage", "cannot hold the upload: %s",
                                         strerror(errno));
                return MHD_YES;
        }
        enum MHD_Result ret;
        if (u->fail.status)
                ret = pd_reply_error(r, u->fail.status, u->fail.code, "%s", u->fail.msg);
        else if (u->len == 0)
                ret = pd_reply_error(r, 400, "bad_request", "the body is empty: send an oci-archive or "
                                     "docker-archive tarball");
        else
                ret = upload_end(r, u);
        upload_free(r, u);
        return ret;
}
