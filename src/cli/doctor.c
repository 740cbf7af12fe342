/* paddock doctor: what this host can do. Checks the kernel features each
 * tier needs (namespaces, cgroups, seccomp, Landlock, KVM or TCG, runsc)
 * and the network's (the default uplink, the resolvers, IPv6), then prints
 * what each tier and network mode can do here, one line each with the
 * reason when the answer is no.
 *
 * The uplink check is a real one unless --no-probe: a router is made on a
 * scratch state dir, its uplink process must come up (a default route on
 * its tap), and the router is torn down again. No packet is sent: nothing
 * leaves the host. Everything else only reads the host. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "net/hostnet.h"
#include "jail/landlock.h"
#include "net/router.h"
#include "lib/state.h"
#include "net/uplink.h"
#include "lib/util.h"
#include "vm/vm.h"

struct facts {
        char ns_missing[128];           /* namespaces unshare refused */
        char cgroups[160];
        bool cgroups_ok;
        bool seccomp, seccomp_notif;
        int landlock;
        bool kvm, qemu, guest;
        char guest_release[64];
        char runsc[PATH_MAX];
        struct pd_uplink up;
        char up_err[PD_ERROR_MSG_MAX];
        bool probed, probe_ok;
        char probe[512];
        char resolvers[256], resolvers_why[256];
        bool resolvers_loopback;
        bool ipv6_works;
        char ipv6_why[256];
};

static void line(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *what, const char *fmt, ...)
{
        va_list ap;
        printf("  %-13s", what);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
}

/* unshare(flag) in a child: 0 or the errno */
static int try_unshare(int flag)
{
        pid_t pid = fork();
        if (pid == 0)
                _exit(unshare(flag) < 0 ? (errno & 0xff) : 0);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) < 0)
                return errno;
        return WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
}

static void check_namespaces(struct facts *f)
{
        static const struct {
                int flag;
                const char *name;
        } ns[] = { { CLONE_NEWUSER, "user" }, { CLONE_NEWNS, "mount" }, { CLONE_NEWPID, "pid" },
                   { CLONE_NEWNET, "net" },   { CLONE_NEWIPC, "ipc" },  { CLONE_NEWUTS, "uts" },
                   { CLONE_NEWCGROUP, "cgroup" } };
        for (size_t i = 0; i < PD_ARRAY_SIZE(ns); i++)
                if (try_unshare(ns[i].flag))
                        snprintf(f->ns_missing + strlen(f->ns_missing), sizeof f->ns_missing - strlen(f->ns_missing),
                                 "%s%s", f->ns_missing[0] ? ", " : "", ns[i].name);
}

static void check_cgroups(struct facts *f)
{
        char buf[512];
        if (pd_read_file_at(AT_FDCWD, "/sys/fs/cgroup/cgroup.controllers", buf, sizeof buf) > 0) {
                buf[strcspn(buf, "\n")] = 0;
                snprintf(f->cgroups, sizeof f->cgroups, "v2: %s", buf);
                f->cgroups_ok = strstr(buf, "memory") && strstr(buf, "pids");
                return;
        }
        static const char *const v1[] = { "memory", "pids", "cpu", "freezer" };
        size_t o = (size_t)snprintf(f->cgroups, sizeof f->cgroups, "v1 (hybrid):");
        int have = 0;
        for (size_t i = 0; i < PD_ARRAY_SIZE(v1); i++) {
                char p[64];
                struct stat st;
                snprintf(p, sizeof p, "/sys/fs/cgroup/%s", v1[i]);
                if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                        o += (size_t)snprintf(f->cgroups + o, sizeof f->cgroups - o, " %s", v1[i]);
                        have++;
                }
        }
        f->cgroups_ok = have >= 2;
}

/* A router on a scratch state dir, its uplink up or not, then gone. */
static void probe_uplink(struct facts *f)
{
        char dir[] = "/tmp/paddock-doctor-XXXXXX";
        if (!mkdtemp(dir)) {
                snprintf(f->probe, sizeof f->probe, "no scratch state dir: %s", strerror(errno));
                return;
        }
        f->probed = true;
        struct pd_state st;
        struct pd_error err = { 0 };
        if (pd_state_open(dir, &st, &err) < 0) {
                snprintf(f->probe, sizeof f->probe, "%s", err.msg);
                rmdir(dir);
                return;
        }
        struct pd_router_cfg cfg = { 0 };
        struct pd_router *r = NULL;
        uint64_t t0 = pd_now_ms();
        if (pd_router_open(&st, &cfg, &r, &err) < 0) {
                snprintf(f->probe, sizeof f->probe, "%s", err.msg);
        } else {
                struct pd_router_egress eg;
                pd_router_close(r);
                if (pd_router_egress(&st, &eg) == 0 && !eg.problem[0]) {
                        f->probe_ok = true;
                        snprintf(f->probe, sizeof f->probe, "came up in a scratch router in %.1f s",
                                 (double)(pd_now_ms() - t0) / 1000.0);
                } else {
                        snprintf(f->probe, sizeof f->probe, "%s", eg.problem);
                }
        }
        (void)pd_router_gc(&st, NULL, NULL, &err);
        char net[PATH_MAX + 8];
        snprintf(net, sizeof net, "%s/net", st.rundir);
        (void)pd_rm_rf(net, NULL);
        (void)unlinkat(st.rundirfd, "sandboxes", AT_REMOVEDIR);
        (void)rmdir(st.rundir);
        pd_state_close(&st);
        (void)pd_rm_rf(dir, NULL);
}

static void gather(struct facts *f, bool probe)
{
        check_namespaces(f);
        check_cgroups(f);
        f->seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
        char buf[512];
        f->seccomp_notif = pd_read_file_at(AT_FDCWD, "/proc/sys/kernel/seccomp/actions_avail", buf, sizeof buf) > 0 &&
                           strstr(buf, "user_notif");
        f->landlock = pd_landlock_abi();
        f->kvm = pd_vm_have_kvm();
        f->qemu = access("/usr/bin/qemu-system-x86_64", X_OK) == 0;
        char gdir[PATH_MAX];
        struct pd_error err = { 0 };
        f->guest = pd_vm_guest_kernel(gdir, sizeof gdir, f->guest_release, sizeof f->guest_release, &err) == 0;
        pd_uplink_find_bin("runsc", NULL, f->runsc, sizeof f->runsc);
        if (pd_uplink_choose(NULL, &f->up, &err) < 0)
                snprintf(f->up_err, sizeof f->up_err, "%s", err.msg);
        if (probe && geteuid() == 0 && f->up.kind != PD_UPLINK_NONE)
                probe_uplink(f);
        pd_hostnet_resolvers(f->resolvers, sizeof f->resolvers, &f->resolvers_loopback, f->resolvers_why,
                             sizeof f->resolvers_why);
        f->ipv6_works = pd_hostnet_ipv6_working(f->ipv6_why, sizeof f->ipv6_why);
}

static void report(const struct facts *f)
{
        struct utsname u;
        uname(&u);
        printf("paddock %s on %s %s, %s\n\nhost\n", PD_VERSION, u.sysname, u.release,
               geteuid() == 0 ? "as root" : "not root (the container tiers need root)");
        if (f->ns_missing[0])
                line("namespaces", "missing: %s", f->ns_missing);
        else
                line("namespaces", "ok: user, mount, pid, net, ipc, uts, cgroup");
        line("cgroups", "%s%s", f->cgroups, f->cgroups_ok ? "" : " (memory and pids are needed)");
        line("seccomp", "%s%s", f->seccomp ? "filters" : "no seccomp",
             f->seccomp ? (f->seccomp_notif ? ", user notification" : ", no user notification") : "");
        if (f->landlock > 0)
                line("landlock", "ABI %d", f->landlock);
        else
                line("landlock", "not enabled");
        line("kvm", "%s", f->kvm ? "hardware virtualization" : "no (no vmx/svm, or no /dev/kvm): microvm uses TCG");
        line("qemu", "%s", f->qemu ? "/usr/bin/qemu-system-x86_64" : "not installed (apt install qemu-system-x86)");
        line("guest kernel", "%s%s", f->guest ? f->guest_release : "none (scripts/setup.sh unpacks it)",
             "");
        line("runsc", "%s", f->runsc[0] ? f->runsc : "not installed");

        printf("\nnetwork\n");
        /* the other program, which --net-uplink can name */
        const char *other = f->up.kind == PD_UPLINK_PASTA ? "slirp4netns" : "pasta";
        char other_bin[PATH_MAX];
        bool have_other = pd_uplink_find_bin(other, f->up.kind == PD_UPLINK_PASTA ? "PADDOCK_SLIRP4NETNS" : "PADDOCK_PASTA",
                                             other_bin, sizeof other_bin);
        if (f->up_err[0])
                line("uplink", "%s", f->up_err);
        else if (f->up.kind == PD_UPLINK_NONE)
                line("uplink", "none: %s", f->up.why);
        else
                line("uplink", "%s (%s)%s%s", pd_uplink_kind_name(f->up.kind), f->up.bin,
                     f->probed ? ": " : "", f->probed ? f->probe : "");
        if (f->up.relay)
                line("", "TCP through paddock's relay (the rest through %s)", pd_uplink_kind_name(f->up.kind));
        if (f->up.kind != PD_UPLINK_NONE)
                line("", "%s: %s", other, have_other ? other_bin : "not installed");
        if (f->resolvers[0])
                line("resolvers", "%s (the host's, from %s)", f->resolvers, PD_HOSTNET_RESOLV);
        else if (f->resolvers_loopback && f->up.kind != PD_UPLINK_NONE)
                line("resolvers", "%s; asked through the uplink's DNS forwarder", f->resolvers_why);
        else
                line("resolvers", "none: %s", f->resolvers_why);
        if (f->ipv6_works)
                line("ipv6", "works on the host: sandboxes get IPv6 too (default uplink)");
        else
                line("ipv6", "%s: sandboxes get IPv4 only", f->ipv6_why);

        printf("\ntiers\n");
        bool root = geteuid() == 0;
        bool ns = !f->ns_missing[0];
        line("process", "%s", f->landlock > 0 && f->seccomp ? "yes" : "no: needs Landlock and seccomp");
        line("container", "%s", root && ns && f->cgroups_ok && f->seccomp ? "yes" : "no: needs root, namespaces, cgroups and seccomp");
        line("supervised", "%s", root && ns && f->cgroups_ok && f->seccomp_notif && f->landlock > 0
                                         ? "yes" : "no: needs the container tier, seccomp user notification and Landlock");
        if (root && ns && f->qemu && f->guest)
                line("microvm", "yes, %s", f->kvm ? "KVM" : "TCG (software emulation: slower start and run)");
        else
                line("microvm", "no: needs root, QEMU and the guest kernel");
        line("gvisor", "no: %s", f->runsc[0] ? "not in this build of paddock" : "runsc is not installed");

        printf("\nnetwork modes\n");
        line("none", "yes");
        const char *why = f->up_err[0]                      ? f->up_err
                          : f->up.kind == PD_UPLINK_NONE    ? f->up.why
                          : f->probed && !f->probe_ok       ? f->probe
                          : !f->resolvers[0] && !f->resolvers_loopback ? f->resolvers_why
                                                            : NULL;
        if (!root || !ns)
                line("open", "no: the network needs root and network namespaces");
        else if (why)
                line("open", "no egress: %s (or give --net-uplink)", why);
        else
                line("open", "yes: what the host reaches, through %s, minus the never list",
                     pd_uplink_kind_name(f->up.kind));
        if (!root || !ns)
                line("policy", "no: the network needs root and network namespaces");
        else if (why)
                line("policy", "no egress: as open");
        else
                line("policy", "yes: only what --allow names, through %s", pd_uplink_kind_name(f->up.kind));
}

int pd_cmd_doctor(int argc, char **argv)
{
        static const struct option opts[] = {
                { "no-probe", no_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        bool probe = true;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 'n': probe = false; break;
                case 'h':
                        printf("usage: paddock doctor [--no-probe]\n"
                               "Check what this host can do: namespaces, cgroups, seccomp, Landlock, KVM/TCG,\n"
                               "runsc, the network's uplink and resolvers; then what each tier and network\n"
                               "mode can do here. The uplink is started once in a scratch router (no packet\n"
                               "is sent) unless --no-probe.\n");
                        return 0;
                default:
                        pd_cli_error("doctor: unknown option '%s' (see paddock doctor --help)", argv[optind - 1]);
                        return PD_EXIT_PADDOCK;
                }
        }
        if (optind < argc) {
                pd_cli_error("doctor: unexpected argument '%s'", argv[optind]);
                return PD_EXIT_PADDOCK;
        }
        static struct facts f;
        gather(&f, probe);
        report(&f);
        return 0;
}
