/* COPY/ADD from a build context into a store layer (copyin.c). */
#pragma once
#include <stdint.h>

#include "image/digest.h"
#include "image/image.h"
#include "image/unpack.h"

struct pd_copyin {
        struct pd_state *st;
        int ctxfd;                      /* the context directory */
        char *const *srcs;
        unsigned n_srcs;
        const char *dest;               /* absolute, inside the image */
        uint32_t uid, gid;              /* image ids of the copies (--chown; default 0) */
        char (*top_first)[65];          /* the image so far, for the parents' modes */
        unsigned n;
};

/* With hash: feed what would be copied into it (nothing written). Without:
 * copy into the layer tree root. */
int pd_copyin(const struct pd_copyin *c, int root, struct pd_sha256 *hash, uint64_t *bytes, struct pd_error *err);
