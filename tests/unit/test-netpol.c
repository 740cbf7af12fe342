/* Unit tests for the network policy model (src/net/policy*.c). TAP. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/policy.h"
#include "tap.h"

static int parses(const char *s)
{
        struct pd_netpol_rule r;
        struct pd_error err = { 0 };
        return pd_netpol_rule_parse(s, &r, &err) == 0;
}

/* parse then format: the canonical text */
static int canon(const char *s, const char *want)
{
        struct pd_netpol_rule r, r2;
        struct pd_error err = { 0 };
        char buf[600];
        if (pd_netpol_rule_parse(s, &r, &err) < 0) {
                printf("# %s: %s\n", s, err.msg);
                return 0;
        }
        pd_netpol_rule_format(&r, buf, sizeof buf);
        if (strcmp(buf, want) != 0) {
                printf("# %s -> %s (want %s)\n", s, buf, want);
                return 0;
        }
        return pd_netpol_rule_parse(buf, &r2, &err) == 0 && memcmp(&r, &r2, sizeof r) == 0;
}

static struct pd_netpol policy(const char *json)
{
        struct pd_netpol p = { 0 };
        struct pd_error err = { 0 };
        if (pd_netpol_from_json_str(json, strlen(json), &p, &err) < 0) {
                printf("# policy %s: %s\n", json, err.msg);
                exit(1);
        }
        return p;
}

static int addr_verdict(const struct pd_netpol *p, const char *a, uint8_t proto, uint16_t port)
{
        uint8_t buf[16];
        int fam = strchr(a, ':') ? AF_INET6 : AF_INET;
        inet_pton(fam, a, buf);
        return pd_netpol_match_addr(p, fam, buf, proto, port, NULL);
}

static int pin_ok(const struct pd_netpol *p, const char *name, const char *a)
{
        const struct pd_netpol_rule *g[8];
        uint8_t buf[16];
        int fam = strchr(a, ':') ? AF_INET6 : AF_INET;
        inet_pton(fam, a, buf);
        size_t n = pd_netpol_name_grants(p, name, g, 8);
        return n > 0 && pd_netpol_pin_ok(p, g[0], fam, buf, NULL);
}

static void test_rule_strings(void)
{
        ok(canon("allow:*.pypi.org:443/tcp", "allow:*.pypi.org:443/tcp"), "wildcard with port/proto");
        ok(canon("deny:10.0.0.0/8", "deny:10.0.0.0/8"), "deny CIDR");
        ok(canon("allow:1.2.3.4", "allow:1.2.3.4/32"), "bare address is /32");
        ok(canon("allow:PyPI.Org.", "allow:pypi.org"), "domain lowercased, final dot dropped");
        ok(canon("allow:2001:db8::/32", "allow:[2001:db8::/32]"), "bare IPv6 CIDR");
        ok(canon("allow:[2001:db8::1]:53/udp", "allow:[2001:db8::1/128]:53/udp"), "bracketed IPv6 with port");
        ok(canon("allow:example.com:1000-2000", "allow:example.com:1000-2000"), "port range");
        ok(canon("allow:example.com:*/udp", "allow:example.com:*/udp"), "any port, udp");
        ok(!parses("permit:example.com"), "unknown action refused");
        ok(!parses("allow:"), "empty target refused");
        ok(!parses("allow:10.0.0.1/8"), "host bits past prefix refused");
        ok(!parses("allow:10.0.0.0/33"), "prefix too long refused");
        ok(!parses("allow:10.0.0.0/08"), "prefix with leading zero refused");
        ok(!parses("allow:example.com:0"), "port 0 refused");
        ok(!parses("allow:example.com:65536"), "port 65536 refused");
        ok(!parses("allow:example.com:20-10"), "reversed range refused");
        ok(!parses("allow:1.1.1.15:0-0"), "range 0-0 refused (it names port 0, refused as '0' is; fuzz-policy found it written back as '0')");
        ok(parses("allow:example.com:0-80"), "a range from 0 stays allowed");
        ok(!parses("allow:example.com:443/icmp"), "unknown protocol refused");
        ok(!parses("allow:example.com:+443"), "signed port refused");
        ok(!parses("deny:example.com:443"), "domain deny with port refused");
        ok(!parses("allow:ex*ample.com"), "star inside a label refused");
        ok(!parses("allow:*example.com"), "star without dot refused");
        ok(!parses("allow:a..b"), "empty label refused");
        ok(!parses("allow:exa mple.com"), "space refused");
        ok(!parses("allow:ex\xc3\xa4mple.com"), "non-ASCII refused");
        ok(!parses("allow:[2001:db8::1:53"), "unbalanced bracket refused");
        ok(!parses("allow:::ffff:10.0.0.1"), "IPv4-mapped IPv6 refused");
        ok(!parses("allow:0177.0.0.1"), "octal IPv4 refused");
        ok(!parses("allow:2130706433"), "decimal IPv4 refused");
        ok(!parses("allow:0x7f.1"), "hex IPv4 refused");
        ok(!parses("allow:127.1"), "short IPv4 refused");
        ok(!parses("allow:foo.123"), "numeric last label refused");
        char lab[80], big[600];
        memset(lab, 'a', 64);
        snprintf(lab + 64, 16, ".com");
        snprintf(big, sizeof big, "allow:%s", lab);
        ok(!parses(big), "64-character label refused");
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        memcpy(big, "allow:", 6);
        for (int i = 10; i < 590; i += 50)
                big[i] = '.';
        ok(!parses(big), "over-long rule refused");
        char name[300];
        memset(name, 0, sizeof name);
        for (int i = 0; i < 254; i++)
                name[i] = (i % 50 == 49) ? '.' : 'a';
        snprintf(big, sizeof big, "allow:%s", name);
        ok(!parses(big), "254-character name refused");
}

static void test_json(void)
{
        struct pd_netpol p = policy("{\"mode\":\"policy\",\"rules\":[\"allow:*.pypi.org:443/tcp\","
                                    "{\"action\":\"deny\",\"cidr\":\"10.0.0.0/8\"},"
                                    "{\"action\":\"allow\",\"domain\":\"x.org\",\"ports\":443,\"proto\":\"tcp\"}],"
                                    "\"allow\":[\"example.com\"],\"deny\":[\"192.168.0.0/16\"],"
                                    "\"conn_per_sec\":50,\"bytes_per_sec\":1000}");
        ok(p.mode == PD_NETPOL_POLICY && p.n_rules == 5, "JSON: five rules");
        ok(p.strict, "JSON: strict on by default with a domain rule");
        ok(p.conn_per_sec == 50 && p.bytes_per_sec == 1000, "JSON: limits");
        char *s = pd_netpol_to_json_str(&p);
        struct pd_netpol q = policy(s);
        ok(q.n_rules == p.n_rules && memcmp(q.rules, p.rules, p.n_rules * sizeof *p.rules) == 0 &&
           q.strict == p.strict && q.mode == p.mode, "JSON round trip");
        free(s);
        pd_netpol_free(&q);
        pd_netpol_free(&p);
        p = policy("{\"mode\":\"open\",\"deny\":[\"1.2.3.0/24\"]}");
        ok(!p.strict, "open with CIDR rules only: strict off");
        pd_netpol_free(&p);
        p = policy("{\"mode\":\"open\",\"deny\":[\"evil.com\"],\"strict\":false}");
        ok(!p.strict, "strict false honoured");
        pd_netpol_free(&p);
        p = policy("{\"allow\":[\"a.com\"]}");
        ok(p.mode == PD_NETPOL_POLICY, "rules without mode: policy");
        pd_netpol_free(&p);

        static const char *bad[] = {
                "[]", "{\"mode\":\"wide\"}", "{\"mode\":\"none\",\"allow\":[\"a.com\"]}",
                "{\"mode\":\"policy\",\"rules\":[{\"action\":\"allow\"}]}",
                "{\"mode\":\"policy\",\"rules\":[{\"action\":\"allow\",\"cidr\":\"a.com\"}]}",
                "{\"mode\":\"policy\",\"rules\":[{\"action\":\"allow\",\"domain\":\"1.2.3.4\"}]}",
                "{\"mode\":\"policy\",\"rules\":[{\"action\":\"allow\",\"domain\":\"a.com\",\"x\":1}]}",
                "{\"mode\":\"policy\",\"rules\":[{\"action\":\"allow\",\"domain\":\"a.com\",\"ports\":70000}]}",
                "{\"mode\":\"policy\",\"rules\":[7]}", "{\"mode\":\"policy\",\"colour\":1}",
                "{\"mode\":\"policy\",\"conn_per_sec\":-1}", "{\"mode\":\"policy\",\"strict\":1}",
                "{\"mode\":\"policy\",\"mode\":\"open\"}", "{\"mode\":\"policy\"",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                struct pd_netpol r = { 0 };
                struct pd_error err = { 0 };
                char what[200];
                snprintf(what, sizeof what, "bad JSON refused with a message: %s", bad[i]);
                ok(pd_netpol_from_json_str(bad[i], strlen(bad[i]), &r, &err) < 0 && err.msg[0] &&
                   r.rules == NULL, "%s", what);
        }
}

static void test_max_rules(void)
{
        size_t n = PD_NETPOL_MAX_RULES + 1, len = 64 + n * 24;
        char *s = malloc(len), *w = s;
        w += sprintf(w, "{\"mode\":\"policy\",\"deny\":[");
        for (size_t i = 0; i < n; i++)
                w += sprintf(w, "%s\"10.%zu.%zu.0/24\"", i ? "," : "", (i >> 8) & 255, i & 255);
        sprintf(w, "]}");
        struct pd_netpol p = { 0 };
        struct pd_error err = { 0 };
        ok(pd_netpol_from_json_str(s, strlen(s), &p, &err) == -E2BIG, "more than max rules refused");
        ok(strstr(err.msg, "16384") != NULL, "max rules error names the limit");
        /* exactly the max is fine */
        char *last = strrchr(s, ',');
        strcpy(last, "]}");
        ok(pd_netpol_from_json_str(s, strlen(s), &p, &err) == 0 && p.n_rules == PD_NETPOL_MAX_RULES,
           "exactly max rules accepted");
        pd_netpol_free(&p);
        free(s);
}

static void test_names(void)
{
        struct pd_netpol p = policy("{\"mode\":\"policy\",\"rules\":[\"allow:*.pypi.org:443/tcp\","
                                    "\"allow:files.pythonhosted.org\",\"deny:*.corp.com\","
                                    "\"allow:git.corp.com:22/tcp\",\"allow:*.corp.com\","
                                    "\"deny:bad.pypi.org\",\"allow:metadata.google.internal\"]}");
        ok(pd_netpol_match_name(&p, "files.pythonhosted.org", NULL) == PD_NETPOL_ALLOW, "exact allow");
        ok(pd_netpol_match_name(&p, "x.files.pythonhosted.org", NULL) == PD_NETPOL_DENY, "exact allow does not cover subdomains");
        ok(pd_netpol_match_name(&p, "a.pypi.org", NULL) == PD_NETPOL_ALLOW, "wildcard allow");
        ok(pd_netpol_match_name(&p, "a.b.pypi.org", NULL) == PD_NETPOL_ALLOW, "wildcard covers deeper names");
        ok(pd_netpol_match_name(&p, "pypi.org", NULL) == PD_NETPOL_DENY, "wildcard does not cover the apex");
        ok(pd_netpol_match_name(&p, "xpypi.org", NULL) == PD_NETPOL_DENY, "wildcard needs a label boundary");
        ok(pd_netpol_match_name(&p, "bad.pypi.org", NULL) == PD_NETPOL_DENY, "exact deny beats wildcard allow");
        ok(pd_netpol_match_name(&p, "git.corp.com", NULL) == PD_NETPOL_ALLOW, "exact allow beats wildcard deny");
        ok(pd_netpol_match_name(&p, "wiki.corp.com", NULL) == PD_NETPOL_DENY, "wildcard deny beats wildcard allow");
        ok(pd_netpol_match_name(&p, "evil.com", NULL) == PD_NETPOL_DENY, "policy mode: unnamed denied");
        ok(pd_netpol_match_name(&p, "metadata.google.internal", NULL) == PD_NETPOL_ALLOW, "metadata name allowed when named exactly");
        const struct pd_netpol_rule *g[8];
        size_t n = pd_netpol_name_grants(&p, "git.corp.com", g, 8);
        ok(n == 1 && g[0]->port_lo == 22 && !g[0]->wildcard, "grants of an exact name: the exact rule only");
        ok(pd_netpol_name_grants(&p, "wiki.corp.com", g, 8) == 0, "no grants for a denied name");
        pd_netpol_free(&p);

        p = policy("{\"mode\":\"open\",\"deny\":[\"*.evil.com\"]}");
        ok(pd_netpol_match_name(&p, "example.com", NULL) == PD_NETPOL_ALLOW, "open mode: names allowed");
        ok(pd_netpol_match_name(&p, "x.evil.com", NULL) == PD_NETPOL_DENY, "open mode: deny rule");
        ok(pd_netpol_match_name(&p, "metadata.google.internal", NULL) == PD_NETPOL_DENY, "open mode: metadata name denied");
        ok(pd_netpol_name_grants(&p, "example.com", g, 8) == 0, "open mode: no pins without an allow rule");
        pd_netpol_free(&p);
        struct pd_netpol none = { 0 };
        ok(pd_netpol_match_name(&none, "example.com", NULL) == PD_NETPOL_DENY, "none mode denies names");

        char out[300];
        struct pd_error err = { 0 };
        ok(pd_netpol_name_normalize("WWW.Example.COM.", out, sizeof out, &err) > 0 &&
           strcmp(out, "www.example.com") == 0, "normalise");
        ok(pd_netpol_name_normalize("1.2.3.4.", out, sizeof out, &err) < 0, "trailing-dot IP literal is not a name");
        ok(pd_netpol_is_ip_literal("0x7f000001") && pd_netpol_is_ip_literal("017700000001") &&
           pd_netpol_is_ip_literal("::ffff:127.0.0.1") && pd_netpol_is_ip_literal("127.1"),
           "IP literal forms detected");
        ok(!pd_netpol_is_ip_literal("1.2.3.4.nip.io") && !pd_netpol_is_ip_literal("a1b.com"),
           "names with digits are not literals");
}

static void test_addrs(void)
{
        struct pd_netpol p = policy("{\"mode\":\"policy\",\"rules\":[\"allow:203.0.113.0/24:443/tcp\","
                                    "\"deny:203.0.113.7\",\"allow:0.0.0.0/0:80/tcp\","
                                    "\"allow:169.254.169.254:80/tcp\",\"allow:10.1.0.0/16\"]}");
        ok(addr_verdict(&p, "203.0.113.5", IPPROTO_TCP, 443) == PD_NETPOL_ALLOW, "CIDR allow");
        ok(addr_verdict(&p, "203.0.113.5", IPPROTO_UDP, 443) == PD_NETPOL_DENY, "CIDR allow is tcp only");
        ok(addr_verdict(&p, "203.0.113.5", IPPROTO_TCP, 444) == PD_NETPOL_DENY, "CIDR allow is port 443 only");
        ok(addr_verdict(&p, "203.0.113.7", IPPROTO_TCP, 443) == PD_NETPOL_DENY, "deny wins over a wider allow");
        ok(addr_verdict(&p, "198.51.100.1", IPPROTO_TCP, 80) == PD_NETPOL_ALLOW, "0/0 allow on port 80");
        ok(addr_verdict(&p, "127.0.0.1", IPPROTO_TCP, 80) == PD_NETPOL_DENY, "0/0 does not lift loopback");
        ok(addr_verdict(&p, "192.168.1.1", IPPROTO_TCP, 80) == PD_NETPOL_DENY, "0/0 does not lift private");
        ok(addr_verdict(&p, "100.100.100.200", IPPROTO_TCP, 80) == PD_NETPOL_DENY, "0/0 does not lift metadata");
        ok(addr_verdict(&p, "169.254.169.254", IPPROTO_TCP, 80) == PD_NETPOL_ALLOW, "explicit metadata /32 lifts it");
        ok(addr_verdict(&p, "10.1.2.3", IPPROTO_UDP, 53) == PD_NETPOL_ALLOW, "explicit private /16 lifts it");
        ok(addr_verdict(&p, "10.2.2.3", IPPROTO_UDP, 53) == PD_NETPOL_DENY, "rest of 10/8 stays closed");
        ok(addr_verdict(&p, "::ffff:203.0.113.7", IPPROTO_TCP, 443) == PD_NETPOL_DENY, "IPv4-mapped matched as IPv4");
        ok(addr_verdict(&p, "::ffff:127.0.0.1", IPPROTO_TCP, 80) == PD_NETPOL_DENY, "mapped loopback denied");
        ok(addr_verdict(&p, "2001:db8::1", IPPROTO_TCP, 80) == PD_NETPOL_DENY, "no IPv6 rule: denied");
        pd_netpol_free(&p);

        p = policy("{\"mode\":\"open\",\"deny\":[\"198.51.100.0/24\"]}");
        ok(addr_verdict(&p, "203.0.113.9", IPPROTO_TCP, 1) == PD_NETPOL_ALLOW, "open: public allowed");
        ok(addr_verdict(&p, "198.51.100.9", IPPROTO_TCP, 1) == PD_NETPOL_DENY, "open: deny rule");
        static const char *never[] = { "169.254.169.254", "100.100.100.200", "fd00:ec2::254", "127.0.0.1",
                                       "10.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1",
                                       "fe80::1", "fc00::1", "::1", "224.0.0.1" };
        for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
                char what[100];
                snprintf(what, sizeof what, "open: %s denied", never[i]);
                ok(addr_verdict(&p, never[i], IPPROTO_TCP, 80) == PD_NETPOL_DENY, "%s", what);
        }
        pd_netpol_free(&p);
}

static void test_pins(void)
{
        struct pd_netpol p = policy("{\"mode\":\"policy\",\"rules\":[\"allow:*.corp.com\","
                                    "\"allow:git.corp.com\",\"deny:198.51.100.0/24\"]}");
        ok(pin_ok(&p, "x.corp.com", "203.0.113.1"), "wildcard: public address pinned");
        ok(!pin_ok(&p, "x.corp.com", "198.51.100.1"), "wildcard: deny CIDR not pinned");
        ok(!pin_ok(&p, "x.corp.com", "10.0.0.1"), "wildcard: private not pinned (rebinding)");
        ok(pin_ok(&p, "git.corp.com", "198.51.100.1"), "exact: deny CIDR pinned (named explicitly)");
        ok(pin_ok(&p, "git.corp.com", "10.0.0.1"), "exact: private pinned");
        ok(!pin_ok(&p, "git.corp.com", "169.254.169.254"), "exact: metadata never pinned");
        ok(!pin_ok(&p, "git.corp.com", "127.0.0.1"), "exact: loopback never pinned");
        ok(!pin_ok(&p, "git.corp.com", "::ffff:127.0.0.1"), "exact: mapped loopback never pinned");
        ok(!pin_ok(&p, "git.corp.com", "fe80::1"), "exact: link-local never pinned");
        ok(!pin_ok(&p, "other.com", "203.0.113.1"), "unnamed: nothing pinned");
        pd_netpol_free(&p);
}

int main(void)
{
        test_rule_strings();
        test_json();
        test_max_rules();
        test_names();
        test_addrs();
        test_pins();
        return tap_done();
}
