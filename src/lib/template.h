/* Templates (DESIGN §4): a read-only root tree registered under a name
 * ([a-z0-9-]{1,64}) in <state>/templates/<name>/rootfs, or (local CLI only)
 * a host directory. The built-in `base` is assembled from the host with no
 * download: its own small /etc and home directories, with the host's /usr
 * (and /bin, /lib*, /sbin where those are real directories) grafted in. */
#pragma once
#include <limits.h>

#include "mount.h"
#include "spec.h"
#include "state.h"

struct pd_template_graft {
        char target[64];                /* inside the sandbox, no leading '/' */
        char source[PATH_MAX];          /* host directory */
};

struct pd_template {
        char name[65];
        char rootfs[PATH_MAX];
        struct pd_template_graft grafts[PD_MAX_GRAFTS];
        unsigned n_grafts;
};

/* 0 if name is a valid template name, else -EINVAL. */
int pd_template_name_check(const char *name);
/* Find (building `base` on first use) the template a spec asks for. */
int pd_template_resolve(struct pd_state *st, const struct pd_spec *spec, struct pd_template *t,
                        struct pd_error *err);
/* Build <state>/templates/base if missing or outdated. */
int pd_template_ensure_base(struct pd_state *st, struct pd_error *err);
/* Check a host directory is usable as a template (not a symlink, not "/"). */
int pd_template_check_dir(const char *dir, char *canonical, struct pd_error *err);
