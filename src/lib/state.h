/* The state directory (DESIGN §7): /var/lib/paddock by default, shared by
 * `paddock run`, `paddock serve` and `paddock-oci`. Host-global names (cgroup
 * paths, uid-range records) carry the instance id derived from it, so two
 * state dirs never touch each other's sandboxes. */
#pragma once
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"

#define PD_DEFAULT_STATE_DIR "/var/lib/paddock"
#define PD_ID_LEN 20            /* sandbox ids: [a-z0-9]{20} */
#define PD_INSTANCE_LEN 8       /* hex */

struct pd_state {
        char dir[PATH_MAX];     /* canonical path */
        int dirfd;              /* O_PATH|O_DIRECTORY of dir */
        char instance[PD_INSTANCE_LEN + 1];
        /* Runtime files of live sandboxes (agent socket, record, staging
         * mount point) live on tmpfs, like runc's /run/runc: the state dir
         * may sit on a disk where every create and unlink costs a journal
         * write. $PADDOCK_RUNTIME_DIR, else /run/paddock/<instance> when
         * /run is tmpfs, else /dev/shm/paddock/<instance>. */
        char rundir[PATH_MAX];
        int rundirfd;
};

/* Open (creating if needed, mode 0700) a state directory. */
int pd_state_open(const char *path, struct pd_state *st, struct pd_error *err);
void pd_state_close(struct pd_state *st);
/* The state dir named by --state-dir, else $PADDOCK_STATE_DIR, else the default. */
const char *pd_state_dir_default(void);

/* A new random sandbox id ([a-z0-9], PD_ID_LEN chars). */
void pd_id_new(char out[PD_ID_LEN + 1]);
/* 0 if s looks like a sandbox id (lowercase letters and digits, 1..64). */
int pd_id_check(const char *s);

/* A small key=value record file written atomically (temp + rename). */
struct pd_record {
        char text[2048];
        size_t len;
};
void pd_record_init(struct pd_record *r);
void pd_record_add(struct pd_record *r, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
int pd_record_write(int dirfd, const char *name, const struct pd_record *r, struct pd_error *err);
int pd_record_read(int dirfd, const char *name, struct pd_record *r, struct pd_error *err);
/* Value of key (into buf), or -ENOENT. */
int pd_record_get(const struct pd_record *r, const char *key, char *buf, size_t size);
int pd_record_get_u64(const struct pd_record *r, const char *key, uint64_t *out);

/* Start time of a process (field 22 of /proc/PID/stat), to tell a pid from
 * its reuse. 0 if the process does not exist. */
uint64_t pd_proc_starttime(pid_t pid);
