/* linux.seccomp from config.json, translated for libseccomp; without one,
 * paddock's own allowlist (DESIGN §5, docs/seccomp.md), which is stricter
 * than runc's "no filter at all". */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "oci/oci.h"
#include "jail/seccomp-policy.h"
#include "lib/util.h"

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

/* libseccomp 2.5 exports only to an fd: through a memfd. */
static int export_ctx(scmp_filter_ctx ctx, struct pd_bpf *out, struct pd_error *err)
{
        int fd = memfd_create("oci-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return pd_error_set(err, errno, "seccomp: memfd_create");
        int r = seccomp_export_bpf(ctx, fd);
        off_t size = lseek(fd, 0, SEEK_CUR);
        if (r < 0 || size <= 0 || size % (off_t)sizeof(struct sock_filter) ||
            size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
                close(fd);
                return pd_error_set(err, r < 0 ? -r : E2BIG, "seccomp: export the config's filter");
        }
        out->insns = malloc((size_t)size);
        if (!out->insns || pread(fd, out->insns, (size_t)size, 0) != size) {
                close(fd);
                free(out->insns);
                out->insns = NULL;
                return pd_error_set(err, EIO, "seccomp: read back BPF");
        }
        close(fd);
        out->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
        return 0;
}

static uint64_t fnv64(uint64_t h, const void *p, size_t n)
{
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++) {
                h ^= b[i];
                h *= 0x100000001b3ull;
        }
        return h;
}

#define CACHE_MAGIC 0x4f434953u /* "OCIS" */

/* A cached filter: the instructions, then {magic, fnv of them} in the
 * size of one instruction. Only files we own and nobody else may write. */
static int cache_read(const char *path, struct pd_bpf *out)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        struct stat st;
        const off_t isz = (off_t)sizeof(struct sock_filter);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) ||
            st.st_size < 2 * isz || st.st_size % isz || st.st_size / isz - 1 > BPF_MAXINSNS) {
                close(fd);
                return -EBADMSG;
        }
        struct sock_filter *buf = malloc((size_t)st.st_size);
        if (!buf || pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
                free(buf);
                close(fd);
                return -EBADMSG;
        }
        close(fd);
        size_t len = (size_t)(st.st_size / isz) - 1;
        uint32_t t[2];
        memcpy(t, &buf[len], sizeof t);
        if (t[0] != CACHE_MAGIC || t[1] != (uint32_t)fnv64(0xcbf29ce484222325ull, buf, len * sizeof *buf)) {
                free(buf);
                return -EBADMSG;
        }
        out->insns = buf;
        out->len = (unsigned short)len;
        return 0;
}

static void cache_write(const char *dir, const char *path, const struct pd_bpf *f)
{
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir);
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return;
        uint32_t t[2] = { CACHE_MAGIC, (uint32_t)fnv64(0xcbf29ce484222325ull, f->insns, f->len * sizeof *f->insns) };
        bool ok = pd_write_all(fd, f->insns, f->len * sizeof *f->insns) == 0 && pd_write_all(fd, t, sizeof t) == 0;
        close(fd);
        if (!ok || rename(tmp, path) < 0)
                unlink(tmp);
}

int oci_seccomp_prepare(json_t *sc, const char *root, struct pd_bpf *out, struct pd_error *err)
{
        *out = (struct pd_bpf){ 0 };
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/.seccomp-cache", root);
        bool cache = mkdir(dir, 0700) == 0 || errno == EEXIST;
        if (!sc || json_is_null(sc))
                return pd_seccomp_load(cache ? dir : NULL, NULL, out, err);
        if (!json_is_object(sc))
                return pd_error_setx(err, EINVAL, "config.json: linux.seccomp must be an object");
        char *dump = json_dumps(sc, JSON_COMPACT | JSON_SORT_KEYS);
        if (!dump)
                return -ENOMEM;
        const struct scmp_version *v = seccomp_version();
        char ver[64];
        snprintf(ver, sizeof ver, "oci-1 libseccomp %u.%u.%u", v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0);
        uint64_t h = fnv64(fnv64(0xcbf29ce484222325ull, ver, strlen(ver)), dump, strlen(dump));
        free(dump);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/oci-%016llx.bpf", dir, (unsigned long long)h);
        if (cache && cache_read(path, out) == 0)
                return 0;
        scmp_filter_ctx ctx = NULL;
        int r = build_from_config(sc, &ctx, err);
        if (r < 0)
                return r;
        r = export_ctx(ctx, out, err);
        seccomp_release(ctx);
        if (r < 0)
                return r;
        if (cache)
                cache_write(dir, path, out);
        return 0;
}

int oci_seccomp_install(const struct pd_bpf *f, struct pd_error *err)
{
        int r = pd_seccomp_install(f);
        return r < 0 ? pd_error_set(err, -r, "seccomp: install the filter") : 0;
}
