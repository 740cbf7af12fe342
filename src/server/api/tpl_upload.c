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
        const char *name;
        struct pd_tpl_tar_walk w = { .what = "body", .entry = "archive", .max_entries = ARCHIVE_ENTRIES_MAX,
                                     .links_inside = true };
        while (r == 0 && (r = pd_tpl_tar_next(a, &w, &e, &name, why, whysz)) > 0) {
                r = 0;
                if (archive_entry_filetype(e) != AE_IFREG)
                        continue;
                oci = oci || !strcmp(name, "oci-layout");
                docker = docker || !strcmp(name, "manifest.json");
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

/* The upload linked into the reserved record: image.tar. */
static int keep_upload(struct pd_server *srv, const char *dir, void *arg, struct pd_error *err)
{
        struct upload *u = arg;
        char path[PATH_MAX + 16], fdp[64];
        snprintf(path, sizeof path, "%s/image.tar", dir);
        snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", u->fd);
        if (linkat(AT_FDCWD, fdp, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0)
                return pd_error_set(err, errno, "keep the upload");
        return 0;
}

/* The end: check the archive, reserve the name, link the file in, start. */
static enum MHD_Result upload_end(struct pd_req *r, struct upload *u)
{
        const char *name = r->params[0], *transport = NULL;
        char why[640];
        if (pd_tpl_archive_kind(u->fd, &transport, why, sizeof why) < 0)
                return pd_reply_error(r, 400, "bad_request", "%s", why);
        char source[64], ref[PATH_MAX + 32], dir[PATH_MAX];
        snprintf(source, sizeof source, "upload (%s)", transport);
        pd_tpl_dir(r->srv, name, dir, sizeof dir);
        snprintf(ref, sizeof ref, "%s:%s/image.tar", transport, dir);
        struct pd_tpl_launch l = { .name = name, .key = &r->key, .shared = u->shared, .source = source, .ref = ref,
                                   .prepare = keep_upload, .arg = u };
        unsigned st = pd_tpl_launch(r->srv, &l, why, sizeof why);
        if (st)
                return pd_reply_error(r, st, pd_tpl_status_code(st), "%s", why);
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
