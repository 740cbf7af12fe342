/* ps, list, features, spec. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oci/oci.h"
#include "lib/util.h"
#include "oci/ocivm.h"

int oci_cmd_ps(const struct oci_global *g, int argc, char **argv)
{
        static const struct option opts[] = { { "format", required_argument, NULL, 'f' }, { NULL, 0, NULL, 0 } };
        struct pd_error err = { 0 };
        const char *format = "table";
        int c;
        /* "+": after the id come ps(1) options, as with runc. */
        while ((c = getopt_long_only(argc, argv, "+f:", opts, NULL)) != -1) {
                if (c != 'f') {
                        pd_error_setx(&err, EINVAL, "usage: ps [--format table|json] ID [PS_OPTIONS]");
                        oci_fail(&err);
                        return 1;
                }
                format = optarg;
        }
        if (optind >= argc || (strcmp(format, "json") != 0 && strcmp(format, "table") != 0)) {
                pd_error_setx(&err, EINVAL, "usage: ps [--format table|json] ID [PS_OPTIONS]");
                oci_fail(&err);
                return 1;
        }
        struct oci_state st;
        if (oci_state_load(g, argv[optind], &st, &err) < 0) {
                oci_fail(&err);
                return 1;
        }
        if (strcmp(format, "table") == 0 && oci_vm_is(st.config)) {
                /* microvm: the guest's processes (json: the host pids) */
                int vr = oci_vm_ps(&st, &err);
                oci_state_free(&st);
                if (vr < 0)
                        oci_fail(&err);
                return vr < 0 ? 1 : 0;
        }
        pid_t *pids;
        size_t n;
        int r = oci_cgroup_pids(st.cgroup, &pids, &n, &err);
        oci_state_free(&st);
        if (r < 0) {
                oci_fail(&err);
                return 1;
        }
        if (strcmp(format, "json") == 0) {
                json_t *a = json_array();
                for (size_t i = 0; i < n; i++)
                        json_array_append_new(a, json_integer(pids[i]));
                char *s = json_dumps(a, JSON_COMPACT);
                printf("%s\n", s);
                free(s);
                json_decref(a);
                free(pids);
                return 0;
        }
        /* table: ps(1) with the caller's options (default -ef), filtered to
         * the container's pids by the PID column. */
        char cmd[1024] = "ps";
        if (optind + 1 >= argc)
                strcat(cmd, " -ef");
        for (int i = optind + 1; i < argc; i++) {
                for (const char *q = argv[i]; *q; q++)
                        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
                              strchr("-,=_:%", *q))) {
                                pd_error_setx(&err, EINVAL, "ps option '%s' refused", argv[i]);
                                oci_fail(&err);
                                free(pids);
                                return 1;
                        }
                if (strlen(cmd) + strlen(argv[i]) + 2 >= sizeof cmd)
                        break;
                strcat(cmd, " ");
                strcat(cmd, argv[i]);
        }
        FILE *f = popen(cmd, "re");
        if (!f) {
                pd_error_set(&err, errno, "run ps");
                oci_fail(&err);
                free(pids);
                return 1;
        }
        char line[4096];
        int pid_col = -1;
        while (fgets(line, sizeof line, f)) {
                if (pid_col < 0) {
                        fputs(line, stdout);
                        char copy[4096];
                        snprintf(copy, sizeof copy, "%s", line);
                        int col = 0;
                        for (char *t = strtok(copy, " \t\n"); t; t = strtok(NULL, " \t\n"), col++)
                                if (strcmp(t, "PID") == 0)
                                        pid_col = col;
                        if (pid_col < 0) {
                                pd_error_setx(&err, EINVAL, "ps output has no PID column");
                                break;
                        }
                        continue;
                }
                char copy[4096];
                snprintf(copy, sizeof copy, "%s", line);
                char *t = strtok(copy, " \t\n");
                for (int col = 0; t && col < pid_col; col++)
                        t = strtok(NULL, " \t\n");
                int p = t ? atoi(t) : -1;
                for (size_t i = 0; i < n; i++)
                        if (pids[i] == p) {
                                fputs(line, stdout);
                                break;
                        }
        }
        pclose(f);
        free(pids);
        if (err.code) {
                oci_fail(&err);
                return 1;
        }
        return 0;
}

int oci_cmd_list(const struct oci_global *g, int argc, char **argv)
{
        static const struct option opts[] = { { "format", required_argument, NULL, 'f' },
                                              { "quiet", no_argument, NULL, 'q' }, { NULL, 0, NULL, 0 } };
        struct pd_error err = { 0 };
        const char *format = "table";
        bool quiet = false;
        int c;
        while ((c = getopt_long_only(argc, argv, "f:q", opts, NULL)) != -1) {
                if (c == 'f')
                        format = optarg;
                else if (c == 'q')
                        quiet = true;
                else {
                        pd_error_setx(&err, EINVAL, "usage: list [--format table|json] [--quiet]");
                        oci_fail(&err);
                        return 1;
                }
        }
        bool json = strcmp(format, "json") == 0;
        if (!json && strcmp(format, "table") != 0) {
                pd_error_setx(&err, EINVAL, "list: --format must be table or json");
                oci_fail(&err);
                return 1;
        }
        json_t *a = json_array();
        DIR *d = opendir(g->root);
        if (!json && !quiet)
                printf("%-24s %-8s %-10s %-40s %-32s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER");
        struct dirent *e;
        while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.' || oci_id_check(e->d_name, NULL) < 0)
                        continue;
                struct oci_state st;
                if (oci_state_load(g, e->d_name, &st, NULL) < 0)
                        continue;
                enum oci_status s = oci_state_status(&st);
                if (quiet)
                        printf("%s\n", st.id);
                else if (json)
                        json_array_append_new(a, oci_state_json(&st, s));
                else
                        printf("%-24s %-8d %-10s %-40s %-32s %s\n", st.id, s == OCI_STOPPED ? 0 : (int)st.pid,
                               oci_status_name(s), st.bundle, st.created, "root");
                oci_state_free(&st);
        }
        if (d)
                closedir(d);
        if (json && !quiet) {
                char *s = json_dumps(a, JSON_COMPACT);
                printf("%s\n", s);
                free(s);
        }
        json_decref(a);
        return 0;
}

static json_t *strs(const char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

int oci_cmd_features(const struct oci_global *g, int argc, char **argv)
{
        static const char *const caps[] = {
                "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
                "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
                "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
                "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
                "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
                "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
                "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
                "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
        };
        json_t *capa = json_array();
        for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
                json_array_append_new(capa, json_string(caps[i]));
        static const char *const hooks[] = { "prestart", "createRuntime", "createContainer", "startContainer",
                                             "poststart", "poststop" };
        static const char *const mopts[] = {
                "async", "atime", "bind", "defaults", "dev", "diratime", "dirsync", "exec", "mand", "noatime",
                "nodev", "nodiratime", "noexec", "nomand", "norelatime", "nostrictatime", "nosuid", "private",
                "rbind", "relatime", "remount", "ro", "rprivate", "rshared", "rslave", "runbindable", "rw",
                "shared", "slave", "strictatime", "suid", "sync", "unbindable", "tmpcopyup",
        };
        static const char *const nss[] = { "cgroup", "ipc", "mount", "network", "pid", "user", "uts" };
        static const char *const actions[] = { "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                                               "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
                                               "SCMP_ACT_TRAP", "SCMP_ACT_TRACE" };
        static const char *const archs[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
                                             "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM" };
        static const char *const ops[] = { "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE",
                                           "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE" };
#define STRS(arr) strs(arr, sizeof(arr) / sizeof((arr)[0]))
        json_t *o = json_object();
        json_object_set_new(o, "ociVersionMin", json_string("1.0.0"));
        json_object_set_new(o, "ociVersionMax", json_string("1.1.0"));
        json_object_set_new(o, "hooks", STRS(hooks));
        json_object_set_new(o, "mountOptions", STRS(mopts));
        json_t *lx = json_object();
        json_object_set_new(lx, "namespaces", STRS(nss));
        json_object_set_new(lx, "capabilities", capa);
        json_object_set_new(lx, "cgroup", json_pack("{s:b,s:b,s:b}", "v1", 1, "v2", 1, "systemd", 0));
        json_t *sc = json_object();
        json_object_set_new(sc, "enabled", json_true());
        json_object_set_new(sc, "actions", STRS(actions));
        json_object_set_new(sc, "operators", STRS(ops));
        json_object_set_new(sc, "archs", STRS(archs));
        json_object_set_new(lx, "seccomp", sc);
        /* Supported by the runtime (lsm.c); applied where the host runs them. */
        json_object_set_new(lx, "apparmor", json_pack("{s:b}", "enabled", 1));
        json_object_set_new(lx, "selinux", json_pack("{s:b}", "enabled", 1));
        json_object_set_new(o, "linux", lx);
        json_object_set_new(o, "annotations", json_pack("{s:s,s:s}", "run.oci.paddock.isolation", "container",
                                                        "run.oci.paddock.version", PD_VERSION));
#undef STRS
        if (!o) {
                fprintf(stderr, "paddock-oci: features: internal error\n");
                return 1;
        }
        char *s = json_dumps(o, JSON_INDENT(2));
        printf("%s\n", s);
        free(s);
        json_decref(o);
        return 0;
}

static const char default_spec[] =
        "{\n"
        "  \"ociVersion\": \"1.1.0\",\n"
        "  \"process\": {\n"
        "    \"terminal\": true,\n"
        "    \"user\": { \"uid\": 0, \"gid\": 0 },\n"
        "    \"args\": [ \"sh\" ],\n"
        "    \"env\": [ \"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\", \"TERM=xterm\" ],\n"
        "    \"cwd\": \"/\",\n"
        "    \"capabilities\": {\n"
        "      \"bounding\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],\n"
        "      \"effective\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],\n"
        "      \"permitted\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],\n"
        "      \"ambient\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ]\n"
        "    },\n"
        "    \"rlimits\": [ { \"type\": \"RLIMIT_NOFILE\", \"hard\": 1024, \"soft\": 1024 } ],\n"
        "    \"noNewPrivileges\": true\n"
        "  },\n"
        "  \"root\": { \"path\": \"rootfs\", \"readonly\": true },\n"
        "  \"hostname\": \"paddock\",\n"
        "  \"mounts\": [\n"
        "    { \"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\" },\n"
        "    { \"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\",\n"
        "      \"options\": [ \"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\" ] },\n"
        "    { \"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\",\n"
        "      \"options\": [ \"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", \"mode=0620\" ] },\n"
        "    { \"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\",\n"
        "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\" ] },\n"
        "    { \"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\",\n"
        "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\" ] },\n"
        "    { \"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\",\n"
        "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"ro\" ] },\n"
        "    { \"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": \"cgroup\",\n"
        "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\" ] }\n"
        "  ],\n"
        "  \"linux\": {\n"
        "    \"resources\": { \"devices\": [ { \"allow\": false, \"access\": \"rwm\" } ] },\n"
        "    \"namespaces\": [ { \"type\": \"pid\" }, { \"type\": \"network\" }, { \"type\": \"ipc\" },\n"
        "                    { \"type\": \"uts\" }, { \"type\": \"mount\" }, { \"type\": \"cgroup\" } ],\n"
        "    \"maskedPaths\": [ \"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", \"/proc/keys\",\n"
        "      \"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\", \"/proc/sched_debug\",\n"
        "      \"/sys/firmware\", \"/proc/scsi\" ],\n"
        "    \"readonlyPaths\": [ \"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\",\n"
        "      \"/proc/sysrq-trigger\" ]\n"
        "  }\n"
        "}\n";

int oci_cmd_spec(const struct oci_global *g, int argc, char **argv)
{
        static const struct option opts[] = { { "bundle", required_argument, NULL, 'b' },
                                              { "rootless", no_argument, NULL, 'r' }, { NULL, 0, NULL, 0 } };
        struct pd_error err = { 0 };
        const char *bundle = ".";
        int c;
        while ((c = getopt_long_only(argc, argv, "b:", opts, NULL)) != -1) {
                if (c == 'b')
                        bundle = optarg;
                else if (c != 'r') {
                        pd_error_setx(&err, EINVAL, "usage: spec [--bundle DIR]");
                        oci_fail(&err);
                        return 1;
                }
        }
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/config.json", bundle);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
                pd_error_set(&err, errno, "create '%s'%s", path, errno == EEXIST ? " (it already exists)" : "");
                oci_fail(&err);
                return 1;
        }
        int r = pd_write_all(fd, default_spec, sizeof default_spec - 1);
        close(fd);
        if (r < 0) {
                pd_error_set(&err, -r, "write '%s'", path);
                oci_fail(&err);
                return 1;
        }
        return 0;
}
