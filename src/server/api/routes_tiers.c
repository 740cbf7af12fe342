/* GET /api/v1/tiers (docs/api.md "Tiers"): `paddock tiers --json` for API
 * clients (lib/tier_json.h). For each tier: available on this host or not
 * and why (the tier's own host_check: no sandbox is started), what it
 * isolates, what it can do beyond the basics, the last figures `paddock
 * tiers --measure` kept in the state dir and the escape suite's last
 * results on this host (null with the reason when there are none): a GET
 * measures nothing. */
#include "lib/tier_json.h"
#include "server/api/api.h"

static enum MHD_Result list_tiers(struct pd_req *r, const char *chunk, size_t *chunk_len)
{
        return pd_reply_json(r, 200, pd_tiers_json(r->srv->state.dirfd));
}

const struct pd_route pd_routes_tiers[] = {
        { "GET", "/api/v1/tiers", list_tiers, 0, 0 },
        { 0 },
};
