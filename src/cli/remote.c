/* The client verbs: talk to a running `paddock serve` over its HTTP API
 * (docs/api.md, docs/cli.md). This file: dispatch, global options, and the
 * verbs that are one call and a format (create ls kill stats audit pause
 * resume timeout); exec and logs in remote_exec.c, cp in remote_cp.c. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "lib/util.h"
#include "net/policy.h"

#define MAX_KV 256

int pd_remote_usage_error(const char *verb, const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "paddock: %s: ", verb);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see paddock %s --help)\n", verb);
        return PD_RC_USAGE;
}

int pd_remote_check_id(const char *verb, const char *id)
{
        if (pd_rc_id_ok(id))
                return 0;
        pd_cli_error("%s: '%s' is not a sandbox id ([a-z0-9]{20})", verb, id);
        return PD_RC_USAGE;
}

static int bad_option(const char *verb, char **argv)
{
        if (optopt)
                return pd_remote_usage_error(verb, "unknown option '-%c' or missing value", optopt);
        return pd_remote_usage_error(verb, "unknown option '%s' or missing value", argv[optind - 1]);
}

/* K=V into an object; false (after a message) if there is no '='. */
static bool put_kv(json_t *o, const char *verb, const char *what, const char *arg)
{
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
                pd_remote_usage_error(verb, "%s '%s' is not KEY=VALUE", what, arg);
                return false;
        }
        json_object_set_new(o, strndupa(arg, (size_t)(eq - arg)), json_string(eq + 1));
        return true;
}

/* ---- create ---- */

static void create_usage(FILE *f)
{
        fprintf(f, "usage: paddock create [OPTIONS]\n"
                   "Create a sandbox on the server and print its id.\n\n"
                   "  --template NAME    registered template or snapshot (default base)\n"
                   "  --isolation TIER   container (default), process (no namespaces: Landlock,\n"
                   "                     seccomp, a uid and cgroup of its own), supervised\n"
                   "                     (brokered opens and connects, audited), or microvm (a\n"
                   "                     QEMU guest); docs/security.md, docs/microvm.md\n"
                   "  --memory SIZE      memory limit (default 512M)\n"
                   "  --cpus N           CPU limit, fractions allowed (default 1)\n"
                   "  --pids N           process limit (default 512)\n"
                   "  --disk SIZE        writable layer size (default 1G)\n"
                   "  --timeout DURATION remove the sandbox after this long (default 300s)\n"
                   "  --net MODE         none (default), open (the internet, never metadata, LAN or\n"
                   "                     host) or policy (only what --allow names; docs/network.md)\n"
                   "  --allow RULE       TARGET[:PORTS[/PROTO]]: CIDR, address, domain, *.domain\n"
                   "  --deny RULE        same form; deny wins over allow\n"
                   "  -e, --env K=V      variable for every command (K alone: take it from here)\n"
                   "  --metadata K=V     a label (filter with paddock ls --metadata)\n"
                   "  -v, --volume ...   refused: the server takes no host paths (use paddock run)\n"
                   "  --json             print the whole sandbox object\n"
                   "  --url URL          server (default $PADDOCK_URL)\n"
                   "  --key KEY          API key (default $PADDOCK_API_KEY, else the local\n"
                   "                     state dir's api-key file; --verbose says when)\n"
                   "Per-command options of paddock run (-w, -u, -t) are paddock exec's.\n");
}

static int cmd_create(const struct pd_rc *rc, int argc, char **argv)
{
        enum { O_TEMPLATE = 256, O_MEMORY, O_CPUS, O_PIDS, O_DISK, O_TIMEOUT, O_ISO, O_META, O_JSON, O_NET,
               O_ALLOW, O_DENY };
        static const struct option opts[] = {
                { "template", required_argument, NULL, O_TEMPLATE }, { "memory", required_argument, NULL, O_MEMORY },
                { "cpus", required_argument, NULL, O_CPUS },         { "pids", required_argument, NULL, O_PIDS },
                { "disk", required_argument, NULL, O_DISK },         { "timeout", required_argument, NULL, O_TIMEOUT },
                { "isolation", required_argument, NULL, O_ISO },     { "env", required_argument, NULL, 'e' },
                { "metadata", required_argument, NULL, O_META },     { "json", no_argument, NULL, O_JSON },
                { "volume", required_argument, NULL, 'v' },          { "help", no_argument, NULL, 'h' },
                { "net", required_argument, NULL, O_NET },           { "allow", required_argument, NULL, O_ALLOW },
                { "deny", required_argument, NULL, O_DENY },
                { 0 },
        };
        json_t *body = json_object(), *env = json_object(), *meta = json_object(), *net = json_object();
        struct pd_error err = { 0 };
        bool as_json = false;
        uint64_t v;
        int c, ret = PD_RC_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+e:v:h", opts, NULL)) != -1) {
                switch (c) {
                case 'v':
                        /* a host path is never accepted over HTTP (docs/api.md) */
                        pd_cli_error("create: -v %s: volumes are not available through the server (it never "
                                     "takes a host path); use paddock run -v", optarg);
                        goto out;
                case O_TEMPLATE: json_object_set_new(body, "template", json_string(optarg)); break;
                case O_ISO: json_object_set_new(body, "isolation", json_string(optarg)); break;
                case O_MEMORY:
                        if (pd_parse_size(optarg, &v, &err) < 0) {
                                pd_remote_usage_error("create", "--memory: %s", err.msg);
                                goto out;
                        }
                        json_object_set_new(body, "memory_mb", json_integer((json_int_t)(v >> 20)));
                        break;
                case O_DISK:
                        if (pd_parse_size(optarg, &v, &err) < 0) {
                                pd_remote_usage_error("create", "--disk: %s", err.msg);
                                goto out;
                        }
                        json_object_set_new(body, "disk_mb", json_integer((json_int_t)(v >> 20)));
                        break;
                case O_CPUS:
                        if (pd_parse_cpus(optarg, &v, &err) < 0) {
                                pd_remote_usage_error("create", "--cpus: %s", err.msg);
                                goto out;
                        }
                        json_object_set_new(body, "cpus", json_real((double)v / 1000.0));
                        break;
                case O_PIDS: {
                        char *end;
                        long n = strtol(optarg, &end, 10);
                        if (*end || end == optarg || n < 1) {
                                pd_remote_usage_error("create", "--pids: invalid count '%s'", optarg);
                                goto out;
                        }
                        json_object_set_new(body, "pids", json_integer(n));
                        break;
                }
                case O_TIMEOUT:
                        if (pd_parse_duration_ms(optarg, &v, &err) < 0) {
                                pd_remote_usage_error("create", "--timeout: %s", err.msg);
                                goto out;
                        }
                        json_object_set_new(body, "timeout", json_integer((json_int_t)((v + 999) / 1000)));
                        break;
                case 'e':
                        if (!strchr(optarg, '=') && *optarg) {
                                /* K alone: its value here, as run and exec do */
                                if (getenv(optarg))
                                        json_object_set_new(env, optarg, json_string(getenv(optarg)));
                                break;
                        }
                        if (!put_kv(env, "create", "-e", optarg))
                                goto out;
                        break;
                case O_META:
                        if (!put_kv(meta, "create", "--metadata", optarg))
                                goto out;
                        break;
                case O_JSON: as_json = true; break;
                case O_NET:
                        if (strcmp(optarg, "none") && strcmp(optarg, "open") && strcmp(optarg, "policy")) {
                                pd_remote_usage_error("create", "--net: '%s' is not none, open or policy", optarg);
                                goto out;
                        }
                        json_object_set_new(net, "mode", json_string(optarg));
                        break;
                case O_ALLOW:
                case O_DENY: {
                        /* the rule's form is checked here, for a message
                         * naming the flag; the server checks it again */
                        const char *list = c == O_ALLOW ? "allow" : "deny";
                        char text[PD_NETPOL_RULE_TEXT_MAX + 8];
                        struct pd_netpol_rule rule;
                        snprintf(text, sizeof text, "%s:%s", list, optarg);
                        if (pd_netpol_rule_parse(text, &rule, &err) < 0) {
                                pd_remote_usage_error("create", "--%s '%s': %s", list, optarg, err.msg);
                                goto out;
                        }
                        json_t *a = json_object_get(net, list);
                        if (!a)
                                json_object_set_new(net, list, a = json_array());
                        json_array_append_new(a, json_string(optarg));
                        break;
                }
                case 'h': create_usage(stdout); ret = 0; goto out;
                default: ret = bad_option("create", argv); goto out;
                }
        }
        if (optind < argc) {
                ret = pd_remote_usage_error("create", "unexpected argument '%s'", argv[optind]);
                goto out;
        }
        if (json_object_size(env))
                json_object_set(body, "env", env);
        if (json_object_size(meta))
                json_object_set(body, "metadata", meta);
        if (json_object_size(net))
                json_object_set(body, "network", net);
        json_t *sb = NULL;
        ret = pd_rc_json(rc, "POST", "/sandboxes", body, &sb);
        if (!ret) {
                if (as_json)
                        json_dumpf(sb, stdout, JSON_INDENT(2)), putchar('\n');
                else
                        printf("%s\n", json_string_value(json_object_get(sb, "id")));
                /* what the server changed of the request (a lowered disk
                 * limit): on stderr, stdout stays the id alone */
                size_t i;
                json_t *note;
                json_array_foreach(json_object_get(sb, "notes"), i, note)
                        if (json_is_string(note))
                                fprintf(stderr, "note: %s\n", json_string_value(note));
                /* the sandbox exists; say in one line why its network
                 * reaches nothing, if it does not */
                json_t *eg = json_object_get(json_object_get(sb, "network"), "egress");
                const char *why = json_string_value(json_object_get(eg, "problem"));
                if (why)
                        fprintf(stderr, "paddock: warning: network: %s\n", why);
        }
        json_decref(sb);
out:
        json_decref(body);
        json_decref(env);
        json_decref(meta);
        json_decref(net);
        return ret;
}

/* ---- ls ---- */

static void ls_usage(FILE *f)
{
        fprintf(f, "usage: paddock ls [--state S[,S]] [--metadata K=V]... [--json]\n"
                   "List this key's sandboxes: ID TEMPLATE TIER STATE CREATED EXPIRES.\n\n"
                   "  --state S          running, paused, failed (comma list)\n"
                   "  --metadata K=V     only sandboxes with this label (repeatable: all must match)\n"
                   "  -q, --quiet        print the ids only\n"
                   "  --json             print a JSON array of sandbox objects\n");
}

/* "2026-11-29T18:41:15.044Z" as "2026-11-29 18:41:15". */
static void short_time(json_t *t, char *out, size_t n)
{
        const char *s = json_string_value(t);
        if (!s) {
                snprintf(out, n, "-");
                return;
        }
        snprintf(out, n, "%.19s", s);
        char *T = strchr(out, 'T');
        if (T)
                *T = ' ';
}

static int cmd_ls(const struct pd_rc *rc, int argc, char **argv)
{
        enum { O_STATE = 256, O_META, O_JSON };
        static const struct option opts[] = {
                { "state", required_argument, NULL, O_STATE }, { "metadata", required_argument, NULL, O_META },
                { "json", no_argument, NULL, O_JSON },          { "quiet", no_argument, NULL, 'q' },
                { "help", no_argument, NULL, 'h' },             { 0 },
        };
        char query[8192] = "";
        size_t ql = 0;
        bool as_json = false, quiet = false;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
                switch (c) {
                case O_STATE:
                case O_META: {
                        if (c == O_META && !strchr(optarg, '='))
                                return pd_remote_usage_error("ls", "--metadata '%s' is not KEY=VALUE", optarg);
                        _pd_cleanup_free_ char *e = pd_rc_escape(optarg);
                        if (!e)
                                return PD_RC_INTERNAL;
                        ql += (size_t)snprintf(query + ql, sizeof query - ql, "&%s=%s",
                                               c == O_STATE ? "state" : "metadata", e);
                        if (ql >= sizeof query)
                                return pd_remote_usage_error("ls", "filters too long");
                        break;
                }
                case O_JSON: as_json = true; break;
                case 'q': quiet = true; break;
                case 'h': ls_usage(stdout); return 0;
                default: return bad_option("ls", argv);
                }
        }
        if (optind < argc)
                return pd_remote_usage_error("ls", "unexpected argument '%s'", argv[optind]);
        json_t *all = json_array();
        char cursor[64] = "";
        for (;;) {
                char path[8400];
                snprintf(path, sizeof path, "/sandboxes?limit=1000%s%s%s", query, cursor[0] ? "&cursor=" : "", cursor);
                json_t *page = NULL;
                int k = pd_rc_json(rc, "GET", path, NULL, &page);
                if (k) {
                        json_decref(all);
                        return k;
                }
                json_array_extend(all, json_object_get(page, "sandboxes"));
                const char *next = json_string_value(json_object_get(page, "next_cursor"));
                snprintf(cursor, sizeof cursor, "%s", next && pd_rc_id_ok(next) ? next : "");
                json_decref(page);
                if (!cursor[0])
                        break;
        }
        size_t i;
        json_t *sb;
        if (as_json) {
                json_dumpf(all, stdout, JSON_INDENT(2));
                putchar('\n');
        } else if (quiet) {
                json_array_foreach(all, i, sb)
                        printf("%s\n", json_string_value(json_object_get(sb, "id")));
        } else {
                /* columns as wide as their longest value (template names
                 * run to 64 characters) */
                int wt = 8, wi = 4, ws = 5;
                json_array_foreach(all, i, sb) {
                        const char *t = json_string_value(json_object_get(sb, "template"));
                        const char *iso = json_string_value(json_object_get(sb, "isolation"));
                        const char *st = json_string_value(json_object_get(sb, "state"));
                        wt = t && (int)strlen(t) > wt ? (int)strlen(t) : wt;
                        wi = iso && (int)strlen(iso) > wi ? (int)strlen(iso) : wi;
                        ws = st && (int)strlen(st) > ws ? (int)strlen(st) : ws;
                }
                printf("%-20s  %-*s  %-*s  %-*s  %-19s  %s\n", "ID", wt, "TEMPLATE", wi, "TIER", ws, "STATE", "CREATED",
                       "EXPIRES");
                json_array_foreach(all, i, sb) {
                        char created[32], expires[32];
                        short_time(json_object_get(sb, "created_at"), created, sizeof created);
                        short_time(json_object_get(sb, "expires_at"), expires, sizeof expires);
                        const char *t = json_string_value(json_object_get(sb, "template"));
                        const char *iso = json_string_value(json_object_get(sb, "isolation"));
                        const char *st = json_string_value(json_object_get(sb, "state"));
                        printf("%-20s  %-*s  %-*s  %-*s  %-19s  %s\n", json_string_value(json_object_get(sb, "id")),
                               wt, t ? t : "-", wi, iso ? iso : "-", ws, st ? st : "-", created, expires);
                }
        }
        json_decref(all);
        return 0;
}

/* ---- kill pause resume timeout stats ---- */

/* Verbs with only ids and --help/--json: returns optind or -status. */
static int simple_opts(const char *verb, int argc, char **argv, bool *as_json, const char *usage)
{
        static const struct option opts[] = {
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 },
        };
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 'j':
                        if (!as_json)
                                return -bad_option(verb, argv);
                        *as_json = true;
                        break;
                case 'h': fputs(usage, stdout); return -256;
                default: return -bad_option(verb, argv);
                }
        }
        return optind;
}

static int simple_start(const char *verb, int argc, char **argv, bool *as_json, const char *usage, int want)
{
        int i = simple_opts(verb, argc, argv, as_json, usage);
        if (i < 0)
                return i;
        if (argc - i < want || (want == 1 && argc - i > 1))
                return -pd_remote_usage_error(verb, argc - i < want ? "missing sandbox id" : "too many arguments");
        for (int k = i; k < argc && k < i + want; k++)
                if (pd_remote_check_id(verb, argv[k]))
                        return -PD_RC_USAGE;
        return i;
}

#define DONE(i) ((i) == -256 ? 0 : -(i))

static int cmd_kill(const struct pd_rc *rc, int argc, char **argv)
{
        int i = simple_opts("kill", argc, argv, NULL,
                            "usage: paddock kill ID...\nDelete sandboxes (their processes and files go with them).\n");
        if (i < 0)
                return DONE(i);
        if (i >= argc)
                return pd_remote_usage_error("kill", "missing sandbox id");
        return pd_remote_delete_each(rc, "kill", "/sandboxes/%s", "%s\n", pd_remote_check_id, argc - i, argv + i);
}

int pd_remote_delete_each(const struct pd_rc *rc, const char *verb, const char *path_fmt, const char *done_fmt,
                          int (*check)(const char *verb, const char *name), int n, char **names)
{
        int ret = 0;
        for (int i = 0; i < n; i++) {
                if (check(verb, names[i])) {
                        ret = ret ? ret : PD_RC_USAGE;
                        continue;
                }
                char path[160];
                snprintf(path, sizeof path, path_fmt, names[i]);
                int k = pd_rc_json(rc, "DELETE", path, NULL, NULL);
                if (k == PD_RC_UNREACHABLE)
                        return k;
                if (k)
                        ret = ret ? ret : k;
                else
                        printf(done_fmt, names[i]);
        }
        return ret;
}

static int cmd_state(const struct pd_rc *rc, const char *verb, int argc, char **argv)
{
        char usage[512];
        snprintf(usage, sizeof usage, "usage: paddock %s\n%s\n", verb,
                 !strcmp(verb, "pause")
                         ? "[--disk|--memory] ID\nStop a sandbox (its timeout stops counting): in memory, or\n"
                           "saved to disk with its memory released (microvm); by default as the tier\nprefers."
                         : "ID\nThaw a paused sandbox (its timeout starts again).");
        /* pause's --disk / --memory, taken out before the common options */
        const char *mode = NULL;
        int n = 0;
        for (int a = 0; a < argc; a++) {
                bool flag = a > 0 && !strcmp(verb, "pause") && (!strcmp(argv[a], "--disk") || !strcmp(argv[a], "--memory"));
                if (flag && mode && strcmp(mode, argv[a] + 2))
                        return pd_remote_usage_error(verb, "--disk and --memory exclude each other");
                if (flag)
                        mode = argv[a] + 2;
                else
                        argv[n++] = argv[a];
        }
        argc = n;
        int i = simple_start(verb, argc, argv, NULL, usage, 1);
        if (i < 0)
                return DONE(i);
        char path[64];
        snprintf(path, sizeof path, "/sandboxes/%s/%s", argv[i], verb);
        json_t *sb = NULL, *body = mode ? json_pack("{s:s}", "mode", mode) : NULL;
        int k = pd_rc_json(rc, "POST", path, body, &sb);
        json_decref(body);
        if (!k)
                printf("%s %s\n", argv[i], json_string_value(json_object_get(sb, "state")));
        json_decref(sb);
        return k;
}

static int cmd_timeout(const struct pd_rc *rc, int argc, char **argv)
{
        const char *usage = "usage: paddock timeout ID DURATION\n"
                            "The sandbox is removed DURATION from now (300, 300s, 5m, 1h).\n";
        int i = simple_opts("timeout", argc, argv, NULL, usage);
        if (i < 0)
                return DONE(i);
        if (argc - i != 2)
                return pd_remote_usage_error("timeout", "expected ID DURATION");
        if (pd_remote_check_id("timeout", argv[i]))
                return PD_RC_USAGE;
        struct pd_error err = { 0 };
        uint64_t ms;
        if (pd_parse_duration_ms(argv[i + 1], &ms, &err) < 0 || ms == 0)
                return pd_remote_usage_error("timeout", "invalid duration '%s'", argv[i + 1]);
        char path[64];
        snprintf(path, sizeof path, "/sandboxes/%s/timeout", argv[i]);
        json_t *body = json_pack("{s:I}", "timeout", (json_int_t)((ms + 999) / 1000)), *sb = NULL;
        int k = pd_rc_json(rc, "POST", path, body, &sb);
        if (!k) {
                const char *e = json_string_value(json_object_get(sb, "expires_at"));
                printf("%s expires %s\n", argv[i], e ? e : "(paused: counts again on resume)");
        }
        json_decref(body);
        json_decref(sb);
        return k;
}

/* snapshot ID NAME; fork ID [N] (docs/cli.md) */
static int cmd_snapshot(const struct pd_rc *rc, int argc, char **argv)
{
        const char *usage = "usage: paddock snapshot ID NAME | ls [--json] | rm NAME...\n"
                            "Save the sandbox's filesystem as snapshot NAME ([a-z0-9-]{1,64}); start\n"
                            "sandboxes from it with `paddock create --template NAME`. ls lists the\n"
                            "key's snapshots, rm removes them.\n";
        if (pd_remote_snapshot_is_admin(argc, argv))
                return pd_remote_snapshot_admin(rc, argc, argv);
        int i = simple_opts("snapshot", argc, argv, NULL, usage);
        if (i < 0)
                return DONE(i);
        if (argc - i != 2)
                return pd_remote_usage_error("snapshot", "expected ID NAME");
        if (pd_remote_check_id("snapshot", argv[i]))
                return PD_RC_USAGE;
        char path[64];
        snprintf(path, sizeof path, "/sandboxes/%s/snapshots", argv[i]);
        json_t *body = json_pack("{s:s}", "name", argv[i + 1]), *out = NULL;
        int k = pd_rc_json(rc, "POST", path, body, &out);
        if (!k)
                printf("%s\n", json_string_value(json_object_get(out, "name")));
        json_decref(body);
        json_decref(out);
        return k;
}

static int cmd_fork(const struct pd_rc *rc, int argc, char **argv)
{
        const char *usage = "usage: paddock fork ID [N]\n"
                            "Start N (default 1, at most 64) independent sandboxes from the sandbox's current\n"
                            "filesystem; prints their ids.\n";
        int i = simple_opts("fork", argc, argv, NULL, usage);
        if (i < 0)
                return DONE(i);
        if (argc - i != 1 && argc - i != 2)
                return pd_remote_usage_error("fork", "expected ID [N]");
        if (pd_remote_check_id("fork", argv[i]))
                return PD_RC_USAGE;
        long n = 1;
        if (argc - i == 2) {
                char *end;
                n = strtol(argv[i + 1], &end, 10);
                if (*end || n < 1 || n > 64)
                        return pd_remote_usage_error("fork", "N must be 1..64, not '%s'", argv[i + 1]);
        }
        char path[64];
        snprintf(path, sizeof path, "/sandboxes/%s/fork", argv[i]);
        json_t *body = json_pack("{s:I}", "count", (json_int_t)n), *out = NULL;
        int k = pd_rc_json(rc, "POST", path, body, &out);
        if (!k) {
                size_t j;
                json_t *sb;
                json_array_foreach(json_object_get(out, "sandboxes"), j, sb)
                        printf("%s\n", json_string_value(json_object_get(sb, "id")));
        }
        json_decref(body);
        json_decref(out);
        return k;
}

static void human_bytes(json_t *j, char *out, size_t n)
{
        if (!json_is_number(j)) {
                snprintf(out, n, "-");
                return;
        }
        double v = json_number_value(j);
        const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        int i = 0;
        while (v >= 1024 && i < 4)
                v /= 1024, i++;
        snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static int cmd_stats(const struct pd_rc *rc, int argc, char **argv)
{
        bool as_json = false;
        int i = simple_start("stats", argc, argv, &as_json,
                             "usage: paddock stats ID [--json]\nShow a sandbox's CPU, memory, pids and disk use.\n", 1);
        if (i < 0)
                return DONE(i);
        char path[64];
        snprintf(path, sizeof path, "/sandboxes/%s/metrics", argv[i]);
        json_t *m = NULL;
        int k = pd_rc_json(rc, "GET", path, NULL, &m);
        if (k)
                return k;
        if (as_json) {
                json_dumpf(m, stdout, JSON_INDENT(2));
                putchar('\n');
        } else {
                char a[32], b[32], p[32];
                printf("%-8s %.3f s\n", "cpu", json_number_value(json_object_get(m, "cpu_seconds")));
                human_bytes(json_object_get(m, "memory_bytes"), a, sizeof a);
                human_bytes(json_object_get(m, "memory_limit_bytes"), b, sizeof b);
                human_bytes(json_object_get(m, "memory_peak_bytes"), p, sizeof p);
                printf("%-8s %s / %s (peak %s)\n", "memory", a, b, p);
                printf("%-8s %lld / %lld\n", "pids", (long long)json_integer_value(json_object_get(m, "pids")),
                       (long long)json_integer_value(json_object_get(m, "pids_limit")));
                human_bytes(json_object_get(m, "disk_used_bytes"), a, sizeof a);
                human_bytes(json_object_get(m, "disk_limit_bytes"), b, sizeof b);
                printf("%-8s %s / %s\n", "disk", a, b);
        }
        json_decref(m);
        return 0;
}

/* ---- audit ---- */

static int out_sink(void *ctx, const char *data, size_t n)
{
        if (pd_write_all(STDOUT_FILENO, data, n) < 0)
                return -PD_RC_INTERNAL;
        return 0;
}

static int cmd_audit(const struct pd_rc *rc, int argc, char **argv)
{
        static const struct option opts[] = {
                { "follow", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, { 0 },
        };
        bool follow = false;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+fh", opts, NULL)) != -1) {
                switch (c) {
                case 'f': follow = true; break;
                case 'h':
                        printf("usage: paddock audit [-f] ID\n"
                               "Print a sandbox's audit log (JSON lines; it outlives the sandbox).\n"
                               "  -f, --follow   keep printing new events until the sandbox is gone\n");
                        return 0;
                default: return bad_option("audit", argv);
                }
        }
        if (argc - optind != 1)
                return pd_remote_usage_error("audit", argc == optind ? "missing sandbox id" : "too many arguments");
        if (pd_remote_check_id("audit", argv[optind]))
                return PD_RC_USAGE;
        char path[96];
        snprintf(path, sizeof path, "/sandboxes/%s/audit%s", argv[optind], follow ? "?follow=1" : "");
        struct pd_rc_stream s = { .path = path, .sink = out_sink };
        int k = pd_rc_stream(rc, &s);
        if (k == PD_RC_UNREACHABLE)
                return pd_rc_net_error(rc, &s);
        return k;
}

int pd_cmd_remote(const char *verb, int argc, char **argv)
{
        struct pd_rc rc;
        int k = pd_rc_init(&rc, &argc, argv);
        if (k)
                return k;
        if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
                pd_cli_error("cannot initialize libcurl");
                return PD_RC_INTERNAL;
        }
        if (!strcmp(verb, "create"))
                k = cmd_create(&rc, argc, argv);
        else if (!strcmp(verb, "ls"))
                k = cmd_ls(&rc, argc, argv);
        else if (!strcmp(verb, "exec"))
                k = pd_remote_exec(&rc, argc, argv);
        else if (!strcmp(verb, "logs"))
                k = pd_remote_logs(&rc, argc, argv);
        else if (!strcmp(verb, "cp"))
                k = pd_remote_cp(&rc, argc, argv);
        else if (!strcmp(verb, "kill"))
                k = cmd_kill(&rc, argc, argv);
        else if (!strcmp(verb, "stats"))
                k = cmd_stats(&rc, argc, argv);
        else if (!strcmp(verb, "audit"))
                k = cmd_audit(&rc, argc, argv);
        else if (!strcmp(verb, "pause") || !strcmp(verb, "resume"))
                k = cmd_state(&rc, verb, argc, argv);
        else if (!strcmp(verb, "timeout"))
                k = cmd_timeout(&rc, argc, argv);
        else if (!strcmp(verb, "snapshot"))
                k = cmd_snapshot(&rc, argc, argv);
        else if (!strcmp(verb, "fork"))
                k = cmd_fork(&rc, argc, argv);
        else if (!strcmp(verb, "port"))
                k = pd_remote_port(&rc, argc, argv);
        else {
                pd_cli_error("unknown client command '%s'", verb);
                k = PD_RC_USAGE;
        }
        fflush(stdout);
        /* no curl_global_cleanup: exec may leave a stdin thread inside a transfer */
        return k;
}
