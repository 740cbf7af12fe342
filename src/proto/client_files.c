/* The file requests (FILE_*, WATCH) and their answers, checked
 * (agent_check.c) before they are decoded. */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent_check.h"
#include "proto/client_priv.h"

#define WRITE_FLUSH_MS 30000

void pd_entries_free(struct pd_entries *e)
{
        free(e->mem);
        memset(e, 0, sizeof *e);
}

int pd_entries_decode(const uint8_t *p, size_t len, unsigned min, unsigned max, struct pd_entries *out,
                      struct pd_error *err)
{
        memset(out, 0, sizeof *out);
        int r = pd_agent_check_entries(p, len, min, max, err);
        if (r < 0)
                return r;
        size_t n = 0, bytes = 0;
        struct pd_msg_iter it, in;
        struct pd_attr a, b;
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_ENTRY)
                        continue;
                n++;
                pd_msg_iter_init(&in, a.data, a.len);
                while (pd_msg_next(&in, &b))
                        if (b.tag == PD_A_NAME || b.tag == PD_A_PATH || b.tag == PD_A_LINK)
                                bytes += (size_t)b.len + 1;
                        else if (b.tag == PD_A_META_VAL)
                                bytes += (size_t)b.len + 1;
                        else if (b.tag == PD_A_META_KEY)
                                /* its string, its item, and room to align the entry's items */
                                bytes += (size_t)b.len + 1 + sizeof(struct pd_meta_item) +
                                         alignof(struct pd_meta_item);
        }
        size_t size = n * sizeof(struct pd_entry) + bytes + alignof(struct pd_entry);
        if (!(out->mem = malloc(size)))
                return pd_error_set(err, ENOMEM, "file entries");
        struct pd_carve cv = { .p = out->mem, .end = (char *)out->mem + size };
        out->v = pd_carve_take(&cv, n * sizeof *out->v, alignof(struct pd_entry));
        pd_msg_iter_init(&it, p, len);
        while (pd_msg_next(&it, &a)) {
                if (a.tag != PD_A_ENTRY)
                        continue;
                struct pd_entry *e = &out->v[out->n++];
                *e = (struct pd_entry){ .name = "", .path = "", .ftype = PD_FT_OTHER };
                /* metadata pairs: counted, then carved as one array */
                size_t nk = 0;
                pd_msg_iter_init(&in, a.data, a.len);
                while (pd_msg_next(&in, &b))
                        nk += b.tag == PD_A_META_KEY;
                struct pd_meta_item *mi = nk ? pd_carve_take(&cv, nk * sizeof *mi, alignof(struct pd_meta_item))
                                             : NULL;
                e->meta = mi;
                pd_msg_iter_init(&in, a.data, a.len);
                while (pd_msg_next(&in, &b)) {
                        switch (b.tag) {
                        case PD_A_NAME: e->name = pd_carve_str(&cv, &b); break;
                        case PD_A_PATH: e->path = pd_carve_str(&cv, &b); break;
                        case PD_A_LINK: e->link = pd_carve_str(&cv, &b); break;
                        case PD_A_FTYPE: pd_attr_u32(&b, &e->ftype); break;
                        case PD_A_SIZE: pd_attr_u64(&b, &e->size); break;
                        case PD_A_MODE: pd_attr_u32(&b, &e->mode); break;
                        case PD_A_UID: pd_attr_u32(&b, &e->uid); break;
                        case PD_A_GID: pd_attr_u32(&b, &e->gid); break;
                        case PD_A_MTIME_NS: pd_attr_u64(&b, &e->mtime_ns); break;
                        case PD_A_META_KEY:
                                if (mi && e->n_meta < nk)
                                        mi[e->n_meta] = (struct pd_meta_item){ pd_carve_str(&cv, &b), NULL };
                                break;
                        case PD_A_META_VAL:
                                /* a value completes the key before it */
                                if (mi && e->n_meta < nk && mi[e->n_meta].key && !mi[e->n_meta].val)
                                        mi[e->n_meta++].val = pd_carve_str(&cv, &b);
                                break;
                        }
                }
        }
        return 0;
}

/* {PATH UID GID} */
static void file_msg(struct pd_msg *m, const struct pd_file_req *f)
{
        pd_msg_init(m);
        pd_msg_put_str(m, PD_A_PATH, f->path);
        pd_msg_put_u32(m, PD_A_UID, f->uid);
        pd_msg_put_u32(m, PD_A_GID, f->gid);
}

/* A FILE_* call whose reply holds min..max entries (out NULL: not read). */
static int file_call(struct pd_client *c, uint16_t type, struct pd_msg *m, unsigned min, unsigned max,
                     struct pd_entries *out, struct pd_error *err)
{
        if (out)
                memset(out, 0, sizeof *out);
        const uint8_t *p;
        size_t len;
        int r = m->failed ? pd_error_setx(err, EMSGSIZE, "request too large") :
                            pd_client_call(c, type, m, &p, &len, err);
        pd_msg_free(m);
        if (r < 0 || !out)
                return r;
        return pd_entries_decode(p, len, min, max, out, err);
}

int pd_client_stat(struct pd_client *c, const struct pd_file_req *f, struct pd_entries *out, struct pd_error *err)
{
        struct pd_msg m;
        file_msg(&m, f);
        return file_call(c, PD_T_FILE_STAT, &m, 1, 1, out, err);
}

int pd_client_list_dir(struct pd_client *c, const struct pd_file_req *f, uint32_t depth, struct pd_entries *out,
                       struct pd_error *err)
{
        struct pd_msg m;
        file_msg(&m, f);
        pd_msg_put_u32(&m, PD_A_DEPTH, depth);
        return file_call(c, PD_T_FILE_LIST, &m, 0, PD_AGENT_ENTRIES_MAX, out, err);
}

int pd_client_mkdir(struct pd_client *c, const struct pd_file_req *f, int mode, bool parents, struct pd_entries *out,
                    struct pd_error *err)
{
        struct pd_msg m;
        file_msg(&m, f);
        if (mode >= 0)
                pd_msg_put_u32(&m, PD_A_MODE, (uint32_t)mode);
        if (parents)
                pd_msg_put_u32(&m, PD_A_PARENTS, 1);
        return file_call(c, PD_T_FILE_MKDIR, &m, 1, 1, out, err);
}

int pd_client_move(struct pd_client *c, const struct pd_file_req *f, const char *to, struct pd_entries *out,
                   struct pd_error *err)
{
        struct pd_msg m;
        file_msg(&m, f);
        pd_msg_put_str(&m, PD_A_PATH2, to);
        return file_call(c, PD_T_FILE_MOVE, &m, 1, 1, out, err);
}

int pd_client_remove(struct pd_client *c, const struct pd_file_req *f, struct pd_error *err)
{
        struct pd_msg m;
        file_msg(&m, f);
        return file_call(c, PD_T_FILE_REMOVE, &m, 0, 0, NULL, err);
}

int pd_client_read_open(struct pd_client *c, const struct pd_file_req *f, struct pd_read *rd, struct pd_error *err)
{
        memset(rd, 0, sizeof *rd);
        /* FILE_READ refuses directories, FIFOs, sockets and devices before
         * it opens anything for reading, and follows a symlink inside the
         * root; DESCRIBE: the length of what it opened comes first */
        struct pd_msg m;
        file_msg(&m, f);
        pd_msg_put_u32(&m, PD_A_DESCRIBE, 1);
        int r = m.failed ? -EMSGSIZE : pd_client_send(c, PD_T_FILE_READ, &m, &rd->id);
        pd_msg_free(&m);
        if (r < 0)
                return pd_error_set(err, -r, "queue FILE_READ");
        /* the first frame with our id decides: ERROR (the open failed),
         * FILE_OPENED, or (an agent without DESCRIBE) DATA or REPLY */
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                r = pd_client_next(c, &h, &p, c->timeout_ms);
                if (r < 0)
                        return pd_error_set(err, -r, "read from the sandbox agent");
                if (h.id != rd->id)
                        continue;
                switch (h.type) {
                case PD_T_ERROR:
                        return pd_frame_error(&h, p, err);
                case PD_T_FILE_OPENED:
                        r = pd_agent_check_file_opened(p, h.len, &rd->size, err);
                        rd->size_known = r == 1;
                        return r < 0 ? r : 0;
                case PD_T_DATA:
                        rd->has_first = true;
                        rd->first = p;
                        rd->first_len = h.len;
                        return 0;
                case PD_T_REPLY:
                        rd->done = true;
                        return 0;
                default:
                        continue;
                }
        }
}

int pd_client_write_open(struct pd_client *c, const struct pd_file_req *f, int mode, uint32_t *id)
{
        struct pd_msg m;
        file_msg(&m, f);
        if (mode >= 0)
                pd_msg_put_u32(&m, PD_A_MODE, (uint32_t)mode);
        for (size_t i = 0; i < f->n_meta; i++) {
                pd_msg_put_str(&m, PD_A_META_KEY, f->meta[2 * i]);
                pd_msg_put_str(&m, PD_A_META_VAL, f->meta[2 * i + 1]);
        }
        /* no REPLY until the last DATA: only an ERROR can come early */
        int r = m.failed ? -EMSGSIZE : pd_client_send(c, PD_T_FILE_WRITE, &m, id);
        pd_msg_free(&m);
        return r;
}

int pd_client_write_data(struct pd_client *c, uint32_t id, const void *data, size_t n, bool end)
{
        const uint8_t *b = data;
        size_t off = 0;
        do {
                size_t len = n - off < PD_DATA_CHUNK ? n - off : PD_DATA_CHUNK;
                bool last = off + len == n;
                int r = pd_conn_queue(&c->conn, PD_T_DATA, last && end ? PD_F_END : 0, id, 0, b ? b + off : NULL,
                                      len);
                if (r < 0)
                        return r;
                off += len;
        } while (off < n);
        return 0;
}

int pd_client_write_check(struct pd_client *c, uint32_t id, struct pd_error *err)
{
        int r = pd_conn_fill(&c->conn);
        for (;;) {
                struct pd_frame_hdr h;
                const uint8_t *p;
                if (r < 0 || (r = pd_conn_next(&c->conn, &h, &p)) < 0)
                        return pd_error_set(err, -r, "agent connection");
                if (r == 0)
                        break;
                /* only an ERROR can come before the last DATA: its REPLY is
                 * awaited by pd_client_write_finish */
                if (h.type == PD_T_ERROR && h.id == id)
                        return pd_frame_error(&h, p, err);
        }
        if (c->conn.eof)
                return pd_error_setx(err, EPIPE, "the sandbox agent closed the connection");
        return 0;
}

int pd_client_write_finish(struct pd_client *c, uint32_t id, struct pd_entries *out, int timeout_ms,
                           struct pd_error *err)
{
        if (out)
                memset(out, 0, sizeof *out);
        const uint8_t *p;
        size_t len;
        int r = pd_client_wait_for(c, id, "FILE_WRITE", &p, &len, timeout_ms, err);
        if (r < 0 || !out)
                return r;
        return pd_entries_decode(p, len, 1, 1, out, err);
}

int pd_client_watch(struct pd_client *c, const struct pd_file_req *f, bool recursive, uint32_t *id,
                    struct pd_error *err)
{
        return pd_client_watch_entries(c, f, recursive, false, false, id, err);
}

int pd_client_watch_entries(struct pd_client *c, const struct pd_file_req *f, bool recursive, bool entries,
                            bool local, uint32_t *id, struct pd_error *err)
{
        struct pd_msg m;
        file_msg(&m, f);
        if (recursive)
                pd_msg_put_u32(&m, PD_A_RECURSIVE, 1);
        if (entries)
                pd_msg_put_u32(&m, PD_A_WATCH_ENTRY, 1);
        if (local)
                pd_msg_put_u32(&m, PD_A_WATCH_LOCAL, 1);
        int r = m.failed ? -EMSGSIZE : pd_client_send(c, PD_T_WATCH, &m, id);
        pd_msg_free(&m);
        if (r < 0)
                return pd_error_set(err, -r, "queue WATCH");
        return pd_client_wait_for(c, *id, "WATCH", NULL, NULL, 0, err);
}

int pd_watch_event_decode(const uint8_t *p, size_t len, struct pd_watch_ev *ev, struct pd_error *err)
{
        int r = pd_agent_check_watch_event(p, len, err);
        if (r < 0)
                return r;
        struct pd_attr a;
        ev->name[0] = '\0';
        ev->event = 0;
        if (pd_msg_find(p, len, PD_A_NAME, &a))
                pd_attr_str(&a, ev->name, sizeof ev->name);
        if (pd_msg_find(p, len, PD_A_EVENT, &a))
                pd_attr_u32(&a, &ev->event);
        return 0;
}
