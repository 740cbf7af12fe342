/* Shared by the client's files (client.c, client_procs.c, client_files.c);
 * not for its callers, who never name a request type. */
#pragma once
#include "proto/client.h"

/* Queue request type with payload m (NULL: empty); its id in *id. */
int pd_client_send(struct pd_client *c, uint16_t type, const struct pd_msg *m, uint32_t *id);
/* pd_client_send, then wait for its REPLY (payload in *p, *len, valid
 * until the next read) or ERROR. */
int pd_client_call(struct pd_client *c, uint16_t type, const struct pd_msg *m, const uint8_t **p, size_t *len,
                   struct pd_error *err);
/* The reply loop: what is the request's name in messages. */
int pd_client_wait_for(struct pd_client *c, uint32_t id, const char *what, const uint8_t **p, size_t *len,
                       int timeout_ms, struct pd_error *err);

/* Storage for decoded lists: one allocation, carved in order (structs,
 * then pointer arrays, then strings), sized by a first pass. */
struct pd_carve {
        char *p, *end;
};
void *pd_carve_take(struct pd_carve *c, size_t n, size_t align);
/* A NUL-terminated copy of a string attribute (checked: no NUL inside). */
const char *pd_carve_str(struct pd_carve *c, const struct pd_attr *a);
