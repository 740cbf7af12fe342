/* Unit tests for paddock-oci's config.json parser, its typed
 * linux.resources, signal names and cgroupsPath rules (src/oci/config.c,
 * src/oci/resources.c, src/oci/cgroup.c). TAP. */
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

/* linux.resources: parsed into the typed limits the jail's writer takes. */
static const char *resources_json;
static void e_resources(json_t *j)
{
        json_error_t je;
        json_t *r = json_loads(resources_json, 0, &je);
        if (!r) {
                fprintf(stderr, "resources: %s\n", je.text);
                exit(1);
        }
        json_object_set_new(json_object_get(j, "linux"), "resources", r);
}

static int parse_resources(const char *res, struct oci_config *c, struct pd_error *err)
{
        resources_json = res;
        return parse_with(e_resources, c, err);
}

static void test_resources(void)
{
        struct oci_config c;
        struct pd_error err = { 0 };
        int r = parse_resources(
                "{\"memory\":{\"limit\":67108864,\"reservation\":1024,\"swap\":134217728,\"kernelTCP\":5,"
                "\"swappiness\":10,\"disableOOMKiller\":true},"
                "\"cpu\":{\"shares\":512,\"quota\":50000,\"period\":100000,\"cpus\":\"0-1\",\"mems\":\"0\"},"
                "\"pids\":{\"limit\":77},"
                "\"blockIO\":{\"weight\":300,\"weightDevice\":[{\"major\":8,\"minor\":0,\"weight\":10},"
                "{\"major\":8,\"minor\":1,\"leafWeight\":5}],"
                "\"throttleReadBpsDevice\":[{\"major\":8,\"minor\":0,\"rate\":1048576}],"
                "\"throttleWriteIOPSDevice\":[{\"major\":8,\"minor\":16,\"rate\":300}]},"
                "\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":4194304}],"
                "\"network\":{\"classID\":1048577,\"priorities\":[{\"name\":\"eth0\",\"priority\":5}]},"
                "\"devices\":[{\"allow\":false,\"access\":\"rwm\"},{\"allow\":true,\"type\":\"c\",\"major\":10,"
                "\"minor\":200,\"access\":\"rw\"}],"
                "\"unified\":{\"memory.high\":\"1G\"}}",
                &c, &err);
        ok(r == 0, "linux.resources parses");
        if (r < 0) {
                printf("# %s\n", err.msg);
                oci_config_free(&c);
                return;
        }
        const struct pd_cg_limits *l = &c.res.lim;
        ok((l->set & PD_CG_SET_MEM_LIMIT) && l->memory.limit == 67108864 && (l->set & PD_CG_SET_MEM_SWAP) &&
                   l->memory.swap == 134217728 && l->memory.reservation == 1024 && l->memory.kernel_tcp == 5 &&
                   !(l->set & PD_CG_SET_MEM_KERNEL),
           "memory: limit, swap, reservation, kernelTCP; kernel not given, not set");
        ok((l->set & PD_CG_SET_MEM_SWAPPINESS) && l->memory.swappiness == 10 && (l->set & PD_CG_SET_MEM_NO_OOM_KILL),
           "memory: swappiness, disableOOMKiller");
        ok((l->set & PD_CG_SET_CPU_SHARES) && l->cpu.shares == 512 && l->cpu.quota == 50000 && l->cpu.period == 100000 &&
                   !strcmp(l->cpu.cpus, "0-1") && !strcmp(l->cpu.mems, "0"),
           "cpu: shares, quota, period, cpus, mems");
        ok((l->set & PD_CG_SET_PIDS) && l->pids == 77, "pids");
        ok((l->set & PD_CG_SET_BLKIO_WEIGHT) && l->blkio.weight == 300 && l->blkio.n_weight_dev == 1 &&
                   l->blkio.weight_dev[0].major == 8 && l->blkio.weight_dev[0].value == 10,
           "blockIO: weight; a weightDevice without a weight is skipped");
        ok(l->blkio.n_throttle[PD_CG_READ_BPS] == 1 && l->blkio.throttle[PD_CG_READ_BPS][0].value == 1048576 &&
                   l->blkio.n_throttle[PD_CG_WRITE_IOPS] == 1 && l->blkio.throttle[PD_CG_WRITE_IOPS][0].minor == 16 &&
                   l->blkio.n_throttle[PD_CG_WRITE_BPS] == 0,
           "blockIO: throttles by kind");
        ok(l->n_hugepages == 1 && !strcmp(l->hugepages[0].size, "2MB") && l->hugepages[0].limit == 4194304,
           "hugepageLimits");
        ok((l->set & PD_CG_SET_NET_CLASSID) && l->net.classid == 1048577 && l->net.n_prios == 1 &&
                   !strcmp(l->net.prios[0].ifname, "eth0") && l->net.prios[0].prio == 5,
           "network: classID, priorities");
        ok(l->n_devices == 2 + 11 && !l->devices[0].allow && l->devices[0].type == 'a' && l->devices[0].major == -1 &&
                   l->devices[1].allow && l->devices[1].type == 'c' && l->devices[1].major == 10 &&
                   !strcmp(l->devices[1].access, "rw") && l->devices[2].allow && !strcmp(l->devices[2].access, "m"),
           "devices: the config's rules in order, then the default nodes");
        ok(l->n_unified == 1 && !strcmp(l->unified[0].key, "memory.high") && !strcmp(l->unified[0].value, "1G"),
           "unified");
        oci_config_free(&c);

        r = parse_resources("{}", &c, &err);
        ok(r == 0 && c.res.lim.set == 0 && c.res.lim.n_devices == 0, "empty resources: nothing set, no device rules");
        oci_config_free(&c);
        r = parse_resources("{\"devices\":[]}", &c, &err);
        ok(r == 0 && c.res.lim.n_devices == 11, "an empty device list still gets the default nodes");
        oci_config_free(&c);
        r = parse_resources("{\"memory\":{\"swappiness\":101,\"limit\":null},\"cpu\":{\"shares\":0}}", &c, &err);
        ok(r == 0 && c.res.lim.set == 0, "out-of-range swappiness, zero shares, null limit: not set");
        oci_config_free(&c);

        static const struct { const char *res, *word, *what; } bad[] = {
                { "{\"memory\":{\"limit\":\"64M\"}}", "memory.limit must be an integer", "a memory limit as a string" },
                { "{\"memory\":[]}", "memory must be an object", "memory not an object" },
                { "{\"pids\":{\"limit\":1.5}}", "pids.limit must be an integer", "a fractional pids limit" },
                { "{\"cpu\":{\"cpus\":3}}", "cpu.cpus must be a string", "cpu.cpus not a string" },
                { "{\"hugepageLimits\":[{\"pageSize\":\"../../2MB\",\"limit\":1}]}", "hugepageLimits[0]",
                  "a hugepage size with a path" },
                { "{\"hugepageLimits\":[{\"pageSize\":\"2MB\"}]}", "hugepageLimits[0]", "a hugepage without a limit" },
                { "{\"network\":{\"priorities\":[{\"name\":\"eth0/../x\",\"priority\":1}]}}", "priorities[0]",
                  "an interface name with a path" },
                { "{\"network\":{\"classID\":-1}}", "classID out of range", "a negative classID" },
                { "{\"blockIO\":{\"throttleReadBpsDevice\":[{\"major\":8,\"rate\":1}]}}", "needs major and minor",
                  "a throttle without a minor" },
                { "{\"blockIO\":{\"throttleWriteBpsDevice\":[{\"major\":8,\"minor\":0}]}}", "needs a rate",
                  "a throttle without a rate" },
                { "{\"devices\":[{\"allow\":true,\"type\":\"x\"}]}", "devices[0].type", "a device type other than a, b, c" },
                { "{\"devices\":[{\"allow\":true,\"access\":\"rwx\"}]}", "devices[0].access", "device access beyond rwm" },
                { "{\"devices\":[7]}", "devices[0] must be an object", "a device rule that is not an object" },
                { "{\"unified\":{\"../x\":\"1\"}}", "bad key", "a unified key with a path" },
                { "{\"unified\":{\"memory.high\":5}}", "must be a string", "a unified value that is not a string" },
                { "[]", "linux.resources must be an object", "resources not an object" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                char what[160];
                snprintf(what, sizeof what, "refused: %s", bad[i].what);
                r = parse_resources(bad[i].res, &c, &err);
                bool good = r < 0 && strstr(err.msg, bad[i].word) && strstr(err.msg, "config.json: ");
                ok(good, what);
                if (!good)
                        printf("# r=%d msg=%s\n", r, err.msg);
                oci_config_free(&c);
        }
        /* Refused half-way, after lists were allocated: nothing leaks. */
        resources_json = "{\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":1}],"
                         "\"devices\":[{\"allow\":false}],\"unified\":{\"a\":\"1\",\"../b\":\"2\"}}";
        test_refused_mount_frees(e_resources, "a refused linux.resources frees its lists");
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
        test_resources();
        test_sysctls();
        test_signals();
        test_ids();
        rmdir(rootfs);
        rmdir(tmpl);
        return tap_done();
}
