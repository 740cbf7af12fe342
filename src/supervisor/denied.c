/* paddock-supervisor, the broker: the identities of denied files, so that
 * a file is refused under any name (a hard link is the classic way around
 * a rule on a path). docs/security.md "`supervised` tier".
 *
 * Two sources, both known before the sandbox's first process runs:
 *   - the sandbox's setup, for the rules that became deny mounts (it saw
 *     the files before covering them: src/jail/policy_mounts.c);
 *   - a walk here, at start, for the other deny rules (globs): beneath each
 *     one's literal prefix, every regular file with more than one name whose
 *     path the policy denies. Bounded; /proc, /sys and /dev are skipped.
 * Links made later are the broker's own business (linkat is brokered while
 * such a rule exists, and refused for a denied source). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/broker.h"

#define WALK_MAX_ENTRIES 50000
#define WALK_MAX_DEPTH 32
#define FOUND_MAX 4096

static struct sv_deny_inode found[FOUND_MAX];
static unsigned n_found, seen;
static bool truncated;

static void walk(const struct sv_policy *p, int dfd, char *path, size_t len, unsigned depth)
{
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                if (++seen > WALK_MAX_ENTRIES) {
                        truncated = true;
                        break;
                }
                size_t nl = strlen(e->d_name);
                if (len + 1 + nl >= PATH_MAX)
                        continue;
                size_t at = len == 1 ? 1 : len + 1;     /* "/" + name, or "dir/name" */
                if (len != 1)
                        path[len] = '/';
                memcpy(path + at, e->d_name, nl + 1);
                /* d_type spares a stat per entry: only directories and
                 * files the policy denies are looked at closer. */
                struct stat st;
                bool isdir = e->d_type == DT_DIR;
                if (e->d_type == DT_UNKNOWN) {
                        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                goto next;
                        isdir = S_ISDIR(st.st_mode);
                }
                if (isdir) {
                        bool skip = !strcmp(path, "/proc") || !strcmp(path, "/sys") || !strcmp(path, "/dev");
                        int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
                        int sub = skip || depth >= WALK_MAX_DEPTH ? -1 : openat(dirfd(d), e->d_name, flags);
                        if (sub >= 0)
                                walk(p, sub, path, at + nl, depth + 1);
                        else if (!skip && depth >= WALK_MAX_DEPTH)
                                truncated = true;
                } else if ((e->d_type == DT_REG || e->d_type == DT_UNKNOWN) &&
                           sv_policy_path(p, path) == SV_ACC_DENY &&
                           fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                           st.st_nlink > 1) {
                        if (n_found < FOUND_MAX)
                                found[n_found++] = (struct sv_deny_inode){ st.st_dev, st.st_ino };
                        else
                                truncated = true;
                }
        next:
                path[len] = '\0';
        }
        closedir(d);
}

void sv_b_find_denied(const struct sv_policy *p)
{
        /* the sandbox's setup marks a walk it cut short with a last record of all ones */
        if (B.a->n_deny_inodes && B.a->deny_inodes[B.a->n_deny_inodes - 1].dev == UINT64_MAX)
                truncated = true;
        static char path[PATH_MAX];
        unsigned n = sv_policy_n_paths(p);
        for (unsigned i = 0; i < n; i++) {
                const char *g = sv_policy_glob(p, i);
                size_t gl = strlen(g), lit = strcspn(g, "*?[\\");
                if (sv_policy_access(p, i) != SV_ACC_DENY || lit == gl)
                        continue;       /* not deny, or a literal path (a mount, or nothing there) */
                /* ("P/" "**" too: if it is a mount the walk sees its empty
                 * cover; if it is not, the files beneath P) */
                size_t cut = lit;
                while (cut > 0 && g[cut] != '/')
                        cut--;
                if (cut == 0) {
                        strcpy(path, "/");
                } else {
                        memcpy(path, g, cut);
                        path[cut] = '\0';
                }
                int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0)
                        walk(p, fd, path, strlen(path), 0);
        }
        qsort(found, n_found, sizeof found[0], sv_deny_inode_cmp);
        if (truncated && sv_audit_begin(&B.audit, "supervisor.warning")) {
                /* in the trail, where whoever reads the denials looks */
                sv_audit_str(&B.audit, "what", "the search for other names of files deny rules match stopped at its "
                                               "bounds: some may be missed");
                sv_audit_int(&B.audit, "max_entries", WALK_MAX_ENTRIES);
                sv_audit_int(&B.audit, "max_files", FOUND_MAX);
                sv_audit_int(&B.audit, "max_depth", WALK_MAX_DEPTH);
                sv_audit_end(&B.audit);
        }
}

bool sv_b_denied_inode(uint64_t dev, uint64_t ino)
{
        struct sv_deny_inode k = { dev, ino };
        return (B.a->n_deny_inodes &&
                bsearch(&k, B.a->deny_inodes, B.a->n_deny_inodes, sizeof k, sv_deny_inode_cmp) != NULL) ||
               (n_found && bsearch(&k, found, n_found, sizeof k, sv_deny_inode_cmp) != NULL);
}
