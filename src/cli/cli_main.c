/* paddock: an execution sandbox for AI agents. Table dispatch to one file
 * per verb (crun's layout). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/agentpath.h"
#include "cli/cli.h"

void pd_cli_error(const char *fmt, ...)
{
        va_list ap;
        fputs("paddock: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* Two executables share this file. `paddock` (PD_LEAN) links only what
 * `run` and `gc` need, so `paddock run` starts without loading libcurl,
 * libmicrohttpd, SQLite and OpenSSL; every other verb it hands to
 * `paddock-full` (the same dispatcher with everything linked) by exec. */
#ifdef PD_LEAN
#define HEAVY(fn) NULL
#else
#define HEAVY(fn) fn
#endif

static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *help;
} verbs[] = {
        { "run", pd_cmd_run, "run a command in a fresh sandbox and remove it afterwards" },
        { "gc", pd_cmd_gc, "destroy everything a state directory owns" },
        { "tiers", pd_cmd_tiers, "the isolation tiers here: available, what each isolates, start times" },
        { "serve", HEAVY(pd_cmd_serve), "run the sandbox server (HTTP API)" },
        { "key", HEAVY(pd_cmd_key), "create, list or revoke API keys (local, on the state dir)" },
        { "template", HEAVY(pd_cmd_template), "list or add templates (local, on the state dir)" },
        { "doctor", HEAVY(pd_cmd_doctor), "check what this host can do (tiers, network)" },
};

static int exec_full(char **argv)
{
        char path[PATH_MAX];
        struct pd_error err = { 0 };
        if (pd_helper_path("paddock-full", "PADDOCK_FULL", path, sizeof path, &err) < 0) {
                pd_cli_error("%s)", err.msg);
                return PD_EXIT_PADDOCK;
        }
        execv(path, argv);
        pd_cli_error("execute '%s': %s", path, strerror(errno));
        return PD_EXIT_PADDOCK;
}

/* Verbs that talk to a running server (remote.c). */
static const struct {
        const char *name;
        const char *help;
} remote_verbs[] = {
        { "create", "create a sandbox on the server" },
        { "ls", "list sandboxes" },
        { "exec", "run a command in a sandbox" },
        { "logs", "print (or follow) a process's output" },
        { "cp", "copy files into or out of a sandbox" },
        { "kill", "delete a sandbox" },
        { "stats", "show a sandbox's resource use" },
        { "audit", "print (or follow) a sandbox's audit log" },
        { "pause", "freeze a sandbox" },
        { "resume", "thaw a sandbox" },
        { "timeout", "set a sandbox's timeout" },
        { "snapshot", "save a sandbox's filesystem as a named snapshot; ls, rm" },
        { "fork", "new sandboxes from a sandbox's current filesystem" },
        { "port", "print the URL (and token) of a port inside a sandbox" },
};

static void usage(FILE *f)
{
        fprintf(f, "usage: paddock COMMAND [OPTIONS]\n\ncommands:\n");
        for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
                fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f, "  %-8s %s\n", "version", "print the version");
        fprintf(f, "\nclient commands (talk to `paddock serve` at $PADDOCK_URL with $PADDOCK_API_KEY):\n");
        for (size_t i = 0; i < sizeof remote_verbs / sizeof *remote_verbs; i++)
                fprintf(f, "  %-8s %s\n", remote_verbs[i].name, remote_verbs[i].help);
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
                        return verbs[i].fn ? verbs[i].fn(argc - 1, argv + 1) : exec_full(argv);
        for (size_t i = 0; i < sizeof remote_verbs / sizeof *remote_verbs; i++)
                if (!strcmp(verb, remote_verbs[i].name)) {
#ifdef PD_LEAN
                        return exec_full(argv);
#else
                        return pd_cmd_remote(verb, argc - 1, argv + 1);
#endif
                }
        pd_cli_error("unknown command '%s' (see paddock --help)", verb);
        return PD_EXIT_PADDOCK;
}
