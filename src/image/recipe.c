/* The recipe parser (recipe.h). Input is a user's file: every length is
 * capped and every error names its line. */
#include "image/recipe.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/util.h"

static const char *const names[] = {
        [PD_R_FROM] = "FROM",   [PD_R_RUN] = "RUN",         [PD_R_COPY] = "COPY", [PD_R_ADD] = "ADD",
        [PD_R_ENV] = "ENV",     [PD_R_WORKDIR] = "WORKDIR", [PD_R_USER] = "USER", [PD_R_ARG] = "ARG",
        [PD_R_LABEL] = "LABEL", [PD_R_CMD] = "CMD",         [PD_R_ENTRYPOINT] = "ENTRYPOINT",
};

const char *pd_recipe_op_name(enum pd_recipe_op op)
{
        return names[op];
}

void pd_recipe_free(struct pd_recipe *r)
{
        for (unsigned i = 0; i < r->n; i++)
                free(r->steps[i].text);
        r->n = 0;
}

static int add_step(struct pd_recipe *r, const char *ins, size_t inslen, const char *args, unsigned line,
                    struct pd_error *err)
{
        char word[16];
        if (inslen >= sizeof word)
                return pd_error_setx(err, EINVAL, "line %u: unknown instruction '%.*s'", line, (int)(inslen > 40 ? 40 : inslen),
                                     ins);
        memcpy(word, ins, inslen);
        word[inslen] = '\0';
        int op = -1;
        for (size_t i = 0; i < PD_ARRAY_SIZE(names); i++)
                if (!strcasecmp(word, names[i]))
                        op = (int)i;
        if (op < 0)
                return pd_error_setx(err, ENOTSUP, "line %u: unknown or unsupported instruction '%s' (recipes know "
                                     "FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG, LABEL, CMD, ENTRYPOINT)", line, word);
        if (r->n == PD_RECIPE_MAX_STEPS)
                return pd_error_setx(err, E2BIG, "line %u: more than %d instructions", line, PD_RECIPE_MAX_STEPS);
        while (*args == ' ' || *args == '\t')
                args++;
        size_t len = strlen(args);
        while (len && (args[len - 1] == ' ' || args[len - 1] == '\t'))
                len--;
        if (!len)
                return pd_error_setx(err, EINVAL, "line %u: %s needs arguments", line, word);
        struct pd_recipe_step *s = &r->steps[r->n];
        s->op = (enum pd_recipe_op)op;
        s->line = line;
        s->text = strndup(args, len);
        s->json = args[0] == '[';
        if (!s->text)
                return pd_error_set(err, ENOMEM, "recipe");
        r->n++;
        return 0;
}

int pd_recipe_parse(const char *text, struct pd_recipe *r, struct pd_error *err)
{
        memset(r, 0, sizeof *r);
        size_t tl = strlen(text);
        if (tl > PD_RECIPE_MAX_BYTES)
                return pd_error_setx(err, E2BIG, "the recipe is %zu bytes (at most %u)", tl, PD_RECIPE_MAX_BYTES);
        char *buf = malloc(tl + 1);
        if (!buf)
                return pd_error_set(err, ENOMEM, "recipe");
        size_t bl = 0;
        unsigned line = 0, start = 0;
        int ret = 0;
        const char *p = text;
        while (*p && ret == 0) {
                const char *nl = strchr(p, '\n');
                size_t n = nl ? (size_t)(nl - p) : strlen(p);
                line++;
                const char *q = p;
                while (q < p + n && (*q == ' ' || *q == '\t' || *q == '\r'))
                        q++;
                bool cont = bl > 0;
                if (q == p + n || *q == '#') {
                        /* blank lines and comments, inside continuations too */
                } else {
                        if (!cont)
                                start = line;
                        size_t m = n - (size_t)(q - p);
                        while (m && (q[m - 1] == '\r' || q[m - 1] == ' ' || q[m - 1] == '\t'))
                                m--;
                        bool more = m && q[m - 1] == '\\';
                        if (more)
                                m--;
                        if (cont)
                                buf[bl++] = ' ';
                        memcpy(buf + bl, q, m);
                        bl += m;
                        buf[bl] = '\0';
                        if (!more) {
                                size_t il = strcspn(buf, " \t");
                                ret = add_step(r, buf, il, buf + il, start, err);
                                bl = 0;
                        }
                }
                p = nl ? nl + 1 : p + n;
        }
        if (ret == 0 && bl) {
                size_t il = strcspn(buf, " \t");
                ret = add_step(r, buf, il, buf + il, start, err);
        }
        free(buf);
        if (ret == 0) {
                unsigned froms = 0, first = r->n;
                for (unsigned i = 0; i < r->n; i++)
                        if (r->steps[i].op == PD_R_FROM && froms++ == 0)
                                first = i;
                for (unsigned i = 0; i < first && ret == 0; i++)
                        if (r->steps[i].op != PD_R_ARG)
                                ret = pd_error_setx(err, EINVAL, "line %u: only ARG may come before FROM", r->steps[i].line);
                if (ret == 0 && froms == 0)
                        ret = pd_error_setx(err, EINVAL, "the recipe has no FROM");
                if (ret == 0 && froms > 1)
                        ret = pd_error_setx(err, ENOTSUP, "the recipe has %u FROM lines; one stage only", froms);
        }
        if (ret < 0)
                pd_recipe_free(r);
        return ret;
}

static const char *lookup(const char *name, size_t n, char *const *vars, unsigned nv)
{
        for (unsigned i = nv; i-- > 0;)
                if (!strncmp(vars[i], name, n) && vars[i][n] == '=')
                        return vars[i] + n + 1;
        return NULL;
}

char *pd_recipe_expand(const char *s, char *const *vars, unsigned nv, struct pd_error *err)
{
        size_t cap = strlen(s) * 2 + 64, len = 0;
        char *out = malloc(cap);
        if (!out) {
                pd_error_set(err, ENOMEM, "expand");
                return NULL;
        }
#define PUT(str, l)                                                                     \
        do {                                                                            \
                size_t _l = (l);                                                        \
                if (len + _l + 1 > cap) {                                               \
                        if (len + _l + 1 > PD_RECIPE_MAX_BYTES) {                       \
                                free(out);                                              \
                                pd_error_setx(err, E2BIG, "expansion too long");        \
                                return NULL;                                            \
                        }                                                               \
                        cap = (len + _l + 1) * 2;                                       \
                        char *_n = realloc(out, cap);                                   \
                        if (!_n) {                                                      \
                                free(out);                                              \
                                pd_error_set(err, ENOMEM, "expand");                    \
                                return NULL;                                            \
                        }                                                               \
                        out = _n;                                                       \
                }                                                                       \
                memcpy(out + len, (str), _l);                                           \
                len += _l;                                                              \
        } while (0)
        for (const char *p = s; *p;) {
                if (p[0] == '\\' && p[1] == '$') {
                        PUT("$", 1);
                        p += 2;
                        continue;
                }
                if (*p != '$') {
                        PUT(p, 1);
                        p++;
                        continue;
                }
                p++;
                if (*p == '{') {
                        const char *end = strchr(p, '}');
                        if (!end) {
                                free(out);
                                pd_error_setx(err, EINVAL, "unterminated ${ in '%.80s'", s);
                                return NULL;
                        }
                        const char *name = p + 1;
                        size_t n = strcspn(name, ":}");
                        const char *v = lookup(name, n, vars, nv);
                        if (name[n] == ':' && (name[n + 1] == '-' || name[n + 1] == '+')) {
                                const char *word = name + n + 2;
                                size_t wl = (size_t)(end - word);
                                if (name[n + 1] == '-')
                                        PUT(v && *v ? v : word, v && *v ? strlen(v) : wl);
                                else if (v && *v)
                                        PUT(word, wl);
                        } else if (v) {
                                PUT(v, strlen(v));
                        }
                        p = end + 1;
                } else if (isalpha((unsigned char)*p) || *p == '_') {
                        size_t n = 0;
                        while (isalnum((unsigned char)p[n]) || p[n] == '_')
                                n++;
                        const char *v = lookup(p, n, vars, nv);
                        if (v)
                                PUT(v, strlen(v));
                        p += n;
                } else {
                        PUT("$", 1);
                }
        }
#undef PUT
        out[len] = '\0';
        return out;
}

void pd_recipe_words_free(char **w)
{
        for (char **p = w; p && *p; p++)
                free(*p);
        free(w);
}

char **pd_recipe_words(const char *s, bool json, struct pd_error *err)
{
        size_t cap = 8, n = 0;
        char **w = calloc(cap, sizeof *w);
        if (!w)
                goto nomem;
        if (json) {
                json_error_t je;
                json_t *a = json_loads(s, 0, &je);
                if (!json_is_array(a)) {
                        json_decref(a);
                        free(w);
                        pd_error_setx(err, EINVAL, "'%.80s' is not a JSON array of strings", s);
                        return NULL;
                }
                size_t i;
                json_t *v;
                json_array_foreach(a, i, v) {
                        if (!json_is_string(v)) {
                                json_decref(a);
                                pd_recipe_words_free(w);
                                pd_error_setx(err, EINVAL, "'%.80s' is not a JSON array of strings", s);
                                return NULL;
                        }
                        if (n + 2 > cap) {
                                char **nw = realloc(w, (cap *= 2) * sizeof *w);
                                if (!nw) {
                                        json_decref(a);
                                        goto nomem;
                                }
                                w = nw;
                        }
                        w[n++] = strdup(json_string_value(v));
                        w[n] = NULL;
                }
                json_decref(a);
                return w;
        }
        for (const char *p = s; *p;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (!*p)
                        break;
                char *word = malloc(strlen(p) + 1);
                if (!word)
                        goto nomem;
                size_t k = 0;
                char quote = 0;
                while (*p && (quote || (*p != ' ' && *p != '\t'))) {
                        if (!quote && (*p == '"' || *p == '\'')) {
                                quote = *p++;
                        } else if (quote && *p == quote) {
                                quote = 0;
                                p++;
                        } else if (*p == '\\' && p[1] && quote != '\'') {
                                word[k++] = p[1];
                                p += 2;
                        } else {
                                word[k++] = *p++;
                        }
                }
                word[k] = '\0';
                if (n + 2 > cap) {
                        char **nw = realloc(w, (cap *= 2) * sizeof *w);
                        if (!nw) {
                                free(word);
                                goto nomem;
                        }
                        w = nw;
                }
                w[n++] = word;
                w[n] = NULL;
        }
        return w;
nomem:
        pd_recipe_words_free(w);
        pd_error_set(err, ENOMEM, "recipe");
        return NULL;
}
