/* A small answer cache per sandbox: raw upstream answers (before policy
 * filtering, which runs on every use, so a policy change needs no flush),
 * kept for their smallest TTL. Per sandbox, so one sandbox cannot learn by
 * timing what another one resolved. Positive answers only. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/netd/dns.h"
#include "net/netd/netd.h"
#include "lib/util.h"

#define CACHE_ENTRIES 256
#define CACHE_TTL_MAX 300

struct cache_entry {
        char name[PD_NETPOL_NAME_MAX + 1];
        uint16_t qtype;
        uint64_t stored_ms, expires_ms;
        unsigned n;
        struct dns_rr *rr;
};

struct netd_cache {
        struct cache_entry e[CACHE_ENTRIES];
        unsigned next;
};

static struct cache_entry *find(struct netd_cache *c, const char *name, uint16_t qtype)
{
        for (unsigned i = 0; i < CACHE_ENTRIES; i++)
                if (c->e[i].rr && c->e[i].qtype == qtype && strcmp(c->e[i].name, name) == 0)
                        return &c->e[i];
        return NULL;
}

bool netd_cache_get(struct netd_sandbox *sb, const char *name, uint16_t qtype,
                    struct dns_answer *out)
{
        struct netd_cache *c = sb->cache;
        struct cache_entry *e = c ? find(c, name, qtype) : NULL;
        uint64_t now = pd_now_ms();
        if (!e || e->expires_ms <= now)
                return false;
        uint32_t age = (uint32_t)((now - e->stored_ms) / 1000);
        memset(out, 0, offsetof(struct dns_answer, rr));
        out->rcode = DNS_RCODE_NOERROR;
        out->n = e->n;
        for (unsigned i = 0; i < e->n; i++) {
                out->rr[i] = e->rr[i];
                out->rr[i].ttl = e->rr[i].ttl > age ? e->rr[i].ttl - age : 1;
        }
        return true;
}

void netd_cache_put(struct netd_sandbox *sb, const char *name, uint16_t qtype,
                    const struct dns_answer *a)
{
        if (a->rcode != DNS_RCODE_NOERROR || a->truncated || a->n == 0)
                return;
        if (!sb->cache && !(sb->cache = calloc(1, sizeof *sb->cache)))
                return;
        uint32_t ttl = CACHE_TTL_MAX;
        for (unsigned i = 0; i < a->n; i++)
                if (a->rr[i].ttl < ttl)
                        ttl = a->rr[i].ttl;
        if (ttl == 0)
                return;
        struct dns_rr *rr = malloc(a->n * sizeof *rr);
        if (!rr)
                return;
        memcpy(rr, a->rr, a->n * sizeof *rr);
        struct netd_cache *c = sb->cache;
        struct cache_entry *e = find(c, name, qtype);
        if (!e) {
                e = &c->e[c->next];     /* a ring: the oldest goes first */
                c->next = (c->next + 1) % CACHE_ENTRIES;
        }
        free(e->rr);
        snprintf(e->name, sizeof e->name, "%s", name);
        e->qtype = qtype;
        e->n = a->n;
        e->rr = rr;
        e->stored_ms = pd_now_ms();
        e->expires_ms = e->stored_ms + (uint64_t)ttl * 1000;
}

void netd_cache_free(struct netd_sandbox *sb)
{
        if (!sb->cache)
                return;
        for (unsigned i = 0; i < CACHE_ENTRIES; i++)
                free(sb->cache->e[i].rr);
        free(sb->cache);
        sb->cache = NULL;
}
