/* libcurl under the client verbs: one easy handle per request, so threads
 * (exec's stdin and signal forwarders) never share one. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/remote_http.h"
#include "lib/state.h"
#include "lib/util.h"

#define DEFAULT_URL "http://127.0.0.1:49982"
#define ERR_BODY_MAX (64u << 10)
#define JSON_BODY_MAX (64u << 20)
#define JSON_TIMEOUT_S 300      /* a create may wait for a sandbox to start */

static void copy_trim(char *dst, size_t dsz, const char *src)
{
        size_t n = strlen(src);
        while (n && (src[n - 1] == '\n' || src[n - 1] == '\r' || src[n - 1] == ' ' || src[n - 1] == '/'))
                n--;
        if (n >= dsz)
                n = dsz - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
}

static bool read_key_file(const char *path, char *key, size_t ksz)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        char buf[512];
        bool ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        if (!ok)
                return false;
        copy_trim(key, ksz, buf);
        return key[0] != '\0';
}

int pd_rc_init(struct pd_rc *rc, int *argc, char **argv)
{
        const char *url = NULL, *key = NULL;
        int out = 1;
        bool dashdash = false;
        for (int i = 1; i < *argc; i++) {
                const char *a = argv[i];
                if (!dashdash && !strcmp(a, "--")) {
                        dashdash = true;
                } else if (!dashdash && (!strcmp(a, "--url") || !strcmp(a, "--key"))) {
                        if (i + 1 >= *argc) {
                                pd_cli_error("%s needs a value", a);
                                return PD_RC_USAGE;
                        }
                        if (a[2] == 'u')
                                url = argv[++i];
                        else
                                key = argv[++i];
                        continue;
                } else if (!dashdash && !strncmp(a, "--url=", 6)) {
                        url = a + 6;
                        continue;
                } else if (!dashdash && !strncmp(a, "--key=", 6)) {
                        key = a + 6;
                        continue;
                }
                argv[out++] = argv[i];
        }
        *argc = out;
        argv[out] = NULL;

        if (!url || !*url)
                url = getenv("PADDOCK_URL");
        if (!url || !*url)
                url = DEFAULT_URL;
        if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
                pd_cli_error("invalid server URL '%s' (expected http://HOST:PORT)", url);
                return PD_RC_USAGE;
        }
        copy_trim(rc->url, sizeof rc->url, url);
        if (!key || !*key)
                key = getenv("PADDOCK_API_KEY");
        if (key && *key) {
                copy_trim(rc->key, sizeof rc->key, key);
        } else {
                char path[4096];
                const char *sd = getenv("PADDOCK_STATE_DIR");
                snprintf(path, sizeof path, "%s/api-key", sd && *sd ? sd : PD_DEFAULT_STATE_DIR);
                if (read_key_file(path, rc->key, sizeof rc->key))
                        fprintf(stderr, "paddock: no --key or PADDOCK_API_KEY: using the key in %s\n", path);
                else
                        rc->key[0] = '\0';      /* the server will say 401 */
        }
        return 0;
}

char *pd_rc_escape(const char *s)
{
        char *e = curl_easy_escape(NULL, s, 0);
        if (!e)
                return NULL;
        char *r = strdup(e);
        curl_free(e);
        return r;
}

bool pd_rc_id_ok(const char *s)
{
        size_t n = 0;
        for (; s[n]; n++)
                if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9')))
                        return false;
        return n == 20;
}

/* ---- one transfer ---- */

struct xfer {
        struct pd_rc_stream *s;
        CURL *h;
        char *err;              /* error answer body, bounded */
        size_t err_len;
        bool is_err;            /* decided at the first body byte */
        bool decided;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *cls)
{
        struct xfer *x = cls;
        size_t n = sz * nm;
        if (!x->decided) {
                long code = 0;
                curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
                x->is_err = code < 200 || code > 299;
                x->decided = true;
        }
        if (x->is_err) {
                size_t room = ERR_BODY_MAX - x->err_len;
                size_t take = n < room ? n : room;
                char *b = realloc(x->err, x->err_len + take + 1);
                if (!b)
                        return 0;
                x->err = b;
                memcpy(x->err + x->err_len, p, take);
                x->err_len += take;
                x->err[x->err_len] = '\0';
                return n;
        }
        if (x->s->sink) {
                int k = x->s->sink(x->s->ctx, p, n);
                if (k < 0) {
                        x->s->sink_status = -k;
                        return 0;       /* aborts the transfer */
                }
        }
        return n;
}

/* The server's message from an error body, or a fallback. */
static void error_message(const char *body, long status, char *out, size_t outsz)
{
        json_t *j = body ? json_loads(body, 0, NULL) : NULL;
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (m)
                snprintf(out, outsz, "%s", m);
        else if (body && *body)
                copy_trim(out, outsz, body);
        else
                snprintf(out, outsz, "the server answered HTTP %ld", status);
        json_decref(j);
}

int pd_rc_stream(const struct pd_rc *rc, struct pd_rc_stream *s)
{
        s->status = 0;
        s->sink_status = 0;
        s->neterr[0] = s->message[0] = '\0';
        CURL *h = curl_easy_init();
        if (!h) {
                pd_cli_error("cannot start an HTTP client (libcurl)");
                return PD_RC_INTERNAL;
        }
        struct xfer x = { .s = s, .h = h };
        char url[8192], auth[600];
        snprintf(url, sizeof url, "%s/api/v1%s", rc->url, s->path);
        struct curl_slist *hdrs = NULL;
        if (rc->key[0]) {
                snprintf(auth, sizeof auth, "Authorization: Bearer %s", rc->key);
                hdrs = curl_slist_append(hdrs, auth);
        }
        char ct[128];
        if (s->content_type) {
                snprintf(ct, sizeof ct, "Content-Type: %s", s->content_type);
                hdrs = curl_slist_append(hdrs, ct);
        }
        hdrs = curl_slist_append(hdrs, "Expect:");      /* no 100-continue round trip */
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "paddock-cli/" PD_VERSION);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (s->timeout_s)
                curl_easy_setopt(h, CURLOPT_TIMEOUT, s->timeout_s);
        const char *method = s->method ? s->method : "GET";
        if (s->upload) {
                curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(h, CURLOPT_READDATA, s->upload);
                if (s->upload_size >= 0)
                        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)s->upload_size);
                else
                        hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
                if (strcmp(method, "PUT"))
                        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        } else if (!strcmp(method, "POST") || s->body) {
                curl_easy_setopt(h, CURLOPT_POST, 1L);
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, s->body ? s->body : "");
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(s->body ? s->body_len : 0));
                if (strcmp(method, "POST"))
                        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        } else if (strcmp(method, "GET")) {
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        char ebuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);

        CURLcode cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
        int ret;
        if (s->sink_status) {
                ret = s->sink_status;
        } else if (s->status && (s->status < 200 || s->status > 299) &&
                   (cc == CURLE_OK || x.err_len || cc == CURLE_SEND_ERROR)) {
                /* an error answer (a refused upload may be answered early) */
                error_message(x.err, s->status, s->message, sizeof s->message);
                if (!s->quiet)
                        pd_cli_error("%s", s->message);
                ret = s->status < 500 ? PD_RC_REFUSED : PD_RC_INTERNAL;
        } else if (cc != CURLE_OK) {
                snprintf(s->neterr, sizeof s->neterr, "%s", ebuf[0] ? ebuf : curl_easy_strerror(cc));
                ret = PD_RC_UNREACHABLE;
        } else {
                ret = 0;
        }
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        free(x.err);
        return ret;
}

int pd_rc_net_error(const struct pd_rc *rc, const struct pd_rc_stream *s)
{
        if (s->status)
                pd_cli_error("connection to %s lost: %s", rc->url, s->neterr);
        else
                pd_cli_error("cannot reach the paddock server at %s: %s", rc->url, s->neterr);
        return PD_RC_UNREACHABLE;
}

/* ---- JSON calls ---- */

struct membuf {
        char *p;
        size_t len;
};

static int mem_sink(void *ctx, const char *data, size_t n)
{
        struct membuf *m = ctx;
        if (m->len + n > JSON_BODY_MAX)
                return -PD_RC_INTERNAL;
        char *b = realloc(m->p, m->len + n + 1);
        if (!b)
                return -PD_RC_INTERNAL;
        memcpy(b + m->len, data, n);
        m->p = b;
        m->len += n;
        m->p[m->len] = '\0';
        return 0;
}

int pd_rc_json(const struct pd_rc *rc, const char *method, const char *path, json_t *body, json_t **out)
{
        _pd_cleanup_free_ char *req = body ? json_dumps(body, JSON_COMPACT) : NULL;
        struct membuf m = { 0 };
        struct pd_rc_stream s = {
                .method = method, .path = path, .sink = mem_sink, .ctx = &m,
                .body = req, .body_len = req ? strlen(req) : 0,
                .content_type = req ? "application/json" : NULL, .timeout_s = JSON_TIMEOUT_S,
        };
        if (out)
                *out = NULL;
        int k = pd_rc_stream(rc, &s);
        if (k == PD_RC_UNREACHABLE) {
                free(m.p);
                return pd_rc_net_error(rc, &s);
        }
        if (k) {
                if (s.sink_status)
                        pd_cli_error("%s %s: answer too large or out of memory", method, path);
                free(m.p);
                return k;
        }
        if (out && m.len) {
                json_error_t je;
                *out = json_loadb(m.p, m.len, 0, &je);
                if (!*out) {
                        pd_cli_error("%s %s: the server's answer is not JSON (%s)", method, path, je.text);
                        free(m.p);
                        return PD_RC_INTERNAL;
                }
        }
        free(m.p);
        return 0;
}
