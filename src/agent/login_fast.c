/* The login fast path: `/bin/bash -l -c CMD` (how every E2B command and
 * every string command of the native API runs) without starting bash,
 * where the agent knows exactly what bash would do.
 *
 * bash with one simple command as its -c string execs that command in
 * place (no fork), after reading the login files. So the program bash
 * starts is the same process, with bash's environment; if the agent can
 * compute that environment and the program's path, it can exec the program
 * itself and skip bash's own start (exec, dynamic loading of bash and
 * libtinfo, its init: most of a `bash -l -c` command's cost).
 *
 * It takes the fast path only when every condition below holds, and runs
 * real bash otherwise (docs/templates.md, "The login fast path"):
 * - argv is exactly /bin/bash -l -c CMD, no pty, /bin/bash executable;
 * - the login files are known: /etc/profile is byte for byte the base
 *   template's (lib/base_profile.h: it sets PATH by EUID, and sources
 *   the profile.d scripts and bash.bashrc only when they exist or PS1 is
 *   set), /etc/profile.d has no name ending in .sh, and none of ~/.bash_profile,
 *   ~/.bash_login, ~/.profile exists (~ being $HOME, which must be set);
 *   checked at every command (stat; the profile's text is read again when
 *   its inode, size or times change), so an edit counts at once;
 * - CMD is words of [A-Za-z0-9_./,:+@-] (and '=' after the first word)
 *   separated by blanks: nothing to expand, quote, redirect or assign;
 * - the first word is no bash keyword or builtin, except echo, true and
 *   false when no argument starts with '-' (then coreutils' programs do
 *   exactly what the builtins do);
 * - the environment has only valid names, none bash treats specially
 *   (BASH*, SHELLOPTS, ENV, PS1, IFS, OLDPWD, _, ...), LC_ALL absent or a
 *   locale glibc always has (bash warns about others), SHLVL absent or a
 *   plain number below 999, PWD absent or the working directory's real path;
 * - the command is found on the profile's PATH as an executable regular
 *   file, in the first directory that has that name.
 * The environment is then what bash exports (checked against real bash by
 * tests/integration/test_login_fast.py): the input, PATH from the profile,
 * SHLVL unchanged (bash adds one and takes it back when it execs in place;
 * 0 when absent), PWD, in the order of bash's variable table (FNV-1 hash
 * of the name, 1024 buckets, ascending; two names in one bucket: real
 * bash), then _= the program's path. If the exec fails, real bash runs
 * (and says what bash says). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/login_fast.h"
#include "lib/base_profile.h"

#define MAX_WORDS 64
#define NBUCKETS 1024u

struct file_sig {
        bool valid, ok;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim, ctim;
};

static struct file_sig profile_sig, profiled_sig;

static bool same_sig(const struct file_sig *s, const struct stat *st)
{
        return s->valid && s->dev == st->st_dev && s->ino == st->st_ino && s->size == st->st_size &&
               s->mtim.tv_sec == st->st_mtim.tv_sec && s->mtim.tv_nsec == st->st_mtim.tv_nsec &&
               s->ctim.tv_sec == st->st_ctim.tv_sec && s->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

static bool same_ino(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static void set_sig(struct file_sig *s, const struct stat *st, bool ok)
{
        *s = (struct file_sig){ true, ok, st->st_dev, st->st_ino, st->st_size, st->st_mtim, st->st_ctim };
}

/* /etc/profile is the base template's own, byte for byte */
static bool profile_known(void)
{
        struct stat st;
        if (stat("/etc/profile", &st) < 0 || !S_ISREG(st.st_mode))
                return false;
        if (same_sig(&profile_sig, &st))
                return profile_sig.ok;
        bool ok = false;
        size_t want = sizeof pd_base_profile - 1;
        if ((size_t)st.st_size == want) {
                /* the sandbox may swap a FIFO in after the stat: never block
                 * on it (O_NONBLOCK), and read only what fstat says is the
                 * file we looked at */
                int fd = open("/etc/profile", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
                struct stat fst;
                if (fd >= 0) {
                        if (fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) && same_ino(&fst, &st)) {
                                char buf[sizeof pd_base_profile];
                                ssize_t n = read(fd, buf, sizeof buf);
                                ok = n == (ssize_t)want && memcmp(buf, pd_base_profile, want) == 0;
                        }
                        close(fd);
                }
        }
        set_sig(&profile_sig, &st, ok);
        return ok;
}

/* nothing the profile's loop over /etc/profile.d would source */
static bool profiled_empty(void)
{
        struct stat st;
        if (stat("/etc/profile.d", &st) < 0)
                return errno == ENOENT;
        if (!S_ISDIR(st.st_mode))
                return true;    /* the glob matches nothing */
        if (same_sig(&profiled_sig, &st))
                return profiled_sig.ok;
        DIR *d = opendir("/etc/profile.d");
        if (!d)
                return false;
        bool ok = true;
        struct dirent *e;
        while ((e = readdir(d))) {
                size_t n = strlen(e->d_name);
                if (n >= 3 && strcmp(e->d_name + n - 3, ".sh") == 0) {
                        ok = false;
                        break;
                }
        }
        closedir(d);
        set_sig(&profiled_sig, &st, ok);
        return ok;
}

static bool absent(const char *dir, const char *name)
{
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
                return false;
        return lstat(path, &st) < 0 && errno == ENOENT;
}

static bool word_char(char c, bool first)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return strchr("_./,:+@-", c) != NULL || (!first && c == '=');
}

/* bash's keywords and builtins (bash 5.2, `compgen -k`, `enable -a`) */
static const char *const special_words[] = {
        "!", ".", ":", "[", "[[", "]]", "{", "}", "alias", "bg", "bind", "break", "builtin",
        "caller", "case", "cd", "command", "compgen", "complete", "compopt", "continue",
        "coproc", "declare", "dirs", "disown", "do", "done", "elif", "else", "enable", "esac",
        "eval", "exec", "exit", "export", "fc", "fg", "fi", "for", "function", "getopts",
        "hash", "help", "history", "if", "in", "jobs", "kill", "let", "local", "logout",
        "mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray", "readonly", "return",
        "select", "set", "shift", "shopt", "source", "suspend", "test", "then", "time", "times",
        "trap", "type", "typeset", "ulimit", "umask", "unalias", "unset", "until", "wait",
        "while",
};
/* locales glibc always has (C.UTF-8 built in since 2.35) */
static const char *const sure_locales[] = { "", "C", "POSIX", "C.UTF-8", "C.utf8" };
/* builtins whose program does the same when no argument starts with '-' */
static const char *const same_as_program[] = { "echo", "true", "false" };

static bool in_list(const char *w, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(w, list[i]) == 0)
                        return true;
        return false;
}

/* names bash reads, sets or refuses on import: real bash for those */
static bool special_name(const char *name, size_t len)
{
        static const char *const names[] = {
                "CDPATH", "DIRSTACK", "ENV", "EPOCHREALTIME", "EPOCHSECONDS", "EUID", "FUNCNAME",
                "FUNCNEST", "GLOBIGNORE", "GROUPS", "HOSTTYPE", "IFS", "IGNOREEOF",
                "INPUTRC", "LINENO", "MACHTYPE", "MAIL", "MAILCHECK", "MAILPATH", "OLDPWD", "OPTARG",
                "OPTERR", "OPTIND", "OSTYPE", "PIPESTATUS", "POSIXLY_CORRECT", "POSIX_PEDANTIC",
                "PPID", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "RANDOM", "REPLY",
                "SECONDS", "SHELLOPTS", "SRANDOM", "TIMEFORMAT", "TMOUT", "UID", "_",
        };
        static const char *const prefixes[] = { "BASH", "COMP_", "HIST", "READLINE" };
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
                if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
                        return true;
        for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
                size_t pl = strlen(prefixes[i]);
                if (len >= pl && memcmp(prefixes[i], name, pl) == 0)
                        return true;
        }
        return false;
}

static bool valid_name(const char *s, size_t len)
{
        if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
                        return false;
        }
        return true;
}

/* bash's hash_string (hashlib.c): FNV-1, 32 bits */
static unsigned bucket_of(const char *s, size_t len)
{
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < len; i++) {
                h *= 16777619u;
                h ^= (uint32_t)(unsigned char)s[i];
        }
        return h & (NBUCKETS - 1);
}

static bool executable_by(const struct stat *st, uid_t uid, gid_t gid, const gid_t *groups,
                          size_t ngroups)
{
        if (!S_ISREG(st->st_mode))
                return false;
        if (uid == 0)
                return (st->st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) != 0;
        if (st->st_uid == uid)
                return st->st_mode & S_IXUSR;
        bool in_group = st->st_gid == gid;
        for (size_t i = 0; i < ngroups && !in_group; i++)
                in_group = st->st_gid == groups[i];
        return st->st_mode & (in_group ? S_IXGRP : S_IXOTH);
}

void ag_login_fast_free(struct ag_login_fast *f)
{
        free(f->cmd);
        free(f->argv);
        if (f->envp)
                for (char **e = f->envp; *e; e++)
                        free(*e);
        free(f->envp);
        *f = (struct ag_login_fast){ 0 };
}

struct env_ent {
        char *s;
        unsigned bucket;
};

static int cmp_bucket(const void *a, const void *b)
{
        const struct env_ent *x = a, *y = b;
        return (x->bucket > y->bucket) - (x->bucket < y->bucket);
}

static bool dup_into(struct env_ent *e, const char *fmt_name, const char *val)
{
        size_t nl = strlen(fmt_name), vl = strlen(val);
        e->s = malloc(nl + 1 + vl + 1);
        if (!e->s)
                return false;
        memcpy(e->s, fmt_name, nl);
        e->s[nl] = '=';
        memcpy(e->s + nl + 1, val, vl + 1);
        e->bucket = bucket_of(fmt_name, nl);
        return true;
}

int ag_login_fast_plan(char *const *argv, char *const *envp, bool pty, const char *cwd, uid_t uid,
                       gid_t gid, const gid_t *groups, size_t ngroups, struct ag_login_fast *out)
{
        *out = (struct ag_login_fast){ 0 };
        if (pty || !argv[0] || strcmp(argv[0], "/bin/bash") || !argv[1] || strcmp(argv[1], "-l") ||
            !argv[2] || strcmp(argv[2], "-c") || !argv[3] || argv[4])
                return 0;
        const char *cmd = argv[3];
        if (strlen(cmd) > 4096)
                return 0;

        /* the words */
        char *copy = strdup(cmd);
        if (!copy)
                return 0;
        char *words[MAX_WORDS + 1];
        size_t nw = 0;
        for (char *p = copy;;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (!*p)
                        break;
                if (nw == MAX_WORDS)
                        goto no;
                char *w = p;
                for (; *p && *p != ' ' && *p != '\t'; p++)
                        if (!word_char(*p, nw == 0))
                                goto no;
                words[nw++] = w;
                if (*p)
                        *p++ = '\0';
        }
        if (nw == 0)
                goto no;
        words[nw] = NULL;
        const char *w0 = words[0];
        if (w0[0] == '-' || in_list(w0, special_words, sizeof special_words / sizeof *special_words))
                goto no;
        if (in_list(w0, same_as_program, sizeof same_as_program / sizeof *same_as_program))
                for (size_t i = 1; i < nw; i++)
                        if (words[i][0] == '-')
                                goto no;

        /* the environment: names bash passes through unchanged */
        const char *home = NULL, *pwd = NULL, *shlvl = NULL;
        size_t ne = 0;
        for (char *const *e = envp; *e; e++, ne++) {
                const char *eq = strchr(*e, '=');
                if (!eq)
                        goto no;
                size_t nl = (size_t)(eq - *e);
                if (!valid_name(*e, nl) || special_name(*e, nl))
                        goto no;
                if (nl == 4 && !memcmp(*e, "HOME", 4))
                        home = eq + 1;
                else if (nl == 3 && !memcmp(*e, "PWD", 3))
                        pwd = eq + 1;
                else if (nl == 5 && !memcmp(*e, "SHLVL", 5))
                        shlvl = eq + 1;
                /* bash warns on stderr when it cannot set LC_ALL's locale:
                 * only the ones every glibc has */
                else if (nl == 6 && !memcmp(*e, "LC_ALL", 6) && !in_list(eq + 1, sure_locales,
                                                                        sizeof sure_locales / sizeof *sure_locales))
                        goto no;
        }
        if (!home || home[0] != '/')
                goto no;
        if (shlvl) {
                size_t l = strlen(shlvl);
                if (l == 0 || l > 3 || (l > 1 && shlvl[0] == '0') || strspn(shlvl, "0123456789") != l ||
                    atoi(shlvl) >= 999)
                        goto no;
        }
        char real_cwd[PATH_MAX];
        if (!realpath(cwd, real_cwd) || (pwd && strcmp(pwd, real_cwd)))
                goto no;

        /* the login files */
        struct stat st;
        if (stat("/bin/bash", &st) < 0 || !executable_by(&st, uid, gid, groups, ngroups))
                goto no;
        if (!profile_known() || !profiled_empty() || !absent(home, ".bash_profile") ||
            !absent(home, ".bash_login") || !absent(home, ".profile"))
                goto no;

        /* the profile's PATH, by EUID */
        const char *path = uid == 0
                ? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/paddock/bin"
                : "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games:/opt/paddock/bin";

        /* the program: bash's search, the first directory with the name */
        char prog[PATH_MAX];
        if (strchr(w0, '/')) {
                if (snprintf(prog, sizeof prog, "%s", w0) >= (int)sizeof prog)
                        goto no;
        } else {
                bool found = false;
                for (const char *p = path; *p && !found;) {
                        const char *colon = strchr(p, ':');
                        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
                        if (snprintf(prog, sizeof prog, "%.*s/%s", (int)dl, p, w0) >= (int)sizeof prog)
                                goto no;
                        if (stat(prog, &st) == 0) {
                                if (!executable_by(&st, uid, gid, groups, ngroups))
                                        goto no;        /* bash: a directory or 126 */
                                found = true;
                        } else if (errno != ENOENT && errno != ENOTDIR) {
                                goto no;
                        }
                        p = colon ? colon + 1 : p + dl;
                }
                if (!found)
                        goto no;        /* bash says "command not found" */
        }

        /* bash's export table: the input, then PWD, SHLVL, PATH if new */
        struct env_ent *ents = calloc(ne + 4, sizeof *ents);
        if (!ents)
                goto no;
        size_t n = 0;
        bool ok = true, had_path = false;
        for (char *const *e = envp; *e && ok; e++) {
                const char *eq = strchr(*e, '=');
                size_t nl = (size_t)(eq - *e);
                char name[256];
                if (nl >= sizeof name) {
                        ok = false;
                        break;
                }
                memcpy(name, *e, nl);
                name[nl] = '\0';
                if (!strcmp(name, "PATH")) {
                        had_path = true;
                        ok = dup_into(&ents[n++], name, path);
                } else {
                        ok = dup_into(&ents[n++], name, eq + 1);
                }
        }
        if (ok && !pwd)
                ok = dup_into(&ents[n++], "PWD", real_cwd);
        if (ok && !shlvl)
                ok = dup_into(&ents[n++], "SHLVL", "0");
        if (ok && !had_path)
                ok = dup_into(&ents[n++], "PATH", path);
        if (ok) {
                qsort(ents, n, sizeof *ents, cmp_bucket);
                for (size_t i = 1; i < n && ok; i++)
                        ok = ents[i].bucket != ents[i - 1].bucket;
        }
        char **env = ok ? calloc(n + 2, sizeof *env) : NULL;
        char **av = ok ? calloc(nw + 1, sizeof *av) : NULL;
        char *under = NULL;
        if (env && av && asprintf(&under, "_=%s", prog) < 0)
                under = NULL;
        if (!env || !av || !under) {
                for (size_t i = 0; i < n; i++)
                        free(ents[i].s);
                free(ents);
                free(env);
                free(av);
                free(under);
                goto no;
        }
        for (size_t i = 0; i < n; i++)
                env[i] = ents[i].s;
        env[n] = under;
        free(ents);
        for (size_t i = 0; i <= nw; i++)
                av[i] = words[i];
        out->cmd = copy;
        out->argv = av;
        out->envp = env;
        snprintf(out->path, sizeof out->path, "%s", prog);
        return 1;
no:
        free(copy);
        return 0;
}
