/* GET /api/v1/tiers (docs/api.md "Tiers"): `paddock tiers` for API
 * clients. For each tier: available on this host or not and why (the
 * tier's own host_check: no sandbox is started), what it isolates, what it
 * can do beyond the basics, and the last figures `paddock tiers --measure`
 * kept in the state dir (null when never measured): a GET measures
 * nothing. */
#include <time.h>

#include "lib/tier.h"
#include "server/api/api.h"

static json_t *caps_json(unsigned caps)
{
        return json_pack("{s:b, s:b, s:b, s:b}", "pause_to_disk", !!(caps & PD_TIER_PAUSE_DISK), "snapshot_memory",
                         !!(caps & PD_TIER_SNAPSHOT_MEMORY), "own_templates", !!(caps & PD_TIER_OWN_TEMPLATES),
                         "policy_file", !!(caps & PD_TIER_POLICY_FILE));
}

static enum MHD_Result list_tiers(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        json_t *arr = json_array();
        for (int i = 0; i < PD_ISO__MAX; i++) {
                const struct pd_tier_ops *t = pd_tier_find((enum pd_isolation)i);
                if (!t)
                        continue;
                char why[512] = "always";
                int ok = t->host_check ? t->host_check(why, sizeof why) : 1;
                double ms;
                long long when;
                json_t *measured = json_null();
                if (pd_tier_measured_get(r->srv->state.dirfd, (enum pd_isolation)i, &ms, &when) == 0) {
                        char at[32];
                        time_t w = (time_t)when;
                        struct tm tm;
                        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&w, &tm));
                        measured = json_pack("{s:f, s:s}", "run_p50_ms", ms, "measured_at", at);
                }
                json_array_append_new(arr, json_pack("{s:s, s:b, s:s, s:s, s:o, s:o}", "name", t->name, "available",
                                                     ok == 1, "why", why, "isolates", t->isolates ? t->isolates : "",
                                                     "capabilities", caps_json(t->caps), "measured", measured));
        }
        return pd_reply_json(r, 200, json_pack("{s:o}", "tiers", arr));
}

const struct pd_route pd_routes_tiers[] = {
        { "GET", "/api/v1/tiers", list_tiers, 0, 0 },
        { 0 },
};
