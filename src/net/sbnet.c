/* The tiers' side of the network (sbnet.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "net/policy.h"
#include "lib/sandbox.h"
#include "net/sbnet.h"
#include "lib/util.h"

static void router_cfg(const struct pd_spec *s, struct pd_router_cfg *cfg)
{
        memset(cfg, 0, sizeof *cfg);
        cfg->uplink = s->net_uplink;
        cfg->resolvers = s->net_resolver;
}

int pd_sbnet_prepare(struct pd_sandbox *sb, struct pd_sbnet *n, struct pd_error *err)
{
        memset(n, 0, sizeof *n);
        if (!sb->spec.netpol || sb->spec.netpol->mode == PD_NETPOL_NONE)
                return pd_error_setx(err, EINVAL, "network mode %s without a policy",
                                     sb->spec.net == PD_NET_OPEN ? "open" : "policy");
        struct pd_router_cfg cfg;
        router_cfg(&sb->spec, &cfg);
        int r = pd_router_open(sb->state, &cfg, &n->router, err);
        if (r < 0)
                return r;
        if ((r = pd_router_reserve(n->router, sb->id, &n->slot, err)) < 0)
                return r;
        n->reserved = true;
        char gw[INET_ADDRSTRLEN], text[128];
        inet_ntop(AF_INET, n->slot.gw_addr, gw, sizeof gw);
        snprintf(text, sizeof text, "# paddock: the sandbox's resolver (docs/network.md)\nnameserver %s\n", gw);
        snprintf(n->resolv_path, sizeof n->resolv_path, "%s/resolv.conf", sb->dir);
        /* netd's decisions: into the server's audit log of the sandbox when
         * this state dir has one (<state>/audit/<id>.jsonl, JSON lines
         * appended whole, so they interleave with the server's), else
         * beside the sandbox (paddock run) */
        struct stat st;
        if (fstatat(sb->state->dirfd, "audit", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                snprintf(n->audit_path, sizeof n->audit_path, "%s/audit/%s.jsonl", sb->state->dir, sb->id);
        else
                snprintf(n->audit_path, sizeof n->audit_path, "%s/net-audit.jsonl", sb->dir);
        int fd = openat(sb->dirfd, "resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s'", n->resolv_path);
        r = pd_write_all(fd, text, strlen(text)) < 0 ? pd_error_set(err, errno, "write resolv.conf") : 0;
        close(fd);
        return r;
}

int pd_sbnet_attach(struct pd_sandbox *sb, struct pd_sbnet *n, pid_t pid, struct pd_error *err)
{
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
        int ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0)
                return pd_error_set(err, errno, "open '%s'", path);
        /* a microvm guest's NIC is set to 1500 by its agent (vmnet.c) */
        n->slot.mtu_max = sb->spec.isolation == PD_ISO_MICROVM ? 1500 : 0;
        n->slot.no_ipv6 = sb->spec.isolation == PD_ISO_MICROVM;
        int r = pd_router_attach(n->router, sb->id, &n->slot, ns, sb->spec.netpol, n->audit_path, err);
        close(ns);
        return r;
}

void pd_sbnet_close(struct pd_sbnet *n)
{
        pd_router_close(n->router);
        n->router = NULL;
}

int pd_sbnet_release(const struct pd_state *st, const char *id, struct pd_error *err)
{
        return pd_router_release(st, id, err);
}

int pd_sbnet_update(const struct pd_state *st, const char *id, const struct pd_netpol *pol,
                    struct pd_error *err)
{
        struct pd_router *r;
        int rc = pd_router_open_existing(st, &r, err);
        if (rc < 0)
                return rc;
        rc = pd_router_update(r, id, pol, err);
        pd_router_close(r);
        return rc;
}
