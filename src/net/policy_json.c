/* The JSON form of a network policy (policy.h, docs/network.md). */
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net/policy.h"

static int rule_from_object(json_t *o, struct pd_netpol_rule *r, struct pd_error *err)
{
        const char *key;
        json_t *v;
        const char *action = NULL, *target = NULL, *proto = "any";
        char ports[24] = "*";
        int n_target = 0;
        json_object_foreach(o, key, v) {
                if (strcmp(key, "action") == 0 && json_is_string(v)) {
                        action = json_string_value(v);
                } else if ((strcmp(key, "cidr") == 0 || strcmp(key, "domain") == 0) &&
                           json_is_string(v)) {
                        target = json_string_value(v);
                        n_target++;
                } else if (strcmp(key, "ports") == 0 && json_is_string(v)) {
                        snprintf(ports, sizeof ports, "%s", json_string_value(v));
                        if (strlen(json_string_value(v)) >= sizeof ports)
                                return pd_error_setx(err, EINVAL, "rule: ports too long");
                } else if (strcmp(key, "ports") == 0 && json_is_integer(v)) {
                        json_int_t p = json_integer_value(v);
                        if (p < 1 || p > 65535)
                                return pd_error_setx(err, EINVAL, "rule: port %lld out of 1..65535",
                                                     (long long)p);
                        snprintf(ports, sizeof ports, "%lld", (long long)p);
                } else if (strcmp(key, "proto") == 0 && json_is_string(v)) {
                        proto = json_string_value(v);
                } else {
                        return pd_error_setx(err, EINVAL, "rule: unknown or mistyped key '%.32s'",
                                             key);
                }
        }
        if (!action || (strcmp(action, "allow") && strcmp(action, "deny")))
                return pd_error_setx(err, EINVAL, "rule: \"action\" must be allow or deny");
        if (n_target != 1)
                return pd_error_setx(err, EINVAL, "rule: exactly one of \"cidr\" or \"domain\"");
        if (strlen(target) > PD_NETPOL_NAME_MAX + 2)
                return pd_error_setx(err, EINVAL, "rule: target too long");
        char s[PD_NETPOL_RULE_TEXT_MAX + 1];
        bool v6 = strchr(target, ':') != NULL;
        int n = snprintf(s, sizeof s, "%s:%s%s%s:%s/%.8s", action, v6 ? "[" : "", target,
                         v6 ? "]" : "", ports, proto);
        if (n < 0 || (size_t)n >= sizeof s)
                return pd_error_setx(err, EINVAL, "rule too long");
        int rc = pd_netpol_rule_parse(s, r, err);
        if (rc < 0)
                return rc;
        /* a domain rule written with "cidr" (or the reverse) is a mistake */
        if ((json_object_get(o, "cidr") != NULL) != (r->kind == PD_NETPOL_CIDR))
                return pd_error_setx(err, EINVAL, "rule '%.64s': \"cidr\" names an address, "
                                     "\"domain\" a name", target);
        return 0;
}

static int add_list(struct pd_netpol *p, json_t *arr, const char *prefix, struct pd_error *err)
{
        size_t i;
        json_t *v;
        if (!json_is_array(arr))
                return pd_error_setx(err, EINVAL, "\"%s\" must be an array", prefix ? prefix : "rules");
        if (json_array_size(arr) > PD_NETPOL_MAX_RULES)
                return pd_error_setx(err, E2BIG, "more than %d network rules", PD_NETPOL_MAX_RULES);
        json_array_foreach(arr, i, v) {
                struct pd_netpol_rule r;
                int rc;
                if (json_is_string(v) && prefix) {
                        char s[PD_NETPOL_RULE_TEXT_MAX + 1];
                        const char *t = json_string_value(v);
                        /* a bare IPv6 target with ports is ambiguous: targets
                         * with 2+ colons are taken whole (policy.h) */
                        int n = snprintf(s, sizeof s, "%s:%s", prefix, t);
                        if (n < 0 || (size_t)n >= sizeof s)
                                return pd_error_setx(err, EINVAL, "%s[%zu]: too long", prefix, i);
                        rc = pd_netpol_rule_parse(s, &r, err);
                } else if (json_is_string(v)) {
                        rc = pd_netpol_rule_parse(json_string_value(v), &r, err);
                } else if (json_is_object(v) && !prefix) {
                        rc = rule_from_object(v, &r, err);
                } else {
                        return pd_error_setx(err, EINVAL, "%s[%zu]: expected a %s", prefix ? prefix : "rules",
                                             i, prefix ? "string" : "string or object");
                }
                if (rc < 0)
                        return pd_error_prefix(err, "%s[%zu]", prefix ? prefix : "rules", i);
                rc = pd_netpol_add_rule(p, &r, err);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

static int get_uint(json_t *v, const char *key, uint64_t max, uint64_t *out, struct pd_error *err)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > max)
                return pd_error_setx(err, EINVAL, "\"%s\" must be an integer 0..%llu", key,
                                     (unsigned long long)max);
        *out = (uint64_t)json_integer_value(v);
        return 0;
}

int pd_netpol_from_json(const void *json, struct pd_netpol *out, struct pd_error *err)
{
        json_t *o = (json_t *)json;
        struct pd_netpol p = { 0 };
        const char *key;
        json_t *v;
        bool have_mode = false;
        int rc = 0;
        if (!json_is_object(o))
                return pd_error_setx(err, EINVAL, "network policy must be a JSON object");
        json_object_foreach(o, key, v) {
                uint64_t u;
                if (strcmp(key, "mode") == 0) {
                        if (!json_is_string(v)) {
                                rc = pd_error_setx(err, EINVAL, "\"mode\" must be a string");
                                break;
                        }
                        rc = pd_netpol_mode_parse(json_string_value(v), &p.mode, err);
                        have_mode = true;
                } else if (strcmp(key, "rules") == 0) {
                        rc = add_list(&p, v, NULL, err);
                } else if (strcmp(key, "allow") == 0 || strcmp(key, "deny") == 0) {
                        rc = add_list(&p, v, key, err);
                } else if (strcmp(key, "strict") == 0) {
                        if (!json_is_boolean(v)) {
                                rc = pd_error_setx(err, EINVAL, "\"strict\" must be true or false");
                                break;
                        }
                        p.strict = json_is_true(v);
                        p.strict_set = true;
                } else if (strcmp(key, "conn_per_sec") == 0) {
                        rc = get_uint(v, key, 1000000, &u, err);
                        p.conn_per_sec = (uint32_t)u;
                } else if (strcmp(key, "bytes_per_sec") == 0) {
                        rc = get_uint(v, key, UINT64_C(1) << 40, &u, err);
                        p.bytes_per_sec = u;
                } else {
                        rc = pd_error_setx(err, EINVAL, "network policy: unknown key '%.32s'", key);
                }
                if (rc < 0)
                        break;
        }
        if (rc >= 0 && !have_mode && p.n_rules)
                p.mode = PD_NETPOL_POLICY;
        if (rc >= 0)
                rc = pd_netpol_finish(&p, err);
        if (rc < 0) {
                pd_netpol_free(&p);
                return rc;
        }
        *out = p;
        return 0;
}

int pd_netpol_from_json_str(const char *s, size_t len, struct pd_netpol *out,
                            struct pd_error *err)
{
        json_error_t je;
        json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return pd_error_setx(err, EINVAL, "network policy JSON: %s (line %d)", je.text,
                                     je.line);
        int rc = pd_netpol_from_json(o, out, err);
        json_decref(o);
        return rc;
}

void *pd_netpol_to_json(const struct pd_netpol *p)
{
        json_t *rules = json_array();
        for (size_t i = 0; rules && i < p->n_rules; i++) {
                char s[PD_NETPOL_RULE_TEXT_MAX + 1];
                pd_netpol_rule_format(&p->rules[i], s, sizeof s);
                if (json_array_append_new(rules, json_string(s)) < 0) {
                        json_decref(rules);
                        return NULL;
                }
        }
        if (!rules)
                return NULL;
        return json_pack("{s:s, s:b, s:I, s:I, s:o}", "mode", pd_netpol_mode_name(p->mode),
                         "strict", p->strict, "conn_per_sec", (json_int_t)p->conn_per_sec,
                         "bytes_per_sec", (json_int_t)p->bytes_per_sec, "rules", rules);
}

char *pd_netpol_to_json_str(const struct pd_netpol *p)
{
        json_t *o = pd_netpol_to_json(p);
        if (!o)
                return NULL;
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return s;
}
