/* paddock cp SRC DST: one side is ID:PATH (a path inside the sandbox), the
 * other a local path or "-" (stdin/stdout). Both directions are streamed:
 * an upload is sent as it is read, a download written as it arrives (into
 * a temporary file renamed over DST at the end, so a failed copy leaves
 * DST as it was). Regular files only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "lib/util.h"

/* "ID:PATH" → id and path (pointers into arg's copy); false if arg is local. */
static bool split_remote(char *arg, char **id, char **path)
{
        char *colon = strchr(arg, ':');
        if (!colon || colon - arg != 20)
                return false;
        *colon = '\0';
        if (!pd_rc_id_ok(arg)) {
                *colon = ':';
                return false;
        }
        *id = arg;
        *path = colon + 1;
        return true;
}

static const char *base_name(const char *p)
{
        const char *s = strrchr(p, '/');
        return s ? s + 1 : p;
}

struct mem {
        char buf[4096];
        size_t len;
};

static int mem_sink(void *ctx, const char *data, size_t n)
{
        struct mem *m = ctx;
        size_t take = n < sizeof m->buf - 1 - m->len ? n : sizeof m->buf - 1 - m->len;
        memcpy(m->buf + m->len, data, take);
        m->len += take;
        m->buf[m->len] = '\0';
        return 0;
}

/* Is the remote path an existing directory? Asked quietly: a missing DST
 * is normal (the upload then says what is wrong, if anything). */
static bool remote_is_dir(const struct pd_rc *rc, const char *id, const char *path)
{
        _pd_cleanup_free_ char *e = pd_rc_escape(path);
        if (!e)
                return false;
        char url[8192];
        struct mem m = { .len = 0 };
        snprintf(url, sizeof url, "/sandboxes/%s/files/stat?path=%s", id, e);
        struct pd_rc_stream s = { .path = url, .sink = mem_sink, .ctx = &m, .quiet = true, .timeout_s = 60 };
        if (pd_rc_stream(rc, &s) != 0)
                return false;
        json_t *st = json_loads(m.buf, 0, NULL);
        const char *t = json_string_value(json_object_get(st, "type"));
        bool r = t && !strcmp(t, "dir");
        json_decref(st);
        return r;
}

static int upload(const struct pd_rc *rc, const char *src, const char *id, const char *dst)
{
        FILE *in;
        long long size = -1;
        if (!strcmp(src, "-")) {
                in = stdin;
        } else {
                in = fopen(src, "rbe");
                if (!in) {
                        pd_cli_error("cp: cannot open '%s': %s", src, strerror(errno));
                        return PD_RC_REFUSED;
                }
                struct stat st;
                if (fstat(fileno(in), &st) == 0) {
                        if (S_ISDIR(st.st_mode)) {
                                fclose(in);
                                pd_cli_error("cp: '%s' is a directory (copy files one by one, or a tar archive)", src);
                                return PD_RC_USAGE;
                        }
                        if (S_ISREG(st.st_mode))
                                size = (long long)st.st_size;
                }
        }
        char target[4096];
        size_t dl = strlen(dst);
        if (!dl || dst[dl - 1] == '/') {
                snprintf(target, sizeof target, "%s%s", dl ? dst : "", strcmp(src, "-") ? base_name(src) : "stdin");
        } else {
                snprintf(target, sizeof target, "%s", dst);
                /* an existing directory: copy into it, as cp does */
                if (strcmp(src, "-") && remote_is_dir(rc, id, dst))
                        snprintf(target, sizeof target, "%s/%s", dst, base_name(src));
        }
        _pd_cleanup_free_ char *e = pd_rc_escape(target);
        if (!e) {
                if (in != stdin)
                        fclose(in);
                return PD_RC_INTERNAL;
        }
        char url[8192];
        snprintf(url, sizeof url, "/sandboxes/%s/files?path=%s", id, e);
        struct pd_rc_stream s = { .method = "PUT", .path = url, .upload = in, .upload_size = size,
                                  .content_type = "application/octet-stream" };
        int k = pd_rc_stream(rc, &s);
        if (in != stdin)
                fclose(in);
        if (k == PD_RC_UNREACHABLE)
                return pd_rc_net_error(rc, &s);
        return k;
}

struct dl_ctx {
        int fd;
};

static int dl_sink(void *ctx, const char *data, size_t n)
{
        struct dl_ctx *d = ctx;
        if (pd_write_all(d->fd, data, n) < 0) {
                pd_cli_error("cp: write: %s", strerror(errno));
                return -PD_RC_INTERNAL;
        }
        return 0;
}

static int download(const struct pd_rc *rc, const char *id, const char *src, const char *dst)
{
        char target[4096];
        struct stat st;
        if (strcmp(dst, "-") && stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(target, sizeof target, "%s/%s", dst, base_name(src));
        else
                snprintf(target, sizeof target, "%s", dst);
        _pd_cleanup_free_ char *e = pd_rc_escape(src);
        if (!e)
                return PD_RC_INTERNAL;
        char url[8192];
        snprintf(url, sizeof url, "/sandboxes/%s/files?path=%s", id, e);
        if (!strcmp(dst, "-")) {
                struct dl_ctx d = { .fd = STDOUT_FILENO };
                struct pd_rc_stream s = { .path = url, .sink = dl_sink, .ctx = &d };
                int k = pd_rc_stream(rc, &s);
                return k == PD_RC_UNREACHABLE ? pd_rc_net_error(rc, &s) : k;
        }
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.paddock-XXXXXX", target);
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                pd_cli_error("cp: cannot create '%s': %s", tmp, strerror(errno));
                return PD_RC_REFUSED;
        }
        struct dl_ctx d = { .fd = fd };
        struct pd_rc_stream s = { .path = url, .sink = dl_sink, .ctx = &d };
        int k = pd_rc_stream(rc, &s);
        if (k == PD_RC_UNREACHABLE)
                k = pd_rc_net_error(rc, &s);
        mode_t um = umask(0);
        umask(um);
        if (!k && fchmod(fd, 0666 & ~um) < 0)
                k = PD_RC_INTERNAL;
        if (close(fd) < 0 && !k) {
                pd_cli_error("cp: write '%s': %s", target, strerror(errno));
                k = PD_RC_INTERNAL;
        }
        if (!k && rename(tmp, target) < 0) {
                pd_cli_error("cp: cannot write '%s': %s", target, strerror(errno));
                k = PD_RC_REFUSED;
        }
        if (k)
                unlink(tmp);
        return k;
}

int pd_remote_cp(const struct pd_rc *rc, int argc, char **argv)
{
        int i = 1;
        if (i < argc && (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))) {
                printf("usage: paddock cp SRC DST\n"
                       "Copy a file into or out of a sandbox; one side is ID:PATH, the other a local\n"
                       "path or - (stdin or stdout). Relative sandbox paths start at the user's home;\n"
                       "a DST that is a directory (or ends in /) receives the file under its own name.\n");
                return 0;
        }
        if (i < argc && !strcmp(argv[i], "--"))
                i++;
        if (argc - i != 2)
                return pd_remote_usage_error("cp", "expected SRC DST");
        char *src = strdupa(argv[i]), *dst = strdupa(argv[i + 1]);
        char *sid, *spath, *did, *dpath;
        bool sr = split_remote(src, &sid, &spath), dr = split_remote(dst, &did, &dpath);
        if (sr == dr)
                return pd_remote_usage_error("cp", sr ? "both sides are in a sandbox (copy through a local file)"
                                                      : "one side must be ID:PATH");
        if (sr && !*spath)
                return pd_remote_usage_error("cp", "no path after '%s:'", sid);
        return sr ? download(rc, sid, spath, dst) : upload(rc, src, did, dpath);
}
