/* The tier table: enum pd_isolation to its driver, built from the one list
 * in lib/tier_list.h. */
#include "lib/tier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#define OPS_(E, name) [PD_ISO_##E] = &pd_tier_##name,
static const struct pd_tier_ops *const tiers[PD_ISO__MAX] = { PD_TIERS(OPS_) };
#undef OPS_

const struct pd_tier_ops *pd_tier_find(enum pd_isolation iso)
{
        return (unsigned)iso < PD_ISO__MAX ? tiers[iso] : NULL;
}

unsigned pd_tier_caps(enum pd_isolation iso)
{
        const struct pd_tier_ops *t = pd_tier_find(iso);
        return t ? t->caps : 0;
}

int pd_tier_check_memory(enum pd_isolation iso, uint64_t memory_bytes, struct pd_error *err)
{
        const struct pd_tier_ops *t = pd_tier_find(iso);
        if (!t || !t->memory_min || memory_bytes >= t->memory_min)
                return 0;
        return pd_error_setx(err, EINVAL, "the %s tier needs a memory limit of at least %" PRIu64 " MiB (asked: %" PRIu64
                             " MiB)", t->name, t->memory_min >> 20, memory_bytes >> 20);
}

void pd_net_info_clear(struct pd_net_info *i)
{
        free(i->policy_json);
        i->policy_json = NULL;
}
