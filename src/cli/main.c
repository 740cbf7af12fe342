/* paddock: an execution sandbox for AI agents. Table dispatch to one file
 * per verb (crun's layout). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void pd_cli_error(const char *fmt, ...)
{
        va_list ap;
        fputs("paddock: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *help;
} verbs[] = {
        { "run", pd_cmd_run, "run a command in a fresh sandbox and remove it afterwards" },
        { "gc", pd_cmd_gc, "destroy everything a state directory owns" },
};

static void usage(FILE *f)
{
        fprintf(f, "usage: paddock COMMAND [OPTIONS]\n\ncommands:\n");
        for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
                fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f, "  %-8s %s\n", "version", "print the version");
        fprintf(f, "\n`paddock COMMAND --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return PD_EXIT_PADDOCK;
        }
        const char *verb = argv[1];
        if (!strcmp(verb, "--help") || !strcmp(verb, "-h") || !strcmp(verb, "help")) {
                usage(stdout);
                return 0;
        }
        if (!strcmp(verb, "version") || !strcmp(verb, "--version")) {
                printf("paddock %s\n", PD_VERSION);
                return 0;
        }
        for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
                if (!strcmp(verb, verbs[i].name))
                        return verbs[i].fn(argc - 1, argv + 1);
        pd_cli_error("unknown command '%s' (see paddock --help)", verb);
        return PD_EXIT_PADDOCK;
}
