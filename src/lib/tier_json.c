/* The chooser's facts as JSON (tier_json.h). The escape summary is read
 * here with a size cap and checked field by field: the suites write it as
 * root, but a half-written or hand-edited file must give a note, not a
 * crash or a made-up figure. */
#include "lib/tier_json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/tier.h"
#include "lib/util.h"

#define ESCAPE_MAX (1u << 20)

static json_t *caps_json(unsigned caps)
{
        return json_pack("{s:b, s:b, s:b, s:b}", "pause_to_disk", !!(caps & PD_TIER_PAUSE_DISK), "snapshot_memory",
                         !!(caps & PD_TIER_SNAPSHOT_MEMORY), "own_templates", !!(caps & PD_TIER_OWN_TEMPLATES),
                         "policy_file", !!(caps & PD_TIER_POLICY_FILE));
}

static json_t *load_escape(int state_dirfd, char *why, size_t size)
{
        _pd_cleanup_close_ int fd = openat(state_dirfd, PD_TIERS_ESCAPE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        snprintf(why, size, "never run on this host");
                else
                        snprintf(why, size, "%s: cannot read it: %s", PD_TIERS_ESCAPE_FILE, strerror(errno));
                return NULL;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ESCAPE_MAX) {
                snprintf(why, size, "%s is not a regular file of at most 1 MiB: ignored", PD_TIERS_ESCAPE_FILE);
                return NULL;
        }
        json_error_t je;
        json_t *doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
                snprintf(why, size, "%s is malformed (line %d: %s): ignored", PD_TIERS_ESCAPE_FILE, je.line, je.text);
                return NULL;
        }
        if (!json_is_object(json_object_get(doc, "tiers"))) {
                snprintf(why, size, "%s is malformed (no \"tiers\" object): ignored", PD_TIERS_ESCAPE_FILE);
                json_decref(doc);
                return NULL;
        }
        return doc;
}

static const char *const COUNTS[] = { "attacks", "blocked", "allowed", "not_implemented", "errors" };

json_t *pd_tier_escape_get(int state_dirfd, const char *tier, char *why, size_t size)
{
        json_t *doc = load_escape(state_dirfd, why, size);
        if (!doc)
                return NULL;
        json_t *t = json_object_get(json_object_get(doc, "tiers"), tier), *out = NULL;
        if (!t) {
                snprintf(why, size, "never run on this host");
                goto done;
        }
        const char *date = json_string_value(json_object_get(t, "date"));
        struct tm tm = { 0 };
        const char *end = date ? strptime(date, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
        if (!json_is_object(t) || !end || *end) {
                snprintf(why, size, "%s is malformed (tier '%s': no \"date\" like 2026-01-31T12:00:00Z): ignored",
                         PD_TIERS_ESCAPE_FILE, tier);
                goto done;
        }
        out = json_pack("{s:s}", "date", date);
        for (size_t i = 0; i < PD_ARRAY_SIZE(COUNTS); i++) {
                json_t *v = json_object_get(t, COUNTS[i]);
                if (!json_is_integer(v) || json_integer_value(v) < 0) {
                        snprintf(why, size, "%s is malformed (tier '%s': \"%s\" is not a count): ignored",
                                 PD_TIERS_ESCAPE_FILE, tier, COUNTS[i]);
                        json_decref(out);
                        out = NULL;
                        goto done;
                }
                json_object_set(out, COUNTS[i], v);
        }
        /* where the full table is: strings or absent (null) */
        static const char *const WHERE[] = { "results", "matrix" };
        for (size_t i = 0; i < PD_ARRAY_SIZE(WHERE); i++) {
                json_t *v = json_object_get(t, WHERE[i]);
                json_object_set_new(out, WHERE[i], json_is_string(v) ? json_copy(v) : json_null());
        }
done:
        json_decref(doc);
        return out;
}

json_t *pd_tiers_json(int state_dirfd)
{
        json_t *arr = json_array();
        for (int i = 0; i < PD_ISO__MAX; i++) {
                const struct pd_tier_ops *t = pd_tier_find((enum pd_isolation)i);
                if (!t)
                        continue;
                char why[512] = "always", ewhy[512] = "";
                int ok = t->host_check ? t->host_check(why, sizeof why) : 1;
                double ms;
                long long when;
                json_t *measured = json_null();
                if (pd_tier_measured_get(state_dirfd, (enum pd_isolation)i, &ms, &when) == 0) {
                        char at[32];
                        time_t w = (time_t)when;
                        struct tm tm;
                        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&w, &tm));
                        measured = json_pack("{s:f, s:s}", "run_p50_ms", ms, "measured_at", at);
                }
                json_t *esc = pd_tier_escape_get(state_dirfd, t->name, ewhy, sizeof ewhy);
                json_array_append_new(arr, json_pack("{s:s, s:b, s:s, s:s, s:o, s:o, s:o, s:o}", "name", t->name,
                                                     "available", ok == 1, "why", why, "isolates",
                                                     t->isolates ? t->isolates : "", "capabilities",
                                                     caps_json(t->caps), "measured", measured, "escape",
                                                     esc ? esc : json_null(), "escape_why",
                                                     esc ? json_null() : json_string(ewhy)));
        }
        return json_pack("{s:o}", "tiers", arr);
}
