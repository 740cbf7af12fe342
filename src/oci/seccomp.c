/* linux.seccomp from config.json, translated for libseccomp; without one,
 * paddock's own allowlist (DESIGN §5, docs/seccomp.md), which is stricter
 * than runc's "no filter at all". */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "oci.h"
#include "seccomp-policy.h"

static int parse_action(const char *name, json_t *errno_ret, uint32_t default_errno, uint32_t *out,
                        struct pd_error *err)
{
        uint32_t e = json_is_integer(errno_ret) ? (uint32_t)json_integer_value(errno_ret) : default_errno;
        if (!name)
                return pd_error_setx(err, EINVAL, "seccomp: action missing");
        if (strcmp(name, "SCMP_ACT_ALLOW") == 0) *out = SCMP_ACT_ALLOW;
        else if (strcmp(name, "SCMP_ACT_ERRNO") == 0) *out = SCMP_ACT_ERRNO(e);
        else if (strcmp(name, "SCMP_ACT_KILL") == 0 || strcmp(name, "SCMP_ACT_KILL_THREAD") == 0) *out = SCMP_ACT_KILL;
        else if (strcmp(name, "SCMP_ACT_KILL_PROCESS") == 0) *out = SCMP_ACT_KILL_PROCESS;
        else if (strcmp(name, "SCMP_ACT_TRAP") == 0) *out = SCMP_ACT_TRAP;
        else if (strcmp(name, "SCMP_ACT_TRACE") == 0) *out = SCMP_ACT_TRACE(e);
        else if (strcmp(name, "SCMP_ACT_LOG") == 0) *out = SCMP_ACT_LOG;
        else if (strcmp(name, "SCMP_ACT_NOTIFY") == 0)
                return pd_error_setx(err, ENOTSUP, "seccomp: SCMP_ACT_NOTIFY (listenerPath) is not supported by paddock-oci");
        else
                return pd_error_setx(err, EINVAL, "seccomp: unknown action '%s'", name);
        return 0;
}

static int parse_op(const char *op, enum scmp_compare *out)
{
        static const struct { const char *n; enum scmp_compare c; } t[] = {
                { "SCMP_CMP_NE", SCMP_CMP_NE }, { "SCMP_CMP_LT", SCMP_CMP_LT }, { "SCMP_CMP_LE", SCMP_CMP_LE },
                { "SCMP_CMP_EQ", SCMP_CMP_EQ }, { "SCMP_CMP_GE", SCMP_CMP_GE }, { "SCMP_CMP_GT", SCMP_CMP_GT },
                { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
        };
        for (size_t i = 0; op && i < sizeof t / sizeof t[0]; i++)
                if (strcmp(op, t[i].n) == 0) {
                        *out = t[i].c;
                        return 0;
                }
        return -EINVAL;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t def, json_t *rule, uint32_t default_errno, struct pd_error *err)
{
        uint32_t action;
        int r = parse_action(json_string_value(json_object_get(rule, "action")), json_object_get(rule, "errnoRet"),
                             default_errno, &action, err);
        if (r < 0)
                return r;
        if (action == def)
                return 0;       /* libseccomp refuses a rule equal to the default */
        json_t *args = json_object_get(rule, "args");
        struct scmp_arg_cmp cmps[6];
        unsigned n = 0;
        size_t i;
        json_t *a;
        json_array_foreach(args, i, a) {
                if (n >= 6)
                        return pd_error_setx(err, EINVAL, "seccomp: more than 6 argument conditions");
                enum scmp_compare op;
                json_t *idx = json_object_get(a, "index");
                if (!json_is_integer(idx) || json_integer_value(idx) < 0 || json_integer_value(idx) > 5 ||
                    parse_op(json_string_value(json_object_get(a, "op")), &op) < 0)
                        return pd_error_setx(err, EINVAL, "seccomp: bad argument condition");
                cmps[n++] = (struct scmp_arg_cmp){ (unsigned)json_integer_value(idx), op,
                                                   (scmp_datum_t)json_integer_value(json_object_get(a, "value")),
                                                   (scmp_datum_t)json_integer_value(json_object_get(a, "valueTwo")) };
        }
        json_t *names = json_object_get(rule, "names");
        json_t *nm;
        json_array_foreach(names, i, nm) {
                const char *name = json_string_value(nm);
                int nr = name ? seccomp_syscall_resolve_name(name) : __NR_SCMP_ERROR;
                if (nr == __NR_SCMP_ERROR) {
                        oci_debug("seccomp: unknown syscall '%s' ignored", name ? name : "?");
                        continue;
                }
                /* Conditions on the same argument are ANDed by libseccomp;
                 * runc (and Docker's profiles) mean OR for repeated ones:
                 * one rule per condition in that case. */
                bool same_arg = false;
                for (unsigned x = 0; x < n; x++)
                        for (unsigned y = x + 1; y < n; y++)
                                if (cmps[x].arg == cmps[y].arg)
                                        same_arg = true;
                if (same_arg) {
                        for (unsigned x = 0; x < n; x++)
                                if ((r = seccomp_rule_add_array(ctx, action, nr, 1, &cmps[x])) < 0)
                                        return pd_error_set(err, -r, "seccomp: rule for '%s'", name);
                } else if ((r = seccomp_rule_add_array(ctx, action, nr, n, cmps)) < 0) {
                        return pd_error_set(err, -r, "seccomp: rule for '%s'", name);
                }
        }
        return 0;
}

static int build_from_config(json_t *sc, scmp_filter_ctx *out, struct pd_error *err)
{
        uint32_t def;
        json_t *der = json_object_get(sc, "defaultErrnoRet");
        uint32_t default_errno = json_is_integer(der) ? (uint32_t)json_integer_value(der) : EPERM;
        int r = parse_action(json_string_value(json_object_get(sc, "defaultAction")), der, EPERM, &def, err);
        if (r < 0)
                return r;
        scmp_filter_ctx ctx = seccomp_init(def);
        if (!ctx)
                return pd_error_setx(err, ENOMEM, "seccomp_init");
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(sc, "architectures"), i, a) {
                const char *n = json_string_value(a);
                char lower[32];
                if (!n)
                        continue;
                if (strncmp(n, "SCMP_ARCH_", 10) == 0)
                        n += 10;
                snprintf(lower, sizeof lower, "%s", n);
                for (char *p = lower; *p; p++)
                        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
                uint32_t arch = seccomp_arch_resolve_name(lower);
                if (arch == 0) {
                        seccomp_release(ctx);
                        return pd_error_setx(err, EINVAL, "seccomp: unknown architecture '%s'", json_string_value(a));
                }
                r = seccomp_arch_add(ctx, arch);
                if (r < 0 && r != -EEXIST) {
                        seccomp_release(ctx);
                        return pd_error_set(err, -r, "seccomp: add architecture '%s'", lower);
                }
        }
        json_array_foreach(json_object_get(sc, "flags"), i, a) {
                const char *f = json_string_value(a);
                if (f && strcmp(f, "SECCOMP_FILTER_FLAG_LOG") == 0)
                        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
                else if (f && strcmp(f, "SECCOMP_FILTER_FLAG_SPEC_ALLOW") == 0)
                        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_SSB, 1);
        }
        /* no_new_privs is the process's own setting (process.noNewPrivileges). */
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        json_array_foreach(json_object_get(sc, "syscalls"), i, a) {
                if ((r = add_rule(ctx, def, a, default_errno, err)) < 0) {
                        seccomp_release(ctx);
                        return r;
                }
        }
        *out = ctx;
        return 0;
}

int oci_seccomp_apply(json_t *sc, const char *cache_dir, struct pd_error *err)
{
        int r;
        if (sc && !json_is_null(sc)) {
                if (!json_is_object(sc))
                        return pd_error_setx(err, EINVAL, "config.json: linux.seccomp must be an object");
                scmp_filter_ctx ctx = NULL;
                if ((r = build_from_config(sc, &ctx, err)) < 0)
                        return r;
                r = seccomp_load(ctx);
                seccomp_release(ctx);
                return r < 0 ? pd_error_set(err, -r, "seccomp: load the config's filter") : 0;
        }
        struct pd_bpf bpf;
        if ((r = pd_seccomp_load(cache_dir, NULL, &bpf, err)) < 0)
                return r;
        r = pd_seccomp_install(&bpf);
        pd_bpf_free(&bpf);
        return r < 0 ? pd_error_set(err, -r, "seccomp: install paddock's default filter") : 0;
}
