// The supervised tier's per-sandbox policy (docs/security.md):
//
//   {"paths":   [{"glob": "/etc/shadow", "access": "deny"},
//                {"glob": "/usr/**",     "access": "ro"},
//                {"glob": "/home/user/**", "access": "rw"}],
//    "connect": [{"cidr": "127.0.0.0/8", "ports": "1-65535", "action": "allow"}]}
//
// Path rules: the first rule whose glob matches the resolved path decides;
// no match = "rw" (what the caller's own permissions allow). A glob is an
// fnmatch(3) pattern over the whole path where '*' stops at '/', "**"
// crosses '/', and a trailing "/**" also matches the directory itself.
// access: rw | ro (no write, create or truncate) | deny | noexec (accepted,
// not enforced by this tier yet: see the docs).
// Connect rules (AF_INET/AF_INET6): first match decides; with no rules at
// all every address is allowed (the network layer still applies), with
// rules an unmatched address is denied. Unix-socket paths follow the path
// rules (connecting needs "rw").
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/policy.h"

#define MAX_RULES 256

struct path_rule {
        char *orig;                     // as written
        char *glob;
        int fnflags;
        char *dir;                      // "X" for a glob "X/**": matches X itself
        char *prefix;                   // the literal directory part before any wildcard
        bool literal;                   // no wildcard at all: matches orig alone
        enum sv_access access;
};

struct net_rule {
        int family;
        uint8_t addr[16];
        unsigned prefix;
        unsigned port_lo, port_hi;
        bool allow;
};

struct sv_policy {
        struct path_rule paths[MAX_RULES + 1];
        unsigned n_paths;
        struct net_rule nets[MAX_RULES];
        unsigned n_nets;
};

static int parse_path_rule(json_t *o, struct path_rule *r, char *msg, size_t ms)
{
        const char *glob = NULL, *access = NULL;
        if (json_unpack(o, "{s:s, s:s !}", "glob", &glob, "access", &access) < 0) {
                snprintf(msg, ms, "a path rule needs exactly \"glob\" and \"access\" (strings)");
                return -1;
        }
        if (glob[0] != '/' || strlen(glob) >= PATH_MAX) {
                snprintf(msg, ms, "path glob '%s' must be absolute", glob);
                return -1;
        }
        if (!strcmp(access, "rw"))
                r->access = SV_ACC_RW;
        else if (!strcmp(access, "ro"))
                r->access = SV_ACC_RO;
        else if (!strcmp(access, "deny"))
                r->access = SV_ACC_DENY;
        else if (!strcmp(access, "noexec"))
                r->access = SV_ACC_NOEXEC;
        else {
                snprintf(msg, ms, "path rule access '%s' (rw, ro, deny or noexec)", access);
                return -1;
        }
        /* "**" crosses '/': replace it by '*' and match without
         * FNM_PATHNAME. A glob with a single '*' keeps FNM_PATHNAME. */
        size_t n = strlen(glob);
        r->glob = malloc(n + 1);
        if (!r->glob) {
                snprintf(msg, ms, "out of memory");
                return -1;
        }
        size_t j = 0;
        bool dstar = false;
        for (size_t i = 0; i < n; i++) {
                if (glob[i] == '*' && glob[i + 1] == '*') {
                        dstar = true;
                        while (glob[i + 1] == '*')
                                i++;
                }
                r->glob[j++] = glob[i];
        }
        r->glob[j] = '\0';
        r->fnflags = dstar ? 0 : FNM_PATHNAME;
        r->orig = strdup(glob);
        size_t lit = strcspn(glob, "*?[\\");
        r->literal = glob[lit] == '\0';
        size_t cut = lit;
        if (!r->literal)
                while (cut > 0 && glob[cut] != '/')
                        cut--;
        r->prefix = cut ? strndup(glob, cut) : strdup("/");
        if (!r->orig || !r->prefix) {
                snprintf(msg, ms, "out of memory");
                return -1;
        }
        if (n >= 3 && !strcmp(glob + n - 3, "/**")) {
                r->dir = strndup(glob, n - 3);
                if (r->dir && !r->dir[0]) {
                        free(r->dir);
                        r->dir = strdup("/");
                }
        }
        return 0;
}

static int parse_ports(const char *s, unsigned *lo, unsigned *hi)
{
        char *end;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (end == s)
                return -1;
        if (*end == '-') {
                const char *t = end + 1;
                b = strtoul(t, &end, 10);
                if (end == t)
                        return -1;
        }
        if (*end || a > 65535 || b > 65535 || a > b)
                return -1;
        *lo = (unsigned)a;
        *hi = (unsigned)b;
        return 0;
}

static int parse_net_rule(json_t *o, struct net_rule *r, char *msg, size_t ms)
{
        const char *cidr = NULL, *ports = NULL, *action = NULL;
        if (json_unpack(o, "{s:s, s?s, s:s !}", "cidr", &cidr, "ports", &ports, "action", &action) < 0) {
                snprintf(msg, ms, "a connect rule needs \"cidr\" and \"action\" (and optionally \"ports\")");
                return -1;
        }
        char a[64];
        snprintf(a, sizeof a, "%s", cidr);
        char *slash = strchr(a, '/');
        if (slash)
                *slash++ = '\0';
        if (inet_pton(AF_INET, a, r->addr) == 1) {
                r->family = AF_INET;
                r->prefix = 32;
        } else if (inet_pton(AF_INET6, a, r->addr) == 1) {
                r->family = AF_INET6;
                r->prefix = 128;
        } else {
                snprintf(msg, ms, "connect rule cidr '%s' is not an address", cidr);
                return -1;
        }
        if (slash) {
                char *end;
                unsigned long p = strtoul(slash, &end, 10);
                if (end == slash || *end || p > r->prefix) {
                        snprintf(msg, ms, "connect rule cidr '%s': bad prefix length", cidr);
                        return -1;
                }
                r->prefix = (unsigned)p;
        }
        r->port_lo = 0;
        r->port_hi = 65535;
        if (ports && parse_ports(ports, &r->port_lo, &r->port_hi) < 0) {
                snprintf(msg, ms, "connect rule ports '%s' (N or N-M, 0..65535)", ports);
                return -1;
        }
        if (!strcmp(action, "allow"))
                r->allow = true;
        else if (!strcmp(action, "deny"))
                r->allow = false;
        else {
                snprintf(msg, ms, "connect rule action '%s' (allow or deny)", action);
                return -1;
        }
        return 0;
}

struct sv_policy *sv_policy_load(const char *path, char *msg, size_t ms)
{
        struct sv_policy *p = calloc(1, sizeof *p);
        if (!p) {
                snprintf(msg, ms, "out of memory");
                return NULL;
        }
        if (!path || !*path)
                return p;
        json_error_t je;
        json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        if (!root) {
                snprintf(msg, ms, "policy '%s': %s (line %d)", path, je.text, je.line);
                goto fail;
        }
        json_t *paths = NULL, *conn = NULL;
        if (json_unpack_ex(root, &je, 0, "{s?o, s?o !}", "paths", &paths, "connect", &conn) < 0) {
                snprintf(msg, ms, "policy '%s': only \"paths\" and \"connect\" are known (%s)", path, je.text);
                goto fail_json;
        }
        if ((paths && !json_is_array(paths)) || (conn && !json_is_array(conn)) ||
            json_array_size(paths) > MAX_RULES || json_array_size(conn) > MAX_RULES) {
                snprintf(msg, ms, "policy '%s': \"paths\" and \"connect\" are arrays of at most %d rules", path,
                         MAX_RULES);
                goto fail_json;
        }
        size_t i;
        json_t *v;
        if (json_array_size(paths) > 0) {
                /* paddock's own directory stays usable whatever the rules say:
                 * the agent makes its sudo socket there. */
                json_t *own = json_pack("{s:s, s:s}", "glob", SV_OWN_DIR "/**", "access", "rw");
                int pr = own ? parse_path_rule(own, &p->paths[p->n_paths], msg, ms) : -1;
                json_decref(own);
                p->n_paths++;
                if (pr < 0)
                        goto fail_json;
        }
        json_array_foreach(paths, i, v) {
                int pr = parse_path_rule(v, &p->paths[p->n_paths], msg, ms);
                p->n_paths++;
                if (pr < 0)
                        goto fail_json;
        }
        json_array_foreach(conn, i, v) {
                if (parse_net_rule(v, &p->nets[p->n_nets], msg, ms) < 0)
                        goto fail_json;
                p->n_nets++;
        }
        json_decref(root);
        return p;
fail_json:
        json_decref(root);
fail:
        sv_policy_free(p);
        return NULL;
}

void sv_policy_free(struct sv_policy *p)
{
        if (!p)
                return;
        for (unsigned k = 0; k < p->n_paths; k++) {
                free(p->paths[k].orig);
                free(p->paths[k].glob);
                free(p->paths[k].dir);
                free(p->paths[k].prefix);
        }
        free(p);
}

unsigned sv_policy_n_paths(const struct sv_policy *p)
{
        return p->n_paths;
}

const char *sv_policy_glob(const struct sv_policy *p, unsigned i)
{
        return p->paths[i].orig;
}

enum sv_access sv_policy_access(const struct sv_policy *p, unsigned i)
{
        return p->paths[i].access;
}

unsigned sv_policy_n_connect(const struct sv_policy *p)
{
        return p->n_nets;
}

/* a is b or lies beneath b */
static bool under(const char *a, const char *b)
{
        size_t n = strlen(b);
        if (!strcmp(b, "/"))
                return true;
        return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

bool sv_policy_restricts_beneath(const struct sv_policy *p, const char *dir)
{
        for (unsigned i = 0; i < p->n_paths; i++) {
                const struct path_rule *r = &p->paths[i];
                if (r->dir && !r->literal && strcspn(r->dir, "*?[\\") == strlen(r->dir) && under(dir, r->dir))
                        return r->access != SV_ACC_RW;  /* decides everything beneath dir first */
                if (r->access == SV_ACC_RW)
                        continue;
                if (r->literal ? under(r->orig, dir) : (under(r->prefix, dir) || under(dir, r->prefix)))
                        return true;
        }
        return false;
}

enum sv_access sv_policy_path(const struct sv_policy *p, const char *path)
{
        for (unsigned i = 0; i < p->n_paths; i++) {
                const struct path_rule *r = &p->paths[i];
                if ((r->dir && !strcmp(path, r->dir)) || fnmatch(r->glob, path, r->fnflags) == 0)
                        return r->access;
        }
        return SV_ACC_RW;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
        unsigned full = bits / 8, rest = bits % 8;
        if (memcmp(a, b, full))
                return false;
        if (rest) {
                uint8_t m = (uint8_t)(0xff << (8 - rest));
                return (a[full] & m) == (b[full] & m);
        }
        return true;
}

bool sv_policy_connect(const struct sv_policy *p, const struct sockaddr *sa, socklen_t len)
{
        if (p->n_nets == 0)
                return true;
        const uint8_t *addr;
        unsigned port;
        int fam = sa->sa_family;
        uint8_t mapped[4];
        if (fam == AF_INET && len >= sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *s4 = (const void *)sa;
                addr = (const uint8_t *)&s4->sin_addr;
                port = ntohs(s4->sin_port);
        } else if (fam == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *s6 = (const void *)sa;
                addr = (const uint8_t *)&s6->sin6_addr;
                port = ntohs(s6->sin6_port);
                /* ::ffff:a.b.c.d is an IPv4 connect: match the IPv4 rules. */
                if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
                        memcpy(mapped, addr + 12, 4);
                        addr = mapped;
                        fam = AF_INET;
                }
        } else {
                return false;
        }
        for (unsigned i = 0; i < p->n_nets; i++) {
                const struct net_rule *r = &p->nets[i];
                if (r->family == fam && port >= r->port_lo && port <= r->port_hi &&
                    prefix_match(addr, r->addr, r->prefix))
                        return r->allow;
        }
        return false;
}
