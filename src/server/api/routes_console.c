/* The web console (docs/console.md): its static pages at / and /console/...
 * and its sign-in, /api/v1/console/session. The pages are plain files (no
 * build step) found beside the binary in the source tree or in the install
 * dir (console_dir); xterm.js comes from the pinned npm package that
 * scripts/setup.sh installs under it. Every page answer carries a strict
 * Content-Security-Policy (scripts only from our own files, no inline
 * script, no framing) and nosniff.
 *
 * Sign-in trades an API key for a session token (core/sessions.h) in an
 * HttpOnly, SameSite=Strict cookie; the key never reaches the cookie, a URL
 * or the page's storage. core/http.c accepts the cookie on the native API
 * with its cross-origin checks. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/api/api.h"
#include "server/core/sessions.h"
#include "server/core/store.h"
#include "lib/util.h"

#define ASSET_MAX (4u << 20)

/* xterm.js's DOM renderer adds <style> elements for its cell metrics and
 * theme, so styles need 'unsafe-inline' (no script does). */
#define CONSOLE_CSP                                                                                          \
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " \
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* What the console serves: URL name -> file under the console dir. A
 * table, not a path: nothing else of the dir is reachable. */
static const struct asset {
        const char *name;       /* under /console/ */
        const char *file;
        const char *type;
        bool vendor;            /* a pinned package: cacheable for a day */
} assets[] = {
        { "index.html", "index.html", "text/html; charset=utf-8", false },
        { "app.js", "app.js", "text/javascript; charset=utf-8", false },
        { "app.css", "app.css", "text/css; charset=utf-8", false },
        { "vendor/xterm.js", "node_modules/@xterm/xterm/lib/xterm.js", "text/javascript; charset=utf-8", true },
        { "vendor/xterm.css", "node_modules/@xterm/xterm/css/xterm.css", "text/css; charset=utf-8", true },
};

/* The console's files: PADDOCK_CONSOLE_DIR, else beside the binary (the
 * build tree's src/console, an install's share/paddock/console), else the
 * install dir meson configured. A dir holds index.html. */
static char dir[PATH_MAX];

static void find_console_dir(void)
{
        char probe[PATH_MAX + 32];
        const char *env = getenv("PADDOCK_CONSOLE_DIR");
        if (env && *env) {
                snprintf(dir, sizeof dir, "%s", env);
                return;
        }
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
                exe[n] = '\0';
                const char *d = dirname(exe);
                static const char *const rel[] = { "../../src/console", "../../share/paddock/console",
                                                   "../share/paddock/console" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(rel); i++) {
                        snprintf(probe, sizeof probe, "%s/%s/index.html", d, rel[i]);
                        if (access(probe, R_OK) == 0) {
                                snprintf(dir, sizeof dir, "%s/%s", d, rel[i]);
                                return;
                        }
                }
        }
#ifdef PD_CONSOLE_DIR
        snprintf(dir, sizeof dir, "%s", PD_CONSOLE_DIR);
#endif
}

static const char *console_dir(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, find_console_dir);
        return dir;
}

static void page_headers(struct MHD_Response *resp)
{
        MHD_add_response_header(resp, "Content-Security-Policy", CONSOLE_CSP);
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
        MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
}

static enum MHD_Result serve(struct pd_req *r, const struct asset *a)
{
        const char *dir = console_dir();
        if (!*dir)
                return pd_reply_error(r, 404, "not_found",
                                      "the console's files are not installed (set PADDOCK_CONSOLE_DIR)");
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, a->file);
        _pd_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ASSET_MAX)
                return pd_reply_error(r, 404, "not_found", "console file '%s' missing%s", a->name,
                                      a->vendor ? " (run scripts/setup.sh: it installs xterm.js)" : "");
        char etag[64];
        snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)st.st_mtim.tv_sec * 1000000000ull +
                                                            (unsigned long long)st.st_mtim.tv_nsec,
                 (unsigned long long)st.st_size);
        const char *inm = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "If-None-Match");
        struct MHD_Response *resp;
        unsigned status = 200;
        if (inm && !strcmp(inm, etag)) {
                resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                status = 304;
        } else {
                resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
                if (resp)
                        fd = -1; /* the response owns it */
        }
        if (!resp)
                return MHD_NO;
        page_headers(resp);
        MHD_add_response_header(resp, "Content-Type", a->type);
        MHD_add_response_header(resp, "ETag", etag);
        /* the console's own files change with paddock: revalidate each
         * time (a 304 is cheap); a pinned package may be kept a day */
        MHD_add_response_header(resp, "Cache-Control", a->vendor ? "public, max-age=86400" : "no-cache");
        return pd_reply_response(r, status, resp);
}

static enum MHD_Result serve_name(struct pd_req *r, const char *name)
{
        for (size_t i = 0; i < PD_ARRAY_SIZE(assets); i++)
                if (!strcmp(assets[i].name, name))
                        return serve(r, &assets[i]);
        return pd_reply_error(r, 404, "not_found", "no console file '%.64s'", name);
}

static enum MHD_Result get_index(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return serve_name(r, "index.html");
}

static enum MHD_Result get_file(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return serve_name(r, r->params[0]);
}

static enum MHD_Result get_vendor(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        char name[80];
        snprintf(name, sizeof name, "vendor/%.64s", r->params[0]);
        return serve_name(r, name);
}

/* ---- sessions ---- */

static enum MHD_Result reply_session(struct pd_req *r, unsigned status, const struct pd_key *key,
                                     const char *cookie)
{
        json_t *o = json_pack("{s:s, s:s}", "key_id", key->id, "name", key->name);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!text)
                return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        if (cookie)
                MHD_add_response_header(resp, "Set-Cookie", cookie);
        return pd_reply_response(r, status, resp);
}

/* Sign-in is a public route: the same cross-origin rules as the cookie's
 * (core/http.c), so another site cannot sign a browser into its key. */
static bool same_origin_post(struct pd_req *r)
{
        const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
        const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
        if (!MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Paddock-Console") || !origin || !host)
                return false;
        if (!strncmp(origin, "http://", 7))
                origin += 7;
        else if (!strncmp(origin, "https://", 8))
                origin += 8;
        else
                return false;
        return !strcasecmp(origin, host);
}

/* Behind a TLS proxy that says so, the cookie is Secure too. */
static bool secure_transport(struct pd_req *r)
{
        const char *p = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Forwarded-Proto");
        return p && !strcasecmp(p, "https");
}

static enum MHD_Result post_session(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        enum MHD_Result ret;
        if (!same_origin_post(r))
                return pd_reply_error(r, 403, "forbidden",
                                      "sign-in needs the console's Origin and X-Paddock-Console header");
        _pd_cleanup_json_ json_t *body = pd_req_json(r, &ret);
        if (!body)
                return ret;
        const char *k = json_string_value(json_object_get(body, "key"));
        if (!k || !*k || json_object_size(body) != 1)
                return pd_reply_error(r, 400, "bad_request", "body must be {\"key\": \"API key\"}");
        unsigned wait = pd_signin_retry_after(r);
        if (wait) {
                /* checked before the key: a right key does not get
                 * through either, so the answer tells nothing */
                char secs[16], *text = NULL;
                snprintf(secs, sizeof secs, "%u", wait);
                if (asprintf(&text, "{\"error\":{\"code\":\"too_many_requests\",\"message\":\"too many wrong API "
                                    "keys from this address: try again in %u s\"}}", wait) < 0)
                        return MHD_NO;
                struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text,
                                                                            MHD_RESPMEM_MUST_FREE);
                if (!resp) {
                        free(text);
                        return MHD_NO;
                }
                MHD_add_response_header(resp, "Content-Type", "application/json");
                MHD_add_response_header(resp, "Retry-After", secs);
                return pd_reply_response(r, 429, resp);
        }
        struct pd_key key;
        if (strlen(k) >= PD_KEY_TEXT_MAX || pd_store_key_lookup(r->srv->store, k, &key) < 0) {
                pd_signin_failed(r);
                pd_log("info", "console sign-in refused: wrong API key");
                return pd_reply_error(r, 401, "unauthorized", "wrong API key");
        }
        char token[PD_SESSION_TOKEN_LEN + 1];
        struct pd_error err = { 0 };
        if (pd_session_create(k, token, &err) < 0)
                return pd_reply_errno(r, -err.code, err.msg);
        char cookie[PD_SESSION_TOKEN_LEN + 128];
        snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s",
                 PD_SESSION_COOKIE, token, PD_SESSION_TTL_S,
                 secure_transport(r) ? "; Secure" : "");
        explicit_bzero(token, sizeof token);
        pd_log("info", "console sign-in key=%s", key.id);
        return reply_session(r, 200, &key, cookie);
}

static enum MHD_Result get_session(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return reply_session(r, 200, &r->key, NULL);
}

static enum MHD_Result delete_session(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        const char *tok = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, PD_SESSION_COOKIE);
        if (tok)
                pd_session_delete(tok);
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Set-Cookie",
                                PD_SESSION_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
        return pd_reply_response(r, 204, resp);
}

/* The pages: not API (docs/console.md), group "console". */
const struct pd_route pd_routes_console[] = {
        { "GET", "/", get_index, PD_ROUTE_PUBLIC, 0 },
        { "GET", "/console", get_index, PD_ROUTE_PUBLIC, 0 },
        { "GET", "/console/{file}", get_file, PD_ROUTE_PUBLIC, 0 },
        { "GET", "/console/vendor/{file}", get_vendor, PD_ROUTE_PUBLIC, 0 },
        { 0 },
};

/* Sign-in and out: native API routes (docs/api.md, openapi.yaml). */
const struct pd_route pd_routes_console_session[] = {
        { "POST", "/api/v1/console/session", post_session, PD_ROUTE_PUBLIC, 4096 },
        { "GET", "/api/v1/console/session", get_session, 0, 0 },
        { "DELETE", "/api/v1/console/session", delete_session, 0, 0 },
        { 0 },
};
