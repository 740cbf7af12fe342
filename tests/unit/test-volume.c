/* Unit tests for src/lib/volume.c: -v option parsing, which host ids a
 * volume gives `user`, and the idmapping text (never host root). TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jail/userns.h"
#include "lib/volume.h"
#include "tap.h"

static int parse(const char *s, struct pd_volume *v, struct pd_error *err)
{
        static char buf[16][512];
        static unsigned k;
        char *b = buf[k++ % 16];
        snprintf(b, 512, "%s", s);
        memset(err, 0, sizeof *err);
        return pd_volume_parse(b, v, err);
}

/* s is refused, *v stays as it was, and the message contains want */
static void refused(const char *s, const char *want)
{
        struct pd_volume v = { .host = "untouched" };
        struct pd_error err;
        int r = parse(s, &v, &err);
        char what[600];
        snprintf(what, sizeof what, "'%s' refused with '%s'", s, want);
        ok(r < 0 && strstr(err.msg, want) && !strcmp(v.host, "untouched"), "%s", what);
        if (r == 0 || !strstr(err.msg, want))
                printf("# got r=%d msg=%s\n", r, err.msg);
}

static void test_parse(void)
{
        struct pd_volume v;
        struct pd_error err;
        ok(parse("/h:/s", &v, &err) == 0 && !strcmp(v.host, "/h") && !strcmp(v.target, "/s") && !v.readonly &&
                   v.map == PD_VOLUME_MAP_OWNER && !v.has_uid && !v.has_gid,
           "HOST:SANDBOX: read-write, mapped to the owner");
        ok(parse("/h:/s:ro", &v, &err) == 0 && v.readonly, ":ro");
        ok(parse("/h:/s:rw", &v, &err) == 0 && !v.readonly, ":rw");
        ok(parse("/h:/s:ro,uid=1001,gid=1002", &v, &err) == 0 && v.readonly && v.has_uid && v.uid == 1001 &&
                   v.has_gid && v.gid == 1002,
           "comma-separated ro,uid,gid");
        ok(parse("/h:/s:ro:uid=1001:gid=1002", &v, &err) == 0 && v.readonly && v.uid == 1001 && v.gid == 1002,
           "colon-separated options too");
        ok(parse("/h:/s:uid=1001", &v, &err) == 0 && v.has_uid && !v.has_gid, "uid alone");
        ok(parse("/h:/s:map=sandbox,ro", &v, &err) == 0 && v.map == PD_VOLUME_MAP_SANDBOX && v.readonly,
           "map=sandbox,ro");
        ok(parse("/h:/s:ro:map=sandbox", &v, &err) == 0 && v.map == PD_VOLUME_MAP_SANDBOX, "ro:map=sandbox");
        ok(parse("/h:/s:map=owner,ro", &v, &err) == 0 && v.map == PD_VOLUME_MAP_OWNER && v.readonly, "map=owner");
        ok(parse("/h:/a,b", &v, &err) == 0 && !strcmp(v.target, "/a,b"), "a comma in the target is the target's");
        ok(parse("/h:/s:uid=4294967294", &v, &err) == 0 && v.uid == 4294967294u, "the largest uid");

        refused("relative", "expected HOST:/SANDBOX");
        refused("/h:relative", "expected HOST:/SANDBOX");
        refused(":/s", "expected HOST:/SANDBOX");
        refused("/h:/", "invalid volume target");
        refused("/h:/a/../b", "invalid volume target");
        refused("/h:/a/..", "invalid volume target");
        refused("/h:/s:", "empty volume option");
        refused("/h:/s:ro,", "empty volume option");
        refused("/h:/s:ro,,uid=5", "empty volume option");
        refused("/h:/s:RO", "unknown volume option 'RO'");
        refused("/h:/s:z", "unknown volume option 'z'");
        refused("/h:/s:ro,rw", "given twice");
        refused("/h:/s:ro,ro", "given twice");
        refused("/h:/s:uid=5,uid=6", "given twice");
        refused("/h:/s:map=sandbox,map=owner,ro", "given twice");
        refused("/h:/s:map=sandbox", "map=sandbox needs ro");
        refused("/h:/s:map=sandbox,rw", "map=sandbox needs ro");
        refused("/h:/s:map=host", "map=owner or map=sandbox");
        refused("/h:/s:uid=0", "never maps a sandbox id to host root");
        refused("/h:/s:gid=0", "never maps a sandbox id to host root");
        refused("/h:/s:uid=00", "never maps a sandbox id to host root");
        refused("/h:/s:uid=", "expected a number");
        refused("/h:/s:uid=-1", "expected a number");
        refused("/h:/s:uid=+5", "expected a number");
        refused("/h:/s:uid=1x", "expected a number");
        refused("/h:/s:uid=4294967295", "not a valid id");
        refused("/h:/s:uid=99999999999", "expected a number");
        refused("/h:/s:uid=4294967296", "not a valid id");
        refused("/h:/s:uid=1000000000", "sandbox uid ranges");
        refused("/h:/s:gid=1000065536", "sandbox uid ranges");
        refused("/h:/s:map=sandbox,uid=5,ro", "contradict");
        refused("/h:/s:gid=5,map=sandbox,ro", "contradict");
}

static int resolve(const char *spec, uint32_t ou, uint32_t og, struct pd_volume_ids *ids, struct pd_error *err)
{
        struct pd_volume v;
        if (parse(spec, &v, err) < 0)
                return -999;
        memset(ids, 0x55, sizeof *ids);
        return pd_volume_resolve(&v, ou, og, ids, err);
}

static void test_resolve(void)
{
        struct pd_volume_ids ids;
        struct pd_error err;
        ok(resolve("/h:/s", 1001, 1002, &ids, &err) == 0 && ids.uid_mapped && ids.uid == 1001 && ids.gid_mapped &&
                   ids.gid == 1002,
           "default: user is the owner");
        ok(resolve("/h:/s", 0, 0, &ids, &err) == -EPERM && strstr(err.msg, "is owned by root") &&
                   strstr(err.msg, ":ro") && strstr(err.msg, ":uid=N"),
           "read-write and owned by root: refused, saying what to do");
        ok(resolve("/h:/s:ro", 0, 0, &ids, &err) == 0 && !ids.uid_mapped && !ids.gid_mapped,
           "read-only and owned by root: the sandbox's own range");
        ok(resolve("/h:/s", 1001, 0, &ids, &err) == -EPERM && strstr(err.msg, "has group root"),
           "read-write with group root: refused");
        ok(resolve("/h:/s:ro", 1001, 0, &ids, &err) == 0 && ids.uid_mapped && ids.uid == 1001 && !ids.gid_mapped,
           "read-only with group root: the group falls back to the range");
        ok(resolve("/h:/s", 1001, PD_UID_BASE, &ids, &err) == -EPERM && strstr(err.msg, "sandbox ranges"),
           "read-write with a sandbox range group: refused");
        ok(resolve("/h:/s", PD_UID_BASE + 5, 1002, &ids, &err) == -EPERM && strstr(err.msg, "sandbox ranges"),
           "read-write and owned by a sandbox range id: refused");
        ok(resolve("/h:/s:ro", PD_UID_BASE + 5, PD_UID_BASE + 5, &ids, &err) == 0 && !ids.uid_mapped &&
                   !ids.gid_mapped,
           "read-only and owned by a sandbox range id: the range");
        ok(resolve("/h:/s:uid=1001", 0, 0, &ids, &err) == -EPERM && strstr(err.msg, "has group root"),
           "explicit uid alone over a root-owned directory: its group is still root's");
        ok(resolve("/h:/s:uid=1001,ro", 0, 0, &ids, &err) == 0 && ids.uid == 1001 && !ids.gid_mapped,
           "explicit uid, read-only, root's group: the range");
        ok(resolve("/h:/s:uid=1001,gid=1003", 0, 0, &ids, &err) == 0 && ids.uid == 1001 && ids.gid_mapped &&
                   ids.gid == 1003,
           "explicit uid and gid over a root-owned directory");
        ok(resolve("/h:/s:gid=1003", 0, 0, &ids, &err) == -EPERM && strstr(err.msg, "owned by root"),
           "explicit gid alone leaves a root uid: refused");
        ok(resolve("/h:/s:map=sandbox,ro", 0, 0, &ids, &err) == 0 && !ids.uid_mapped && !ids.gid_mapped,
           "map=sandbox: no host account");
        struct pd_volume v = { .host = "/h", .target = "/s", .has_uid = true, .uid = 0 };
        ok(pd_volume_resolve(&v, 1001, 1001, &ids, &err) == -EINVAL, "a hand-built spec with uid 0 is refused too");
}

static void test_map_text(void)
{
        char buf[256];
        uint32_t base = PD_UID_BASE + 7 * PD_UID_RANGE;
        char want[256];
        ok(pd_volume_map_text(base, 1000, false, 0, buf, sizeof buf) > 0 &&
                   snprintf(want, sizeof want, "%u %u 65536\n", base, base) > 0 && !strcmp(buf, want),
           "unmapped: the identity on the sandbox's range");
        snprintf(want, sizeof want, "%u %u 1000\n1001 %u 1\n%u %u 64535\n", base, base, base + 1000, base + 1001,
                 base + 1001);
        ok(pd_volume_map_text(base, 1000, true, 1001, buf, sizeof buf) > 0 && !strcmp(buf, want),
           "mapped: host 1001 is sandbox 1000, the rest the range");
        if (strcmp(buf, want))
                printf("# got:\n%s# want:\n%s", buf, want);
        ok(strstr(buf, " 0 ") == NULL && strncmp(buf, "0 ", 2) != 0, "no line names host id 0");
        snprintf(want, sizeof want, "%u %u 1\n%u %u 65535\n", 1001u, base, base + 1, base + 1);
        ok(pd_volume_map_text(base, 0, true, 1001, buf, sizeof buf) > 0 && !strcmp(buf, want),
           "user 0: no empty line below");
        ok(pd_volume_map_text(base, 1000, true, base + 3, buf, sizeof buf) == -EINVAL,
           "a host id inside the sandbox's own range is refused");
        ok(pd_volume_map_text(base, 1000, true, 1001, buf, 20) == -EINVAL, "too small a buffer");
        ok(pd_volume_map_text(base, 65536, true, 1001, buf, sizeof buf) == -EINVAL, "user outside the range");
}

int main(void)
{
        test_parse();
        test_resolve();
        test_map_text();
        return tap_done();
}
