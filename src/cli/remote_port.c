/* paddock port ID PORT [--json] (docs/cli.md): the URL that reaches PORT
 * inside sandbox ID through the server (docs/api.md, "Ports"), and the
 * port token when the sandbox's ports are not public. One GET of
 * /sandboxes/{id}/ports: the server knows its domain and its port. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"

#define CODE_PORT 49999

static const char usage[] =
        "usage: paddock port ID PORT [--json]\n"
        "Print the URL of PORT (1..65535) inside sandbox ID, reached through the server:\n"
        "http://PORT-ID.DOMAIN/ (DOMAIN: the server's --domain and port). When the\n"
        "sandbox's ports are not public a second line gives the header to send:\n"
        "X-Paddock-Port-Token: TOKEN (or add ?paddock_port_token=TOKEN to the URL).\n";

static int parse_port(const char *s, unsigned *out)
{
        char *end;
        if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5)
                return -1;
        unsigned long v = strtoul(s, &end, 10);
        if (v < 1 || v > 65535)
                return -1;
        *out = (unsigned)v;
        return 0;
}

int pd_remote_port(const struct pd_rc *rc, int argc, char **argv)
{
        static const struct option opts[] = {
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 },
        };
        bool as_json = false;
        int c;
        optind = 1;
        opterr = 0;
        /* options anywhere: `paddock port ID PORT --json` */
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'j': as_json = true; break;
                case 'h': fputs(usage, stdout); return 0;
                default: return pd_remote_usage_error("port", "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (argc - optind != 2)
                return pd_remote_usage_error("port", "expected ID PORT");
        const char *id = argv[optind];
        unsigned port;
        if (pd_remote_check_id("port", id))
                return PD_RC_USAGE;
        if (parse_port(argv[optind + 1], &port) < 0)
                return pd_remote_usage_error("port", "port '%s' is not 1..65535", argv[optind + 1]);
        char path[64];
        snprintf(path, sizeof path, "/sandboxes/%s/ports", id);
        json_t *info = NULL;
        int k = pd_rc_json(rc, "GET", path, NULL, &info);
        if (k)
                return k;
        const char *domain = json_string_value(json_object_get(info, "domain"));
        const char *token = json_string_value(json_object_get(info, "port_token"));
        bool pub = json_is_true(json_object_get(info, "public"));
        if (!domain) {
                json_decref(info);
                pd_cli_error("port: the server's answer has no domain");
                return PD_RC_INTERNAL;
        }
        char url[512];
        snprintf(url, sizeof url, "http://%u-%s.%s/", port, id, domain);
        /* the code interpreter's port takes the access token only */
        bool need_token = !pub && port != CODE_PORT && token;
        if (as_json) {
                json_t *o = json_pack("{s:s, s:s, s:i, s:b}", "url", url, "id", id, "port", (int)port, "public", pub);
                if (need_token)
                        json_object_set_new(o, "port_token", json_string(token));
                json_dumpf(o, stdout, JSON_INDENT(2));
                putchar('\n');
                json_decref(o);
        } else {
                printf("%s\n", url);
                if (need_token)
                        printf("X-Paddock-Port-Token: %s\n", token);
        }
        if (port == CODE_PORT)
                fprintf(stderr, "paddock: port %u (the code interpreter) needs the sandbox's access token "
                                "(X-Access-Token), not the port token\n", port);
        json_decref(info);
        return 0;
}
