/* SQLite state of the server (DESIGN §7). One connection, serialised by a
 * mutex: the server's write rate is a few rows per sandbox lifecycle, so
 * there is nothing to win from a pool. All SQL binds its values. */
#include "server/core/store.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/util.h"

struct pd_store {
        sqlite3 *db;
        pthread_mutex_t lock;
        /* every request looks its key up: prepared once (under lock), not
         * parsed anew each time */
        sqlite3_stmt *key_lookup;
        char path[4200];
};

static const char schema[] =
        "CREATE TABLE IF NOT EXISTS keys("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, created INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS sandboxes("
        "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, template TEXT NOT NULL, isolation TEXT NOT NULL,"
        "  spec_json TEXT NOT NULL, env_json TEXT NOT NULL, metadata_json TEXT NOT NULL,"
        "  state TEXT NOT NULL, created_ms INTEGER NOT NULL, timeout_s INTEGER NOT NULL,"
        "  deadline_boot_ms INTEGER NOT NULL, boot_id TEXT NOT NULL,"
        "  paused_remaining_ms INTEGER NOT NULL DEFAULT 0, notes_json TEXT NOT NULL DEFAULT '[]');"
        "CREATE TABLE IF NOT EXISTS templates(name TEXT PRIMARY KEY, created INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS snapshots(name TEXT PRIMARY KEY, key_id TEXT NOT NULL,"
        "  source TEXT NOT NULL, template TEXT NOT NULL, isolation TEXT NOT NULL, created INTEGER NOT NULL);"
        /* version 2: admin keys (`paddock key create --admin`), a table of
         * their own so a version-1 database only gains it */
        "CREATE TABLE IF NOT EXISTS admin_keys(id TEXT PRIMARY KEY);";

void pd_sha256_hex(const char *s, char out[65])
{
        unsigned char md[32];
        unsigned int n = 0;
        EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL);
        for (unsigned i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        out[64] = '\0';
}

void pd_rfc3339_ms(uint64_t ms, char out[32])
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000));
}

static uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int db_error(struct pd_store *s, struct pd_error *err, int rc, const char *what)
{
        int e = rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? EBUSY
                : rc == SQLITE_FULL                      ? ENOSPC
                : rc == SQLITE_CONSTRAINT                ? EEXIST
                                                         : EIO;
        return pd_error_setx(err, e, "state database %s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int exec_locked(struct pd_store *s, const char *sql, struct pd_error *err)
{
        char *msg = NULL;
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                int r = pd_error_setx(err, rc == SQLITE_BUSY ? EBUSY : EIO, "state database %s: %s", s->path,
                                      msg ? msg : sqlite3_errstr(rc));
                sqlite3_free(msg);
                return r;
        }
        return 0;
}

/* Run sql, with text bound to ?1 (and *i2, when given, to ?2), to its end.
 * The caller holds the lock. 0, or db_error for what. */
static int step_text_locked(struct pd_store *s, const char *sql, const char *text, const sqlite3_int64 *i2,
                            const char *what, struct pd_error *err)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        int r = 0;
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
                if (i2)
                        sqlite3_bind_int64(st, 2, *i2);
                rc = sqlite3_step(st);
        }
        if (rc != SQLITE_DONE)
                r = db_error(s, err, rc, what);
        sqlite3_finalize(st);
        return r;
}

/* The rows of sql, each made an object by row, as a JSON array in *out. */
static int list_json(struct pd_store *s, const char *sql, json_t *(*row)(sqlite3_stmt *st), const char *what,
                     json_t **out, struct pd_error *err)
{
        json_t *arr = json_array();
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        int r = 0;
        if (rc == SQLITE_OK) {
                while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                        json_array_append_new(arr, row(st));
        }
        if (rc != SQLITE_DONE)
                r = db_error(s, err, rc, what);
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                json_decref(arr);
        else
                *out = arr;
        return r;
}

int pd_store_open(const char *state_dir, struct pd_store **out, struct pd_error *err)
{
        struct pd_store *s = calloc(1, sizeof *s);
        if (!s)
                return pd_error_set(err, ENOMEM, "state database");
        pthread_mutex_init(&s->lock, NULL);
        snprintf(s->path, sizeof s->path, "%s/paddock.db", state_dir);
        int rc = sqlite3_open_v2(s->path, &s->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
        int r;
        if (rc != SQLITE_OK) {
                r = pd_error_setx(err, EIO, "state database %s: %s", s->path,
                                  s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
                goto fail;
        }
        sqlite3_busy_timeout(s->db, 5000);
        sqlite3_extended_result_codes(s->db, 0);
        /* Read something first: a file that is not a database (or a damaged
         * one) fails here, before anything could write to it. */
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check", -1, &st, NULL);
        if (rc == SQLITE_OK) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        const char *res = (const char *)sqlite3_column_text(st, 0);
                        if (!res || strcmp(res, "ok")) {
                                r = pd_error_setx(err, EIO,
                                                  "state database %s: database disk image is malformed (%s) (not "
                                                  "resetting it; move it away to start fresh)",
                                                  s->path, res ? res : "?");
                                sqlite3_finalize(st);
                                goto fail;
                        }
                        rc = SQLITE_OK;
                } else if (rc == SQLITE_DONE) {
                        rc = SQLITE_OK;
                }
        }
        if (rc != SQLITE_OK) {
                const char *hint = rc == SQLITE_BUSY || rc == SQLITE_LOCKED
                                           ? "is another process holding it?"
                                           : "not resetting it; move it away to start fresh";
                r = pd_error_setx(err, rc == SQLITE_BUSY ? EBUSY : EIO, "state database %s: %s (%s)", s->path,
                                  sqlite3_errmsg(s->db), hint);
                sqlite3_finalize(st);
                goto fail;
        }
        sqlite3_finalize(st);
        if ((r = exec_locked(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err)) < 0)
                goto fail;
        int version = 0;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
        if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                version = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (version > PD_STORE_SCHEMA_VERSION) {
                r = pd_error_setx(err, EPROTO,
                                  "state database %s has schema version %d, newer than this paddock knows (%d); "
                                  "use a newer paddock",
                                  s->path, version, PD_STORE_SCHEMA_VERSION);
                goto fail;
        }
        if (version < PD_STORE_SCHEMA_VERSION) {
                char sql[sizeof schema + 128];
                snprintf(sql, sizeof sql, "BEGIN IMMEDIATE; %s PRAGMA user_version=%d; COMMIT;", schema,
                         PD_STORE_SCHEMA_VERSION);
                if ((r = exec_locked(s, sql, err)) < 0) {
                        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                        goto fail;
                }
        }
        *out = s;
        return 0;
fail:
        sqlite3_close(s->db);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return r;
}

void pd_store_close(struct pd_store *s)
{
        if (!s)
                return;
        sqlite3_finalize(s->key_lookup);
        sqlite3_close(s->db);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

/* ---- keys ---- */

int pd_store_key_create(struct pd_store *s, const char *name, char key_text[PD_KEY_TEXT_MAX], struct pd_key *out,
                        struct pd_error *err)
{
        /* E2B's form, "e2b_" and 40 hex digits (160 random bits): the stock
         * E2B SDKs refuse keys of another shape. Keys are looked up by their
         * hash, so keys of the older "pdk_" form keep working. */
        unsigned char rnd[20];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
                return pd_error_set(err, errno, "random bytes for a key");
        int n = snprintf(key_text, PD_KEY_TEXT_MAX, "e2b_");
        for (size_t i = 0; i < sizeof rnd; i++)
                n += snprintf(key_text + n, PD_KEY_TEXT_MAX - (size_t)n, "%02x", rnd[i]);
        char hash[65];
        pd_sha256_hex(key_text, hash);
        struct pd_key k = { 0 };
        snprintf(k.id, sizeof k.id, "%.16s", hash);
        snprintf(k.name, sizeof k.name, "%s", name && *name ? name : "default");
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int r = 0;
        int rc = sqlite3_prepare_v2(s->db, "INSERT INTO keys(id, name, hash, created) VALUES(?,?,?,?)", -1, &st,
                                    NULL);
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, k.id, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 2, k.name, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 4, (sqlite3_int64)wall_ms());
                rc = sqlite3_step(st);
        }
        if (rc != SQLITE_DONE)
                r = db_error(s, err, rc, "create key");
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        if (r == 0 && out)
                *out = k;
        return r;
}

int pd_store_key_lookup(struct pd_store *s, const char *key_text, struct pd_key *out)
{
        if (!key_text || !*key_text || strlen(key_text) >= PD_KEY_TEXT_MAX)
                return -ENOENT;
        char hash[65];
        pd_sha256_hex(key_text, hash);
        pthread_mutex_lock(&s->lock);
        int r = -ENOENT;
        if (!s->key_lookup &&
            sqlite3_prepare_v2(s->db,
                               "SELECT id, name, EXISTS(SELECT 1 FROM admin_keys a WHERE a.id = keys.id) FROM keys "
                               "WHERE hash = ?", -1, &s->key_lookup, NULL) != SQLITE_OK)
                s->key_lookup = NULL;
        sqlite3_stmt *st = s->key_lookup;
        if (st) {
                sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
                if (sqlite3_step(st) == SQLITE_ROW) {
                        memset(out, 0, sizeof *out);
                        snprintf(out->id, sizeof out->id, "%s", (const char *)sqlite3_column_text(st, 0));
                        snprintf(out->name, sizeof out->name, "%s", (const char *)sqlite3_column_text(st, 1));
                        out->admin = sqlite3_column_int(st, 2) != 0;
                        r = 0;
                }
                /* ends the read transaction: a revocation, also by another
                 * process, is seen by the next lookup */
                sqlite3_reset(st);
                sqlite3_clear_bindings(st);
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

int pd_store_key_set_admin(struct pd_store *s, const char *id, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = step_text_locked(s, "INSERT OR IGNORE INTO admin_keys(id) SELECT id FROM keys WHERE id = ?", id, NULL,
                                 "make an admin key", err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

int pd_store_key_count(struct pd_store *s, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "SELECT count(*) FROM keys", -1, &st, NULL);
        int r;
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
                r = sqlite3_column_int(st, 0);
        else
                r = db_error(s, err, rc, "count keys");
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        return r;
}

static json_t *key_row(sqlite3_stmt *st)
{
        char ts[32];
        pd_rfc3339_ms((uint64_t)sqlite3_column_int64(st, 2), ts);
        return json_pack("{s:s, s:s, s:s, s:b}", "id", (const char *)sqlite3_column_text(st, 0), "name",
                         (const char *)sqlite3_column_text(st, 1), "created_at", ts, "admin",
                         sqlite3_column_int(st, 3) != 0);
}

int pd_store_key_list(struct pd_store *s, json_t **out, struct pd_error *err)
{
        return list_json(s, "SELECT id, name, created, EXISTS(SELECT 1 FROM admin_keys a WHERE a.id = keys.id) "
                         "FROM keys ORDER BY created, id", key_row, "list keys", out, err);
}

int pd_store_key_revoke(struct pd_store *s, const char *id, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = step_text_locked(s, "DELETE FROM keys WHERE id = ?", id, NULL, "revoke key", err);
        if (r == 0 && sqlite3_changes(s->db) == 0)
                r = pd_error_setx(err, ENOENT, "no key with id '%s'", id);
        if (r == 0)
                r = step_text_locked(s, "DELETE FROM admin_keys WHERE id = ?", id, NULL, "revoke key", err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

/* ---- sandboxes ---- */

int pd_store_sandbox_put(struct pd_store *s, const struct pd_store_row *w, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = exec_locked(s, "BEGIN IMMEDIATE", err);
        if (r < 0) {
                pthread_mutex_unlock(&s->lock);
                return r;
        }
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(
                s->db,
                "INSERT OR REPLACE INTO sandboxes(id, key_id, template, isolation, spec_json, env_json, "
                "metadata_json, state, created_ms, timeout_s, deadline_boot_ms, boot_id, paused_remaining_ms, "
                "notes_json) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                -1, &st, NULL);
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, w->id, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 2, w->key_id, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 3, w->template_name, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 4, w->isolation, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 5, w->spec_json ? w->spec_json : "{}", -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 6, w->env_json ? w->env_json : "{}", -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 7, w->metadata_json ? w->metadata_json : "{}", -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 8, w->state, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 9, (sqlite3_int64)w->created_ms);
                sqlite3_bind_int64(st, 10, (sqlite3_int64)w->timeout_s);
                sqlite3_bind_int64(st, 11, (sqlite3_int64)w->deadline_boot_ms);
                sqlite3_bind_text(st, 12, w->boot_id, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 13, (sqlite3_int64)w->paused_remaining_ms);
                sqlite3_bind_text(st, 14, w->notes_json ? w->notes_json : "[]", -1, SQLITE_TRANSIENT);
                rc = sqlite3_step(st);
        }
        if (rc != SQLITE_DONE)
                r = db_error(s, err, rc, "save sandbox");
        sqlite3_finalize(st);
        if (r == 0)
                r = exec_locked(s, "COMMIT", err);
        if (r < 0)
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        pthread_mutex_unlock(&s->lock);
        return r;
}

int pd_store_sandbox_delete(struct pd_store *s, const char *id, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = step_text_locked(s, "DELETE FROM sandboxes WHERE id = ?", id, NULL, "delete sandbox", err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

static char *col_dup(sqlite3_stmt *st, int i, const char *dflt)
{
        const char *t = (const char *)sqlite3_column_text(st, i);
        return strdup(t ? t : dflt);
}

static void col_copy(sqlite3_stmt *st, int i, char *buf, size_t size)
{
        const char *t = (const char *)sqlite3_column_text(st, i);
        snprintf(buf, size, "%s", t ? t : "");
}

void pd_store_row_clear(struct pd_store_row *row)
{
        free(row->spec_json);
        free(row->env_json);
        free(row->metadata_json);
        free(row->notes_json);
        memset(row, 0, sizeof *row);
}

int pd_store_sandbox_each(struct pd_store *s, void (*fn)(const struct pd_store_row *row, void *ctx), void *ctx,
                          struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db,
                                    "SELECT id, key_id, template, isolation, spec_json, env_json, metadata_json, "
                                    "state, created_ms, timeout_s, deadline_boot_ms, boot_id, paused_remaining_ms, "
                                    "notes_json FROM sandboxes ORDER BY id",
                                    -1, &st, NULL);
        int r = 0;
        if (rc == SQLITE_OK) {
                while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                        struct pd_store_row row = { 0 };
                        col_copy(st, 0, row.id, sizeof row.id);
                        col_copy(st, 1, row.key_id, sizeof row.key_id);
                        col_copy(st, 2, row.template_name, sizeof row.template_name);
                        col_copy(st, 3, row.isolation, sizeof row.isolation);
                        row.spec_json = col_dup(st, 4, "{}");
                        row.env_json = col_dup(st, 5, "{}");
                        row.metadata_json = col_dup(st, 6, "{}");
                        col_copy(st, 7, row.state, sizeof row.state);
                        row.created_ms = (uint64_t)sqlite3_column_int64(st, 8);
                        row.timeout_s = (uint32_t)sqlite3_column_int64(st, 9);
                        row.deadline_boot_ms = (uint64_t)sqlite3_column_int64(st, 10);
                        col_copy(st, 11, row.boot_id, sizeof row.boot_id);
                        row.paused_remaining_ms = (uint64_t)sqlite3_column_int64(st, 12);
                        row.notes_json = col_dup(st, 13, "[]");
                        fn(&row, ctx);
                        pd_store_row_clear(&row);
                }
        }
        if (rc != SQLITE_DONE)
                r = db_error(s, err, rc, "read sandboxes");
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        return r;
}

/* ---- templates ---- */

int pd_store_template_add(struct pd_store *s, const char *name, struct pd_error *err)
{
        sqlite3_int64 now = (sqlite3_int64)wall_ms();
        pthread_mutex_lock(&s->lock);
        int r = step_text_locked(s, "INSERT OR REPLACE INTO templates(name, created) VALUES(?,?)", name, &now,
                                 "add template", err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

static json_t *template_row(sqlite3_stmt *st)
{
        char ts[32];
        pd_rfc3339_ms((uint64_t)sqlite3_column_int64(st, 1), ts);
        return json_pack("{s:s, s:s}", "name", (const char *)sqlite3_column_text(st, 0), "created_at", ts);
}

int pd_store_template_list(struct pd_store *s, json_t **out, struct pd_error *err)
{
        return list_json(s, "SELECT name, created FROM templates ORDER BY name", template_row, "list templates", out,
                         err);
}

int pd_store_template_exists(struct pd_store *s, const char *name)
{
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int found = 0;
        if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM templates WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
                found = sqlite3_step(st) == SQLITE_ROW;
        }
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        return found;
}

/* ---- snapshots ---- */

int pd_store_snapshot_add(struct pd_store *s, const char *name, const char *key_id, const char *source,
                          const char *template_name, const char *isolation, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db,
                                    "INSERT INTO snapshots(name, key_id, source, template, isolation, created) "
                                    "VALUES(?,?,?,?,?,?)", -1, &st, NULL);
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 2, key_id, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 3, source, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 4, template_name, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 5, isolation, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 6, (sqlite3_int64)wall_ms());
                rc = sqlite3_step(st);
        }
        int r = 0;
        if (rc != SQLITE_DONE)
                r = pd_error_setx(err, rc == SQLITE_CONSTRAINT ? EEXIST : EIO, "record snapshot '%s': %s", name,
                                  sqlite3_errmsg(s->db));
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        return r;
}

int pd_store_snapshot_delete(struct pd_store *s, const char *name, struct pd_error *err)
{
        pthread_mutex_lock(&s->lock);
        int r = step_text_locked(s, "DELETE FROM snapshots WHERE name = ?", name, NULL, "delete snapshot", err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

static json_t *snapshot_row(sqlite3_stmt *st)
{
        char ts[32];
        pd_rfc3339_ms((uint64_t)sqlite3_column_int64(st, 5), ts);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "name", (const char *)sqlite3_column_text(st, 0),
                         "key_id", (const char *)sqlite3_column_text(st, 1), "source",
                         (const char *)sqlite3_column_text(st, 2), "template",
                         (const char *)sqlite3_column_text(st, 3), "isolation",
                         (const char *)sqlite3_column_text(st, 4), "created_at", ts);
}

int pd_store_snapshot_list(struct pd_store *s, json_t **out, struct pd_error *err)
{
        return list_json(s, "SELECT name, key_id, source, template, isolation, created FROM snapshots ORDER BY name",
                         snapshot_row, "list snapshots", out, err);
}

int pd_store_snapshot_owner(struct pd_store *s, const char *name, char key_id[64])
{
        pthread_mutex_lock(&s->lock);
        sqlite3_stmt *st = NULL;
        int found = 0;
        if (sqlite3_prepare_v2(s->db, "SELECT key_id FROM snapshots WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
                if (sqlite3_step(st) == SQLITE_ROW) {
                        snprintf(key_id, 64, "%s", (const char *)sqlite3_column_text(st, 0));
                        found = 1;
                }
        }
        sqlite3_finalize(st);
        pthread_mutex_unlock(&s->lock);
        return found;
}
