/* A container or supervised sandbox's side of the network (src/net): the
 * tier calls prepare before its clone (the sandbox's resolv.conf needs the
 * router's address), attach once the child's netns exists, and release on
 * destroy. Mode none touches none of this. */
#pragma once
#include <stdbool.h>
#include <limits.h>
#include <sys/types.h>

#include "lib/error.h"
#include "net/router.h"

struct pd_sandbox;
struct pd_state;

struct pd_sbnet {
        struct pd_router *router;
        struct pd_router_slot slot;
        bool reserved;
        char resolv_path[PATH_MAX];     /* host file, bound on /etc/resolv.conf */
        char audit_path[PATH_MAX];      /* netd's decisions: the server's audit
                                           log of the sandbox, or beside it */
};

/* Open (or make) the router, take a slot, write resolv.conf. */
int pd_sbnet_prepare(struct pd_sandbox *sb, struct pd_sbnet *n, struct pd_error *err);
/* Wire the netns of pid (the sandbox's first process). */
int pd_sbnet_attach(struct pd_sandbox *sb, struct pd_sbnet *n, pid_t pid, struct pd_error *err);
/* Close handles (a failed create: release first). */
void pd_sbnet_close(struct pd_sbnet *n);
/* Detach sandbox id from its instance's router, if it has one. */
int pd_sbnet_release(const struct pd_state *st, const char *id, struct pd_error *err);
/* Live policy change of a running sandbox. */
int pd_sbnet_update(const struct pd_state *st, const char *id, const struct pd_netpol *pol,
                    struct pd_error *err);
