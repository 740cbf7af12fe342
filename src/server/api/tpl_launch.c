/* What every template build request does once its input is checked
 * (templates.h): reserve the name, put the build's inputs into the record
 * (the context, the recipe text, an upload, the network policy), start
 * the child, and undo the reservation if any of that fails. The native
 * routes (routes_templates.c, tpl_upload.c) and E2B's build start
 * (e2b_templates.c) differ only in their inputs; this is their common
 * path, and the one mapping of its statuses to error codes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"
#include "net/policy.h"
#include "server/api/templates.h"

const char *pd_tpl_status_code(unsigned status)
{
        switch (status) {
        case 400: return "bad_request";
        case 403: return "forbidden";
        case 404: return "not_found";
        case 409: return "conflict";
        case 413: return "too_large";
        case 429: return "too_many_requests";
        default: return status >= 500 ? "internal" : "bad_request";
        }
}

unsigned pd_tpl_network_check(json_t *v, json_t **out, char *why, size_t whysz)
{
        *out = NULL;
        if (!v || json_is_null(v))
                return 0;
        struct pd_netpol p = { 0 };
        struct pd_error err = { 0 };
        if (pd_netpol_from_json(v, &p, &err) < 0) {
                snprintf(why, whysz, "network: %s", err.msg);
                return 400;
        }
        /* the canonical form: what the record keeps and the child reads */
        if (p.mode != PD_NETPOL_NONE)
                *out = pd_netpol_to_json(&p);
        pd_netpol_free(&p);
        return 0;
}

static int write_new(const char *path, const char *text, struct pd_error *err)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return pd_error_set(err, errno, "write '%s'", strrchr(path, '/') + 1);
        int k = pd_write_all(fd, text, strlen(text));
        close(fd);
        return k < 0 ? pd_error_set(err, -k, "write '%s'", strrchr(path, '/') + 1) : 0;
}

/* The record's inputs, in the reserved record dir. */
static int fill(struct pd_server *srv, const struct pd_tpl_launch *l, const char *dir, struct pd_error *err)
{
        char ctx[PATH_MAX + 16], p[PATH_MAX + 300];
        snprintf(ctx, sizeof ctx, "%s/context", dir);
        if (l->context_dir && rename(l->context_dir, ctx) < 0)
                return pd_error_set(err, errno, "move the context");
        if (!l->ref && !l->context_dir && mkdir(ctx, 0755) < 0)
                return pd_error_set(err, errno, "make the context");
        if (l->recipe_text) {
                snprintf(p, sizeof p, "%s/%s", ctx, l->recipe_rel);
                if (write_new(p, l->recipe_text, err) < 0)
                        return -1;
        }
        if (l->prepare && l->prepare(srv, dir, l->arg, err) < 0)
                return -1;
        if (l->network) {
                char *text = json_dumps(l->network, JSON_COMPACT);
                snprintf(p, sizeof p, "%s/network.json", dir);
                int k = text ? write_new(p, text, err) : pd_error_set(err, ENOMEM, "network");
                free(text);
                if (k < 0)
                        return k;
        }
        return 0;
}

unsigned pd_tpl_launch(struct pd_server *srv, const struct pd_tpl_launch *l, char *why, size_t whysz)
{
        unsigned st = pd_tpl_reserve_as(srv, l->name, l->key, l->shared, l->source, why, whysz);
        if (st)
                return st;
        char dir[PATH_MAX];
        pd_tpl_dir(srv, l->name, dir, sizeof dir);
        struct pd_error err = { 0 };
        int k = fill(srv, l, dir, &err);
        if (k == 0)
                k = pd_tpl_start(srv, l->name, l->ref, l->recipe_rel, l->build_args, l->n_args, &err);
        if (k == 0)
                return 0;
        snprintf(why, whysz, "%s", err.msg[0] ? err.msg : "start the build");
        /* E2B's build has a status to report it by; a native request's
         * record goes, as if it never came */
        if (l->keep_failed)
                pd_tpl_set_status(srv, l->name, "failed", why);
        else
                pd_tpl_unreserve(srv, l->name);
        return 500;
}
