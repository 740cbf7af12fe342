/* paddock-oci: global options, then one verb (runc's command line). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"

static void usage(FILE *f)
{
        fprintf(f, "usage: paddock-oci [--root DIR] [--log FILE] [--log-format text|json] [--debug]\n"
                   "                   [--systemd-cgroup] COMMAND [ARGS]\n"
                   "commands: create start run state kill delete exec ps pause resume list features spec\n"
                   "docs: docs/oci.md\n");
}

int main(int argc, char **argv)
{
        struct oci_global g = { .root = OCI_ROOT_DEFAULT };
        static const struct option opts[] = {
                { "root", required_argument, NULL, 'r' },       { "log", required_argument, NULL, 'l' },
                { "log-format", required_argument, NULL, 'f' }, { "debug", no_argument, NULL, 'd' },
                { "systemd-cgroup", no_argument, NULL, 's' },   { "criu", required_argument, NULL, 'c' },
                { "rootless", required_argument, NULL, 'R' },   { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'v' },          { NULL, 0, NULL, 0 },
        };
        /* '+': stop at the verb; its options belong to it. */
        int c;
        while ((c = getopt_long_only(argc, argv, "+hv", opts, NULL)) != -1) {
                switch (c) {
                case 'r': g.root = optarg; break;
                case 'l': g.log_path = optarg; break;
                case 'f':
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
                                fprintf(stderr, "paddock-oci: --log-format must be text or json\n");
                                return 1;
                        }
                        g.log_json = strcmp(optarg, "json") == 0;
                        break;
                case 'd': g.debug = true; break;
                case 's': g.systemd_cgroup = true; break;
                case 'c': case 'R': break;
                case 'v':
                        printf("paddock-oci version %s\nspec: 1.1.0\n", PD_VERSION);
                        return 0;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 1;
                }
        }
        oci_log_init(&g);
        if (optind >= argc) {
                usage(stderr);
                return 1;
        }
        const char *verb = argv[optind];
        int vargc = argc - optind;
        char **vargv = argv + optind;
        optind = 0;     /* reset getopt for the verb's own parser */
        if (strcmp(verb, "create") == 0)
                return oci_cmd_create(&g, vargc, vargv, false);
        if (strcmp(verb, "run") == 0)
                return oci_cmd_create(&g, vargc, vargv, true);
        if (strcmp(verb, "start") == 0)
                return oci_cmd_start(&g, vargc, vargv);
        if (strcmp(verb, "state") == 0)
                return oci_cmd_state(&g, vargc, vargv);
        if (strcmp(verb, "kill") == 0)
                return oci_cmd_kill(&g, vargc, vargv);
        if (strcmp(verb, "delete") == 0)
                return oci_cmd_delete(&g, vargc, vargv);
        if (strcmp(verb, "exec") == 0)
                return oci_cmd_exec(&g, vargc, vargv);
        if (strcmp(verb, "ps") == 0)
                return oci_cmd_ps(&g, vargc, vargv);
        if (strcmp(verb, "pause") == 0)
                return oci_cmd_pause(&g, vargc, vargv, true);
        if (strcmp(verb, "resume") == 0)
                return oci_cmd_pause(&g, vargc, vargv, false);
        if (strcmp(verb, "list") == 0 || strcmp(verb, "ls") == 0)
                return oci_cmd_list(&g, vargc, vargv);
        if (strcmp(verb, "features") == 0)
                return oci_cmd_features(&g, vargc, vargv);
        if (strcmp(verb, "spec") == 0)
                return oci_cmd_spec(&g, vargc, vargv);
        fprintf(stderr, "paddock-oci: unknown command '%s'\n", verb);
        usage(stderr);
        return 1;
}
