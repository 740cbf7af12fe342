/* The tier table: enum pd_isolation to its driver, built from the one list
 * in lib/tier_list.h. */
#include "lib/tier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/state.h"

#define MEASURED "tiers.measured"

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

int pd_tier_measured_save(int state_dirfd, enum pd_isolation iso, double run_p50_ms, struct pd_error *err)
{
        const struct pd_tier_ops *t = pd_tier_find(iso);
        if (!t)
                return pd_error_setx(err, EINVAL, "no such tier");
        /* the other tiers' figures are kept: rewrite the record with ours */
        struct pd_record old, rec;
        pd_record_init(&rec);
        bool have = pd_record_read(state_dirfd, MEASURED, &old, NULL) == 0;
        for (int i = 0; i < PD_ISO__MAX; i++) {
                const char *n = tiers[i]->name;
                char k1[64], k2[64], v1[32], v2[32];
                snprintf(k1, sizeof k1, "%s_run_p50_ms", n);
                snprintf(k2, sizeof k2, "%s_measured_at", n);
                if (i == (int)iso) {
                        pd_record_add(&rec, k1, "%.1f", run_p50_ms);
                        pd_record_add(&rec, k2, "%lld", (long long)time(NULL));
                } else if (have && pd_record_get(&old, k1, v1, sizeof v1) >= 0 &&
                           pd_record_get(&old, k2, v2, sizeof v2) >= 0) {
                        pd_record_add(&rec, k1, "%s", v1);
                        pd_record_add(&rec, k2, "%s", v2);
                }
        }
        return pd_record_write(state_dirfd, MEASURED, &rec, err);
}

int pd_tier_measured_get(int state_dirfd, enum pd_isolation iso, double *run_p50_ms, long long *when)
{
        const struct pd_tier_ops *t = pd_tier_find(iso);
        struct pd_record rec;
        char k1[64], k2[64], v1[32], v2[32];
        if (!t || pd_record_read(state_dirfd, MEASURED, &rec, NULL) < 0)
                return -ENOENT;
        snprintf(k1, sizeof k1, "%s_run_p50_ms", t->name);
        snprintf(k2, sizeof k2, "%s_measured_at", t->name);
        if (pd_record_get(&rec, k1, v1, sizeof v1) < 0 || pd_record_get(&rec, k2, v2, sizeof v2) < 0)
                return -ENOENT;
        *run_p50_ms = strtod(v1, NULL);
        *when = strtoll(v2, NULL, 10);
        return 0;
}
