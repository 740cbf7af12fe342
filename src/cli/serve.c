/* paddock serve: the sandbox server (docs/api.md), and the local admin
 * verbs that work on its state directory directly: `paddock key` and
 * `paddock template`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "jail/caps.h"
#include "lib/agentpath.h"
#include "server/core/manager.h"
#include "server/core/server.h"
#include "server/core/store.h"
#include "server/routes.h"
#include "lib/template.h"
#include "lib/util.h"
#include "vm/vm.h"

extern char **environ;

static int parse_uint(const char *opt, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || end == s || *end || v < lo || v > hi || s[0] == '-') {
                pd_cli_error("%s: invalid value '%s' (%u to %u)", opt, s, lo, hi);
                return -1;
        }
        *out = (unsigned)v;
        return 0;
}

/* Open the state dir and its database; messages go to stderr. */
static int open_state(const char *dir, struct pd_state *st, struct pd_store **store)
{
        struct pd_error err = { 0 };
        if (pd_state_open(dir, st, &err) < 0) {
                pd_cli_error("%s", err.msg);
                return -1;
        }
        if (pd_store_open(st->dir, store, &err) < 0) {
                pd_cli_error("%s", err.msg);
                pd_state_close(st);
                return -1;
        }
        return 0;
}

/* Write the first key where the README's command can show it (0600). */
static int write_key_file(const struct pd_state *st, const char *key, struct pd_error *err)
{
        char tmp[64];
        snprintf(tmp, sizeof tmp, ".api-key.%d", (int)getpid());
        _pd_cleanup_close_ int fd = openat(st->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s/api-key'", st->dir);
        char line[PD_KEY_TEXT_MAX + 2];
        int n = snprintf(line, sizeof line, "%s\n", key);
        int r = pd_write_all(fd, line, (size_t)n);
        if (r < 0 || fsync(fd) < 0 || renameat(st->dirfd, tmp, st->dirfd, "api-key") < 0) {
                r = pd_error_set(err, r < 0 ? -r : errno, "write '%s/api-key'", st->dir);
                unlinkat(st->dirfd, tmp, 0);
                return r;
        }
        return 0;
}

static void *stop_watchdog(void *arg)
{
        (void)arg;
        sleep(10);
        pd_log("warn", "open connections did not end within 10s; exiting anyway (sandboxes keep running)");
        _exit(0);
}

static void serve_usage(FILE *f)
{
        fprintf(f,
                "usage: paddock serve [OPTIONS]\n"
                "Run the sandbox server (HTTP API, docs/api.md) in the foreground.\n\n"
                "  --listen ADDR:PORT     address to listen on (default 127.0.0.1:49982)\n"
                "  --state-dir DIR        state directory (default %s)\n"
                "  --pool N               warm sandboxes per template and limits (default 2,\n"
                "                         0 = none)\n"
                "  --max-sandboxes N      sandboxes in all (default 1000)\n"
                "  --max-per-key N        sandboxes per API key (default 100)\n"
                "  --domain D             domain of sandbox ports: <port>-<id>.D reaches a port\n"
                "                         inside a sandbox (default localhost, given out with\n"
                "                         the server's port unless D names one; docs/api.md)\n"
                "  --net-uplink UPLINK    where sandbox traffic leaves (the router's uplink;\n"
                "                         docs/network.md): auto (default: relay, else\n"
                "                         pasta; traffic leaves as the host's own sockets),\n"
                "                         relay (TCP relayed, the rest through slirp4netns),\n"
                "                         slirp4netns, pasta, none, netns:PATH or\n"
                "                         IFACE:ADDR/PREFIX:GW\n"
                "  --net-resolver IP[,IP] upstream DNS resolvers for paddock's resolver\n"
                "                         (default: the host's, from /etc/resolv.conf)\n"
                "  --e2b-network open|none  open (default): E2B creates get the internet\n"
                "                         unless they turn it off, as on E2B; none: no E2B\n"
                "                         sandbox gets a network (asking for one is refused)\n"
                "  --template-registry HOST[:PORT]\n"
                "                         a registry POST /api/v1/templates may pull from\n"
                "                         (repeatable; default none: server-side pulls refused)\n"
                "  --template-upload-max SIZE\n"
                "                         the largest image archive a key may upload as a\n"
                "                         template (default 4G)\n"
                "  --destroy-on-exit      destroy every sandbox on SIGTERM/SIGINT (default:\n"
                "                         keep them running; the next server adopts them)\n"
                "  --audit-retention DAYS keep the audit log of a deleted sandbox DAYS days\n"
                "                         after its last event, then remove it (default 7;\n"
                "                         0: at the next hourly sweep or start)\n"
                "  --log-level L          error, warn, info (default) or debug\n"
                "  --access-log FILE|-    one line per request (time, key id, method, route,\n"
                "                         status, bytes, duration; never a key or a body) to\n"
                "                         FILE or stderr (-); without it, stderr at debug\n",
                PD_DEFAULT_STATE_DIR);
}

int pd_cmd_serve(int argc, char **argv)
{
        enum { O_LISTEN = 256, O_STATE, O_POOL, O_MAX, O_MAXKEY, O_DESTROY, O_DOMAIN, O_UPLINK, O_RESOLVER,
               O_E2BNET, O_PRINT_ROUTES, O_TPLREG, O_LOGLEVEL, O_ACCESSLOG, O_AUDITRET, O_TPLMAX };
        static const struct option opts[] = {
                { "listen", required_argument, NULL, O_LISTEN },
                { "state-dir", required_argument, NULL, O_STATE },
                { "pool", required_argument, NULL, O_POOL },
                { "max-sandboxes", required_argument, NULL, O_MAX },
                { "max-per-key", required_argument, NULL, O_MAXKEY },
                { "destroy-on-exit", no_argument, NULL, O_DESTROY },
                { "domain", required_argument, NULL, O_DOMAIN },
                { "template-upload-max", required_argument, NULL, O_TPLMAX },
                { "net-uplink", required_argument, NULL, O_UPLINK },
                { "net-resolver", required_argument, NULL, O_RESOLVER },
                { "e2b-network", required_argument, NULL, O_E2BNET },
                { "template-registry", required_argument, NULL, O_TPLREG },
                { "log-level", required_argument, NULL, O_LOGLEVEL },
                { "access-log", required_argument, NULL, O_ACCESSLOG },
                { "audit-retention", required_argument, NULL, O_AUDITRET },
                /* hidden: the registered routes, one a line (tests/server/test_openapi.py) */
                { "print-routes", no_argument, NULL, O_PRINT_ROUTES },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct pd_server_config cfg = {
                .domain = "localhost",
                .listen_addr = "127.0.0.1:49982",
                .state_dir = pd_state_dir_default(),
                .pool_size = 2,
                .max_sandboxes = 1000,
                .max_per_key = 100,
                .default_timeout_s = 300,
                .audit_retention_days = 7,
        };
        static const char *registries[32];
        unsigned n_registries = 0;
        int c;
        bool print_routes = false;
        const char *access_log = NULL;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case O_PRINT_ROUTES: print_routes = true; break;
                case O_LISTEN: cfg.listen_addr = optarg; break;
                case O_STATE: cfg.state_dir = optarg; break;
                case O_DOMAIN:
                        if (!*optarg || strlen(optarg) > 200 || strpbrk(optarg, "/ \t\r\n")) {
                                fprintf(stderr, "paddock serve: --domain '%s': expected a host name\n", optarg);
                                return PD_EXIT_PADDOCK;
                        }
                        cfg.domain = optarg;
                        break;
                case O_POOL:
                        if (parse_uint("--pool", optarg, 0, 64, &cfg.pool_size) < 0)
                                return PD_EXIT_PADDOCK;
                        break;
                case O_MAX:
                        if (parse_uint("--max-sandboxes", optarg, 1, 100000, &cfg.max_sandboxes) < 0)
                                return PD_EXIT_PADDOCK;
                        break;
                case O_MAXKEY:
                        if (parse_uint("--max-per-key", optarg, 1, 100000, &cfg.max_per_key) < 0)
                                return PD_EXIT_PADDOCK;
                        break;
                case O_DESTROY: cfg.destroy_on_exit = true; break;
                case O_UPLINK:
                        if (strncmp(optarg, "netns:/", 7) && !strchr(optarg, ':') && strcmp(optarg, "auto") &&
                            strcmp(optarg, "pasta") && strcmp(optarg, "slirp4netns") && strcmp(optarg, "relay") &&
                            strcmp(optarg, "none")) {
                                fprintf(stderr, "paddock serve: --net-uplink '%s': expected auto, relay, pasta, "
                                                "slirp4netns, none, netns:/PATH or IFACE:ADDR/PREFIX:GATEWAY\n",
                                        optarg);
                                return PD_EXIT_PADDOCK;
                        }
                        cfg.net_uplink = optarg;
                        break;
                case O_RESOLVER: cfg.net_resolver = optarg; break;
                case O_E2BNET:
                        if (strcmp(optarg, "open") && strcmp(optarg, "none")) {
                                fprintf(stderr, "paddock serve: --e2b-network '%s': expected open or none\n", optarg);
                                return PD_EXIT_PADDOCK;
                        }
                        cfg.e2b_network = optarg;
                        break;
                case O_TPLREG:
                        /* a host[:port] as image references name it */
                        if (!*optarg || strlen(optarg) > 253 || strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
                                                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") !=
                                                                         strlen(optarg)) {
                                fprintf(stderr, "paddock serve: --template-registry '%s': expected HOST[:PORT]\n",
                                        optarg);
                                return PD_EXIT_PADDOCK;
                        }
                        if (n_registries == PD_ARRAY_SIZE(registries)) {
                                fprintf(stderr, "paddock serve: at most %zu --template-registry\n",
                                        PD_ARRAY_SIZE(registries));
                                return PD_EXIT_PADDOCK;
                        }
                        registries[n_registries++] = optarg;
                        cfg.template_registries = registries;
                        cfg.n_template_registries = n_registries;
                        break;
                case O_TPLMAX: {
                        struct pd_error e = { 0 };
                        if (pd_parse_size(optarg, &cfg.template_upload_max, &e) < 0 || !cfg.template_upload_max) {
                                pd_cli_error("serve: --template-upload-max '%s': %s", optarg,
                                             e.msg[0] ? e.msg : "must be more than 0");
                                return PD_EXIT_PADDOCK;
                        }
                        break;
                }
                case O_LOGLEVEL:
                        if (pd_log_set_level(optarg) < 0) {
                                pd_cli_error("serve: --log-level '%s': expected error, warn, info or debug", optarg);
                                return PD_EXIT_PADDOCK;
                        }
                        break;
                case O_ACCESSLOG: access_log = optarg; break;
                case O_AUDITRET:
                        if (parse_uint("--audit-retention", optarg, 0, 36500, &cfg.audit_retention_days) < 0)
                                return PD_EXIT_PADDOCK;
                        break;
                case 'h': serve_usage(stdout); return 0;
                default:
                        pd_cli_error("serve: unknown option '%s' or missing value (see paddock serve --help)",
                                     argv[optind - 1]);
                        return PD_EXIT_PADDOCK;
                }
        }
        if (optind < argc) {
                pd_cli_error("serve: unexpected argument '%s'", argv[optind]);
                return PD_EXIT_PADDOCK;
        }
        static struct pd_server srv;
        struct pd_error err = { 0 };
        if (pd_server_routes(&srv, &err) < 0) {
                pd_cli_error("serve: %s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        if (print_routes) {
                pd_http_print_routes(&srv, stdout);
                return fflush(stdout) == 0 ? 0 : PD_EXIT_PADDOCK;
        }
        if (access_log && pd_access_log_open(access_log, &err) < 0) {
                pd_cli_error("serve: %s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        if (geteuid() != 0)
                pd_cli_error("warning: not root; the container tier needs root, sandbox creation will fail");

        /* Signals are taken by sigwait below; block them before any thread
         * exists so every thread inherits the mask. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        /* ~8 fds per sandbox: 1024 would end near 120 sandboxes (accept's
         * EMFILE leaves new clients unanswered) */
        pd_rlimits_raise_nofile();

        /* E2B's own default: the internet, now that egress works out of
         * the box (the default uplink) */
        if (!cfg.e2b_network)
                cfg.e2b_network = "open";
        srv.cfg = cfg;
        srv.audit_dirfd = -1;
        pthread_mutex_init(&srv.lock, NULL);
        if (open_state(cfg.state_dir, &srv.state, &srv.store) < 0)
                return PD_EXIT_PADDOCK;
        srv.cfg.state_dir = srv.state.dir;
        /* One server per state dir: two would adopt the same sandboxes. */
        int lockfd = openat(srv.state.dirfd, "serve.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
                pd_cli_error("another paddock serve is running on state directory %s", srv.state.dir);
                return PD_EXIT_PADDOCK;
        }
        /* the holder's pid, for `paddock gc` to name (gc.c): the lock is
         * what says a server is alive, the pid only who it is */
        char pidtext[24];
        int pidlen = snprintf(pidtext, sizeof pidtext, "%d\n", (int)getpid());
        if (ftruncate(lockfd, 0) < 0 || pwrite(lockfd, pidtext, (size_t)pidlen, 0) != pidlen)
                pd_log("warn", "cannot write the pid into %s/serve.lock", srv.state.dir);
        /* creates keep working while the agent is rebuilt or upgraded */
        if (pd_agent_pin(srv.state.dirfd, srv.state.dir, &err) < 0) {
                pd_cli_error("serve: %s", err.msg);
                return PD_EXIT_PADDOCK;
        }

        char key[PD_KEY_TEXT_MAX] = "";
        int nkeys = pd_store_key_count(srv.store, &err);
        if (nkeys < 0) {
                pd_cli_error("%s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        /* The key is printed once, when it is made: a log or a terminal
         * scrollback of every later start would otherwise hold it. */
        bool key_file_ok = false;
        if (nkeys == 0) {
                if (pd_store_key_create(srv.store, "default", key, NULL, &err) < 0 ||
                    write_key_file(&srv.state, key, &err) < 0) {
                        pd_cli_error("first API key: %s", err.msg);
                        return PD_EXIT_PADDOCK;
                }
        } else {
                char buf[PD_KEY_TEXT_MAX + 2];
                struct pd_key k;
                if (pd_read_file_at(srv.state.dirfd, "api-key", buf, sizeof buf) > 0) {
                        buf[strcspn(buf, "\n")] = '\0';
                        key_file_ok = pd_store_key_lookup(srv.store, buf, &k) == 0;
                }
                explicit_bzero(buf, sizeof buf);
        }

        pd_log("info", "starting state_dir=%s listen=%s pool=%u", srv.state.dir, cfg.listen_addr, cfg.pool_size);
        if (pd_manager_start(&srv, &err) < 0) {
                pd_cli_error("serve: %s", err.msg);
                pd_manager_stop(&srv);
                return PD_EXIT_PADDOCK;
        }
        if (pd_http_start(&srv, &err) < 0) {
                pd_cli_error("serve: %s", err.msg);
                pd_manager_stop(&srv);
                return PD_EXIT_PADDOCK;
        }
        printf("paddock %s serving on http://%s (state %s)\n", PD_VERSION, cfg.listen_addr, srv.state.dir);
        if (key[0]) {
                printf("API key (new, also in %s/api-key): %s\n", srv.state.dir, key);
                printf("Try:\n  curl -H \"Authorization: Bearer %s\" http://%s/api/v1/sandboxes -d '{}'\n", key,
                       cfg.listen_addr);
        } else if (key_file_ok) {
                printf("API key: in %s/api-key\n", srv.state.dir);
                printf("Try:\n  curl -H \"Authorization: Bearer $(cat %s/api-key)\" http://%s/api/v1/sandboxes "
                       "-d '{}'\n", srv.state.dir, cfg.listen_addr);
        } else {
                printf("API key: create one with `paddock key create --state-dir %s`\n", srv.state.dir);
        }
        explicit_bzero(key, sizeof key);
        fflush(stdout);
        pd_log("info", "listening url=http://%s", cfg.listen_addr);

        int sig = 0;
        while (sigwait(&mask, &sig) != 0 || sig == SIGHUP)
                ;
        pd_log("info", "stopping signal=%d destroy_on_exit=%s", sig, cfg.destroy_on_exit ? "yes" : "no");
        pd_manager_begin_stop(&srv);
        /* a template build in progress (microvm assets) ends with us */
        pd_vm_builders_stop();
        /* Destroying first ends the agent connections that streaming
         * requests are blocked on, so the HTTP threads can finish. */
        if (cfg.destroy_on_exit)
                pd_manager_stop(&srv);
        pthread_t wd;
        if (pthread_create(&wd, NULL, stop_watchdog, NULL) == 0)
                pthread_detach(wd);
        pd_http_stop(&srv);
        pd_manager_stop(&srv);
        pd_store_close(srv.store);
        pd_log("info", "stopped");
        return 0;
}

/* ---- paddock key ---- */

int pd_cmd_key(int argc, char **argv)
{
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "name", required_argument, NULL, 'n' },
                { "admin", no_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *state_dir = pd_state_dir_default(), *name = NULL;
        bool admin = false;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 's': state_dir = optarg; break;
                case 'n': name = optarg; break;
                case 'a': admin = true; break;
                case 'h':
                        printf("usage: paddock key create [--name NAME] [--admin] | list | revoke ID\n"
                               "         [--state-dir DIR]\n"
                               "Manage the API keys of a state directory (works while the server runs).\n"
                               "An --admin key may also manage the shared templates (docs/templates.md).\n");
                        return 0;
                default:
                        pd_cli_error("key: unknown option '%s' or missing value", argv[optind - 1]);
                        return PD_EXIT_PADDOCK;
                }
        }
        if (optind >= argc) {
                pd_cli_error("key: expected create, list or revoke ID");
                return PD_EXIT_PADDOCK;
        }
        const char *sub = argv[optind];
        if ((name || admin) && strcmp(sub, "create")) {
                pd_cli_error("key: --name and --admin only go with create");
                return PD_EXIT_PADDOCK;
        }
        if (name && (strlen(name) > 64 || !*name)) {
                pd_cli_error("key: --name must be 1 to 64 characters");
                return PD_EXIT_PADDOCK;
        }
        int want = !strcmp(sub, "revoke") ? 2 : 1;
        if ((strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "revoke")) || argc - optind != want) {
                pd_cli_error("key: expected create [--name N] [--admin], list or revoke ID");
                return PD_EXIT_PADDOCK;
        }
        struct pd_state st;
        struct pd_store *store;
        if (open_state(state_dir, &st, &store) < 0)
                return PD_EXIT_PADDOCK;
        struct pd_error err = { 0 };
        int r = 0;
        if (!strcmp(sub, "create")) {
                char key[PD_KEY_TEXT_MAX];
                struct pd_key k;
                r = pd_store_key_create(store, name, key, &k, &err);
                /* made, then marked: a failure of the mark revokes the key
                 * rather than leave a plain key the operator thinks admin */
                if (r == 0 && admin && (r = pd_store_key_set_admin(store, k.id, &err)) < 0)
                        (void)pd_store_key_revoke(store, k.id, NULL);
                if (r == 0)
                        printf("%s\n", key);
                explicit_bzero(key, sizeof key);
        } else if (!strcmp(sub, "list")) {
                json_t *arr;
                r = pd_store_key_list(store, &arr, &err);
                if (r == 0) {
                        size_t i;
                        json_t *k;
                        /* the columns scripts read stay where they were; an
                         * admin key says so after them */
                        printf("%-16s  %-24s  %s\n", "ID", "NAME", "CREATED");
                        json_array_foreach(arr, i, k)
                                printf("%-16s  %-24s  %s%s\n", json_string_value(json_object_get(k, "id")),
                                       json_string_value(json_object_get(k, "name")),
                                       json_string_value(json_object_get(k, "created_at")),
                                       json_is_true(json_object_get(k, "admin")) ? "  admin" : "");
                        json_decref(arr);
                }
        } else {
                r = pd_store_key_revoke(store, argv[optind + 1], &err);
                if (r == 0)
                        printf("revoked %s\n", argv[optind + 1]);
        }
        pd_store_close(store);
        pd_state_close(&st);
        if (r < 0) {
                pd_cli_error("key %s: %s", sub, err.msg);
                return PD_EXIT_PADDOCK;
        }
        return 0;
}
