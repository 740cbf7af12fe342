/* Retention of the audit logs of deleted sandboxes (docs/api.md, "Audit
 * log"). A log outlives its sandbox so that its owner can still read it,
 * but not forever: cfg.audit_retention_days after its last line (the
 * file's mtime: the sandbox.delete line is the last one) it is removed.
 * The server sweeps at its start, after adoption (so every live sandbox is
 * in the table), and then hourly from the reaper thread. A live sandbox's
 * log is never removed, however quiet it has been. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/core/server.h"
#include "lib/util.h"

static bool is_live(struct pd_server *srv, const char *id)
{
        for (size_t i = 0; i < srv->n_sandboxes; i++)
                if (!strcmp(srv->sandboxes[i]->id, id))
                        return true;
        return false;
}

void pd_audit_prune(struct pd_server *srv)
{
        int fd = openat(srv->state.dirfd, "audit", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        time_t cutoff = time(NULL) - (time_t)srv->cfg.audit_retention_days * 86400;
        unsigned removed = 0, kept = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (n != PD_ID_LEN + 6 || strcmp(de->d_name + PD_ID_LEN, ".jsonl"))
                        continue;
                char id[PD_ID_LEN + 1];
                memcpy(id, de->d_name, PD_ID_LEN);
                id[PD_ID_LEN] = '\0';
                struct stat st;
                if (pd_id_check(id) < 0 || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                /* the check and the unlink under the table's lock: a
                 * sandbox that appears meanwhile keeps its log */
                pthread_mutex_lock(&srv->lock);
                bool gone = !is_live(srv, id) && st.st_mtime <= cutoff &&
                            unlinkat(dirfd(d), de->d_name, 0) == 0;
                pthread_mutex_unlock(&srv->lock);
                if (gone)
                        removed++;
                else
                        kept++;
        }
        closedir(d);
        if (removed)
                pd_log("info", "audit logs removed after their retention removed=%u kept=%u retention_days=%u",
                       removed, kept, srv->cfg.audit_retention_days);
}
