/* E2B's TemplateBuildStartV2 as a paddock recipe (docs/e2b.md
 * "Templates"). The SDK sends the template as steps (RUN, COPY, ENV,
 * WORKDIR, USER) on a base (fromImage or fromTemplate); the native builder
 * takes a recipe. Every value that lands in the recipe either goes through
 * a JSON array form (RUN, COPY: a newline in a command stays a string, never
 * a new recipe line) or is refused when it holds a control character: the
 * recipe is the server's text, a client must not add lines to it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/e2b/e2b.h"

#define ENV_NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

struct out {
        char *buf;
        size_t len, cap;
        bool oom;
};

static void put(struct out *o, const char *s)
{
        size_t n = strlen(s);
        if (o->oom)
                return;
        if (o->len + n + 1 > o->cap) {
                size_t cap = (o->len + n + 1) * 2;
                char *b = realloc(o->buf, cap);
                if (!b) {
                        o->oom = true;
                        return;
                }
                o->buf = b;
                o->cap = cap;
        }
        memcpy(o->buf + o->len, s, n + 1);
        o->len += n;
}

static void put_json_line(struct out *o, const char *op, json_t *arr)
{
        char *j = json_dumps(arr, JSON_COMPACT);
        json_decref(arr);
        if (!j) {
                o->oom = true;
                return;
        }
        put(o, op);
        put(o, " ");
        put(o, j);
        put(o, "\n");
        free(j);
}

static bool plain(const char *s, size_t max)
{
        size_t n = strlen(s);
        if (!n || n > max)
                return false;
        for (const char *c = s; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        return false;
        return true;
}

/* " k=\"v\"": inside double quotes \ " and $ escaped, so the recipe's
 * expansion and word splitting give v back as written. */
static void put_quoted(struct out *o, const char *k, const char *val)
{
        put(o, " ");
        put(o, k);
        put(o, "=\"");
        for (const char *c = val; *c; c++) {
                char ch[3] = { *c, 0, 0 };
                if (*c == '\\' || *c == '"' || *c == '$') {
                        ch[0] = '\\';
                        ch[1] = *c;
                }
                put(o, ch);
        }
        put(o, "\"");
}

/* A user name as USER and --chown take it: no spaces, no quotes. */
static bool user_ok(const char *s)
{
        return plain(s, 64) && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:") ==
                                       strlen(s) && s[0] != '-';
}

int pd_e2b_image_ref(const char *in, char *out, size_t size, char *why, size_t whysz)
{
        /* E2B's default base (a Template() with no from..., or
         * fromBaseImage()): its own Debian image on Docker Hub, built for
         * its envd; paddock's counterpart is the template "base" (the host's
         * /usr), which a recipe builds on in a sandbox (build_live.h) */
        if (!strncmp(in, "e2bdev/base", 11) && (!in[11] || in[11] == ':' || in[11] == '@')) {
                snprintf(out, size, "base");
                return 0;
        }
        const char *slash = strchr(in, '/');
        size_t hl = slash ? (size_t)(slash - in) : 0;
        bool qualified = slash && (memchr(in, '.', hl) || memchr(in, ':', hl) ||
                                   (hl == 9 && !strncmp(in, "localhost", 9)));
        /* Docker's short names: "python:3.12" is docker.io/library/python,
         * "oven/bun" docker.io/oven/bun; the allowlist then judges
         * docker.io like any registry */
        int n = qualified ? snprintf(out, size, "%s", in)
                : slash   ? snprintf(out, size, "docker.io/%s", in)
                          : snprintf(out, size, "docker.io/library/%s", in);
        if (n < 0 || (size_t)n >= size) {
                snprintf(why, whysz, "fromImage is too long");
                return 400;
        }
        return 0;
}

/* A COPY source as the SDK sends it: a path relative to its context; a
 * glob (* ? [) only in its last component (see below). */
static bool src_ok(const char *s)
{
        const char *last = strrchr(s, '/');
        size_t dirlen = last ? (size_t)(last - s) : 0;
        if (!plain(s, 1024) || s[0] == '/' || strpbrk(s, "{\\") || strcspn(s, "*?[") < dirlen)
                return false;
        for (const char *c = s; c; c = strchr(c, '/')) {
                if (*c == '/')
                        c++;
                if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || !c[2]))
                        return false;
        }
        return true;
}

static bool hash_ok(const char *h)
{
        return h && strlen(h) == 64 && strspn(h, "0123456789abcdef") == 64;
}

char *pd_e2b_recipe(json_t *body, json_t *hashes, char *why, size_t whysz)
{
        struct out o = { 0 };
        json_t *v;
        const char *from_image = json_string_value(json_object_get(body, "fromImage"));
        const char *from_tpl = json_string_value(json_object_get(body, "fromTemplate"));
        char ref[512];
        why[0] = '\0';
        if ((v = json_object_get(body, "fromImageRegistry")) && !json_is_null(v)) {
                snprintf(why, whysz, "fromImageRegistry (registry credentials) is not supported: the operator "
                                     "allows registries with `paddock serve --template-registry`");
                return NULL;
        }
        /* setStartCmd(cmd, readyCmd): LABELs the builder keeps as the
         * template's start and ready commands (docs/templates.md) */
        const char *start_cmd = NULL, *ready_cmd = NULL;
        for (const char *k = "startCmd"; k; k = strcmp(k, "startCmd") ? NULL : "readyCmd") {
                v = json_object_get(body, k);
                if (!v || json_is_null(v))
                        continue;
                if (!json_is_string(v) || (json_string_length(v) && !plain(json_string_value(v), 8192))) {
                        snprintf(why, whysz, "%s: a string without control characters (at most 8192 bytes)", k);
                        return NULL;
                }
                if (json_string_length(v))
                        *(k[0] == 's' ? &start_cmd : &ready_cmd) = json_string_value(v);
        }
        if (ready_cmd && !start_cmd) {
                snprintf(why, whysz, "readyCmd without a startCmd");
                return NULL;
        }
        if ((from_image && from_tpl) || (!from_image && !from_tpl)) {
                snprintf(why, whysz, "give one of fromImage and fromTemplate");
                return NULL;
        }
        if (from_tpl) {
                if (pd_template_name_check(from_tpl) < 0) {
                        snprintf(why, whysz, "fromTemplate: invalid template name (names are [a-z0-9-]{1,64})");
                        return NULL;
                }
                snprintf(ref, sizeof ref, "%s", from_tpl);
        } else if (!plain(from_image, 300) || pd_e2b_image_ref(from_image, ref, sizeof ref, why, whysz)) {
                if (!why[0])
                        snprintf(why, whysz, "fromImage: a malformed image reference");
                return NULL;
        }
        put(&o, "FROM ");
        put(&o, ref);
        put(&o, "\n");
        json_t *steps = json_object_get(body, "steps");
        if (steps && !json_is_null(steps) && !json_is_array(steps)) {
                snprintf(why, whysz, "steps must be an array");
                goto bad;
        }
        if (json_array_size(steps) > PD_E2B_TPL_STEPS_MAX) {
                snprintf(why, whysz, "at most %d steps", PD_E2B_TPL_STEPS_MAX);
                goto bad;
        }
        char user[72] = "";     /* the last USER step's */
        char cur[72] = "";      /* the last USER line's ("": none, root) */
        size_t i;
        json_t *s;
        json_array_foreach(steps, i, s) {
                const char *type = json_string_value(json_object_get(s, "type"));
                json_t *args = json_object_get(s, "args");
                size_t na = json_array_size(args);
                bool strings = json_is_array(args) || !args;
                for (size_t a = 0; a < na && strings; a++)
                        strings = json_is_string(json_array_get(args, a));
                if (!json_is_object(s) || !type || !strings) {
                        snprintf(why, whysz, "step %zu: an object with a type and args (strings)", i + 1);
                        goto bad;
                }
#define ARG(n) ((n) < na ? json_string_value(json_array_get(args, n)) : "")
                if (!strcmp(type, "RUN")) {
                        if (na < 1 || na > 2 || !*ARG(0) || strlen(ARG(0)) > 65536 ||
                            (na == 2 && *ARG(1) && !user_ok(ARG(1)))) {
                                snprintf(why, whysz, "step %zu: RUN takes [command, user?]", i + 1);
                                goto bad;
                        }
                        /* the user it runs as: its own, else the last USER
                         * step's, else root (the builder's); a USER line only
                         * where that changes, so an image's default user is
                         * left alone by RUNs as root (aptInstall's) */
                        const char *want = na == 2 && *ARG(1) ? ARG(1) : user[0] ? user : "root";
                        if (strcmp(want, cur[0] ? cur : "root")) {
                                put(&o, "USER ");
                                put(&o, want);
                                put(&o, "\n");
                                snprintf(cur, sizeof cur, "%s", want);
                        }
                        put_json_line(&o, "RUN", json_pack("[s, s, s]", "/bin/sh", "-c", ARG(0)));
                } else if (!strcmp(type, "COPY")) {
                        const char *h = json_string_value(json_object_get(s, "filesHash"));
                        if (na < 2 || na > 4 || !src_ok(ARG(0)) || !plain(ARG(1), 1024)) {
                                snprintf(why, whysz, "step %zu: COPY takes [src, dest, user?, mode?]: src a path "
                                                     "inside the context (no '..'; a glob only in its last "
                                                     "component: * ? [), dest a path", i + 1);
                                goto bad;
                        }
                        if (*ARG(2) && !user_ok(ARG(2))) {
                                snprintf(why, whysz, "step %zu: COPY: malformed user", i + 1);
                                goto bad;
                        }
                        if (*ARG(3)) {
                                snprintf(why, whysz, "step %zu: COPY with a mode is not supported on paddock (the "
                                                     "files keep the modes they were uploaded with)", i + 1);
                                goto bad;
                        }
                        if (!hash_ok(h) || !json_object_get(hashes, h)) {
                                snprintf(why, whysz, "step %zu: COPY: filesHash names no upload of this template "
                                                     "(GET /templates/{templateID}/files/{hash} first)", i + 1);
                                goto bad;
                        }
                        char src[1200], dest[1100];
                        const char *rel = ARG(0);
                        snprintf(dest, sizeof dest, "%s", ARG(1));
                        while (rel[0] == '.' && rel[1] == '/')
                                rel += 2;
                        if (!strcmp(rel, ".") || !*rel) {
                                snprintf(src, sizeof src, "f-%s/", h);
                        } else if (strpbrk(rel, "*?[")) {
                                /* the SDK uploads exactly the files the glob
                                 * matched (their paths in the context): the
                                 * directory of the glob holds the matches,
                                 * which go into dest as a directory */
                                const char *slash = strrchr(rel, '/');
                                snprintf(src, sizeof src, "f-%s/%.*s%s", h, slash ? (int)(slash - rel) : 0, rel,
                                         slash ? "/" : "");
                                if (dest[0] && dest[strlen(dest) - 1] != '/' && strlen(dest) + 1 < sizeof dest)
                                        strcat(dest, "/");
                        } else {
                                snprintf(src, sizeof src, "f-%s/%s", h, rel);
                        }
                        json_t *a = json_array();
                        if (*ARG(2)) {
                                char ch[100];
                                snprintf(ch, sizeof ch, "--chown=%s", ARG(2));
                                json_array_append_new(a, json_string(ch));
                        }
                        json_array_append_new(a, json_string(src));
                        json_array_append_new(a, json_string(dest));
                        put_json_line(&o, "COPY", a);
                } else if (!strcmp(type, "ENV")) {
                        if (na == 0 || na % 2) {
                                snprintf(why, whysz, "step %zu: ENV takes [name, value, ...] pairs", i + 1);
                                goto bad;
                        }
                        put(&o, "ENV");
                        for (size_t a = 0; a < na; a += 2) {
                                const char *k = ARG(a), *val = ARG(a + 1);
                                bool ok = *k && (isalpha((unsigned char)*k) || *k == '_') && strlen(k) <= 128 &&
                                          strspn(k, ENV_NAME_CHARS) == strlen(k) && (!*val || plain(val, 8192));
                                if (!ok) {
                                        snprintf(why, whysz, "step %zu: ENV: a name [A-Za-z_][A-Za-z0-9_]* and a "
                                                             "value without control characters", i + 1);
                                        goto bad;
                                }
                                put(&o, " ");
                                put(&o, k);
                                put(&o, "=\"");
                                /* inside double quotes: \ " and $ escaped,
                                 * so the value is taken as written */
                                for (const char *c = val; *c; c++) {
                                        char ch[3] = { *c, 0, 0 };
                                        if (*c == '\\' || *c == '"' || *c == '$') {
                                                ch[0] = '\\';
                                                ch[1] = *c;
                                        }
                                        put(&o, ch);
                                }
                                put(&o, "\"");
                        }
                        put(&o, "\n");
                } else if (!strcmp(type, "WORKDIR") || !strcmp(type, "USER")) {
                        bool is_user = type[0] == 'U';
                        if (na != 1 || !(is_user ? user_ok(ARG(0)) : plain(ARG(0), 1024)) ||
                            (!is_user && (strchr(ARG(0), '$') || strchr(ARG(0), '"')))) {
                                snprintf(why, whysz, "step %zu: %s takes [%s]", i + 1, type,
                                         is_user ? "user" : "path");
                                goto bad;
                        }
                        put(&o, type);
                        put(&o, " ");
                        put(&o, ARG(0));
                        put(&o, "\n");
                        if (is_user) {
                                snprintf(user, sizeof user, "%s", ARG(0));
                                snprintf(cur, sizeof cur, "%s", ARG(0));
                        }
                } else {
                        snprintf(why, whysz, "step %zu: unknown step type '%.32s' (RUN, COPY, ENV, WORKDIR, USER)",
                                 i + 1, type);
                        goto bad;
                }
#undef ARG
        }
        /* the template's default user: the last USER step's */
        if (user[0] && strcmp(user, cur)) {
                put(&o, "USER ");
                put(&o, user);
                put(&o, "\n");
        }
        if (start_cmd) {
                put(&o, "LABEL");
                put_quoted(&o, "paddock.start-cmd", start_cmd);
                if (ready_cmd)
                        put_quoted(&o, "paddock.ready-cmd", ready_cmd);
                put(&o, "\n");
        }
        if (o.oom) {
                snprintf(why, whysz, "out of memory");
                goto bad;
        }
        return o.buf;
bad:
        free(o.buf);
        return NULL;
}
