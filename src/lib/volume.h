/* Volumes (-v HOST:SANDBOX[:OPTIONS]): their option syntax, and which host
 * ids a volume's own idmapping gives the sandbox (docs/security.md,
 * "Volumes"). Pure functions: the container tier makes the mapping real
 * (src/tiers/container.c, pd_userns_make in src/jail/userns.c).
 *
 * The rule they enforce: no sandbox id is ever host uid 0 or gid 0 on a
 * volume, and none is an id of paddock's sandbox ranges but the sandbox's
 * own. `user` (1000) is the volume owner's account (or :uid=/:gid=);
 * every other id, root inside included, is the sandbox's own range. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/spec.h"

/* Parse "HOST:/SANDBOX[:OPT[,OPT]...]" (OPT: ro, rw, uid=N, gid=N,
 * map=owner, map=sandbox; ':' also separates options) into *v. arg is
 * split in place (v points into it). On error *v is untouched and err
 * says what is wrong with which part. */
int pd_volume_parse(char *arg, struct pd_volume *v, struct pd_error *err);

/* The host ids `user` gets on a volume, or none (the sandbox's range). */
struct pd_volume_ids {
        bool uid_mapped, gid_mapped;
        uint32_t uid, gid;
};

/* From the volume's options and its owner on the host (st_uid, st_gid of
 * the directory or file): an owner of 0 or of paddock's sandbox ranges is
 * never taken; for the uid that refuses a read-write volume (with what to
 * do instead) and falls back to the range for a read-only one; for the gid
 * it falls back to the range. */
int pd_volume_resolve(const struct pd_volume *v, uint32_t owner_uid, uint32_t owner_gid, struct pd_volume_ids *out,
                      struct pd_error *err);

/* The uid_map (or gid_map) text of a volume's idmapping user namespace:
 * its first column is the id on disk, its second the kernel id, which the
 * sandbox (whose ids k are base + k) sees as its own. Identity on the
 * sandbox's range; with mapped, host id `host` <-> sandbox id `user`
 * instead of base + user. Returns the length, or -EINVAL (host inside the
 * range, or the text does not fit). */
int pd_volume_map_text(uint32_t base, uint32_t user, bool mapped, uint32_t host, char *buf, size_t size);

/* Is id one of paddock's sandbox ranges (any sandbox's, any instance's)? */
bool pd_volume_id_in_ranges(uint32_t id);
