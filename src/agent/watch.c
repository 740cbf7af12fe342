/* WATCH: inotify on a directory (and its subdirectories when RECURSIVE).
 * inotify_add_watch takes a path, which openat2 cannot vouch for; so we
 * open the directory with openat2 first, fchdir into it and watch ".". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/magic.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/util.h"

#define WATCH_MAX_DIRS 8192
#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | \
                    IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW)

struct ag_wd {
        int wd;
        char *rel;      /* "" for the watched directory itself */
};

struct ag_watch {
        struct ag_handler h;
        struct ag_watch *next;
        struct ag_conn *c;
        uint32_t id, uid, gid;
        bool recursive;
        bool entries;   /* each event carries the ENTRY of what it names */
        char root[PATH_MAX];
        struct ag_wd *wds;
        size_t nwd;
};

static int add_dir_fd(struct agent *ag, struct ag_watch *w, int dfd, const char *rel)
{
        if (w->nwd >= WATCH_MAX_DIRS)
                return -ENOSPC;
        if (fchdir(dfd) < 0)
                return -errno;
        int wd = inotify_add_watch(w->h.fd, ".", WATCH_MASK);
        int e = errno;
        if (fchdir(ag->rootfd) < 0)
                (void)!chdir("/");
        if (wd < 0)
                return -e;
        for (size_t i = 0; i < w->nwd; i++)
                if (w->wds[i].wd == wd)
                        return 0;
        struct ag_wd *n = realloc(w->wds, (w->nwd + 1) * sizeof *n);
        char *r = strdup(rel);
        if (!n || !r) {
                free(r);
                if (n)
                        w->wds = n;
                return -ENOMEM;
        }
        w->wds = n;
        n[w->nwd++] = (struct ag_wd){ wd, r };
        return 0;
}

/* Watch dfd (whose path relative to the root of the watch is rel) and,
 * recursively, its subdirectories, never through symlinks. */
static int add_tree(struct agent *ag, struct ag_watch *w, int dfd, const char *rel, int depth)
{
        int k = add_dir_fd(ag, w, dfd, rel);
        if (k < 0 || !w->recursive || depth > 64)
                return k;
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return 0;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;
                char r2[PATH_MAX];
                snprintf(r2, sizeof r2, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
                k = add_tree(ag, w, sub, r2, depth + 1);
                close(sub);
                if (k == -ENOSPC)
                        break;
        }
        closedir(d);
        return 0;
}

static void add_new_subdir(struct agent *ag, struct ag_watch *w, const char *rel)
{
        char abs[PATH_MAX];
        if (snprintf(abs, sizeof abs, "%s/%s", w->root, rel) >= (int)sizeof abs)
                return;
        struct ag_fsid f;
        ag_fsid_enter(&f, w->uid, w->gid);
        int fd = ag_open_in_root(ag, abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd >= 0) {
                add_tree(ag, w, fd, rel, 0);
                close(fd);
        }
        ag_fsid_leave(&f);
}

/* The ENTRY of root/name as it is now, as the watch's user sees it
 * (nothing when it is gone: a remove, the old name of a rename). */
static void put_event_entry(struct agent *ag, struct ag_watch *w, struct pd_msg *m, const char *name)
{
        char abs[PATH_MAX], base[NAME_MAX + 1];
        if (snprintf(abs, sizeof abs, "%s%s%s", w->root, strcmp(w->root, "/") ? "/" : "", name) >= (int)sizeof abs)
                return;
        struct ag_fsid f;
        struct pd_error err = { 0 };
        ag_fsid_enter(&f, w->uid, w->gid);
        int dfd = ag_open_parent(ag, abs, base, sizeof base, &err);
        if (dfd >= 0) {
                size_t mark = m->len;
                if (ag_put_entry(m, dfd, base, abs, &err) < 0)
                        m->len = mark;
                close(dfd);
        }
        ag_fsid_leave(&f);
}

/* Network filesystems, whose events inotify sees only for changes made
 * through this kernel (envd refuses them unless asked). */
static bool network_fs(int fd)
{
        struct statfs fs;
        if (fstatfs(fd, &fs) < 0)
                return false;
        switch ((unsigned long)fs.f_type) {
        case NFS_SUPER_MAGIC:
        case SMB_SUPER_MAGIC:
        case 0xFF534D42ul:      /* CIFS */
        case 0xFE534D42ul:      /* SMB2 */
        case 0x65735546ul:      /* FUSE */
        case 0x6B414653ul:      /* AFS */
        case 0x01021997ul:      /* 9P */
        case 0x00C36400ul:      /* Ceph */
                return true;
        default:
                return false;
        }
}

static void watch_event(struct agent *ag, struct ag_watch *w, const struct inotify_event *ev)
{
        size_t i;
        for (i = 0; i < w->nwd; i++)
                if (w->wds[i].wd == ev->wd)
                        break;
        if (i == w->nwd)
                return;
        if (ev->mask & IN_IGNORED) {
                free(w->wds[i].rel);
                w->wds[i] = w->wds[--w->nwd];
                return;
        }
        uint32_t type = 0;
        if (ev->mask & IN_CREATE)
                type = PD_WE_CREATE;
        else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE))
                type = PD_WE_WRITE;
        else if (ev->mask & IN_DELETE)
                type = PD_WE_REMOVE;
        else if (ev->mask & (IN_MOVED_FROM | IN_MOVED_TO))
                type = PD_WE_RENAME;
        else if (ev->mask & IN_ATTRIB)
                type = PD_WE_CHMOD;
        if (!type || !ev->len)
                return;
        char name[PATH_MAX];
        const char *rel = w->wds[i].rel;
        if (snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", ev->name) >= (int)sizeof name)
                return;
        struct pd_msg m;
        pd_msg_init(&m);
        pd_msg_put_str(&m, PD_A_NAME, name);
        pd_msg_put_u32(&m, PD_A_EVENT, type);
        if (w->entries)
                put_event_entry(ag, w, &m, name);
        ag_conn_send(ag, w->c, PD_T_WATCH_EVENT, 0, w->id, 0, m.buf, m.len);
        pd_msg_free(&m);
        if (w->recursive && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR))
                add_new_subdir(ag, w, name);
}

static void on_inotify(struct agent *ag, struct ag_handler *h, uint32_t events)
{
        struct ag_watch *w = ag_container_of(h, struct ag_watch, h);
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (int round = 0; round < 8; round++) {
                if (ag_buf_used(&w->c->out) >= AG_OUT_HIGH) {
                        /* let the kernel queue (and overflow) rather than us */
                        ag_ev_mod(ag, &w->h, 0);
                        break;
                }
                ssize_t n = read(w->h.fd, buf, sizeof buf);
                if (n <= 0)
                        break;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        watch_event(ag, w, ev);
                        p += sizeof *ev + ev->len;
                }
        }
        ag_conn_pump(ag, w->c);
}

static void watch_free(struct agent *ag, struct ag_watch *w)
{
        ag_ev_close(ag, &w->h);
        for (size_t i = 0; i < w->nwd; i++)
                free(w->wds[i].rel);
        free(w->wds);
        ag_defer_free(ag, w);
}

int ag_req_watch(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        uint32_t uid, gid, rec = 0, entries = 0, local = 0;
        char abs[PATH_MAX];
        int k = ag_req_creds(r->payload, r->h->len, &uid, &gid, r->err);
        if (k < 0 || (k = ag_get_path(r, PD_A_PATH, uid, abs, sizeof abs)) < 0)
                return k;
        if ((k = ag_get_u32(r, PD_A_RECURSIVE, &rec)) < 0 || (k = ag_get_u32(r, PD_A_WATCH_ENTRY, &entries)) < 0 ||
            (k = ag_get_u32(r, PD_A_WATCH_LOCAL, &local)) < 0)
                return k;
        for (struct ag_watch *x = c->watches; x; x = x->next)
                if (x->id == r->h->id)
                        return pd_error_setx(r->err, EBUSY, "watch id %u already in use", r->h->id);
        struct ag_watch *w = calloc(1, sizeof *w);
        if (!w)
                return pd_error_set(r->err, ENOMEM, "watch");
        w->c = c;
        w->id = r->h->id;
        w->uid = uid;
        w->gid = gid;
        w->recursive = rec != 0;
        w->entries = entries != 0;
        w->h.fd = -1;
        snprintf(w->root, sizeof w->root, "%s", abs);
        int ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ifd < 0) {
                free(w);
                return pd_error_set(r->err, errno, "inotify");
        }
        if (ag_ev_add(ag, &w->h, ifd, EPOLLIN, on_inotify) < 0) {
                close(ifd);
                free(w);
                return pd_error_set(r->err, errno, "epoll");
        }
        struct ag_fsid f;
        ag_fsid_enter(&f, uid, gid);
        int fd = ag_open_in_root(ag, abs, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0) {
                k = pd_error_set(r->err, -fd, "watch '%s'", abs);
        } else if (local && network_fs(fd)) {
                k = pd_error_setx(r->err, EXDEV, "'%s' is on a network filesystem, whose changes inotify may "
                                                 "not see: watch it with allowNetworkMounts", abs);
                close(fd);
        } else {
                k = add_tree(ag, w, fd, "", 0);
                if (k < 0)
                        pd_error_set(r->err, -k, "watch '%s'", abs);
                close(fd);
        }
        ag_fsid_leave(&f);
        if (k < 0) {
                watch_free(ag, w);
                return k;
        }
        w->next = c->watches;
        c->watches = w;
        return 0;
}

int ag_req_unwatch(struct agent *ag, struct ag_conn *c, struct ag_req *r)
{
        for (struct ag_watch **pp = &c->watches; *pp; pp = &(*pp)->next) {
                struct ag_watch *w = *pp;
                if (w->id == r->h->id) {
                        *pp = w->next;
                        watch_free(ag, w);
                        return 0;
                }
        }
        return pd_error_setx(r->err, ENOENT, "no watch %u", r->h->id);
}

void ag_watch_resume(struct agent *ag, struct ag_conn *c)
{
        for (struct ag_watch *w = c->watches; w; w = w->next)
                if (w->h.fd >= 0 && !w->h.events)
                        ag_ev_mod(ag, &w->h, EPOLLIN);
}

void ag_watch_conn_free(struct agent *ag, struct ag_conn *c)
{
        while (c->watches) {
                struct ag_watch *w = c->watches;
                c->watches = w->next;
                watch_free(ag, w);
        }
}
