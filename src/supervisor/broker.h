/* paddock-supervisor, the broker's internals shared by broker.c (opens,
 * connects), modify.c (the calls that change paths) and send.c (sends). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/sv.h"

struct broker {
        const struct sv_broker_args *a;
        int hostproc;                   /* the host's /proc */
        int selffd;                     /* our /proc/PID/fd */
        int sandroot;                   /* O_PATH of our root (the sandbox's) */
        uint64_t permitted;             /* our capabilities in the sandbox's namespace */
        struct sv_creds cur;
        bool have_cur;
        uint32_t cur_umask;
        struct sv_audit audit;
        pid_t pid;
};

#define B sv_broker
extern struct broker B;

void sv_b_respond(uint64_t id, int error);
void sv_b_respond_val(uint64_t id, int64_t val);
bool sv_b_id_valid(uint64_t id);
bool sv_b_still_valid(struct sv_job *j);
void sv_b_fd_path(int fd, char *buf, size_t size);
int sv_b_resolve(const struct sv_job *j, int root, int dir, const char *path, uint64_t extra_flags);
int sv_b_fork_child(void);
int sv_b_capset_eff(uint64_t eff);
/* Is this file denied under another name (known by its identity)? */
bool sv_b_denied_inode(uint64_t dev, uint64_t ino);
/* denied.c: find the hard-linked files glob deny rules match (at start). */
void sv_b_find_denied(const struct sv_policy *p);

/* modify.c, send.c */
void sv_do_pathop(struct sv_job *j, int root, int dir, int dir2, int extra);
void sv_do_send(struct sv_job *j, int root, int dir, int sock, const int *rights);
