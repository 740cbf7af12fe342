#include "lib/template.h"
#include "lib/base_profile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"

/* Bump when the base template's contents change: old ones are rebuilt. */
#define PD_BASE_VERSION "5"
/* An outdated base template moved aside until no mount uses it. */
#define RETIRED_PREFIX ".base-retired-"

extern char **environ;

int pd_template_name_check(const char *name)
{
        size_t n = 0;
        for (; name[n]; n++) {
                char c = name[n];
                if (n >= 64 || !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return -EINVAL;
        }
        return n ? 0 : -EINVAL;
}

int pd_template_check_dir(const char *dir, char *canonical, struct pd_error *err)
{
        struct stat st;
        if (lstat(dir, &st) < 0)
                return pd_error_set(err, errno, "template directory '%s'", dir);
        if (S_ISLNK(st.st_mode))
                return pd_error_setx(err, EINVAL,
                                     "template directory '%s' is a symlink; give the directory itself", dir);
        if (!S_ISDIR(st.st_mode))
                return pd_error_setx(err, ENOTDIR, "template '%s' is not a directory", dir);
        if (!realpath(dir, canonical))
                return pd_error_set(err, errno, "template directory '%s'", dir);
        if (strcmp(canonical, "/") == 0)
                return pd_error_setx(err, EINVAL,
                                     "template directory '%s' is the host's root; refusing to expose the whole host",
                                     dir);
        return 0;
}

/* Host /etc entries the base template copies: what programs need to run,
 * nothing that identifies or authenticates the host (no shadow, ssh, sudoers,
 * machine-id, private keys). */
static const char *const etc_copy[] = {
        "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "bash.bashrc", "skel", "inputrc", "localtime", "timezone", "mime.types", "ssl/certs",
        "ca-certificates", "ca-certificates.conf", "debian_version", "os-release", "environment",
        "fonts", "matplotlibrc", "locale.alias", "locale.gen", "terminfo", "magic", "magic.mime",
        "protocols", "services", "ethertypes", "networks", "shells", "login.defs", "gai.conf",
        "host.conf", "issue", "perl", "papersize", "python3", "python3.11", "vim", "mke2fs.conf",
        "xdg", "gitconfig", "wgetrc", "manpath.config", "lsb-release", "default/locale",
};

static int run_cp(const char *src, const char *dst)
{
        char *const argv[] = { "cp", "-a", "--no-preserve=ownership", (char *)src, (char *)dst, NULL };
        pid_t pid;
        if (posix_spawnp(&pid, "cp", NULL, NULL, argv, environ) != 0)
                return -errno;
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int write_text(const char *root, const char *rel, const char *text, mode_t mode, struct pd_error *err)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", root, rel);
        _pd_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return pd_error_set(err, errno, "create '%s'", path);
        int r = pd_write_all(fd, text, strlen(text));
        if (r < 0)
                return pd_error_set(err, -r, "write '%s'", path);
        return 0;
}

static const char base_passwd[] =
        "root:x:0:0:root:/root:/bin/bash\n"
        "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
        "bin:x:2:2:bin:/bin:/usr/sbin/nologin\n"
        "sys:x:3:3:sys:/dev:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        "user:x:1000:1000:user:/home/user:/bin/bash\n";
static const char base_group[] =
        "root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\n"
        "sudo:x:27:user\nstaff:x:50:\nusers:x:100:user\nnogroup:x:65534:\nuser:x:1000:\n";
static const char base_hosts[] =
        "127.0.0.1\tlocalhost paddock\n::1\tlocalhost ip6-localhost ip6-loopback\n";
static const char base_nsswitch[] =
        "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
        "protocols: files\nservices: files\nethers: files\nrpc: files\n";

static int add_own_bin(const char *root, struct pd_error *err)
{
        char path[PATH_MAX];
        static const char *const dirs[] = { "opt/paddock", "opt/paddock/bin", "etc/profile.d" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(dirs); i++) {
                snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        return pd_error_set(err, errno, "create '%s'", path);
        }
        snprintf(path, sizeof path, "%s/opt/paddock/bin/python", root);
        if (symlink("/usr/bin/python3", path) < 0 && errno != EEXIST)
                return pd_error_set(err, errno, "create '%s'", path);
        return write_text(root, "etc/profile", pd_base_profile, 0644, err);
}

static int build_base(const char *dir, struct pd_error *err)
{
        char root[PATH_MAX], path[PATH_MAX];
        snprintf(root, sizeof root, "%s/rootfs", dir);
        static const struct { const char *path; mode_t mode; } dirs[] = {
                { "", 0755 }, { "etc", 0755 }, { "home", 0755 }, { "home/user", 0755 },
                { "root", 0700 }, { "tmp", 01777 }, { "var", 0755 }, { "var/tmp", 01777 },
                { "var/lib", 0755 }, { "var/cache", 0755 }, { "var/log", 0755 }, { "opt", 0755 },
                { "run", 0755 }, { "run/paddock", 0755 }, { "usr", 0755 }, { "proc", 0555 },
                { "sys", 0555 }, { "dev", 0755 }, { "mnt", 0755 }, { "srv", 0755 }, { "etc/ssl", 0755 },
                { "etc/default", 0755 },
        };
        for (size_t i = 0; i < PD_ARRAY_SIZE(dirs); i++) {
                snprintf(path, sizeof path, "%s/%s", root, dirs[i].path);
                if (mkdir(path, dirs[i].mode) < 0 && errno != EEXIST)
                        return pd_error_set(err, errno, "create '%s'", path);
                chmod(path, dirs[i].mode); /* umask-proof */
        }
        snprintf(path, sizeof path, "%s/home/user", root);
        if (chown(path, PD_USER_UID, PD_USER_UID) < 0)
                return pd_error_set(err, errno, "chown '%s'", path);
        /* /bin, /lib*, /sbin as on the host: symlinks stay symlinks here,
         * real directories become grafts (see pd_template_resolve). */
        static const char *const top[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(top); i++) {
                char host[64], target[PATH_MAX];
                snprintf(host, sizeof host, "/%s", top[i]);
                ssize_t n = readlink(host, target, sizeof target - 1);
                snprintf(path, sizeof path, "%s/%s", root, top[i]);
                if (n > 0) {
                        target[n] = '\0';
                        if (symlink(target, path) < 0 && errno != EEXIST)
                                return pd_error_set(err, errno, "create '%s'", path);
                } else if (access(host, F_OK) == 0 && mkdir(path, 0755) < 0 && errno != EEXIST) {
                        return pd_error_set(err, errno, "create '%s'", path);
                }
        }
        int r;
        if ((r = write_text(root, "etc/passwd", base_passwd, 0644, err)) < 0 ||
            (r = write_text(root, "etc/group", base_group, 0644, err)) < 0 ||
            (r = write_text(root, "etc/shadow", "root:*:19000:0:99999:7:::\nuser:*:19000:0:99999:7:::\n", 0640, err)) < 0 ||
            (r = write_text(root, "etc/hosts", base_hosts, 0644, err)) < 0 ||
            (r = write_text(root, "etc/hostname", "paddock\n", 0644, err)) < 0 ||
            (r = write_text(root, "etc/resolv.conf", "# no network in this sandbox\n", 0644, err)) < 0 ||
            (r = write_text(root, "etc/nsswitch.conf", base_nsswitch, 0644, err)) < 0 ||
            (r = write_text(root, "etc/sudoers", "# paddock: `sudo` asks the sandbox's agent; user may run anything as root\n", 0440, err)) < 0)
                return r;
        for (size_t i = 0; i < PD_ARRAY_SIZE(etc_copy); i++) {
                char src[PATH_MAX], dst[PATH_MAX];
                snprintf(src, sizeof src, "/etc/%s", etc_copy[i]);
                struct stat st;
                if (lstat(src, &st) < 0)
                        continue;
                snprintf(dst, sizeof dst, "%s/etc/%s", root, etc_copy[i]);
                if (run_cp(src, dst) < 0)
                        return pd_error_setx(err, EIO, "copy '%s' into the base template failed", src);
        }
        if ((r = add_own_bin(root, err)) < 0)
                return r;
        return write_text(dir, "version", PD_BASE_VERSION "\n", 0644, err);
}

static int write_users(struct pd_state *st, const char *dir, struct pd_error *err);

int pd_template_ensure_base(struct pd_state *st, struct pd_error *err)
{
        char dir[PATH_MAX], buf[16];
        snprintf(dir, sizeof dir, "%s/templates/base", st->dir);
        snprintf(buf, sizeof buf, "%s", "");
        char vpath[PATH_MAX];
        snprintf(vpath, sizeof vpath, "%s/version", dir);
        if (pd_read_file_at(AT_FDCWD, vpath, buf, sizeof buf) > 0 && !strcmp(buf, PD_BASE_VERSION "\n"))
                return 0;
        /* Build under a lock into a temp dir, then rename into place, so
         * concurrent first runs never see a half-built template. */
        char lockp[PATH_MAX];
        snprintf(lockp, sizeof lockp, "%s/templates/.base.lock", st->dir);
        _pd_cleanup_close_ int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
                return pd_error_set(err, errno, "lock '%s'", lockp);
        if (pd_read_file_at(AT_FDCWD, vpath, buf, sizeof buf) > 0 && !strcmp(buf, PD_BASE_VERSION "\n"))
                return 0;
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/templates/.base.%d", st->dir, (int)getpid());
        pd_rm_rf(tmp, NULL);
        if (mkdir(tmp, 0755) < 0)
                return pd_error_set(err, errno, "create '%s'", tmp);
        int r = build_base(tmp, err);
        if (r < 0) {
                pd_rm_rf(tmp, NULL);
                return pd_error_prefix(err, "build template 'base'");
        }
        /* The outdated one is moved aside, not removed: running sandboxes
         * (a server on the previous build) have their root mounted from
         * it. A rename keeps their mounts; it goes when the sandboxes
         * alive now are gone. */
        char old[PATH_MAX];
        snprintf(old, sizeof old, "%s/templates/" RETIRED_PREFIX "%d-%llx", st->dir, (int)getpid(),
                 (unsigned long long)pd_now_ns());
        struct stat sb;
        if (stat(dir, &sb) == 0 && (r = write_users(st, dir, err)) < 0) {
                pd_rm_rf(tmp, NULL);
                return r;
        }
        if (rename(dir, old) < 0 && errno != ENOENT) {
                r = pd_error_set(err, errno, "move the outdated template 'base' aside");
                pd_rm_rf(tmp, NULL);
                return r;
        }
        if (rename(tmp, dir) < 0) {
                r = pd_error_set(err, errno, "install template 'base'");
                pd_rm_rf(tmp, NULL);
                return r;
        }
        pd_template_sweep_retired(st);
        return 0;
}

/* The live sandboxes of this state dir, one id a line, into dir/users:
 * the ones whose root may be mounted from the base about to retire (a
 * sandbox's mounts name no path: its overlay's layers were detached). */
static int write_users(struct pd_state *st, const char *dir, struct pd_error *err)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/users", dir);
        FILE *out = fopen(path, "we");
        if (!out)
                return pd_error_set(err, errno, "create '%s'", path);
        DIR *d = pd_opendirat(st->rundirfd, "sandboxes");
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.' && pd_id_check(de->d_name) == 0)
                        fprintf(out, "%s\n", de->d_name);
        if (d)
                closedir(d);
        if (fclose(out) != 0)
                return pd_error_set(err, EIO, "write '%s'", path);
        return 0;
}

/* 1 while a sandbox listed in dir/users is still alive (or the list
 * cannot be read: keep it). */
static int still_used(struct pd_state *st, int tdirfd, const char *name)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/users", name);
        int fd = openat(tdirfd, path, O_RDONLY | O_CLOEXEC);
        FILE *in = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!in) {
                if (fd >= 0)
                        close(fd);
                return 1;
        }
        char line[128];
        int used = 0;
        while (!used && fgets(line, sizeof line, in)) {
                line[strcspn(line, "\n")] = '\0';
                char sb[160];
                snprintf(sb, sizeof sb, "sandboxes/%s", line);
                used = pd_id_check(line) == 0 && faccessat(st->rundirfd, sb, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        }
        fclose(in);
        return used;
}

int pd_template_sweep_retired(struct pd_state *st)
{
        DIR *d = pd_opendirat(st->dirfd, "templates");
        if (!d)
                return 0;
        int fd = dirfd(d);
        int kept = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, RETIRED_PREFIX, strlen(RETIRED_PREFIX)))
                        continue;
                char path[PATH_MAX];
                snprintf(path, sizeof path, "%s/templates/%s", st->dir, de->d_name);
                if (still_used(st, fd, de->d_name) || pd_rm_rf(path, NULL) < 0)
                        kept++;
        }
        closedir(d);
        return kept;
}

static int resolve_bottom(struct pd_state *st, const char *name, struct pd_template *t, struct pd_error *err);

int pd_template_resolve(struct pd_state *st, const struct pd_spec *spec, struct pd_template *t,
                        struct pd_error *err)
{
        memset(t, 0, sizeof *t);
        if (spec->template_dir) {
                snprintf(t->name, sizeof t->name, "dir");
                return pd_template_check_dir(spec->template_dir, t->rootfs, err);
        }
        const char *name = spec->template_name ? spec->template_name : "base";
        if (pd_template_name_check(name) < 0)
                return pd_error_setx(err, EINVAL,
                                     "invalid template name '%s' (names are [a-z0-9-]{1,64}; "
                                     "to use a directory, pass --template with a path containing '/')",
                                     name);
        /* A snapshot stacks on its parent, maybe another snapshot: walk
         * down to the registered template at the bottom. */
        char cur[65];
        snprintf(cur, sizeof cur, "%s", name);
        while (pd_snapshot_is(st, cur)) {
                if (t->n_stack == PD_MAX_STACK)
                        return pd_error_setx(err, ELOOP, "snapshot '%s' stacks more than %d snapshots deep",
                                             name, PD_MAX_STACK);
                snprintf(t->stack[t->n_stack++], sizeof t->stack[0], "%s", cur);
                char parent[65];
                if (pd_snapshot_parent(st, cur, parent) < 0)
                        return pd_error_setx(err, EINVAL, "snapshot '%s' has no valid parent record", cur);
                snprintf(cur, sizeof cur, "%s", parent);
        }
        int r = resolve_bottom(st, cur, t, err);
        snprintf(t->name, sizeof t->name, "%s", name);
        snprintf(t->bottom, sizeof t->bottom, "%s", cur);
        return r;
}

int pd_template_is_image(struct pd_state *st, const char *name)
{
        char path[PATH_MAX];
        if (pd_template_name_check(name) < 0)
                return 0;
        snprintf(path, sizeof path, "templates/%s/layers", name);
        return faccessat(st->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

void pd_template_layer_path(struct pd_state *st, const char *id, char *out, size_t size)
{
        snprintf(out, size, "%s/layers/%s/tree", st->dir, id);
}

/* templates/<name>/layers: the store layers' ids, one per line, top first
 * (written by src/image/, read here on every start: no JSON). */
static int read_layers(struct pd_state *st, const char *name, struct pd_template *t, struct pd_error *err)
{
        char path[PATH_MAX], buf[PD_MAX_IMAGE_LAYERS * 66 + 2];
        snprintf(path, sizeof path, "templates/%s/layers", name);
        ssize_t n = pd_read_file_at(st->dirfd, path, buf, sizeof buf);
        if (n < 0)
                return pd_error_set(err, (int)-n, "template '%s': read its layer list", name);
        t->n_layers = 0;
        for (char *line = buf, *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl)
                        break;
                *nl = '\0';
                size_t len = strlen(line);
                bool hex = len == 64;
                for (size_t i = 0; hex && i < len; i++)
                        hex = (line[i] >= '0' && line[i] <= '9') || (line[i] >= 'a' && line[i] <= 'f');
                if (!hex || t->n_layers == PD_MAX_IMAGE_LAYERS)
                        return pd_error_setx(err, EINVAL, "template '%s': its layer list is damaged", name);
                memcpy(t->layers[t->n_layers++], line, 65);
        }
        if (t->n_layers == 0)
                return pd_error_setx(err, EINVAL, "template '%s': its layer list is empty", name);
        t->image = true;
        return 0;
}

static int resolve_bottom(struct pd_state *st, const char *name, struct pd_template *t, struct pd_error *err)
{
        snprintf(t->name, sizeof t->name, "%s", name);
        if (!strcmp(name, "base")) {
                int r = pd_template_ensure_base(st, err);
                if (r < 0)
                        return r;
                snprintf(t->rootfs, sizeof t->rootfs, "%s/templates/base/rootfs", st->dir);
                snprintf(t->grafts[t->n_grafts].target, sizeof t->grafts[0].target, "usr");
                snprintf(t->grafts[t->n_grafts++].source, sizeof t->grafts[0].source, "/usr");
                static const char *const top[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
                for (size_t i = 0; i < PD_ARRAY_SIZE(top); i++) {
                        char host[64];
                        struct stat sb;
                        snprintf(host, sizeof host, "/%s", top[i]);
                        if (lstat(host, &sb) == 0 && S_ISDIR(sb.st_mode) && t->n_grafts < PD_MAX_GRAFTS) {
                                snprintf(t->grafts[t->n_grafts].target, sizeof t->grafts[0].target, "%s", top[i]);
                                snprintf(t->grafts[t->n_grafts++].source, sizeof t->grafts[0].source, "%s", host);
                        }
                }
                return 0;
        }
        snprintf(t->rootfs, sizeof t->rootfs, "%s/templates/%s/rootfs", st->dir, name);
        struct stat sb;
        if (stat(t->rootfs, &sb) < 0 || !S_ISDIR(sb.st_mode))
                return pd_error_setx(err, ENOENT,
                                     "template '%s' not found in %s/templates (built in: base; "
                                     "`paddock template pull NAME IMAGE` or `paddock template add NAME DIR` "
                                     "registers one, or pass --template DIR)",
                                     name, st->dir);
        if (pd_template_is_image(st, name))
                return read_layers(st, name, t, err);
        return 0;
}
