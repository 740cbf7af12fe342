/* The stop hooks of sb_hooks.h: a fixed table filled at start-up. */
#include "server/core/sb_hooks.h"

#include <errno.h>
#include <pthread.h>

#define MAX_HOOKS 4

static pd_sb_stop_hook hooks[MAX_HOOKS];
static unsigned nhooks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

int pd_sb_hooks_register(pd_sb_stop_hook fn)
{
        int r = 0;
        pthread_mutex_lock(&mu);
        unsigned i;
        for (i = 0; i < nhooks && hooks[i] != fn; i++)
                ;
        if (i == nhooks) {
                if (nhooks < MAX_HOOKS)
                        hooks[nhooks++] = fn;
                else
                        r = -ENOSPC;
        }
        pthread_mutex_unlock(&mu);
        return r;
}

void pd_sb_hooks_stopped(const struct pd_srv_sandbox *s)
{
        pthread_mutex_lock(&mu);
        unsigned n = nhooks;
        pd_sb_stop_hook h[MAX_HOOKS];
        for (unsigned i = 0; i < n; i++)
                h[i] = hooks[i];
        pthread_mutex_unlock(&mu);
        for (unsigned i = 0; i < n; i++)
                h[i](s);
}
