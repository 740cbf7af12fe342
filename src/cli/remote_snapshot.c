/* paddock snapshot ls | rm NAME... (docs/cli.md): the key's snapshots on
 * the server. Taking one stays `paddock snapshot ID NAME` (remote.c); a
 * sandbox id is [a-z0-9]{20}, so "ls" and "rm" never name one. */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/remote.h"

static const char usage[] =
        "usage: paddock snapshot ID NAME      save a sandbox's filesystem as snapshot NAME\n"
        "       paddock snapshot ls [--json]  the key's snapshots\n"
        "       paddock snapshot rm NAME...   remove snapshots (refused while a sandbox or\n"
        "                                     another snapshot stacks on one)\n";

bool pd_remote_snapshot_is_admin(int argc, char **argv)
{
        return argc > 1 && (!strcmp(argv[1], "ls") || !strcmp(argv[1], "list") || !strcmp(argv[1], "rm"));
}

/* Snapshot names are [a-z0-9-]{1,64}: anything else could change the path. */
static bool name_ok(const char *n)
{
        size_t l = strlen(n);
        if (l == 0 || l > 64)
                return false;
        for (size_t i = 0; i < l; i++)
                if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '-'))
                        return false;
        return true;
}

static int snap_ls(const struct pd_rc *rc, bool as_json)
{
        json_t *out = NULL;
        int k = pd_rc_json(rc, "GET", "/snapshots", NULL, &out);
        if (k)
                return k;
        json_t *all = json_object_get(out, "snapshots"), *s;
        size_t i;
        if (as_json) {
                json_dumpf(all ? all : json_array(), stdout, JSON_INDENT(2));
                putchar('\n');
                json_decref(out);
                return 0;
        }
        int wn = 4, wt = 8;
        json_array_foreach(all, i, s) {
                const char *n = json_string_value(json_object_get(s, "name"));
                const char *t = json_string_value(json_object_get(s, "template"));
                wn = n && (int)strlen(n) > wn ? (int)strlen(n) : wn;
                wt = t && (int)strlen(t) > wt ? (int)strlen(t) : wt;
        }
        printf("%-*s  %-20s  %-*s  %-10s  %s\n", wn, "NAME", "SOURCE", wt, "TEMPLATE", "TIER", "CREATED");
        json_array_foreach(all, i, s) {
                const char *n = json_string_value(json_object_get(s, "name"));
                const char *src = json_string_value(json_object_get(s, "source"));
                const char *t = json_string_value(json_object_get(s, "template"));
                const char *iso = json_string_value(json_object_get(s, "isolation"));
                const char *c = json_string_value(json_object_get(s, "created_at"));
                printf("%-*s  %-20s  %-*s  %-10s  %.19s\n", wn, n ? n : "-", src ? src : "-", wt, t ? t : "-",
                       iso ? iso : "-", c ? c : "-");
        }
        json_decref(out);
        return 0;
}

static int snap_check(const char *verb, const char *name)
{
        if (name_ok(name))
                return 0;
        pd_remote_usage_error(verb, "invalid snapshot name '%s' (expected [a-z0-9-]{1,64})", name);
        return PD_RC_USAGE;
}

static int snap_rm(const struct pd_rc *rc, int argc, char **argv)
{
        if (argc < 1)
                return pd_remote_usage_error("snapshot rm", "missing snapshot name");
        return pd_remote_delete_each(rc, "snapshot rm", "/snapshots/%s", "removed %s\n", snap_check, argc, argv);
}

int pd_remote_snapshot_admin(const struct pd_rc *rc, int argc, char **argv)
{
        const char *sub = argv[1];
        static const struct option opts[] = {
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 },
        };
        bool as_json = false;
        int c;
        /* options after the sub-verb: argv[1..] as its own argv */
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc - 1, argv + 1, "+h", opts, NULL)) != -1) {
                switch (c) {
                case 'j': as_json = true; break;
                case 'h': fputs(usage, stdout); return 0;
                default:
                        if (optopt)
                                return pd_remote_usage_error("snapshot", "unknown option '-%c'", optopt);
                        return pd_remote_usage_error("snapshot", "unknown option '%s'", argv[optind]);
                }
        }
        int rest = argc - 1 - optind;
        char **ops = argv + 1 + optind;
        if (!strcmp(sub, "rm")) {
                if (as_json)
                        return pd_remote_usage_error("snapshot rm", "--json applies to ls only");
                return snap_rm(rc, rest, ops);
        }
        if (rest)
                return pd_remote_usage_error("snapshot ls", "unexpected argument '%s'", ops[0]);
        return snap_ls(rc, as_json);
}
