/* What a caller asks of a sandbox: tier, template, limits, environment.
 * Filled by the CLI (or, later, the server) and read by the tier drivers. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define PD_DEFAULT_MEMORY (512ull << 20)
#define PD_DEFAULT_DISK (1ull << 30)
#define PD_DEFAULT_PIDS 512u
#define PD_DEFAULT_MILLICPUS 1000u
#define PD_MAX_VOLUMES 32
#define PD_USER_UID 1000u

enum pd_isolation {
        PD_ISO_PROCESS,
        PD_ISO_CONTAINER,
        PD_ISO_SUPERVISED,
        PD_ISO_MICROVM,
};

/* none: loopback only. open / policy: a veth to the instance's router
 * netns, rules in spec.netpol (src/net/policy.h, docs/network.md). */
enum pd_net_mode { PD_NET_NONE, PD_NET_OPEN, PD_NET_POLICY };

struct pd_netpol;

/* How a volume's files' owners translate (docs/security.md, Volumes):
 * OWNER: the sandbox's `user` is the directory's owner (or uid/gid given),
 * every other sandbox id is the sandbox's own host range; SANDBOX: every
 * sandbox id is its own range, no host account at all. Never host root. */
enum pd_volume_map { PD_VOLUME_MAP_OWNER, PD_VOLUME_MAP_SANDBOX };

struct pd_volume {
        const char *host;       /* host path (local CLI only) */
        const char *target;     /* absolute path inside the sandbox */
        bool readonly;
        enum pd_volume_map map;
        bool has_uid, has_gid;  /* :uid=N, :gid=M: `user`'s host ids */
        uint32_t uid, gid;
};

struct pd_spec {
        enum pd_isolation isolation;
        const char *template_name;      /* registered name, or NULL with template_dir */
        const char *template_dir;       /* a host directory (local CLI only) */
        uint64_t memory_bytes;
        uint64_t disk_bytes;
        uint32_t pids;
        uint32_t millicpus;
        enum pd_net_mode net;
        /* open/policy: the rules (mode matches net); NULL = none */
        const struct pd_netpol *netpol;
        /* the router's uplink ("netns:PATH") and upstream resolvers
         * ("IP[,IP]"); used when the instance's router is first made */
        const char *net_uplink;
        const char *net_resolver;
        const char *hostname;
        /* process tier: accept a kernel whose Landlock lacks a right the
         * policy needs (recorded in the sandbox's info), instead of refusing */
        bool allow_weaker;
        /* supervised tier: a JSON policy file (path and connect rules,
         * docs/security.md); NULL = allow what the container tier allows,
         * audit everything */
        const char *policy_file;
        struct pd_volume volumes[PD_MAX_VOLUMES];
        unsigned n_volumes;
};

void pd_spec_defaults(struct pd_spec *s);
const char *pd_isolation_name(enum pd_isolation i);
int pd_isolation_parse(const char *s, enum pd_isolation *out);
