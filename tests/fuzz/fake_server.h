/* The in-process server of the HTTP fuzz targets (fake_server.c). */
#pragma once
#include "server/core/server.h"
#include "server/e2b/e2b.h"
#include "server/core/store.h"

struct fake_server_info {
        char key[PD_KEY_TEXT_MAX];              /* the API key */
        char sandbox_id[PD_ID_LEN + 1];         /* the one sandbox */
        char token[PD_E2B_TOKEN_LEN + 1];       /* its envd access token */
};

/* Open a state dir, make an API key and the fake sandbox, and serve HTTP on
 * 127.0.0.1:port (libmicrohttpd, thread per connection). 0 or -1. */
int fake_server_start(const char *state_dir, unsigned port, struct fake_server_info *info);
