/* A template's start command at sandbox create (start_cmd.c). */
#pragma once
#include "lib/sandbox.h"
#include "server/core/manager.h"

/* If req's template has a start command (docs/templates.md "Start and ready
 * commands"), start it in sb and wait for its ready command: 0 at once
 * when it has none; an error (with the start command's output) if it never
 * gets ready. */
int pd_mgr_start_cmd(struct pd_server *srv, struct pd_sandbox *sb, const struct pd_create_req *req,
                     struct pd_error *err);
