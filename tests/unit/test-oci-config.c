/* Unit tests for paddock-oci's config.json parser, signal names and
 * cgroupsPath rules (src/oci/config.c, src/oci/cgroup.c). TAP. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci/oci.h"
#include "tap.h"

static char bundle[PATH_MAX];

static const char *base =
        "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\",\"readonly\":true},"
        "\"process\":{\"args\":[\"sh\"],\"cwd\":\"/\",\"user\":{\"uid\":1000,\"gid\":100,\"additionalGids\":[10,20]},"
        "\"capabilities\":{\"bounding\":[\"CAP_KILL\",\"CAP_CHOWN\"],\"effective\":[\"CAP_KILL\"]},"
        "\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":256,\"hard\":512}],\"noNewPrivileges\":true},"
        "\"hostname\":\"h\","
        "\"mounts\":[{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\","
        "\"options\":[\"nosuid\",\"ro\",\"rw\",\"mode=755\",\"size=1k\",\"rslave\"]},"
        "{\"destination\":\"/data\",\"source\":\"/tmp\",\"options\":[\"rbind\",\"ro\"]}],"
        "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},{\"type\":\"uts\"},"
        "{\"type\":\"network\",\"path\":\"/proc/self/ns/net\"}]}}";

/* Parse base with one edit applied through jansson. */
static int parse_with(void (*edit)(json_t *), struct oci_config *c, struct pd_error *err)
{
        json_error_t je;
        json_t *j = json_loads(base, 0, &je);
        if (!j) {
                fprintf(stderr, "base: %s\n", je.text);
                exit(1);
        }
        if (edit)
                edit(j);
        return oci_config_parse(j, bundle, c, err);
}

static void e_unknown_ns(json_t *j)
{
        json_array_append_new(json_object_get(json_object_get(j, "linux"), "namespaces"),
                              json_pack("{s:s}", "type", "bogus"));
}
static void e_dup_ns(json_t *j)
{
        json_array_append_new(json_object_get(json_object_get(j, "linux"), "namespaces"),
                              json_pack("{s:s}", "type", "pid"));
}
static void e_version(json_t *j) { json_object_set_new(j, "ociVersion", json_string("2.0.0")); }
static void e_userns(json_t *j)
{
        json_array_append_new(json_object_get(json_object_get(j, "linux"), "namespaces"),
                              json_pack("{s:s}", "type", "user"));
}
static void e_no_args(json_t *j) { json_object_set_new(json_object_get(j, "process"), "args", json_array()); }
static void e_bad_oom(json_t *j) { json_object_set_new(json_object_get(j, "process"), "oomScoreAdj", json_integer(5000)); }
static void e_no_uts(json_t *j)
{
        json_array_remove(json_object_get(json_object_get(j, "linux"), "namespaces"), 2);
}
static void e_cgpath_dotdot(json_t *j)
{
        json_object_set_new(json_object_get(j, "linux"), "cgroupsPath", json_string("/a/../../b"));
}
static void e_cgpath_systemd(json_t *j)
{
        json_object_set_new(json_object_get(j, "linux"), "cgroupsPath", json_string("machine.slice:libpod:abc"));
}

static void test_valid(void)
{
        struct oci_config c;
        struct pd_error err = { 0 };
        int r = parse_with(NULL, &c, &err);
        ok(r == 0, "a valid config parses");
        if (r < 0) {
                printf("# %s\n", err.msg);
                return;
        }
        ok(c.root_readonly && strstr(c.rootfs, "/rootfs") != NULL, "root.path is resolved under the bundle, readonly");
        ok(c.proc.uid == 1000 && c.proc.gid == 100 && c.proc.n_gids == 2 && c.proc.gids[1] == 20, "user and groups");
        ok(c.proc.caps.bounding == ((1ull << 5) | (1ull << 0)) && c.proc.caps.effective == (1ull << 5),
           "capability names become bits");
        ok(c.proc.n_rlimits == 1 && c.proc.rlimits[0].resource == RLIMIT_NOFILE && c.proc.rlimits[0].soft == 256,
           "rlimits");
        ok(c.proc.no_new_privs && !c.proc.terminal, "noNewPrivileges, terminal");
        ok(c.n_mounts == 2, "two mounts");
        ok(!(c.mounts[0].flags & MS_RDONLY) && (c.mounts[0].flags & MS_NOSUID) && (c.mounts[0].clear_flags & MS_RDONLY),
           "'rw' after 'ro' clears it");
        ok(strcmp(c.mounts[0].data, "mode=755,size=1k") == 0, "unknown options become filesystem data");
        ok(c.mounts[0].propagation == (MS_SLAVE | MS_REC), "rslave propagation");
        ok(c.mounts[1].bind && c.mounts[1].rec && (c.mounts[1].flags & MS_RDONLY), "rbind without a type");
        ok(oci_ns_flag(&c, CLONE_NEWPID) >= 0 && oci_ns_flag(&c, CLONE_NEWUSER) < 0, "namespaces listed");
        int net = oci_ns_flag(&c, CLONE_NEWNET);
        ok(net >= 0 && c.ns[net].path && strcmp(c.ns[net].path, "/proc/self/ns/net") == 0, "namespace path kept");
        ok(strcmp(c.isolation, "container") == 0, "isolation defaults to container");
        struct oci_global g = { .root = "/run/x" };
        char p[256];
        ok(oci_cgroup_path(&g, &c, "id1", p, sizeof p, &err) == 0 && strcmp(p, "/paddock-oci/id1") == 0,
           "default cgroupsPath");
        oci_config_free(&c);
}

static void refused(void (*edit)(json_t *), const char *word, const char *what)
{
        struct oci_config c;
        struct pd_error err = { 0 };
        int r = parse_with(edit, &c, &err);
        ok(r < 0 && strstr(err.msg, word) != NULL, "%s", what);
        if (r >= 0 || !strstr(err.msg, word))
                printf("# r=%d msg=%s\n", r, err.msg);
        oci_config_free(&c);
}

/* A mount whose options parse but whose shape is wrong (a bind mount with
 * no source): the options buffer parse_mount allocated must not leak. */
static void e_bind_no_source(json_t *j)
{
        json_t *m = json_array_get(json_object_get(j, "mounts"), 1);
        json_object_del(m, "source");
        json_object_set_new(m, "options", json_pack("[s,s,s]", "rbind", "ro", "mode=755"));
}

static void e_bad_option(json_t *j)
{
        json_t *m = json_array_get(json_object_get(j, "mounts"), 0);
        json_array_append_new(json_object_get(m, "options"), json_integer(7));
}

/* Bytes in use on the heap after parsing a refused config and freeing it,
 * many times over: a leak of even one buffer per parse shows as growth. */
static void test_refused_mount_frees(void (*edit)(json_t *), const char *what)
{
        size_t before = 0;
        for (int i = 0; i < 2000; i++) {
                if (i == 100) /* after jansson's and stdio's first allocations */
                        before = mallinfo2().uordblks;
                struct oci_config c;
                struct pd_error err = { 0 };
                int r = parse_with(edit, &c, &err);
                oci_config_free(&c);
                if (r >= 0) {
                        ok(0, "%s", what);
                        return;
                }
        }
        size_t after = mallinfo2().uordblks;
        ok(after <= before + 4096, "%s", what);
        if (after > before + 4096)
                printf("# heap grew by %zu bytes over 1900 refused parses\n", after - before);
}

static void test_cgroup_paths(void)
{
        struct oci_config c;
        struct pd_error err = { 0 };
        struct oci_global g = { .root = "/run/x" };
        char p[256];
        parse_with(e_cgpath_dotdot, &c, &err);
        ok(oci_cgroup_path(&g, &c, "id1", p, sizeof p, &err) < 0 && strstr(err.msg, ".."), "cgroupsPath with '..' refused");
        oci_config_free(&c);
        parse_with(e_cgpath_systemd, &c, &err);
        ok(oci_cgroup_path(&g, &c, "id1", p, sizeof p, &err) == 0 && strcmp(p, "/machine.slice/libpod-abc.scope") == 0,
           "systemd slice:prefix:name becomes a cgroupfs path");
        oci_config_free(&c);
}

/* linux.sysctl against base (new uts, network joined at the runtime's own
 * /proc/self/ns/net, no ipc), optionally with a new ipc and network. */
static const char *sysctl_key;
static bool sysctl_own_ns;
static void e_sysctl(json_t *j)
{
        json_t *l = json_object_get(j, "linux");
        json_object_set_new(l, "sysctl", json_pack("{s:s}", sysctl_key, "1"));
        if (sysctl_own_ns) {
                json_t *nss = json_object_get(l, "namespaces");
                json_array_remove(nss, 3);      /* network joined by path */
                json_array_append_new(nss, json_pack("{s:s}", "type", "network"));
                json_array_append_new(nss, json_pack("{s:s}", "type", "ipc"));
        }
}

static void sysctl_case(const char *key, bool own_ns, const char *word)
{
        struct oci_config c;
        struct pd_error err = { 0 };
        sysctl_key = key;
        sysctl_own_ns = own_ns;
        int r = parse_with(e_sysctl, &c, &err);
        char what[256];
        snprintf(what, sizeof what, "sysctl %s (%s): %s", key, own_ns ? "own net and ipc" : "host net, no ipc",
                 word ? "refused" : "accepted");
        bool good = word ? r < 0 && strstr(err.msg, word) != NULL : r == 0;
        ok(good, "%s", what);
        if (!good)
                printf("# r=%d msg=%s\n", r, err.msg);
        oci_config_free(&c);
}

static void test_sysctls(void)
{
        sysctl_case("vm.swappiness", true, "not namespaced");
        sysctl_case("kernel.core_pattern", true, "not namespaced");
        sysctl_case("fs.file-max", true, "not namespaced");
        sysctl_case("vm/swappiness", true, "not namespaced");
        sysctl_case("kernel.hostname", true, "'hostname' field");
        sysctl_case("net.ipv4.ip_forward", false, "network namespace");
        sysctl_case("net/ipv4/ip_forward", false, "network namespace");
        sysctl_case("kernel.shmmax", false, "ipc namespace");
        sysctl_case("fs.mqueue.msg_max", false, "ipc namespace");
        sysctl_case("net.ipv4.ip_forward", true, NULL);
        sysctl_case("net/ipv4/ip_forward", true, NULL);
        sysctl_case("kernel.shmmax", true, NULL);
        sysctl_case("kernel.sem", true, NULL);
        sysctl_case("fs.mqueue.msg_max", true, NULL);
        sysctl_case("kernel.domainname", false, NULL);   /* base has a new uts namespace */
        sysctl_case("net.ipv4..ip_forward", true, "bad sysctl");
        sysctl_case("net/../vm/swappiness", true, "bad sysctl");
        sysctl_case("net/./ipv4/ip_forward", true, "bad sysctl");
        sysctl_case("/net/ipv4/ip_forward", true, "bad sysctl");
        sysctl_case("", true, "bad sysctl");
}

static void test_signals(void)
{
        ok(oci_signal_parse("KILL") == SIGKILL && oci_signal_parse("SIGTERM") == SIGTERM &&
           oci_signal_parse("sigusr1") == SIGUSR1 && oci_signal_parse("9") == 9, "signal names and numbers");
        ok(oci_signal_parse("RTMIN+2") == SIGRTMIN + 2 && oci_signal_parse("SIGRTMAX") == SIGRTMAX, "real-time signals");
        ok(oci_signal_parse("bogus") < 0 && oci_signal_parse("0") < 0 && oci_signal_parse("65") < 0 &&
           oci_signal_parse("") < 0 && oci_signal_parse("9x") < 0 && oci_signal_parse("RTMIN+99") < 0,
           "bad signals refused");
}

static void test_ids(void)
{
        ok(oci_id_check("abc-1.2_x+y", NULL) == 0, "a valid id");
        ok(oci_id_check("../x", NULL) < 0 && oci_id_check("a/b", NULL) < 0 && oci_id_check(".hidden", NULL) < 0 &&
           oci_id_check("", NULL) < 0 && oci_id_check("a b", NULL) < 0, "hostile ids refused");
        char longid[300];
        memset(longid, 'a', sizeof longid - 1);
        longid[sizeof longid - 1] = '\0';
        ok(oci_id_check(longid, NULL) < 0, "over-long id refused");
}

int main(void)
{
        char tmpl[] = "/tmp/pd-oci-unit-XXXXXX";
        if (!mkdtemp(tmpl))
                return 1;
        snprintf(bundle, sizeof bundle, "%s", tmpl);
        char rootfs[PATH_MAX];
        snprintf(rootfs, sizeof rootfs, "%s/rootfs", tmpl);
        mkdir(rootfs, 0755);
        struct oci_global g = { .root = "/nonexistent" };
        oci_log_init(&g);
        test_valid();
        refused(e_unknown_ns, "unknown namespace type 'bogus'", "unknown namespace type refused");
        refused(e_dup_ns, "listed twice", "duplicate namespace refused");
        refused(e_version, "ociVersion", "ociVersion 2.x refused");
        refused(e_userns, "uidMappings", "user namespace without mappings refused");
        refused(e_no_args, "process.args", "empty args refused");
        refused(e_bad_oom, "oomScoreAdj", "oomScoreAdj out of range refused");
        refused(e_no_uts, "uts namespace", "hostname without a uts namespace refused");
        refused(e_bind_no_source, "has no source", "bind mount without a source refused");
        refused(e_bad_option, "is not a string", "a mount option that is not a string refused");
        test_refused_mount_frees(e_bind_no_source, "a refused mount frees its options buffer (bind without source)");
        test_refused_mount_frees(e_bad_option, "a refused mount frees its options buffer (option not a string)");
        test_cgroup_paths();
        test_sysctls();
        test_signals();
        test_ids();
        rmdir(rootfs);
        rmdir(tmpl);
        return tap_done();
}
