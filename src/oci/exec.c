/* exec: a new process in a running container. The runtime joins the
 * container's pid namespace (for its children), forks, and the child joins
 * the other namespaces and the cgroup, then sets itself up as the init did.
 * The sync socket is CLOEXEC: EOF means the exec succeeded. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oci/init.h"
#include "jail/seccomp-policy.h"
#include "jail/caps.h"
#include "oci/oci.h"
#include "lib/util.h"
#include "oci/ocivm.h"

struct exec_opts {
        const char *process, *pid_file, *console_socket, *cwd, *user;
        bool detach, tty, tty_set, nnp;
        int preserve_fds;
        json_t *env, *caps, *gids;
};

static const struct { const char *name; int flag; } exec_ns[] = {
        { "user", CLONE_NEWUSER }, { "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS }, { "net", CLONE_NEWNET },
        { "cgroup", CLONE_NEWCGROUP }, { "mnt", CLONE_NEWNS },
};

static bool same_ns(pid_t pid, const char *name)
{
        char a[64], b[64];
        struct stat sa, sb;
        snprintf(a, sizeof a, "/proc/%d/ns/%s", (int)pid, name);
        snprintf(b, sizeof b, "/proc/self/ns/%s", name);
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

static int build_process(const struct exec_opts *o, json_t *config, int argc, char **argv, json_t **out,
                         struct pd_error *err)
{
        json_t *p;
        if (o->process) {
                json_error_t je;
                p = json_load_file(o->process, JSON_REJECT_DUPLICATES, &je);
                if (!p)
                        return pd_error_setx(err, EINVAL, "--process '%s': %s (line %d)", o->process, je.text, je.line);
        } else {
                json_t *base = json_object_get(config, "process");
                p = base ? json_deep_copy(base) : json_object();
                json_object_del(p, "terminal");
                json_t *args = json_array();
                for (int i = 0; i < argc; i++)
                        json_array_append_new(args, json_string(argv[i]));
                json_object_set_new(p, "args", args);
        }
        if (o->tty_set)
                json_object_set_new(p, "terminal", json_boolean(o->tty));
        if (o->cwd)
                json_object_set_new(p, "cwd", json_string(o->cwd));
        if (o->nnp)
                json_object_set_new(p, "noNewPrivileges", json_true());
        if (json_array_size(o->env)) {
                json_t *env = json_object_get(p, "env");
                if (!json_is_array(env))
                        json_object_set_new(p, "env", env = json_array());
                json_array_extend(env, o->env);
        }
        if (o->user) {
                unsigned uid, gid = 0;
                int n = sscanf(o->user, "%u:%u", &uid, &gid);
                if (n < 1) {
                        json_decref(p);
                        return pd_error_setx(err, EINVAL, "--user '%s': expected UID[:GID]", o->user);
                }
                json_object_set_new(p, "user", json_pack("{s:i,s:i}", "uid", (int)uid, "gid", (int)gid));
        }
        if (json_array_size(o->gids)) {
                json_t *u = json_object_get(p, "user");
                if (!u)
                        json_object_set_new(p, "user", u = json_object());
                json_object_set(u, "additionalGids", o->gids);
        }
        if (json_array_size(o->caps)) {
                json_t *caps = json_object_get(p, "capabilities");
                if (!caps)
                        json_object_set_new(p, "capabilities", caps = json_object());
                const char *sets[] = { "bounding", "effective", "permitted", "ambient" };
                for (int i = 0; i < 4; i++) {
                        json_t *s = json_object_get(caps, sets[i]);
                        if (!json_is_array(s))
                                json_object_set_new(caps, sets[i], s = json_array());
                        json_array_extend(s, o->caps);
                }
        }
        *out = p;
        return 0;
}

__attribute__((noreturn)) static void child_fail(int sync, const struct pd_error *err)
{
        struct oci_sync_msg m = { .kind = 'E', .code = err->code };
        snprintf(m.msg, sizeof m.msg, "%s", err->msg);
        send(sync, &m, sizeof m, MSG_NOSIGNAL);
        _exit(127);
}

__attribute__((noreturn)) static void exec_child(int sync, int console, const int *nsfd, const struct oci_process *p,
                                                 const struct pd_bpf *seccomp, const struct pd_bpf *notify,
                                                 int preserve_fds)
{
        struct pd_error err = { 0 };
        struct oci_sync_msg m;
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (recv(sync, &m, sizeof m, 0) != (ssize_t)sizeof m || m.kind != 'G')
                _exit(1);
        for (size_t i = 0; i < sizeof exec_ns / sizeof exec_ns[0]; i++)
                if (nsfd[i] >= 0 && setns(nsfd[i], exec_ns[i].flag) < 0) {
                        pd_error_set(&err, errno, "join the container's %s namespace", exec_ns[i].name);
                        child_fail(sync, &err);
                }
        if (p->terminal && oci_proc_console(console, p, &err) < 0)
                child_fail(sync, &err);
        if (pd_rlimits_set(p->rlimits, p->n_rlimits, &err) < 0)
                child_fail(sync, &err);
        if (p->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                pd_error_set(&err, errno, "set no_new_privs");
                child_fail(sync, &err);
        }
        if (oci_proc_set_lsm(p, &err) < 0)
                child_fail(sync, &err);
        if (!p->no_new_privs && oci_seccomp_install(seccomp, &err) < 0)
                child_fail(sync, &err);
        /* supervised container: this process gets a supervisor of its own. */
        if (notify && oci_hand_listener(sync, notify, &err) < 0)
                child_fail(sync, &err);
        if (oci_proc_become(p, &err) < 0)
                child_fail(sync, &err);
        if (chdir(p->cwd) < 0) {
                pd_error_set(&err, errno, "chdir to '%s'", p->cwd);
                child_fail(sync, &err);
        }
        char exe[PATH_MAX];
        if (oci_proc_find_exec(p, exe, sizeof exe, &err) < 0)
                child_fail(sync, &err);
        syscall(SYS_close_range, 3 + preserve_fds, ~0U, 1U << 2 /* CLOSE_RANGE_CLOEXEC */);
        prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
        if (p->no_new_privs && oci_seccomp_install(seccomp, &err) < 0)
                child_fail(sync, &err);
        execve(exe, p->args, p->env);
        pd_error_set(&err, errno, "exec '%s'", exe);
        child_fail(sync, &err);
}

static pid_t forward_to;
static void forward_signal(int sig)
{
        if (forward_to > 0)
                kill(forward_to, sig);
}

static int do_exec(const struct oci_global *g, const struct exec_opts *o, const char *id, int argc, char **argv,
                   pid_t *out_pid, struct pd_error *err)
{
        struct oci_state st;
        int r = oci_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        json_t *pj = NULL;
        struct oci_process p;
        int nsfd[sizeof exec_ns / sizeof exec_ns[0]];
        int sv[2] = { -1, -1 }, console = -1, pidns = -1, own_pidns = -1;
        struct pd_bpf bpf = { 0 }, notify_bpf = { 0 };
        char uid_map[64] = "";
        bool supervised = false;
        for (size_t i = 0; i < sizeof nsfd / sizeof nsfd[0]; i++)
                nsfd[i] = -1;
        memset(&p, 0, sizeof p);
        enum oci_status s = oci_state_status(&st);
        if (s != OCI_RUNNING && s != OCI_CREATED) {
                r = pd_error_setx(err, EINVAL, "container '%s' is %s: cannot exec", id, oci_status_name(s));
                goto out;
        }
        if (!st.config) {
                r = pd_error_setx(err, EIO, "container '%s': its config copy is missing", id);
                goto out;
        }
        if ((r = build_process(o, st.config, argc, argv, &pj, err)) < 0 || (r = oci_process_parse(pj, &p, err)) < 0)
                goto out;
        if (oci_vm_is(st.config)) {
                r = oci_vm_exec(&st, &p, o->pid_file, out_pid, err);
                goto out;
        }
        json_t *iso = json_object_get(json_object_get(st.config, "annotations"), "run.oci.paddock.isolation");
        supervised = json_is_string(iso) && strcmp(json_string_value(iso), "supervised") == 0;
        if (supervised) {
                json_t *m0 = json_array_get(json_object_get(json_object_get(st.config, "linux"), "uidMappings"), 0);
                snprintf(uid_map, sizeof uid_map, "%lld %lld", json_integer_value(json_object_get(m0, "containerID")),
                         json_integer_value(json_object_get(m0, "hostID")));
                p.no_new_privs = true;
                struct pd_seccomp_opts so = { .notify = true };
                if ((r = pd_seccomp_load(NULL, &so, &notify_bpf, err)) < 0)
                        goto out;
        }
        if (p.terminal && !o->console_socket) {
                r = pd_error_setx(err, EINVAL, "a terminal needs --console-socket");
                goto out;
        }
        if (p.terminal && (console = r = oci_console_connect(o->console_socket, err)) < 0)
                goto out;
        for (size_t i = 0; i < sizeof exec_ns / sizeof exec_ns[0]; i++) {
                if (same_ns(st.pid, exec_ns[i].name))
                        continue;
                char path[64];
                snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)st.pid, exec_ns[i].name);
                if ((nsfd[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                        r = pd_error_set(err, errno, "open '%s'", path);
                        goto out;
                }
        }
        if (!same_ns(st.pid, "pid")) {
                /* Only for the exec'd child: helpers started later (a
                 * supervisor reading /proc by pid) must stay in ours. */
                own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
                if (own_pidns < 0) {
                        r = pd_error_set(err, errno, "open /proc/self/ns/pid");
                        goto out;
                }
                char path[64];
                snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)st.pid);
                pidns = open(path, O_RDONLY | O_CLOEXEC);
                if (pidns < 0 || setns(pidns, CLONE_NEWPID) < 0) {
                        r = pd_error_set(err, errno, "join the container's pid namespace");
                        goto out;
                }
        }
        /* The init may have died while we opened its namespaces. */
        if (!oci_pid_alive(st.pid, st.pid_start)) {
                r = pd_error_setx(err, ESRCH, "container '%s' stopped", id);
                goto out;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = pd_error_set(err, errno, "socketpair");
                goto out;
        }
        if ((r = oci_seccomp_prepare(json_object_get(json_object_get(st.config, "linux"), "seccomp"), g->root, &bpf,
                                     err)) < 0)
                goto out;
        pid_t pid = fork();
        if (pid < 0) {
                r = pd_error_set(err, errno, "fork");
                goto out;
        }
        if (pid == 0) {
                close(sv[0]);
                exec_child(sv[1], console, nsfd, &p, &bpf, supervised ? &notify_bpf : NULL, o->preserve_fds);
        }
        close(sv[1]);
        sv[1] = -1;
        if (own_pidns >= 0 && setns(own_pidns, CLONE_NEWPID) < 0) {
                r = pd_error_set(err, errno, "return to the runtime's pid namespace");
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                goto out;
        }
        struct oci_sync_msg m = { .kind = 'G', .pid = pid };
        if ((r = oci_cgroup_enter(st.cgroup, pid, err)) < 0 || send(sv[0], &m, sizeof m, MSG_NOSIGNAL) < 0) {
                if (r >= 0)
                        r = pd_error_set(err, errno, "signal the exec child");
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                goto out;
        }
        ssize_t n;
        int lfd = -1;
        while ((n = oci_recv_msg(sv[0], &m, &lfd)) > 0 && m.kind == 'L') {
                pid_t sp;
                uint64_t ss;
                r = oci_supervisor_start(&st, uid_map, lfd, &sp, &ss, err);
                lfd = -1;
                m = (struct oci_sync_msg){ .kind = 'G' };
                if (r < 0 || send(sv[0], &m, sizeof m, MSG_NOSIGNAL) < 0) {
                        if (r >= 0)
                                r = pd_error_set(err, errno, "signal the exec child");
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                        goto out;
                }
        }
        if (n > 0) {
                m.msg[sizeof m.msg - 1] = '\0';
                r = pd_error_setx(err, m.code > 0 ? m.code : EIO, "%s", m.msg);
                waitpid(pid, NULL, 0);
                goto out;
        }
        if (o->pid_file) {
                char tmp[PATH_MAX], buf[32];
                snprintf(tmp, sizeof tmp, "%s.tmp%d", o->pid_file, (int)getpid());
                int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                int k = snprintf(buf, sizeof buf, "%d", (int)pid);
                if (fd < 0 || pd_write_all(fd, buf, (size_t)k) < 0 || rename(tmp, o->pid_file) < 0) {
                        r = pd_error_set(err, errno, "pid file '%s'", o->pid_file);
                        if (fd >= 0)
                                close(fd);
                        goto out;
                }
                close(fd);
        }
        *out_pid = pid;
        r = 0;
out:
        if (sv[0] >= 0)
                close(sv[0]);
        if (sv[1] >= 0)
                close(sv[1]);
        if (console >= 0)
                close(console);
        if (pidns >= 0)
                close(pidns);
        if (own_pidns >= 0)
                close(own_pidns);
        for (size_t i = 0; i < sizeof nsfd / sizeof nsfd[0]; i++)
                if (nsfd[i] >= 0)
                        close(nsfd[i]);
        free(p.args);
        free(p.env);
        free(p.gids);
        free(p.rlimits);
        json_decref(pj);
        pd_bpf_free(&bpf);
        pd_bpf_free(&notify_bpf);
        oci_state_free(&st);
        return r;
}

int oci_cmd_exec(const struct oci_global *g, int argc, char **argv)
{
        static const struct option opts[] = {
                { "process", required_argument, NULL, 'p' }, { "detach", no_argument, NULL, 'd' },
                { "pid-file", required_argument, NULL, 'P' }, { "tty", no_argument, NULL, 't' },
                { "console-socket", required_argument, NULL, 'c' }, { "cwd", required_argument, NULL, 'w' },
                { "env", required_argument, NULL, 'e' },     { "user", required_argument, NULL, 'u' },
                { "cap", required_argument, NULL, 'C' },     { "no-new-privs", no_argument, NULL, 'n' },
                { "preserve-fds", required_argument, NULL, 'f' }, { "additional-gids", required_argument, NULL, 'g' },
                { "process-label", required_argument, NULL, 'L' }, { "apparmor", required_argument, NULL, 'A' },
                { "ignore-paused", no_argument, NULL, 'I' }, { "cgroup", required_argument, NULL, 'G' },
                { NULL, 0, NULL, 0 },
        };
        struct pd_error err = { 0 };
        struct exec_opts o = { .env = json_array(), .caps = json_array(), .gids = json_array() };
        int c, rc = 1;
        /* "+": the command after the id keeps its own options. */
        while ((c = getopt_long_only(argc, argv, "+p:dtw:e:u:g:", opts, NULL)) != -1) {
                switch (c) {
                case 'p': o.process = optarg; break;
                case 'd': o.detach = true; break;
                case 'P': o.pid_file = optarg; break;
                case 't': o.tty = o.tty_set = true; break;
                case 'c': o.console_socket = optarg; break;
                case 'w': o.cwd = optarg; break;
                case 'e': json_array_append_new(o.env, json_string(optarg)); break;
                case 'u': o.user = optarg; break;
                case 'C': json_array_append_new(o.caps, json_string(optarg)); break;
                case 'n': o.nnp = true; break;
                case 'f': o.preserve_fds = atoi(optarg); break;
                case 'g': json_array_append_new(o.gids, json_integer(atoi(optarg))); break;
                case 'L': case 'A': case 'I': case 'G': break;
                default:
                        pd_error_setx(&err, EINVAL, "usage: exec [options] ID [COMMAND ARGS...]");
                        goto out;
                }
        }
        if (optind >= argc) {
                pd_error_setx(&err, EINVAL, "exec: container id missing");
                goto out;
        }
        const char *id = argv[optind];
        if (!o.process && optind + 1 >= argc) {
                pd_error_setx(&err, EINVAL, "exec: a command or --process FILE is required");
                goto out;
        }
        pid_t pid;
        if (do_exec(g, &o, id, argc - optind - 1, argv + optind + 1, &pid, &err) < 0)
                goto out;
        if (o.detach) {
                rc = 0;
                goto out;
        }
        forward_to = pid;
        struct sigaction sa = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
        int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
                sigaction(sigs[i], &sa, NULL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        json_decref(o.env);
        json_decref(o.caps);
        json_decref(o.gids);
        return rc;
out:
        if (rc)
                oci_fail(&err);
        json_decref(o.env);
        json_decref(o.caps);
        json_decref(o.gids);
        return rc;
}
