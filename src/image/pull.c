/* Pulling an image into a template (image.h). skopeo copies the image
 * (any transport; auth, mirrors and insecure registries from the standard
 * containers config files and the variables containers tools honour) into
 * an OCI layout of our own whose blobs live in a shared cache dir
 * (<state>/images/blobs: a second pull of the same image downloads
 * nothing); we read its manifest and config, verify every digest again,
 * and unpack each layer the store lacks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/digest.h"
#include "image/egress.h"
#include "image/image.h"
#include "image/skopeo.h"
#include "image/layers.h"
#include "lib/template.h"
#include "lib/util.h"

#define MAX_META_BYTES (4u << 20)       /* manifest, config, index */

static const char *const local_transports[] = { "oci:", "oci-archive:", "docker-archive:",
                                                 "containers-storage:", "dir:" };

/* The skopeo source for ref: "docker://..." stays, a local transport stays
 * (local CLI only), anything else is a registry reference. */
static int source_of(const char *ref, bool allow_local, char *out, size_t size, struct pd_error *err)
{
        if (!*ref || ref[0] == '-' || strpbrk(ref, " \t\n\r"))
                return pd_error_setx(err, EINVAL, "invalid image reference '%.200s'", ref);
        if (strlen(ref) >= size - 16)
                return pd_error_setx(err, ENAMETOOLONG, "image reference too long");
        if (!strncmp(ref, "docker://", 9)) {
                snprintf(out, size, "%s", ref);
                return 0;
        }
        for (size_t i = 0; i < PD_ARRAY_SIZE(local_transports); i++)
                if (!strncmp(ref, local_transports[i], strlen(local_transports[i]))) {
                        if (!allow_local)
                                return pd_error_setx(err, EPERM, "'%.200s' names a source on the host; only the local "
                                                     "CLI may use those (DESIGN §4)", ref);
                        snprintf(out, size, "%s", ref);
                        return 0;
                }
        const char *colon = strchr(ref, ':'), *slash = strchr(ref, '/');
        if (colon && (!slash || colon < slash) && !strncmp(colon, "://", 3))
                return pd_error_setx(err, EINVAL, "unsupported image transport in '%.200s' (docker://, or on the "
                                     "local CLI oci:, oci-archive:, docker-archive:, containers-storage:, dir:)", ref);
        snprintf(out, size, "docker://%s", ref);
        return 0;
}

/* A blob of the cache, read whole (small ones: manifests, configs) and
 * checked against its name. */
static json_t *read_blob_json(const char *blobs, const char *hex, struct pd_error *err)
{
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/sha256/%s", blobs, hex);
        _pd_cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                pd_error_set(err, errno, "open blob sha256:%.12s", hex);
                return NULL;
        }
        if (st.st_size > MAX_META_BYTES) {
                pd_error_setx(err, EFBIG, "blob sha256:%.12s is %lld bytes (a manifest or config of at most %u)", hex,
                              (long long)st.st_size, MAX_META_BYTES);
                return NULL;
        }
        _pd_cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
        if (!buf || pd_read_all(fd, buf, (size_t)st.st_size) != st.st_size) {
                pd_error_set(err, EIO, "read blob sha256:%.12s", hex);
                return NULL;
        }
        char got[65];
        pd_sha256_of(buf, (size_t)st.st_size, got);
        if (strcmp(got, hex)) {
                pd_error_setx(err, EBADMSG, "blob sha256:%.12s... has digest sha256:%.12s... (corrupt)", hex, got);
                return NULL;
        }
        json_error_t je;
        json_t *j = json_loadb(buf, (size_t)st.st_size, 0, &je);
        if (!j || !json_is_object(j)) {
                json_decref(j);
                pd_error_setx(err, EINVAL, "blob sha256:%.12s is not a JSON object: %s", hex, je.text);
                return NULL;
        }
        return j;
}

static bool layer_type_ok(const char *mt)
{
        static const char *const ok[] = {
                "application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd", "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        };
        if (!mt)
                return true;
        for (size_t i = 0; i < PD_ARRAY_SIZE(ok); i++)
                if (!strcmp(mt, ok[i]))
                        return true;
        return false;
}

struct layer_progress {
        const struct pd_image_opts *o;
        const char *hex;
};

static void on_unpack(uint64_t done, uint64_t total, void *arg)
{
        struct layer_progress *lp = arg;
        pd_image_emit(lp->o, PD_IMAGE_EV_LAYER, NULL, lp->hex, done, total);
}

void pd_image_fetched_free(struct pd_image_fetched *f)
{
        free(f->layers);
        json_decref(f->config);
        memset(f, 0, sizeof *f);
}

/* Unpack the layers of the copied image into the store. */
static int from_layout(struct pd_state *st, const char *ref, const char *layout, const char *blobs,
                       const struct pd_image_opts *o, struct pd_image_fetched *f, struct pd_error *err)
{
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/index.json", layout);
        json_error_t je;
        json_t *index = json_load_file(p, 0, &je);
        json_t *manifest = NULL, *config = NULL;
        char(*ids)[65] = NULL;
        int r = 0;
        const char *md = json_string_value(json_object_get(json_array_get(json_object_get(index, "manifests"), 0),
                                                           "digest"));
        char mhex[65], chex[65];
        if (!md || pd_digest_parse(md, mhex) < 0) {
                r = pd_error_setx(err, EINVAL, "the copied image has no sha256 manifest (%s)", index ? "index.json" : je.text);
                goto out;
        }
        if (!(manifest = read_blob_json(blobs, mhex, err))) {
                r = -err->code;
                goto out;
        }
        const char *cd = json_string_value(json_object_get(json_object_get(manifest, "config"), "digest"));
        json_t *layers = json_object_get(manifest, "layers");
        if (!cd || pd_digest_parse(cd, chex) < 0 || !json_is_array(layers)) {
                r = pd_error_setx(err, EINVAL, "the image's manifest has no sha256 config or no layer list");
                goto out;
        }
        if (!(config = read_blob_json(blobs, chex, err))) {
                r = -err->code;
                goto out;
        }
        const char *os = json_string_value(json_object_get(config, "os"));
        const char *arch = json_string_value(json_object_get(config, "architecture"));
        if ((os && strcmp(os, "linux")) || (arch && strcmp(arch, "amd64"))) {
                r = pd_error_setx(err, ENOEXEC, "the image is for %s/%s; this host runs linux/amd64", os ? os : "?",
                                  arch ? arch : "?");
                goto out;
        }
        json_t *diffs = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
        size_t n = json_array_size(layers);
        if (n == 0 || n != json_array_size(diffs)) {
                r = pd_error_setx(err, EINVAL, "the image has %zu layers but its config lists %zu diff_ids", n,
                                  json_array_size(diffs));
                goto out;
        }
        if (n > 512) {
                r = pd_error_setx(err, E2BIG, "the image has %zu layers (at most 512)", n);
                goto out;
        }
        ids = calloc(n, sizeof *ids);
        if (!ids) {
                r = pd_error_set(err, ENOMEM, "layers");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *l = json_array_get(layers, i);
                const char *ld = json_string_value(json_object_get(l, "digest"));
                const char *mt = json_string_value(json_object_get(l, "mediaType"));
                char lhex[65];
                if (!ld || pd_digest_parse(ld, lhex) < 0 ||
                    pd_digest_parse(json_string_value(json_array_get(diffs, i)), ids[i]) < 0) {
                        r = pd_error_setx(err, EINVAL, "layer %zu has no sha256 digest or diff_id", i + 1);
                        goto out;
                }
                if (!layer_type_ok(mt)) {
                        r = pd_error_setx(err, ENOTSUP, "layer %zu has media type '%.100s' (not a plain, gzip or "
                                          "zstd tar)", i + 1, mt);
                        goto out;
                }
                if (pd_layers_has(st, ids[i])) {
                        pd_image_emit(o, PD_IMAGE_EV_CACHED, "layer already in the store", ids[i], 0, 0);
                        continue;
                }
                snprintf(p, sizeof p, "%s/sha256/%s", blobs, lhex);
                _pd_cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        r = pd_error_set(err, errno, "open layer blob sha256:%.12s", lhex);
                        goto out;
                }
                json_int_t size = json_integer_value(json_object_get(l, "size"));
                struct layer_progress lp = { o, ids[i] };
                struct pd_unpack_opts uo = { .id_base = PD_STORE_UID_BASE, .want_blob = lhex, .want_diff = ids[i],
                                             .total = size > 0 ? (uint64_t)size : 0, .progress = on_unpack,
                                             .arg = &lp };
                struct pd_unpack_result res;
                pd_image_emit(o, PD_IMAGE_EV_LAYER, NULL, ids[i], 0, uo.total);
                if ((r = pd_layers_add(st, fd, &uo, &res, ref, err)) < 0) {
                        pd_error_prefix(err, "layer %zu (sha256:%.12s)", i + 1, lhex);
                        goto out;
                }
                if (res.devices_skipped) {
                        char msg[128];
                        snprintf(msg, sizeof msg, "layer %zu: %llu device nodes or sockets not created", i + 1,
                                 (unsigned long long)res.devices_skipped);
                        pd_image_emit(o, PD_IMAGE_EV_LINE, msg, ids[i], 0, 0);
                }
        }
        f->layers = ids;
        f->n = (unsigned)n;
        f->config = config;
        snprintf(f->digest, sizeof f->digest, "%s", md);
        ids = NULL;
        config = NULL;
out:
        free(ids);
        json_decref(config);
        json_decref(manifest);
        json_decref(index);
        return r;
}

int pd_image_pull(struct pd_state *st, const char *name, const char *ref, const struct pd_image_opts *o,
                  struct pd_error *err)
{
        int r = pd_image_name_check(name, err);
        if (r < 0)
                return r;
        if (!o->replace) {
                char p[PATH_MAX];
                snprintf(p, sizeof p, "templates/%s", name);
                if (faccessat(st->dirfd, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                        return pd_error_setx(err, EEXIST, "template '%s' exists already (`paddock template rm %s` "
                                             "first, or --replace)", name, name);
        }
        /* prune waits until the layers are registered */
        _pd_cleanup_close_ int gc = pd_layers_lock(st, false, err);
        if (gc < 0)
                return gc;
        struct pd_image_fetched f = { 0 };
        if ((r = pd_image_fetch(st, ref, o, &f, err)) < 0)
                return r;
        json_t *meta = json_pack("{s:s, s:s, s:s}", "kind", "image", "source", o->source_label ? o->source_label : ref,
                                 "digest", f.digest);
        pd_image_emit(o, PD_IMAGE_EV_STEP, "registering", NULL, 0, 0);
        r = pd_image_register(st, name, f.layers, f.n, json_object_get(f.config, "config"), meta, o, err);
        json_decref(meta);
        pd_image_fetched_free(&f);
        return r < 0 ? pd_error_prefix(err, "pull '%.200s'", ref) : 0;
}

int pd_image_fetch(struct pd_state *st, const char *ref, const struct pd_image_opts *o, struct pd_image_fetched *f,
                   struct pd_error *err)
{
        memset(f, 0, sizeof *f);
        char src[2048];
        int r;
        if ((r = source_of(ref, o->allow_local, src, sizeof src, err)) < 0)
                return r;
        char images[PATH_MAX], blobs[PATH_MAX + 8], locks[PATH_MAX + 8];
        snprintf(images, sizeof images, "%s/images", st->dir);
        snprintf(blobs, sizeof blobs, "%s/blobs", images);
        snprintf(locks, sizeof locks, "%s/locks", images);
        if (pd_mkdir_p(blobs, 0700, err) < 0 || pd_mkdir_p(locks, 0700, err) < 0)
                return -1;
        (void)chmod(images, 0700);
        /* prune waits for us; pulls of the same source wait for each other
         * and the later ones find the blobs in the cache */
        _pd_cleanup_close_ int gc = pd_layers_lock(st, false, err);
        if (gc < 0)
                return gc;
        char lhex[65], lockp[PATH_MAX + 32];
        pd_sha256_of(src, strlen(src), lhex);
        snprintf(lockp, sizeof lockp, "%s/%.16s", locks, lhex);
        _pd_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock < 0)
                return pd_error_set(err, errno, "open '%s'", lockp);
        if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
                pd_image_emit(o, PD_IMAGE_EV_STEP, "waiting for another pull of the same image", NULL, 0, 0);
                if (flock(lock, LOCK_EX) < 0)
                        return pd_error_set(err, errno, "lock '%s'", lockp);
        }
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
                rnd = pd_now_ns();
        char layout[PATH_MAX + 64], dest[PATH_MAX + 80];
        snprintf(layout, sizeof layout, "%s/tmp-%d-%016llx", images, (int)getpid(), (unsigned long long)rnd);
        snprintf(dest, sizeof dest, "oci:%s:latest", layout);
        pd_image_emit(o, PD_IMAGE_EV_STEP, "copying the image (skopeo)", NULL, 0, 0);
        /* skopeo 1.9 (Debian 12) predates CONTAINERS_REGISTRIES_CONF and
         * CONTAINERS_POLICY_JSON: hand them over as its own flags (newer
         * ones read the variables themselves; REGISTRY_AUTH_FILE it reads) */
        char *argv[16];
        int a = 0;
        argv[a++] = "skopeo";
        const char *conf = getenv("CONTAINERS_REGISTRIES_CONF"), *policy = getenv("CONTAINERS_POLICY_JSON");
        if (conf && *conf) {
                argv[a++] = "--registries-conf";
                argv[a++] = (char *)conf;
        }
        if (policy && *policy) {
                argv[a++] = "--policy";
                argv[a++] = (char *)policy;
        }
        char *rest[] = { "copy", "--dest-shared-blob-dir", blobs, "--", src, dest, NULL };
        for (size_t i = 0; i < PD_ARRAY_SIZE(rest); i++)
                argv[a++] = rest[i];
        struct pd_tool_out out;
        struct pd_egress *guard = NULL;
        if (o->egress_guard && !strncmp(src, "docker://", 9)) {
                if ((r = pd_egress_start(o->egress_allow, o->n_egress_allow, &guard, err)) < 0) {
                        pd_rm_rf(layout, NULL);
                        return pd_error_prefix(err, "pull '%.200s'", ref);
                }
                /* this process is the build child: its environment is
                 * skopeo's. Go never proxies loopback: egress.h */
                static const char *const vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(vars); i++)
                        setenv(vars[i], pd_egress_proxy_url(guard), 1);
                unsetenv("NO_PROXY");
                unsetenv("no_proxy");
                unsetenv("ALL_PROXY");
                unsetenv("all_proxy");
                r = pd_egress_enter(guard, 1, err);
        }
        if (r == 0)
                r = pd_tool_run(argv, layout, o, &out, err);
        if (guard) {
                (void)pd_egress_enter(guard, 0, NULL);
                pd_egress_stop(guard);
        }
        if (r == 0)
                r = from_layout(st, ref, layout, blobs, o, f, err);
        pd_rm_rf(layout, NULL);
        if (r < 0)
                return pd_error_prefix(err, "pull '%.200s'", ref);
        return 0;
}
