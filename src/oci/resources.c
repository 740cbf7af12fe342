/* config.json's linux.resources into the typed limits the jail's cgroup
 * writer takes (jail/cgroup_limits.h). Everything is checked here, before
 * the container or its cgroup exists: a malformed value is an error that
 * changes nothing. What is well formed but cannot be enforced on this host
 * is logged when it is written (cgroup.c), not dropped silently. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"

#define WHERE "config.json: linux.resources."

/* An integer member, absent (or null) allowed. 1: present, 0: absent. */
static int int_member(json_t *o, const char *key, const char *where, int64_t *out, struct pd_error *err)
{
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v))
                return pd_error_setx(err, EINVAL, WHERE "%s.%s must be an integer", where, key);
        *out = json_integer_value(v);
        return 1;
}

static int str_member(json_t *o, const char *key, const char *where, const char **out, struct pd_error *err)
{
        json_t *v = json_object_get(o, key);
        *out = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return pd_error_setx(err, EINVAL, WHERE "%s.%s must be a string", where, key);
        *out = json_string_value(v);
        return 1;
}

/* An object member, absent or null allowed (*out = NULL). */
static int obj_member(json_t *o, const char *key, json_t **out, struct pd_error *err)
{
        json_t *v = json_object_get(o, key);
        *out = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return pd_error_setx(err, EINVAL, WHERE "%s must be an object", key);
        *out = v;
        return 1;
}

static int array_member(json_t *o, const char *key, const char *where, json_t **out, struct pd_error *err)
{
        json_t *v = json_object_get(o, key);
        *out = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v))
                return pd_error_setx(err, EINVAL, WHERE "%s%s%s must be an array", where, *where ? "." : "", key);
        *out = v;
        return 1;
}

static int memory(json_t *m, struct pd_cg_limits *l, struct pd_error *err)
{
        const struct { const char *key; uint32_t bit; int64_t *to; } ints[] = {
                { "limit", PD_CG_SET_MEM_LIMIT, &l->memory.limit },
                { "reservation", PD_CG_SET_MEM_RESERVATION, &l->memory.reservation },
                { "swap", PD_CG_SET_MEM_SWAP, &l->memory.swap },
                { "kernel", PD_CG_SET_MEM_KERNEL, &l->memory.kernel },
                { "kernelTCP", PD_CG_SET_MEM_KERNEL_TCP, &l->memory.kernel_tcp },
        };
        int r;
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
                if ((r = int_member(m, ints[i].key, "memory", ints[i].to, err)) < 0)
                        return r;
                l->set |= r ? ints[i].bit : 0;
        }
        int64_t v;
        if ((r = int_member(m, "swappiness", "memory", &v, err)) < 0)
                return r;
        /* The kernel's range; outside it runc's old behaviour, ignored. */
        if (r && v >= 0 && v <= 100) {
                l->set |= PD_CG_SET_MEM_SWAPPINESS;
                l->memory.swappiness = (uint32_t)v;
        }
        if (json_is_true(json_object_get(m, "disableOOMKiller")))
                l->set |= PD_CG_SET_MEM_NO_OOM_KILL;
        return 0;
}

static int cpu(json_t *c, struct pd_cg_limits *l, struct pd_error *err)
{
        int64_t v;
        int r;
        if ((r = int_member(c, "shares", "cpu", &v, err)) < 0)
                return r;
        if (r && v > 0) {
                l->set |= PD_CG_SET_CPU_SHARES;
                l->cpu.shares = (uint64_t)v;
        }
        if ((r = int_member(c, "quota", "cpu", &l->cpu.quota, err)) < 0)
                return r;
        l->set |= r ? PD_CG_SET_CPU_QUOTA : 0;
        if ((r = int_member(c, "period", "cpu", &l->cpu.period, err)) < 0)
                return r;
        l->set |= r ? PD_CG_SET_CPU_PERIOD : 0;
        if ((r = str_member(c, "cpus", "cpu", &l->cpu.cpus, err)) < 0 ||
            (r = str_member(c, "mems", "cpu", &l->cpu.mems, err)) < 0)
                return r;
        return 0;
}

static int device_number(json_t *d, const char *key, const char *what, size_t i, uint32_t *out, struct pd_error *err)
{
        json_t *v = json_object_get(d, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
                return pd_error_setx(err, EINVAL, WHERE "%s[%zu] needs major and minor", what, i);
        *out = (uint32_t)json_integer_value(v);
        return 0;
}

static const struct { const char *key; enum pd_cg_throttle t; } throttle_keys[] = {
        { "throttleReadBpsDevice", PD_CG_READ_BPS },
        { "throttleWriteBpsDevice", PD_CG_WRITE_BPS },
        { "throttleReadIOPSDevice", PD_CG_READ_IOPS },
        { "throttleWriteIOPSDevice", PD_CG_WRITE_IOPS },
};

static int block_io(json_t *b, struct oci_resources *res, struct pd_error *err)
{
        struct pd_cg_limits *l = &res->lim;
        int r;
        if ((r = int_member(b, "weight", "blockIO", &l->blkio.weight, err)) < 0)
                return r;
        l->set |= r ? PD_CG_SET_BLKIO_WEIGHT : 0;
        /* One allocation for the weight devices and the four throttles. */
        json_t *lists[1 + _PD_CG_THROTTLE_MAX];
        const char *names[1 + _PD_CG_THROTTLE_MAX] = { "weightDevice" };
        size_t total = 0;
        for (size_t k = 0; k < 1 + _PD_CG_THROTTLE_MAX; k++) {
                if (k)
                        names[k] = throttle_keys[k - 1].key;
                if ((r = array_member(b, names[k], "blockIO", &lists[k], err)) < 0)
                        return r;
                total += json_array_size(lists[k]);
        }
        if (!total)
                return 0;
        struct pd_cg_blkio_dev *all = calloc(total, sizeof *all);
        if (!all)
                return -ENOMEM;
        res->blkio = all;
        for (size_t k = 0; k < 1 + _PD_CG_THROTTLE_MAX; k++) {
                char what[64];
                snprintf(what, sizeof what, "blockIO.%s", names[k]);
                struct pd_cg_blkio_dev *start = all;
                size_t i;
                json_t *d;
                json_array_foreach(lists[k], i, d) {
                        struct pd_cg_blkio_dev e = { 0 };
                        if ((r = device_number(d, "major", what, i, &e.major, err)) < 0 ||
                            (r = device_number(d, "minor", what, i, &e.minor, err)) < 0)
                                return r;
                        json_t *v = json_object_get(d, k ? "rate" : "weight");
                        if (k && (!json_is_integer(v) || json_integer_value(v) < 0))
                                return pd_error_setx(err, EINVAL, WHERE "%s[%zu] needs a rate", what, i);
                        if (!k && !json_is_integer(v))
                                continue;       /* a leafWeight alone: nothing we apply */
                        e.value = json_integer_value(v);
                        *all++ = e;
                }
                if (k == 0) {
                        l->blkio.weight_dev = start;
                        l->blkio.n_weight_dev = (size_t)(all - start);
                } else {
                        l->blkio.throttle[throttle_keys[k - 1].t] = start;
                        l->blkio.n_throttle[throttle_keys[k - 1].t] = (size_t)(all - start);
                }
        }
        return 0;
}

static int hugepages(json_t *a, struct oci_resources *res, struct pd_error *err)
{
        size_t n = json_array_size(a), i;
        if (!n)
                return 0;
        if (!(res->hugepages = calloc(n, sizeof *res->hugepages)))
                return -ENOMEM;
        json_t *e;
        json_array_foreach(a, i, e) {
                const char *size = json_string_value(json_object_get(e, "pageSize"));
                json_t *lim = json_object_get(e, "limit");
                /* The size names a file: digits and a unit ("2MB", "1GB"), nothing else. */
                size_t d = size ? strspn(size, "0123456789") : 0;
                if (!size || d == 0 || d > 8 || !size[d] || !strchr("KMGT", size[d]) || strcmp(size + d + 1, "B") != 0 ||
                    !json_is_integer(lim))
                        return pd_error_setx(err, EINVAL, "config.json: bad linux.resources.hugepageLimits[%zu]", i);
                snprintf(res->hugepages[i].size, sizeof res->hugepages[i].size, "%s", size);
                res->hugepages[i].limit = json_integer_value(lim);
        }
        res->lim.hugepages = res->hugepages;
        res->lim.n_hugepages = n;
        return 0;
}

static int network(json_t *net, struct oci_resources *res, struct pd_error *err)
{
        int64_t id;
        int r = int_member(net, "classID", "network", &id, err);
        if (r < 0)
                return r;
        if (r) {
                if (id < 0 || id > UINT32_MAX)
                        return pd_error_setx(err, EINVAL, WHERE "network.classID out of range");
                res->lim.set |= PD_CG_SET_NET_CLASSID;
                res->lim.net.classid = (uint32_t)id;
        }
        json_t *a;
        if ((r = array_member(net, "priorities", "network", &a, err)) < 0)
                return r;
        size_t n = json_array_size(a), i;
        if (!n)
                return 0;
        if (!(res->prios = calloc(n, sizeof *res->prios)))
                return -ENOMEM;
        json_t *p;
        json_array_foreach(a, i, p) {
                const char *name = json_string_value(json_object_get(p, "name"));
                json_t *prio = json_object_get(p, "priority");
                if (!name || !*name || strlen(name) > 15 || strpbrk(name, " /\n") || !json_is_integer(prio) ||
                    json_integer_value(prio) < 0 || json_integer_value(prio) > UINT32_MAX)
                        return pd_error_setx(err, EINVAL, "config.json: bad linux.resources.network.priorities[%zu]", i);
                snprintf(res->prios[i].ifname, sizeof res->prios[i].ifname, "%s", name);
                res->prios[i].prio = (uint32_t)json_integer_value(prio);
        }
        res->lim.net.prios = res->prios;
        res->lim.net.n_prios = n;
        return 0;
}

/* The nodes every container may use (runc's list), after the config's own
 * rules: engines such as podman send only "deny all" and count on these. */
static const struct pd_cg_device default_devices[] = {
        { true, 'c', -1, -1, "m" },  { true, 'b', -1, -1, "m" },  { true, 'c', 1, 3, "rwm" },
        { true, 'c', 1, 5, "rwm" },  { true, 'c', 1, 7, "rwm" },  { true, 'c', 1, 8, "rwm" },
        { true, 'c', 1, 9, "rwm" },  { true, 'c', 5, 0, "rwm" },  { true, 'c', 5, 1, "rwm" },
        { true, 'c', 5, 2, "rwm" },  { true, 'c', 136, -1, "rwm" },
};

static int devices(json_t *a, struct oci_resources *res, struct pd_error *err)
{
        size_t n = json_array_size(a), nd = sizeof default_devices / sizeof default_devices[0], i;
        if (!(res->devices = calloc(n + nd, sizeof *res->devices)))
                return -ENOMEM;
        json_t *d;
        json_array_foreach(a, i, d) {
                struct pd_cg_device *e = &res->devices[i];
                if (!json_is_object(d))
                        return pd_error_setx(err, EINVAL, WHERE "devices[%zu] must be an object", i);
                const char *type = json_string_value(json_object_get(d, "type"));
                const char *access = json_string_value(json_object_get(d, "access"));
                if (!type || !*type)
                        type = "a";
                if (!access || !*access)
                        access = "rwm";
                if (strlen(type) != 1 || !strchr("abc", type[0]))
                        return pd_error_setx(err, EINVAL, WHERE "devices[%zu].type '%s': 'a', 'b' or 'c'", i, type);
                if (strlen(access) > 3 || strspn(access, "rwm") != strlen(access))
                        return pd_error_setx(err, EINVAL, WHERE "devices[%zu].access '%s': some of 'rwm'", i, access);
                e->allow = json_is_true(json_object_get(d, "allow"));
                e->type = type[0];
                snprintf(e->access, sizeof e->access, "%s", access);
                json_t *mj = json_object_get(d, "major"), *mn = json_object_get(d, "minor");
                /* absent, null or negative: any ('*') */
                e->major = json_is_integer(mj) && json_integer_value(mj) >= 0 ? json_integer_value(mj) : -1;
                e->minor = json_is_integer(mn) && json_integer_value(mn) >= 0 ? json_integer_value(mn) : -1;
        }
        memcpy(res->devices + n, default_devices, sizeof default_devices);
        res->lim.devices = res->devices;
        res->lim.n_devices = n + nd;
        return 0;
}

static int unified(json_t *u, struct oci_resources *res, struct pd_error *err)
{
        size_t n = json_object_size(u), i = 0;
        if (!n)
                return 0;
        if (!(res->unified = calloc(n, sizeof *res->unified)))
                return -ENOMEM;
        const char *k;
        json_t *v;
        json_object_foreach(u, k, v) {
                /* A key names a file of the container's cgroup, nothing else. */
                if (!*k || strchr(k, '/') || strstr(k, ".."))
                        return pd_error_setx(err, EINVAL, WHERE "unified: bad key '%s'", k);
                if (!json_is_string(v))
                        return pd_error_setx(err, EINVAL, WHERE "unified.%s must be a string", k);
                res->unified[i++] = (struct pd_cg_kv){ k, json_string_value(v) };
        }
        res->lim.unified = res->unified;
        res->lim.n_unified = n;
        return 0;
}

int oci_resources_parse(json_t *j, struct oci_resources *res, struct pd_error *err)
{
        memset(res, 0, sizeof *res);
        if (!j || json_is_null(j))
                return 0;
        if (!json_is_object(j))
                return pd_error_setx(err, EINVAL, "config.json: linux.resources must be an object");
        json_t *o;
        int r;
        if ((r = obj_member(j, "memory", &o, err)) < 0 || (o && (r = memory(o, &res->lim, err)) < 0))
                return r;
        if ((r = obj_member(j, "cpu", &o, err)) < 0 || (o && (r = cpu(o, &res->lim, err)) < 0))
                return r;
        if ((r = obj_member(j, "pids", &o, err)) < 0 ||
            (o && (r = int_member(o, "limit", "pids", &res->lim.pids, err)) < 0))
                return r;
        res->lim.set |= r > 0 ? PD_CG_SET_PIDS : 0;
        if ((r = obj_member(j, "blockIO", &o, err)) < 0 || (o && (r = block_io(o, res, err)) < 0))
                return r;
        if ((r = array_member(j, "hugepageLimits", "", &o, err)) < 0 || (r = hugepages(o, res, err)) < 0)
                return r;
        if ((r = obj_member(j, "network", &o, err)) < 0 || (o && (r = network(o, res, err)) < 0))
                return r;
        if ((r = array_member(j, "devices", "", &o, err)) < 0 || (o && (r = devices(o, res, err)) < 0))
                return r;
        if ((r = obj_member(j, "unified", &o, err)) < 0 || (o && (r = unified(o, res, err)) < 0))
                return r;
        res->rdma = json_object_get(j, "rdma") != NULL;
        return 0;
}

void oci_resources_free(struct oci_resources *res)
{
        free(res->devices);
        free(res->blkio);
        free(res->hugepages);
        free(res->prios);
        free(res->unified);
        memset(res, 0, sizeof *res);
}
