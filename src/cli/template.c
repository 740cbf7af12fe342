/* paddock template: the local verbs on a state dir's templates
 * (docs/templates.md). Each parses, calls one src/image/ function, and
 * formats; progress goes to stderr (a live display on a terminal, plain
 * lines otherwise, JSON lines with --json), results to stdout. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "image/image.h"
#include "net/policy.h"
#include "server/core/store.h"
#include "lib/template.h"
#include "lib/util.h"

extern char **environ;

#define MAX_BUILD_ARGS 64

struct topts {
        const char *state_dir;
        const char *recipe;
        char *build_args[MAX_BUILD_ARGS];
        unsigned n_args;
        bool json, replace;
        /* hidden, for paddock serve's builds (server/api/tpl_builds.c):
         * no host sources, and the result written to a file */
        bool no_local;
        const char *status_file;
        /* hidden, for an image archive uploaded to paddock serve
         * (server/api/tpl_upload.c): pull may read that one archive
         * (oci-archive:/docker-archive:) and removes it when done */
        bool uploaded_archive;
        /* hidden, for paddock serve's builds: the registries its pulls may
         * reach, redirects included (image/egress.h) */
        bool egress_guard;
        const char *egress_allow[32];
        unsigned n_egress;
        /* build: the RUN steps' network (--net, --allow, --deny, or
         * --network-file: the JSON form, as paddock serve passes it) */
        struct pd_netpol net;
        bool net_given;
        const char *net_file;
        const char *net_uplink, *net_resolver;
};

struct display {
        bool tty, json;
        uint64_t t0_ns, last_ns;
        char layer[13];
        uint64_t layer_t0;
        bool layer_done;
        uint64_t dl_t0, dl_first;       /* the download's first report */
};

static void human(uint64_t b, char *out, size_t size)
{
        if (b >= (1ull << 30))
                snprintf(out, size, "%.1f GiB", (double)b / (1 << 30));
        else if (b >= (1ull << 20))
                snprintf(out, size, "%.1f MiB", (double)b / (1 << 20));
        else if (b >= 1024)
                snprintf(out, size, "%.1f KiB", (double)b / 1024);
        else
                snprintf(out, size, "%llu B", (unsigned long long)b);
}

static void on_progress(const struct pd_image_event *ev, void *arg)
{
        struct display *d = arg;
        if (d->json) {
                static const char *const kinds[] = { "step", "line", "layer", "cached", "download" };
                json_t *j = json_pack("{s:s}", "event", kinds[ev->kind]);
                if (ev->text)
                        json_object_set_new(j, "text", json_string(ev->text));
                if (ev->layer)
                        json_object_set_new(j, "layer", json_string(ev->layer));
                if (ev->kind == PD_IMAGE_EV_LAYER || ev->kind == PD_IMAGE_EV_DOWNLOAD) {
                        json_object_set_new(j, "done", json_integer((json_int_t)ev->done));
                        json_object_set_new(j, "total", json_integer((json_int_t)ev->total));
                }
                char *s = json_dumps(j, JSON_COMPACT);
                if (s)
                        fprintf(stderr, "%s\n", s);
                free(s);
                json_decref(j);
                return;
        }
        switch (ev->kind) {
        case PD_IMAGE_EV_STEP:
                fprintf(stderr, "%s==> %s\n", d->tty ? "\r\033[K" : "", ev->text);
                break;
        case PD_IMAGE_EV_LINE:
                fprintf(stderr, "%s    %s\n", d->tty ? "\r\033[K" : "", ev->text);
                break;
        case PD_IMAGE_EV_CACHED:
                fprintf(stderr, "    %.12s%s%s: cached\n", ev->layer ? ev->layer : "", ev->layer && ev->text ? " " : "",
                        ev->layer ? "" : (ev->text ? ev->text : ""));
                break;
        case PD_IMAGE_EV_DOWNLOAD: {
                /* live on a terminal only: the blobs under way and the rate */
                if (!d->tty)
                        break;
                uint64_t now = pd_now_ns();
                if (!d->dl_t0)
                        d->dl_t0 = now;
                char a[32], rate[32] = "";
                human(ev->done, a, sizeof a);
                double secs = (double)(now - d->dl_t0) / 1e9;
                if (secs > 0.2 && ev->done > d->dl_first) {
                        human((uint64_t)((double)(ev->done - d->dl_first) / secs), rate, sizeof rate);
                        strcat(rate, "/s");
                }
                if (now == d->dl_t0)
                        d->dl_first = ev->done;
                fprintf(stderr, "\r\033[K    downloading %s (%s)  %s", a, ev->text, rate);
                break;
        }
        case PD_IMAGE_EV_LAYER: {
                uint64_t now = pd_now_ns();
                if (strncmp(d->layer, ev->layer, 12)) {
                        snprintf(d->layer, sizeof d->layer, "%.12s", ev->layer);
                        d->layer_t0 = now;
                        d->layer_done = false;
                }
                bool done = ev->total && ev->done >= ev->total;
                if (d->layer_done)
                        break;          /* said once */
                d->layer_done = done;
                char a[32], b[32], rate[32] = "";
                human(ev->done, a, sizeof a);
                human(ev->total, b, sizeof b);
                double secs = (double)(now - d->layer_t0) / 1e9;
                if (secs > 0.05) {
                        human((uint64_t)((double)ev->done / secs), rate, sizeof rate);
                        strcat(rate, "/s");
                }
                if (d->tty) {
                        if (!done && now - d->last_ns < 100000000ull && ev->done)
                                break;
                        d->last_ns = now;
                        fprintf(stderr, "\r\033[K    layer %.12s  %s / %s  %s%s", ev->layer, a, b, rate, done ? "\n" : "");
                } else if (ev->done == 0 || done) {
                        fprintf(stderr, "    layer %.12s  %s%s %s\n", ev->layer, done ? "unpacked " : "unpacking ",
                                done ? a : b, done ? rate : "");
                }
                break;
        }
        }
        fflush(stderr);
}

static void usage(FILE *f)
{
        fprintf(f,
                "usage: paddock template COMMAND [OPTIONS]  (local: on the state dir; root)\n\n"
                "  ls | list                 templates, snapshots and their sizes and users\n"
                "  pull NAME IMAGE           an OCI image as template NAME: docker://REF or\n"
                "                            REF (a registry), oci:DIR[:TAG], oci-archive:FILE,\n"
                "                            docker-archive:FILE, containers-storage:REF\n"
                "  build NAME [-f RECIPE] CONTEXT_DIR   a recipe (Dockerfile subset; default\n"
                "                            CONTEXT_DIR/Dockerfile) built in sandboxes, steps\n"
                "                            cached\n"
                "  inspect NAME              a template's details (JSON)\n"
                "  rm NAME                   remove (refused while a sandbox or snapshot uses it)\n"
                "  prune                     remove layers no template uses, and the caches\n"
                "  add NAME DIR              register a copy of a host directory\n\n"
                "options:\n"
                "  --state-dir DIR           state directory (default %s)\n"
                "  -f, --file RECIPE         build: the recipe file\n"
                "  --build-arg K=V           build: a value for ARG K\n"
                "  --replace                 pull, build: replace an image template of that name\n"
                "  --net MODE                build: the RUN steps' network: none (default:\n"
                "                            loopback only), open (the internet, never metadata,\n"
                "                            LAN or host) or policy (only what --allow names)\n"
                "  --allow RULE, --deny RULE build: TARGET[:PORTS[/PROTO]] (docs/network.md)\n"
                "  --network-file FILE       build: the policy as JSON (docs/network.md's form)\n"
                "  --net-uplink UPLINK, --net-resolver IP[,IP]   where the router's traffic\n"
                "                            leaves, when it is first made (as paddock run's)\n"
                "  --json                    machine-readable output (progress: JSON lines on\n"
                "                            stderr)\n"
                "docs/templates.md has the details.\n",
                PD_DEFAULT_STATE_DIR);
}

/* --net MODE (action NULL), --allow RULE, --deny RULE. */
static int net_option(struct topts *o, const char *action, const char *arg)
{
        struct pd_error err = { 0 };
        o->net_given = true;
        if (!action) {
                if (pd_netpol_mode_parse(arg, &o->net.mode, &err) < 0) {
                        pd_cli_error("--net: %s", err.msg);
                        return -1;
                }
                return 0;
        }
        char text[PD_NETPOL_RULE_TEXT_MAX + 8];
        struct pd_netpol_rule rule;
        snprintf(text, sizeof text, "%s:%s", action, arg);
        if (pd_netpol_rule_parse(text, &rule, &err) < 0 || pd_netpol_add_rule(&o->net, &rule, &err) < 0) {
                pd_cli_error("--%s '%s': %s", action, arg, err.msg);
                return -1;
        }
        return 0;
}

/* The build's network, checked once the options are all read. */
static int net_finish(struct topts *o, const char *sub)
{
        struct pd_error err = { 0 };
        if (!o->net_given)
                return 0;
        if (strcmp(sub, "build")) {
                pd_cli_error("template %s: --net, --allow, --deny and --network-file are for build (its RUN steps)",
                             sub);
                return -1;
        }
        if (o->net_file) {
                if (o->net.mode != PD_NETPOL_NONE || o->net.n_rules) {
                        pd_cli_error("template build: --network-file or --net/--allow/--deny, not both");
                        return -1;
                }
                json_error_t je;
                json_t *j = json_load_file(o->net_file, JSON_REJECT_DUPLICATES, &je);
                int r = j ? pd_netpol_from_json(j, &o->net, &err) : -1;
                json_decref(j);
                if (r < 0) {
                        pd_cli_error("--network-file '%s': %s", o->net_file, j ? err.msg : je.text);
                        return -1;
                }
                return 0;
        }
        if (pd_netpol_finish(&o->net, &err) < 0) {
                pd_cli_error("--net %s: %s", pd_netpol_mode_name(o->net.mode), err.msg);
                return -1;
        }
        return 0;
}

static int parse(int argc, char **argv, struct topts *o)
{
        enum { O_STATE = 256, O_JSON, O_ARG, O_REPLACE, O_NOLOCAL, O_STATUS, O_UPLOADED, O_EGRESS, O_NET, O_ALLOW,
               O_DENY, O_NETFILE, O_UPLINK, O_RESOLVER };
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, O_STATE }, { "json", no_argument, NULL, O_JSON },
                { "file", required_argument, NULL, 'f' },          { "build-arg", required_argument, NULL, O_ARG },
                { "replace", no_argument, NULL, O_REPLACE },       { "help", no_argument, NULL, 'h' },
                { "no-local", no_argument, NULL, O_NOLOCAL },      { "status-file", required_argument, NULL, O_STATUS },
                { "uploaded-archive", no_argument, NULL, O_UPLOADED },
                { "egress-allow", required_argument, NULL, O_EGRESS },
                { "net", required_argument, NULL, O_NET },         { "allow", required_argument, NULL, O_ALLOW },
                { "deny", required_argument, NULL, O_DENY },       { "network-file", required_argument, NULL, O_NETFILE },
                { "net-uplink", required_argument, NULL, O_UPLINK },
                { "net-resolver", required_argument, NULL, O_RESOLVER },
                { 0 },
        };
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "hf:", opts, NULL)) != -1) {
                switch (c) {
                case O_STATE: o->state_dir = optarg; break;
                case O_JSON: o->json = true; break;
                case O_REPLACE: o->replace = true; break;
                case O_NOLOCAL: o->no_local = true; break;
                case O_STATUS: o->status_file = optarg; break;
                case O_UPLOADED: o->uploaded_archive = true; break;
                case O_EGRESS:
                        /* "-" alone: the guard with nothing allowed */
                        o->egress_guard = true;
                        if (strcmp(optarg, "-") && o->n_egress < PD_ARRAY_SIZE(o->egress_allow))
                                o->egress_allow[o->n_egress++] = optarg;
                        break;
                case 'f': o->recipe = optarg; break;
                case O_NET:
                case O_ALLOW:
                case O_DENY:
                        if (net_option(o, c == O_NET ? NULL : c == O_ALLOW ? "allow" : "deny", optarg) < 0)
                                return -1;
                        break;
                case O_NETFILE: o->net_file = optarg; o->net_given = true; break;
                case O_UPLINK: o->net_uplink = optarg; break;
                case O_RESOLVER: o->net_resolver = optarg; break;
                case O_ARG:
                        if (o->n_args == MAX_BUILD_ARGS || !strchr(optarg, '=')) {
                                pd_cli_error("--build-arg: K=V expected (at most %d)", MAX_BUILD_ARGS);
                                return -1;
                        }
                        o->build_args[o->n_args++] = optarg;
                        break;
                case 'h': usage(stdout); return 1;
                default:
                        pd_cli_error("template: unknown option '%s' or missing value (see --help)", argv[optind - 1]);
                        return -1;
                }
        }
        return 0;
}

static void print_json(json_t *j)
{
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (s)
                printf("%s\n", s);
        free(s);
}

static void list_table(json_t *arr)
{
        printf("%-24s %-9s %-36s %9s %9s %6s %-16s %s\n", "NAME", "KIND", "SOURCE", "OWN", "SHARED", "LAYERS",
               "CREATED", "USED BY");
        printf("%-24s %-9s %-36s %9s %9s %6s %-16s %s\n", "base", "builtin", "(the host's /usr)", "-", "-", "-", "-",
               "-");
        size_t i;
        json_t *t;
        json_array_foreach(arr, i, t) {
                char own[32] = "-", shared[32] = "-", created[32] = "-", layers[16] = "-";
                const char *kind = json_string_value(json_object_get(t, "kind"));
                if (!strcmp(kind, "builtin"))
                        continue;
                if (json_object_get(t, "bytes_total")) {
                        human((uint64_t)json_integer_value(json_object_get(t, "bytes_own")), own, sizeof own);
                        human((uint64_t)json_integer_value(json_object_get(t, "bytes_shared")), shared, sizeof shared);
                        snprintf(layers, sizeof layers, "%lld", (long long)json_integer_value(json_object_get(t, "layers")));
                }
                time_t c = (time_t)json_integer_value(json_object_get(t, "created"));
                struct tm tm;
                if (c && gmtime_r(&c, &tm))
                        strftime(created, sizeof created, "%Y-%m-%d %H:%M", &tm);
                const char *src = json_string_value(json_object_get(t, "source"));
                printf("%-24s %-9s %-36.36s %9s %9s %6s %-16s %lld\n", json_string_value(json_object_get(t, "name")),
                       kind, src ? src : "-", own, shared, layers, created,
                       (long long)json_integer_value(json_object_get(t, "used_by")));
        }
}

/* ---- add: a copy of a host directory (DESIGN §4) ---- */

static int copy_tree(const char *src, const char *dst)
{
        char from[PATH_MAX + 4];
        snprintf(from, sizeof from, "%s/.", src);
        char *const av[] = { "cp", "-a", "--", from, (char *)dst, NULL };
        pid_t pid;
        int e = posix_spawnp(&pid, "cp", NULL, NULL, av, environ);
        if (e != 0)
                return -e;
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int template_add(struct pd_state *st, struct pd_store *store, const char *name, const char *dir)
{
        struct pd_error err = { 0 };
        if (pd_template_name_check(name) < 0 || !strcmp(name, "base")) {
                pd_cli_error("template add: invalid name '%s' (names are [a-z0-9-]{1,64}; 'base' is built in)", name);
                return -1;
        }
        char canonical[PATH_MAX];
        if (pd_template_check_dir(dir, canonical, &err) < 0) {
                pd_cli_error("template add: %s", err.msg);
                return -1;
        }
        char final[PATH_MAX + 128], tmp[PATH_MAX + 128], rootfs[PATH_MAX + 140];
        snprintf(final, sizeof final, "%s/templates/%s", st->dir, name);
        snprintf(tmp, sizeof tmp, "%s/templates/.%s.%d", st->dir, name, (int)getpid());
        struct stat sb;
        if (lstat(final, &sb) == 0) {
                pd_cli_error("template add: template '%s' exists already", name);
                return -1;
        }
        snprintf(rootfs, sizeof rootfs, "%s/rootfs", tmp);
        if (pd_mkdir_p(tmp, 0755, &err) < 0 || mkdir(rootfs, 0755) < 0) {
                pd_cli_error("template add: create '%s': %s", tmp, err.code ? err.msg : strerror(errno));
                pd_rm_rf(tmp, NULL);
                return -1;
        }
        /* A copy, not a bind mount: no mounts on the host, and later changes
         * to DIR do not leak into sandboxes. Fine for small templates. */
        if (copy_tree(canonical, rootfs) < 0) {
                pd_cli_error("template add: copy '%s' failed", canonical);
                pd_rm_rf(tmp, NULL);
                return -1;
        }
        if (rename(tmp, final) < 0) {
                pd_cli_error("template add: install '%s': %s", final, strerror(errno));
                pd_rm_rf(tmp, NULL);
                return -1;
        }
        if (pd_store_template_add(store, name, &err) < 0) {
                pd_cli_error("template add: %s", err.msg);
                pd_rm_rf(final, NULL);
                return -1;
        }
        printf("added template %s\n", name);
        return 0;
}

/* --status-file: {"status": "building"|"ready"|"failed", "error": ...},
 * written whole then renamed, so a reader never sees half of it. */
static void write_status(const char *path, const char *status, const char *error)
{
        if (!path)
                return;
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        json_t *j = json_pack("{s:s}", "status", status);
        if (error)
                json_object_set_new(j, "error", json_string(error));
        if (json_dump_file(j, tmp, JSON_COMPACT) == 0)
                (void)rename(tmp, path);
        json_decref(j);
}

/* --uploaded-archive: ref is oci-archive:PATH or docker-archive:PATH, an
 * archive a key uploaded; the pull reads it (skopeo unpacks an
 * oci-archive under TMPDIR: the archive's own directory, the build
 * record) and it goes when the pull ends, whatever the result. */
static int pull_uploaded(struct pd_state *st, const char *name, const char *ref, struct pd_image_opts *io,
                         struct pd_error *err)
{
        const char *path = !strncmp(ref, "oci-archive:", 12) ? ref + 12 :
                           !strncmp(ref, "docker-archive:", 15) ? ref + 15 : NULL;
        if (!path || path[0] != '/')
                return pd_error_setx(err, EINVAL, "--uploaded-archive takes oci-archive:PATH or docker-archive:PATH");
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        *strrchr(dir, '/') = '\0';
        setenv("TMPDIR", dir[0] ? dir : "/", 1);
        io->allow_local = true;
        io->source_label = !strncmp(ref, "oci-archive:", 12) ? "upload (oci-archive)" : "upload (docker-archive)";
        int r = pd_image_pull(st, name, ref, io, err);
        (void)unlink(path);
        return r;
}

int pd_cmd_template(int argc, char **argv)
{
        struct topts o = { .state_dir = pd_state_dir_default() };
        int p = parse(argc, argv, &o);
        if (p != 0)
                return p > 0 ? 0 : PD_EXIT_PADDOCK;
        /* getopt_long permuted the operands to the end */
        char *ops[8];
        int n = 0;
        while (optind < argc) {
                if (n == 8) {
                        pd_cli_error("template: too many arguments");
                        return PD_EXIT_PADDOCK;
                }
                ops[n++] = argv[optind++];
        }
        const char *sub = n > 0 ? ops[0] : "";
        static const struct { const char *name; int args; } subs[] = {
                { "ls", 1 }, { "list", 1 }, { "pull", 3 }, { "build", 3 }, { "inspect", 2 }, { "rm", 2 },
                { "prune", 1 }, { "add", 3 },
        };
        bool ok = false;
        for (size_t i = 0; i < PD_ARRAY_SIZE(subs); i++)
                if (!strcmp(sub, subs[i].name)) {
                        if (n != subs[i].args) {
                                pd_cli_error("template %s: expected %d argument%s (see paddock template --help)", sub,
                                             subs[i].args - 1, subs[i].args == 2 ? "" : "s");
                                return PD_EXIT_PADDOCK;
                        }
                        ok = true;
                }
        if (!ok) {
                pd_cli_error("template: expected ls, pull, build, inspect, rm, prune or add (see --help)");
                return PD_EXIT_PADDOCK;
        }
        if (net_finish(&o, sub) < 0) {
                pd_netpol_free(&o.net);
                return PD_EXIT_PADDOCK;
        }
        if (!o.net_uplink)
                o.net_uplink = getenv("PADDOCK_NET_UPLINK");
        if (!o.net_resolver)
                o.net_resolver = getenv("PADDOCK_NET_RESOLVER");
        bool writes = strcmp(sub, "ls") && strcmp(sub, "list") && strcmp(sub, "inspect");
        if (writes && geteuid() != 0) {
                pd_cli_error("template %s: only root may change templates", sub);
                return PD_EXIT_PADDOCK;
        }
        struct pd_error err = { 0 };
        struct pd_state st;
        if (pd_state_open(o.state_dir, &st, &err) < 0) {
                pd_cli_error("%s", err.msg);
                return PD_EXIT_PADDOCK;
        }
        struct pd_store *store = NULL;
        if (writes && pd_store_open(st.dir, &store, &err) < 0) {
                pd_cli_error("%s", err.msg);
                pd_state_close(&st);
                return PD_EXIT_PADDOCK;
        }
        struct display d = { .tty = isatty(2), .json = o.json, .t0_ns = pd_now_ns() };
        struct pd_image_opts io = { .progress = on_progress, .arg = &d, .allow_local = !o.no_local,
                                    .replace = o.replace, .egress_guard = o.egress_guard,
                                    .egress_allow = o.egress_allow, .n_egress_allow = o.n_egress,
                                    .run_net = &o.net, .net_uplink = o.net_uplink, .net_resolver = o.net_resolver };
        write_status(o.status_file, "building", NULL);
        int r = 0;
        json_t *j = NULL;
        if (!strcmp(sub, "ls") || !strcmp(sub, "list")) {
                if ((r = pd_image_list(&st, &j, &err)) == 0) {
                        if (o.json)
                                print_json(j);
                        else
                                list_table(j);
                }
        } else if (!strcmp(sub, "inspect")) {
                if ((r = pd_image_inspect(&st, ops[1], &j, &err)) == 0)
                        print_json(j);
        } else if (!strcmp(sub, "rm")) {
                if ((r = pd_image_remove(&st, ops[1], &err)) == 0 && !o.json)
                        printf("removed %s\n", ops[1]);
        } else if (!strcmp(sub, "prune")) {
                struct pd_prune_result pr;
                if ((r = pd_image_prune(&st, &pr, &err)) == 0) {
                        char b[32];
                        human(pr.bytes, b, sizeof b);
                        if (o.json)
                                printf("{\"layers\": %u, \"bytes\": %llu, \"blobs\": %u}\n", pr.layers,
                                       (unsigned long long)pr.bytes, pr.blobs);
                        else
                                printf("removed %u layers (%s) and %u cached blobs\n", pr.layers, b, pr.blobs);
                }
        } else if (!strcmp(sub, "add")) {
                r = template_add(&st, store, ops[1], ops[2]) < 0 ? -EINVAL : 0;
                err.msg[0] = '\0';
        } else {
                if (!strcmp(sub, "pull") && o.uploaded_archive) {
                        r = pull_uploaded(&st, ops[1], ops[2], &io, &err);
                } else if (!strcmp(sub, "pull")) {
                        r = pd_image_pull(&st, ops[1], ops[2], &io, &err);
                } else {
                        char recipe[PATH_MAX];
                        if (o.recipe)
                                snprintf(recipe, sizeof recipe, "%s", o.recipe);
                        else
                                snprintf(recipe, sizeof recipe, "%s/Dockerfile", ops[2]);
                        r = pd_image_build(&st, ops[1], recipe, ops[2], o.build_args, o.n_args, &io, &err);
                }
                /* the server knows registered templates by its table */
                if (r == 0 && pd_store_template_add(store, ops[1], &err) < 0)
                        r = -EIO;
                if (r == 0 && (r = pd_image_inspect(&st, ops[1], &j, &err)) == 0) {
                        if (o.json) {
                                print_json(j);
                        } else {
                                char b[32];
                                human((uint64_t)json_integer_value(json_object_get(j, "bytes_total")), b, sizeof b);
                                printf("%s %s: %lld layers, %s (%.1f s)\n", !strcmp(sub, "pull") ? "pulled" : "built",
                                       ops[1], (long long)json_integer_value(json_object_get(j, "layers")), b,
                                       (double)(pd_now_ns() - d.t0_ns) / 1e9);
                        }
                }
        }
        json_decref(j);
        if (r < 0 && err.msg[0])
                pd_cli_error("template %s: %s", sub, err.msg);
        write_status(o.status_file, r < 0 ? "failed" : "ready", r < 0 ? (err.msg[0] ? err.msg : "failed") : NULL);
        if (store)
                pd_store_close(store);
        pd_state_close(&st);
        pd_netpol_free(&o.net);
        return r < 0 ? PD_EXIT_PADDOCK : 0;
}
