/* What the resolver answered, per sandbox and name: the strict proxy lets
 * a connection through only to an address answered for the name it asks
 * for (SNI / Host), which stops domain fronting through shared addresses.
 * The kernel's pin sets are the enforcement; this is the proxy's view. */
#include <stdlib.h>
#include <string.h>

#include "net/netd/netd.h"
#include "lib/util.h"

static struct netd_pinned_name *find(struct netd_sandbox *sb, const char *name)
{
        for (unsigned i = 0; i < sb->n_names; i++)
                if (strcmp(sb->names[i].name, name) == 0)
                        return &sb->names[i];
        return NULL;
}

void netd_pins_remember(struct netd_sandbox *sb, const char *name, const struct netd_addr *a,
                        uint32_t ttl_s)
{
        uint64_t now = pd_now_ms(), exp = now + (uint64_t)ttl_s * 1000;
        if (!sb->names) {
                sb->names = calloc(NETD_MAX_PINNED_NAMES, sizeof *sb->names);
                if (!sb->names)
                        return;
        }
        struct netd_pinned_name *pn = find(sb, name);
        if (!pn) {
                /* a ring: the oldest name is forgotten first */
                pn = &sb->names[sb->next_name];
                sb->next_name = (sb->next_name + 1) % NETD_MAX_PINNED_NAMES;
                if (sb->n_names < NETD_MAX_PINNED_NAMES)
                        sb->n_names++;
                memset(pn, 0, sizeof *pn);
                strncpy(pn->name, name, sizeof pn->name - 1);
        }
        unsigned slot = pn->n, oldest = 0;
        for (unsigned i = 0; i < pn->n; i++) {
                if (pn->pins[i].addr.family == a->family &&
                    memcmp(pn->pins[i].addr.a, a->a, 16) == 0) {
                        slot = i;
                        break;
                }
                if (pn->pins[i].expires_ms < pn->pins[oldest].expires_ms)
                        oldest = i;
        }
        if (slot == pn->n) {
                if (pn->n < NETD_MAX_PINS_PER_NAME)
                        pn->n++;
                else
                        slot = oldest;
        }
        pn->pins[slot].addr = *a;
        pn->pins[slot].expires_ms = exp;
}

bool netd_pins_has(struct netd_sandbox *sb, const char *name, const struct netd_addr *a)
{
        if (!sb->names)
                return false;
        struct netd_pinned_name *pn = find(sb, name);
        uint64_t now = pd_now_ms();
        for (unsigned i = 0; pn && i < pn->n; i++)
                if (pn->pins[i].addr.family == a->family &&
                    memcmp(pn->pins[i].addr.a, a->a, 16) == 0 && pn->pins[i].expires_ms > now)
                        return true;
        return false;
}

/* A sandbox's pins in the kernel are bounded: an allowed wildcard whose
 * zone answers ever new addresses must not grow the nft set without end.
 * Slots hold the expiry of each pin made; a slot whose time has passed is
 * free again (the kernel dropped that element on its timeout). */
static unsigned live_pins(struct netd *d, struct netd_sandbox *sb, uint64_t now)
{
        unsigned live = 0;
        for (unsigned i = 0; sb->pin_expiry && i < d->max_pins; i++)
                live += sb->pin_expiry[i] > now;
        return live;
}

bool netd_pins_budget(struct netd *d, struct netd_sandbox *sb, size_t n)
{
        return live_pins(d, sb, pd_now_ms()) + n <= d->max_pins;
}

void netd_pins_charge(struct netd *d, struct netd_sandbox *sb, size_t n, uint32_t ttl_s)
{
        uint64_t now = pd_now_ms();
        if (!sb->pin_expiry && !(sb->pin_expiry = calloc(d->max_pins, sizeof *sb->pin_expiry)))
                return;
        for (unsigned i = 0; i < d->max_pins && n; i++)
                if (sb->pin_expiry[i] <= now) {
                        sb->pin_expiry[i] = now + (uint64_t)ttl_s * 1000;
                        n--;
                }
}

void netd_pins_forget_all(struct netd_sandbox *sb)
{
        free(sb->pin_expiry);
        sb->pin_expiry = NULL;
        free(sb->names);
        sb->names = NULL;
        sb->n_names = sb->next_name = 0;
}

uint64_t netd_pins_expiry(struct netd_sandbox *sb, const char *name, const struct netd_addr *a)
{
        if (!sb->names)
                return 0;
        struct netd_pinned_name *pn = find(sb, name);
        for (unsigned i = 0; pn && i < pn->n; i++)
                if (pn->pins[i].addr.family == a->family && memcmp(pn->pins[i].addr.a, a->a, 16) == 0)
                        return pn->pins[i].expires_ms;
        return 0;
}
