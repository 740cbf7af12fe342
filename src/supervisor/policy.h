/* The supervised tier's per-sandbox policy (policy.c, docs/security.md
 * "`supervised` tier"). Used by the supervisor (every brokered call) and by
 * the sandbox's creator (src/jail/supervisor_launch.c: which rules become mounts,
 * which syscalls the seccomp filter hands to the supervisor). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

enum sv_access { SV_ACC_RW = 0, SV_ACC_RO, SV_ACC_DENY, SV_ACC_NOEXEC };

/* paddock's own directory (the agent's sudo socket): a policy with any path
 * rule gets "SV_OWN_DIR/" "**" rw as an implicit first rule. */
#define SV_OWN_DIR "/run/paddock"

struct sv_policy;
/* Parse a policy file (NULL = the default policy). On error, msg says why. */
struct sv_policy *sv_policy_load(const char *path, char *msg, size_t msgsize);
void sv_policy_free(struct sv_policy *p);
/* The access the first matching path rule grants (SV_ACC_RW if none). */
enum sv_access sv_policy_path(const struct sv_policy *p, const char *path);
/* May a rule other than rw decide dir itself or any path beneath it? (A
 * directory moved or linked there or from there would carry files across
 * a rule boundary.) Conservative for globs: by their literal prefix. */
bool sv_policy_restricts_beneath(const struct sv_policy *p, const char *dir);
/* 0 = allow, else the errno to deny with. family AF_INET/AF_INET6 only. */
bool sv_policy_connect(const struct sv_policy *p, const struct sockaddr *sa, socklen_t len);

/* The rules as written, in order (the implicit first rule included). */
unsigned sv_policy_n_paths(const struct sv_policy *p);
const char *sv_policy_glob(const struct sv_policy *p, unsigned i);
enum sv_access sv_policy_access(const struct sv_policy *p, unsigned i);
unsigned sv_policy_n_connect(const struct sv_policy *p);
