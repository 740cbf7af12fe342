/* Snapshots as templates (template.h): names, the record of who stacks on
 * which snapshot, deletion that refuses while something still does.
 *
 * A sandbox's root is an overlay whose lower layers are the snapshots of
 * its template's stack; removing one of them under a live sandbox would
 * change that sandbox's files. So every user is recorded as an empty file
 * users/<id> (a sandbox of this state dir) or users/@<name> (a snapshot
 * stacked on this one) in each layer it stacks on, all under one lock. */
#include "lib/template.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

#define FORK_PREFIX "fork-"

int pd_snapshot_name_check(const char *name, struct pd_error *err)
{
        size_t n = strlen(name);
        if (n == 0)
                return pd_error_setx(err, EINVAL, "snapshot name is empty (names are [a-z0-9-]{1,64})");
        if (n > 64)
                return pd_error_setx(err, EINVAL, "snapshot name is too long (%zu characters; at most 64)", n);
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return pd_error_setx(err, EINVAL,
                                             "snapshot name has an invalid character at position %zu "
                                             "(names are [a-z0-9-]{1,64}: lowercase letters, digits, '-')",
                                             i + 1);
        }
        if (!strcmp(name, "base"))
                return pd_error_setx(err, EINVAL, "'base' is the built-in template; pick another snapshot name");
        if (!strncmp(name, FORK_PREFIX, strlen(FORK_PREFIX)))
                return pd_error_setx(err, EINVAL, "snapshot names starting with '" FORK_PREFIX
                                     "' are reserved for forks; pick another name");
        return 0;
}

void pd_snapshot_fork_name(const char *src_id, char out[65])
{
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
                rnd = (uint32_t)getpid();
        snprintf(out, 65, FORK_PREFIX "%.20s-%08x", src_id, rnd);
}

static int snap_dir(struct pd_state *st, const char *name)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "templates/%s", name);
        return openat(st->dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int pd_snapshot_is(struct pd_state *st, const char *name)
{
        if (pd_template_name_check(name) < 0)
                return 0;
        _pd_cleanup_close_ int d = snap_dir(st, name);
        return d >= 0 && faccessat(d, "snapshot", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* One lock for every users/ change and every deletion. */
static int lock_snapshots(struct pd_state *st)
{
        int fd = openat(st->dirfd, "templates/.snapshots.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

static int parent_of(struct pd_state *st, const char *name, char parent[65])
{
        _pd_cleanup_close_ int d = snap_dir(st, name);
        if (d < 0)
                return -errno;
        struct pd_record rec;
        if (pd_record_read(d, "snapshot", &rec, NULL) < 0)
                return -ENOENT;
        if (pd_record_get(&rec, "parent", parent, 65) < 0 || pd_template_name_check(parent) < 0)
                return -EINVAL;
        return 0;
}

static bool is_fork(struct pd_state *st, const char *name)
{
        return !strncmp(name, FORK_PREFIX, strlen(FORK_PREFIX));
}

/* A users/ entry still counts: a snapshot that exists, or a sandbox whose
 * runtime dir exists (gone after its destroy, gc, or a reboot). */
static bool user_alive(struct pd_state *st, const char *entry)
{
        char path[PATH_MAX];
        if (entry[0] == '@')
                snprintf(path, sizeof path, "templates/%s/snapshot", entry + 1);
        else
                snprintf(path, sizeof path, "sandboxes/%s", entry);
        return faccessat(entry[0] == '@' ? st->dirfd : st->rundirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* First live user of name into who (pruning dead ones); 0 if none. */
static int first_user(struct pd_state *st, const char *name, char *who, size_t size)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "templates/%s/users", name);
        int fd = openat(st->dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return 0;
        }
        int found = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (user_alive(st, de->d_name)) {
                        snprintf(who, size, "%s", de->d_name);
                        found = 1;
                        break;
                }
                (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
        return found;
}

static void remove_dir(struct pd_state *st, const char *name)
{
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, "%s/templates/%s", st->dir, name);
        snprintf(to, sizeof to, "%s/templates/.deleted-%s-%d", st->dir, name, (int)getpid());
        /* Rename first: a half-removed tree never answers to the name. */
        if (rename(from, to) == 0)
                (void)pd_rm_rf(to, NULL);
}

static void unuse_locked(struct pd_state *st, const char *top, const char *entry);

/* Delete name (lock held, no users): its own entry leaves its parents. */
static void delete_locked(struct pd_state *st, const char *name)
{
        char parent[65], entry[70];
        bool has_parent = parent_of(st, name, parent) == 0;
        remove_dir(st, name);
        if (has_parent && (pd_snapshot_is(st, parent) || pd_template_is_image(st, parent))) {
                snprintf(entry, sizeof entry, "@%s", name);
                unuse_locked(st, parent, entry);
        }
}

/* Drop entry from top and every snapshot below it; forks left unused go. */
static void unuse_locked(struct pd_state *st, const char *top, const char *entry)
{
        char name[65], parent[65], who[80];
        snprintf(name, sizeof name, "%s", top);
        for (unsigned depth = 0; depth <= PD_MAX_STACK && pd_snapshot_is(st, name); depth++) {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "templates/%s/users/%s", name, entry);
                (void)unlinkat(st->dirfd, path, 0);
                bool has_parent = parent_of(st, name, parent) == 0;
                if (is_fork(st, name) && !first_user(st, name, who, sizeof who)) {
                        /* delete_locked walks on with its own entry */
                        delete_locked(st, name);
                        return;
                }
                if (!has_parent)
                        return;
                snprintf(name, sizeof name, "%s", parent);
        }
        /* an image template at the bottom keeps its users too */
        if (pd_template_is_image(st, name)) {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "templates/%s/users/%s", name, entry);
                (void)unlinkat(st->dirfd, path, 0);
        }
}

int pd_snapshot_use(struct pd_state *st, const struct pd_template *t, const char *id, struct pd_error *err)
{
        if (t->n_stack == 0 && !t->image)
                return 0;
        _pd_cleanup_close_ int lock = lock_snapshots(st);
        if (lock < 0)
                return pd_error_set(err, -lock, "lock the snapshots of '%s'", st->dir);
        for (unsigned i = 0; i <= t->n_stack; i++) {
                if (i == t->n_stack && !t->image)
                        break;
                const char *name = i < t->n_stack ? t->stack[i] : t->bottom;
                char path[PATH_MAX];
                snprintf(path, sizeof path, "templates/%s/users/%s", name, id);
                _pd_cleanup_close_ int fd = openat(st->dirfd, path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0)
                        return pd_error_set(err, errno, "template '%s' (removed meanwhile?)", name);
        }
        return 0;
}

void pd_snapshot_unuse(struct pd_state *st, const char *top, const char *id)
{
        if (!top[0] || !(pd_snapshot_is(st, top) || pd_template_is_image(st, top)))
                return;
        _pd_cleanup_close_ int lock = lock_snapshots(st);
        if (lock < 0)
                return;
        unuse_locked(st, top, id);
}

int pd_snapshot_delete(struct pd_state *st, const char *name, struct pd_error *err)
{
        if (pd_template_name_check(name) < 0)
                return pd_error_setx(err, EINVAL, "invalid snapshot name (names are [a-z0-9-]{1,64})");
        _pd_cleanup_close_ int lock = lock_snapshots(st);
        if (lock < 0)
                return pd_error_set(err, -lock, "lock the snapshots of '%s'", st->dir);
        if (!pd_snapshot_is(st, name))
                return pd_error_setx(err, ENOENT, "no snapshot '%s'", name);
        char who[80];
        if (first_user(st, name, who, sizeof who)) {
                if (who[0] == '@')
                        return pd_error_setx(err, EBUSY, "snapshot '%s' is in use: snapshot '%s' stacks on it "
                                             "(delete that first)", name, who + 1);
                return pd_error_setx(err, EBUSY, "snapshot '%s' is in use by sandbox %s (delete that first)",
                                     name, who);
        }
        delete_locked(st, name);
        return 0;
}

void pd_snapshot_release(struct pd_state *st, const char *name, struct pd_error *err)
{
        _pd_cleanup_close_ int lock = lock_snapshots(st);
        char who[80];
        if (lock < 0 || !pd_snapshot_is(st, name) || first_user(st, name, who, sizeof who))
                return;
        delete_locked(st, name);
}

int pd_snapshot_parent(struct pd_state *st, const char *name, char parent[65])
{
        return parent_of(st, name, parent);
}

int pd_snapshot_register(struct pd_state *st, const char *name, const char *parent, struct pd_error *err)
{
        if (!pd_snapshot_is(st, parent) && !pd_template_is_image(st, parent))
                return 0;
        _pd_cleanup_close_ int lock = lock_snapshots(st);
        if (lock < 0)
                return pd_error_set(err, -lock, "lock the snapshots of '%s'", st->dir);
        char cur[65];
        snprintf(cur, sizeof cur, "%s", parent);
        for (unsigned depth = 0; depth <= PD_MAX_STACK + 1 &&
                                 (pd_snapshot_is(st, cur) || pd_template_is_image(st, cur)); depth++) {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "templates/%s/users/@%s", cur, name);
                _pd_cleanup_close_ int fd = openat(st->dirfd, path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0)
                        return pd_error_set(err, errno, "snapshot '%s' (removed meanwhile?)", cur);
                char next[65];
                if (parent_of(st, cur, next) < 0)
                        break;
                snprintf(cur, sizeof cur, "%s", next);
        }
        return 0;
}

/* Walk name's stack down from top (lock held): add (or drop) users/<add>,
 * drop users/<drop>. */
static void chain_entries(struct pd_state *st, const char *top, const char *add, const char *drop)
{
        char cur[65];
        snprintf(cur, sizeof cur, "%s", top);
        for (unsigned depth = 0; depth <= PD_MAX_STACK + 1 &&
                                 (pd_snapshot_is(st, cur) || pd_template_is_image(st, cur)); depth++) {
                char path[PATH_MAX];
                if (add) {
                        snprintf(path, sizeof path, "templates/%s/users/%s", cur, add);
                        int fd = openat(st->dirfd, path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                        if (fd >= 0)
                                close(fd);
                }
                if (drop) {
                        snprintf(path, sizeof path, "templates/%s/users/%s", cur, drop);
                        (void)unlinkat(st->dirfd, path, 0);
                }
                char next[65];
                if (parent_of(st, cur, next) < 0)
                        break;
                snprintf(cur, sizeof cur, "%s", next);
        }
}

int pd_snapshot_swap(struct pd_state *st, const char *tmp, const char *name, struct pd_error *err)
{
        if (pd_template_name_check(tmp) < 0 || pd_template_name_check(name) < 0 ||
            (!pd_snapshot_is(st, tmp) && !pd_template_is_image(st, tmp)))
                return pd_error_setx(err, EINVAL, "swap '%.64s' for '%.64s': not a snapshot or image template", tmp,
                                     name);
        _pd_cleanup_close_ int lock = lock_snapshots(st);
        if (lock < 0)
                return pd_error_set(err, -lock, "lock the snapshots of '%s'", st->dir);
        char from[PATH_MAX], to[PATH_MAX], who[80], old_parent[65], entry[70];
        snprintf(from, sizeof from, "templates/%s", tmp);
        snprintf(to, sizeof to, "templates/%s", name);
        bool old = faccessat(st->dirfd, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        if (old && first_user(st, name, who, sizeof who))
                return who[0] == '@' ? pd_error_setx(err, EBUSY, "template '%s' is in use: snapshot '%s' stacks on "
                                                     "it (remove that first)", name, who + 1)
                                     : pd_error_setx(err, EBUSY, "template '%s' is in use by sandbox %s (remove that "
                                                     "first)", name, who);
        bool old_has_parent = old && parent_of(st, name, old_parent) == 0;
        if (renameat2(st->dirfd, from, st->dirfd, to, old ? RENAME_EXCHANGE : RENAME_NOREPLACE) < 0)
                return pd_error_set(err, errno, "put the new '%s' in place", name);
        /* the old one's parents forget @name before the new one's learn it
         * (they may be the same); @tmp keeps a fork both share alive */
        snprintf(entry, sizeof entry, "@%s", name);
        if (old_has_parent)
                chain_entries(st, old_parent, NULL, entry);
        char parent[65], tmp_entry[70];
        snprintf(tmp_entry, sizeof tmp_entry, "@%s", tmp);
        if (parent_of(st, name, parent) == 0)
                chain_entries(st, parent, entry, tmp_entry);
        return 0;
}

void pd_snapshot_layer_path(struct pd_state *st, const char *name, const char *graft, char *out, size_t size)
{
        if (!graft) {
                snprintf(out, size, "%s/templates/%s/rootfs", st->dir, name);
                return;
        }
        /* graft targets are paths like "usr": '/' becomes '_' in the name */
        int n = snprintf(out, size, "%s/templates/%s/grafts/", st->dir, name);
        for (const char *c = graft; *c && (size_t)n + 1 < size; c++)
                out[n++] = *c == '/' ? '_' : *c;
        out[n] = '\0';
}

int pd_snapshot_install(int tmpfd, const char *tmp, const char *path, const char *name,
                        const struct pd_record *rec, struct pd_error *err)
{
        int r = pd_record_write(tmpfd, "snapshot", rec, err);
        if (r < 0)
                return r;
        if (mkdirat(tmpfd, "users", 0700) < 0)
                return pd_error_set(err, errno, "create '%s/users'", tmp);
        /* rename(2) onto a taken name fails: first of two racing wins */
        if (rename(tmp, path) < 0)
                return errno == EEXIST || errno == ENOTEMPTY
                               ? pd_error_setx(err, EEXIST, "a template or snapshot named '%s' exists already", name)
                               : pd_error_set(err, errno, "install snapshot '%s'", name);
        return 0;
}

int pd_template_lock(struct pd_state *st, struct pd_error *err)
{
        int fd = lock_snapshots(st);
        return fd < 0 ? pd_error_set(err, -fd, "lock the templates of '%s'", st->dir) : fd;
}

int pd_template_user(struct pd_state *st, const char *name, char *who, size_t size)
{
        return first_user(st, name, who, size);
}
