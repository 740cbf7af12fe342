/* placeholder: the process tier is being written */
#include "tier.h"
const struct pd_tier_ops pd_tier_process = { .name = "process" };
