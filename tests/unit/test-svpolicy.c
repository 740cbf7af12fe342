/* Unit tests for the supervised tier's policy (src/supervisor/policy.c):
 * first match, the implicit rule for paddock's own directory, and which
 * directories a rule other than rw may reach beneath (the supervisor's
 * EXDEV for directory renames). TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/policy.h"
#include "tap.h"

static struct sv_policy *load(const char *json, char *msg, size_t ms)
{
        char path[] = "/tmp/pd-svpolicy-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0)
                return NULL;
        (void)!write(fd, json, strlen(json));
        close(fd);
        struct sv_policy *p = sv_policy_load(path, msg, ms);
        unlink(path);
        return p;
}

int main(void)
{
        char msg[512];
        struct sv_policy *p = load("{\"paths\": [{\"glob\": \"/home/user/work/**\", \"access\": \"rw\"},"
                                   "{\"glob\": \"/etc/shadow\", \"access\": \"deny\"},"
                                   "{\"glob\": \"/home/**/*.pem\", \"access\": \"deny\"},"
                                   "{\"glob\": \"/home/**\", \"access\": \"ro\"},"
                                   "{\"glob\": \"/**\", \"access\": \"ro\"}]}",
                                   msg, sizeof msg);
        ok(p != NULL, "policy loads");
        if (!p) {
                tap_diag("%s", msg);
                return tap_done();
        }
        ok(sv_policy_n_paths(p) == 6 && !strcmp(sv_policy_glob(p, 0), "/run/paddock/**") &&
                   sv_policy_access(p, 0) == SV_ACC_RW,
           "an implicit first rule keeps /run/paddock rw");
        ok(sv_policy_path(p, "/run/paddock/sudo.sock") == SV_ACC_RW, "the agent's socket stays rw under /** ro");
        ok(sv_policy_path(p, "/home/user/work/a.pem") == SV_ACC_RW, "first match decides (rw before deny)");
        ok(sv_policy_path(p, "/home/user/a.pem") == SV_ACC_DENY, "** crosses /");
        ok(sv_policy_path(p, "/home") == SV_ACC_RO, "a trailing /** matches the directory itself");
        ok(sv_policy_path(p, "/etc/shadow") == SV_ACC_DENY && sv_policy_path(p, "/etc/shadowx") == SV_ACC_RO,
           "a literal rule matches its path alone");
        ok(!sv_policy_restricts_beneath(p, "/home/user/work/src"),
           "beneath an rw P/** rule only that rule decides");
        ok(sv_policy_restricts_beneath(p, "/home/user/other"), "a deny glob may match beneath");
        ok(sv_policy_restricts_beneath(p, "/tmp"), "a later /** ro decides beneath /tmp");
        ok(!sv_policy_restricts_beneath(p, "/run/paddock/x"), "the implicit rule decides beneath /run/paddock");
        ok(sv_policy_restricts_beneath(p, "/home"), "a directory above a deny path");
        sv_policy_free(p);

        p = load("{\"paths\": [{\"glob\": \"/data/*.key\", \"access\": \"deny\"}]}", msg, sizeof msg);
        ok(p && sv_policy_restricts_beneath(p, "/data") && sv_policy_restricts_beneath(p, "/") &&
                   !sv_policy_restricts_beneath(p, "/tmp/k"),
           "a glob's literal prefix bounds where it may match");
        sv_policy_free(p);

        p = load("{\"paths\": []}", msg, sizeof msg);
        ok(p && sv_policy_n_paths(p) == 0, "no path rule, no implicit rule");
        sv_policy_free(p);

        p = load("{\"paths\": [{\"glob\": \"rel\", \"access\": \"ro\"}]}", msg, sizeof msg);
        ok(!p && strstr(msg, "must be absolute"), "a relative glob is refused with the reason");
        p = load("{\"paths\": [{\"glob\": \"/x\", \"access\": \"rx\"}]}", msg, sizeof msg);
        ok(!p && strstr(msg, "rw, ro, deny or noexec"), "an unknown access is refused with the reason");

        return tap_done();
}
