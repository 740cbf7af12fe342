/* E2B creates with a network get a warm pool of their own.
 *
 * E2B's SDKs leave allow_internet_access out and E2B then gives the
 * internet, so nearly every SDK create asks for a network (e2b_network.c).
 * The plain warm pool holds no sandbox with a network (lifecycle.c): such
 * a create was a cold start every time (create ~5x the native API's pooled
 * one, bench/reports/e2b.md). A prepared pool class may carry the create's
 * network (the class key is the policy's canonical JSON, manager.h), as the
 * code interpreter's does (e2b_ci.c); this class needs no preparation
 * beyond the network itself, which the pool's filler builds from the
 * policy before the sandbox has an owner, as for the code interpreter. */
#include "server/e2b/e2b_pool.h"

static int net_prep(struct pd_server *srv, struct pd_sandbox *sb, const bool *stop, struct pd_error *err)
{
        (void)srv, (void)sb, (void)stop, (void)err;
        return 0;
}

const struct pd_pool_prep pd_e2b_net_prep = { .name = "e2b-network", .run = net_prep };
