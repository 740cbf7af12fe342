/* The warm pool class of E2B creates with a network (e2b_pool.c). */
#ifndef PD_SERVER_E2B_POOL_H
#define PD_SERVER_E2B_POOL_H

#include "server/core/manager.h"

extern const struct pd_pool_prep pd_e2b_net_prep;

#endif
