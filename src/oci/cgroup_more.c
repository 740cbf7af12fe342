/* linux.resources beyond memory, cpu, pids and devices (cgroup.c):
 * blockIO (weight devices and throttles; the v1 weight is in cgroup.c),
 * hugepageLimits and network. Each is applied in the hierarchy that has its
 * controller; where the host has none, or refuses the value, the runtime
 * logs what was not applied instead of dropping it silently. A malformed
 * value is an error before anything is written. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "oci/oci.h"
#include "lib/util.h"

static bool get_i64(json_t *o, const char *key, int64_t *out)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                return false;
        *out = json_integer_value(v);
        return true;
}

/* Write val to <ctrl's cgroup dir>/<file>; a failure is logged. */
static void put(const char *ctrl, const char *path, const char *file, const char *val, const char *what)
{
        char dir[PATH_MAX];
        if (oci_cgroup_ctrl_dir(ctrl, path, dir, sizeof dir) < 0) {
                oci_warn("linux.resources.%s not applied: no %s cgroup controller on this host", what, ctrl);
                return;
        }
        struct pd_error e = { 0 };
        char file_path[PATH_MAX + 64];
        snprintf(file_path, sizeof file_path, "%s/%s", dir, file);
        if (pd_write_file_at(AT_FDCWD, file_path, val, &e) < 0)
                oci_warn("linux.resources.%s not applied: %s", what, e.msg);
}

static int check_dev(json_t *d, const char *what, int64_t *maj, int64_t *min, struct pd_error *err)
{
        if (!get_i64(d, "major", maj) || !get_i64(d, "minor", min) || *maj < 0 || *min < 0)
                return pd_error_setx(err, EINVAL, "config.json: linux.resources.%s needs major and minor", what);
        return 0;
}

static const struct { const char *key, *v1, *v2; } throttles[] = {
        { "throttleReadBpsDevice", "blkio.throttle.read_bps_device", "rbps" },
        { "throttleWriteBpsDevice", "blkio.throttle.write_bps_device", "wbps" },
        { "throttleReadIOPSDevice", "blkio.throttle.read_iops_device", "riops" },
        { "throttleWriteIOPSDevice", "blkio.throttle.write_iops_device", "wiops" },
};

static int block_io(const char *path, bool v2, json_t *bio, struct pd_error *err)
{
        char val[128], what[96];
        int64_t maj, min, v;
        size_t i;
        json_t *d;
        if (v2 && get_i64(bio, "weight", &v)) {
                snprintf(val, sizeof val, "default %" PRId64, v);
                put("io", path, "io.weight", val, "blockIO.weight");
        }
        json_array_foreach(json_object_get(bio, "weightDevice"), i, d) {
                if (check_dev(d, "blockIO.weightDevice", &maj, &min, err) < 0)
                        return -EINVAL;
                if (!get_i64(d, "weight", &v))
                        continue;
                snprintf(val, sizeof val, "%" PRId64 ":%" PRId64 " %" PRId64, maj, min, v);
                put(v2 ? "io" : "blkio", path, v2 ? "io.weight" : "blkio.weight_device", val, "blockIO.weightDevice");
        }
        for (size_t k = 0; k < sizeof throttles / sizeof throttles[0]; k++) {
                snprintf(what, sizeof what, "blockIO.%s", throttles[k].key);
                json_array_foreach(json_object_get(bio, throttles[k].key), i, d) {
                        if (check_dev(d, what, &maj, &min, err) < 0)
                                return -EINVAL;
                        if (!get_i64(d, "rate", &v) || v < 0)
                                return pd_error_setx(err, EINVAL, "config.json: linux.resources.%s needs a rate", what);
                        if (v2)
                                snprintf(val, sizeof val, "%" PRId64 ":%" PRId64 " %s=%" PRId64, maj, min,
                                         throttles[k].v2, v);
                        else
                                snprintf(val, sizeof val, "%" PRId64 ":%" PRId64 " %" PRId64, maj, min, v);
                        put(v2 ? "io" : "blkio", path, v2 ? "io.max" : throttles[k].v1, val, what);
                }
        }
        return 0;
}

static int hugepages(const char *path, bool v2, json_t *limits, struct pd_error *err)
{
        size_t i;
        json_t *l;
        json_array_foreach(limits, i, l) {
                const char *size = json_string_value(json_object_get(l, "pageSize"));
                int64_t v;
                /* The size names a file: digits and a unit ("2MB", "1GB"), nothing else. */
                size_t n = size ? strspn(size, "0123456789") : 0;
                if (!size || n == 0 || n > 8 || !strchr("KMGT", size[n]) || strcmp(size + n + 1, "B") != 0 ||
                    !get_i64(l, "limit", &v))
                        return pd_error_setx(err, EINVAL, "config.json: bad linux.resources.hugepageLimits[%zu]", i);
                char file[64], val[32];
                snprintf(file, sizeof file, "hugetlb.%s.%s", size, v2 ? "max" : "limit_in_bytes");
                snprintf(val, sizeof val, "%" PRId64, v);
                put("hugetlb", path, file, val, "hugepageLimits");
        }
        return 0;
}

static int network(const char *path, bool v2, json_t *net, struct pd_error *err)
{
        char val[64];
        int64_t id;
        if (get_i64(net, "classID", &id)) {
                if (id < 0 || id > UINT32_MAX)
                        return pd_error_setx(err, EINVAL, "config.json: linux.resources.network.classID out of range");
                if (v2)
                        oci_warn("linux.resources.network.classID not applied: cgroup v2 has no net_cls");
                else {
                        snprintf(val, sizeof val, "%" PRId64, id);
                        put("net_cls", path, "net_cls.classid", val, "network.classID");
                }
        }
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(net, "priorities"), i, p) {
                const char *name = json_string_value(json_object_get(p, "name"));
                int64_t prio;
                if (!name || !*name || strlen(name) > 15 || strpbrk(name, " /\n") || !get_i64(p, "priority", &prio) ||
                    prio < 0 || prio > UINT32_MAX)
                        return pd_error_setx(err, EINVAL, "config.json: bad linux.resources.network.priorities[%zu]", i);
                if (v2) {
                        oci_warn("linux.resources.network.priorities not applied: cgroup v2 has no net_prio");
                        continue;
                }
                snprintf(val, sizeof val, "%s %" PRId64, name, prio);
                put("net_prio", path, "net_prio.ifpriomap", val, "network.priorities");
        }
        return 0;
}

int oci_cgroup_apply_more(const char *path, bool v2, json_t *res, struct pd_error *err)
{
        json_t *bio = json_object_get(res, "blockIO"), *huge = json_object_get(res, "hugepageLimits"),
               *net = json_object_get(res, "network");
        int r = 0;
        if (json_is_object(bio) && (r = block_io(path, v2, bio, err)) < 0)
                return r;
        if (json_is_array(huge) && (r = hugepages(path, v2, huge, err)) < 0)
                return r;
        if (json_is_object(net) && (r = network(path, v2, net, err)) < 0)
                return r;
        if (json_object_get(res, "rdma"))
                oci_warn("linux.resources.rdma not applied: paddock-oci does not support it");
        return 0;
}
