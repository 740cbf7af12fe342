/* Volume options and the host ids a volume's idmapping gives the sandbox
 * (volume.h; docs/security.md, "Volumes"). */
#include "lib/volume.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jail/userns.h"

#define VOLUME_SYNTAX "HOST:/SANDBOX[:OPTIONS], OPTIONS from ro, rw, uid=N, gid=N, map=owner, map=sandbox"

bool pd_volume_id_in_ranges(uint32_t id)
{
        return id >= PD_UID_BASE && (uint64_t)(id - PD_UID_BASE) < (uint64_t)PD_UID_SLOTS * PD_UID_RANGE;
}

/* Why a host id can never be `user`'s on a volume (NULL: it can). */
static const char *unmappable(uint32_t id)
{
        if (id == 0)
                return "paddock never maps a sandbox id to host root";
        if (id == UINT32_MAX)
                return "not a valid id";
        if (pd_volume_id_in_ranges(id))
                return "it lies in paddock's sandbox uid ranges; name a host account";
        return NULL;
}

static int parse_id(const char *opt, const char *val, uint32_t *out, struct pd_error *err)
{
        uint64_t n = 0;
        if (!*val || strlen(val) > 10)
                return pd_error_setx(err, EINVAL, "volume option '%s': expected a number (a host %s)", opt,
                                     opt[0] == 'u' ? "uid" : "gid");
        for (const char *p = val; *p; p++) {
                if (*p < '0' || *p > '9')
                        return pd_error_setx(err, EINVAL, "volume option '%s': expected a number (a host %s)",
                                             opt, opt[0] == 'u' ? "uid" : "gid");
                n = n * 10 + (uint64_t)(*p - '0');
        }
        const char *why = n > UINT32_MAX ? "not a valid id" : unmappable((uint32_t)n);
        if (why)
                return pd_error_setx(err, EINVAL, "volume option '%s': %s", opt, why);
        *out = (uint32_t)n;
        return 0;
}

static int parse_option(char *o, struct pd_volume *v, bool *seen_mode, bool *seen_map, struct pd_error *err)
{
        if (!*o)
                return pd_error_setx(err, EINVAL, "empty volume option (expected " VOLUME_SYNTAX ")");
        if (!strcmp(o, "ro") || !strcmp(o, "rw")) {
                if (*seen_mode)
                        return pd_error_setx(err, EINVAL, "volume option '%s': ro or rw given twice", o);
                *seen_mode = true;
                v->readonly = o[1] == 'o';
                return 0;
        }
        if (!strncmp(o, "uid=", 4) || !strncmp(o, "gid=", 4)) {
                bool is_uid = o[0] == 'u';
                if (is_uid ? v->has_uid : v->has_gid)
                        return pd_error_setx(err, EINVAL, "volume option '%.3s' given twice", o);
                int r = parse_id(o, o + 4, is_uid ? &v->uid : &v->gid, err);
                if (r < 0)
                        return r;
                *(is_uid ? &v->has_uid : &v->has_gid) = true;
                return 0;
        }
        if (!strncmp(o, "map=", 4)) {
                if (*seen_map)
                        return pd_error_setx(err, EINVAL, "volume option 'map' given twice");
                *seen_map = true;
                if (!strcmp(o + 4, "owner"))
                        v->map = PD_VOLUME_MAP_OWNER;
                else if (!strcmp(o + 4, "sandbox"))
                        v->map = PD_VOLUME_MAP_SANDBOX;
                else
                        return pd_error_setx(err, EINVAL, "volume option '%s': map=owner or map=sandbox", o);
                return 0;
        }
        return pd_error_setx(err, EINVAL, "unknown volume option '%s' (expected " VOLUME_SYNTAX ")", o);
}

int pd_volume_parse(char *arg, struct pd_volume *v, struct pd_error *err)
{
        struct pd_volume nv = { .map = PD_VOLUME_MAP_OWNER };
        char *colon = strchr(arg, ':');
        if (!colon || colon == arg || colon[1] != '/')
                return pd_error_setx(err, EINVAL, "invalid volume '%.200s' (expected " VOLUME_SYNTAX ")", arg);
        *colon = '\0';
        nv.host = arg;
        nv.target = colon + 1;
        char *opts = strchr(colon + 1, ':');
        if (opts)
                *opts++ = '\0';
        size_t tl = strlen(nv.target);
        if (strstr(nv.target, "/../") || !strcmp(nv.target, "/") || (tl >= 3 && !strcmp(nv.target + tl - 3, "/..")) ||
            tl >= 250)
                return pd_error_setx(err, EINVAL, "invalid volume target '%.200s'", nv.target);
        bool seen_mode = false, seen_map = false;
        while (opts) {
                char *o = opts;
                opts = strpbrk(o, ",:");
                if (opts)
                        *opts++ = '\0';
                int r = parse_option(o, &nv, &seen_mode, &seen_map, err);
                if (r < 0)
                        return r;
        }
        if (nv.map == PD_VOLUME_MAP_SANDBOX && (nv.has_uid || nv.has_gid))
                return pd_error_setx(err, EINVAL, "volume options map=sandbox and uid=/gid= contradict each "
                                                  "other (map=sandbox: no host account at all)");
        /* With no host account mapped, every file on the volume has an
         * owner the mount does not map, and the kernel refuses writes to
         * those: say so rather than mount a read-write volume nobody can
         * write. */
        if (nv.map == PD_VOLUME_MAP_SANDBOX && !nv.readonly)
                return pd_error_setx(err, EINVAL, "volume option map=sandbox needs ro (with no host account "
                                                  "mapped nothing on the volume is writable)");
        *v = nv;
        return 0;
}

int pd_volume_resolve(const struct pd_volume *v, uint32_t owner_uid, uint32_t owner_gid, struct pd_volume_ids *out,
                      struct pd_error *err)
{
        struct pd_volume_ids ids = { 0 };
        if (v->map == PD_VOLUME_MAP_SANDBOX) {
                *out = ids;
                return 0;
        }
        if (v->has_uid) {
                /* parse checked it; a caller building a spec by hand may not have */
                if (unmappable(v->uid))
                        return pd_error_setx(err, EINVAL, "volume '%s': uid=%u: %s", v->host, v->uid,
                                             unmappable(v->uid));
                ids.uid_mapped = true;
                ids.uid = v->uid;
        } else if (!unmappable(owner_uid)) {
                ids.uid_mapped = true;
                ids.uid = owner_uid;
        } else if (!v->readonly) {
                /* Mapping `user` to such an owner would let it write (and
                 * chmod u+s) as host root or as another sandbox; leaving it
                 * unmapped makes the directory unwritable (the kernel
                 * refuses writes to inodes whose owner a mount does not
                 * map): a clear refusal beats a puzzling EACCES. */
                if (owner_uid == 0)
                        return pd_error_setx(err, EPERM,
                                             "volume '%s' is owned by root; paddock never lets a sandbox write as "
                                             "host root: chown it to the account its files should belong to, or "
                                             "mount it :ro (:uid=N,gid=M writes as N:M where they own files)",
                                             v->host);
                return pd_error_setx(err, EPERM,
                                     "volume '%s' is owned by uid %u, an id of paddock's sandbox ranges (a "
                                     "sandbox's root made it): chown it to a host account, or mount it :ro",
                                     v->host, owner_uid);
        }
        if (v->has_gid) {
                if (unmappable(v->gid))
                        return pd_error_setx(err, EINVAL, "volume '%s': gid=%u: %s", v->host, v->gid,
                                             unmappable(v->gid));
                ids.gid_mapped = true;
                ids.gid = v->gid;
        } else if (!unmappable(owner_gid)) {
                ids.gid_mapped = true;
                ids.gid = owner_gid;
        } else if (!v->readonly) {
                if (owner_gid == 0)
                        return pd_error_setx(err, EPERM,
                                             "volume '%s' has group root; paddock never lets a sandbox write as "
                                             "host group root: chgrp it to the group its files should belong to, "
                                             "or mount it :ro (:uid=N,gid=M writes as N:M where they own files)",
                                             v->host);
                return pd_error_setx(err, EPERM,
                                     "volume '%s' has group %u, an id of paddock's sandbox ranges: chgrp it to a "
                                     "host group, or mount it :ro", v->host, owner_gid);
        }
        *out = ids;
        return 0;
}

int pd_volume_map_text(uint32_t base, uint32_t user, bool mapped, uint32_t host, char *buf, size_t size)
{
        int n;
        if (user >= PD_UID_RANGE || base > UINT32_MAX - PD_UID_RANGE || size == 0)
                return -EINVAL;
        if (!mapped) {
                n = snprintf(buf, size, "%u %u %u\n", base, base, PD_UID_RANGE);
                return n < 0 || (size_t)n >= size ? -EINVAL : n;
        }
        if (host >= base && host - base < PD_UID_RANGE)
                return -EINVAL; /* the first column's ranges would overlap */
        /* base..base+user-1 as they are, host <-> base+user, the rest as
         * it is; base+user itself stays unmapped on disk (nobody inside). */
        size_t len = 0;
        buf[0] = '\0';
        uint32_t below = user, above = PD_UID_RANGE - user - 1;
        if (below)
                n = snprintf(buf, size, "%u %u %u\n", base, base, below);
        else
                n = 0;
        if (n < 0 || (size_t)n >= size)
                return -EINVAL;
        len = (size_t)n;
        n = snprintf(buf + len, size - len, "%u %u 1\n", host, base + user);
        if (n < 0 || (size_t)n >= size - len)
                return -EINVAL;
        len += (size_t)n;
        if (above) {
                n = snprintf(buf + len, size - len, "%u %u %u\n", base + user + 1, base + user + 1, above);
                if (n < 0 || (size_t)n >= size - len)
                        return -EINVAL;
                len += (size_t)n;
        }
        return (int)len;
}
