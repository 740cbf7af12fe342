#include "proto/msg.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

void pd_msg_init(struct pd_msg *m)
{
        memset(m, 0, sizeof *m);
}

void pd_msg_free(struct pd_msg *m)
{
        free(m->buf);
        pd_msg_init(m);
}

void pd_msg_reset(struct pd_msg *m)
{
        m->len = 0;
        m->failed = 0;
}

static int msg_reserve(struct pd_msg *m, size_t extra)
{
        if (m->failed)
                return m->failed;
        if (extra > PD_FRAME_MAX || m->len + extra > PD_FRAME_MAX)
                return m->failed = -EMSGSIZE;
        if (m->len + extra <= m->cap)
                return 0;
        size_t cap = m->cap ? m->cap : 256;
        while (cap < m->len + extra)
                cap *= 2;
        uint8_t *b = realloc(m->buf, cap);
        if (!b)
                return m->failed = -ENOMEM;
        m->buf = b;
        m->cap = cap;
        return 0;
}

static void put_hdr(uint8_t *p, uint16_t tag, uint32_t len)
{
        uint16_t t = htobe16(tag), z = 0;
        uint32_t l = htobe32(len);
        memcpy(p, &t, 2);
        memcpy(p + 2, &z, 2);
        memcpy(p + 4, &l, 4);
}

int pd_msg_put(struct pd_msg *m, uint16_t tag, const void *data, size_t len)
{
        size_t padded = (len + 3) & ~(size_t)3;
        int r = msg_reserve(m, 8 + padded);
        if (r < 0)
                return r;
        put_hdr(m->buf + m->len, tag, (uint32_t)len);
        if (len)
                memcpy(m->buf + m->len + 8, data, len);
        memset(m->buf + m->len + 8 + len, 0, padded - len);
        m->len += 8 + padded;
        return 0;
}

int pd_msg_put_str(struct pd_msg *m, uint16_t tag, const char *s)
{
        return pd_msg_put(m, tag, s, strlen(s));
}

int pd_msg_put_u32(struct pd_msg *m, uint16_t tag, uint32_t v)
{
        uint32_t be = htobe32(v);
        return pd_msg_put(m, tag, &be, 4);
}

int pd_msg_put_u64(struct pd_msg *m, uint16_t tag, uint64_t v)
{
        uint64_t be = htobe64(v);
        return pd_msg_put(m, tag, &be, 8);
}

size_t pd_msg_nest_begin(struct pd_msg *m, uint16_t tag)
{
        if (msg_reserve(m, 8) < 0)
                return (size_t)-1;
        size_t mark = m->len;
        put_hdr(m->buf + mark, tag, 0);
        m->len += 8;
        return mark;
}

void pd_msg_nest_end(struct pd_msg *m, size_t mark)
{
        if (m->failed || mark == (size_t)-1)
                return;
        /* nested contents are already 4-aligned, so no padding is needed */
        uint32_t l = htobe32((uint32_t)(m->len - mark - 8));
        memcpy(m->buf + mark + 4, &l, 4);
}

void pd_msg_iter_init(struct pd_msg_iter *it, const void *payload, size_t len)
{
        it->p = payload;
        /* an empty pd_msg has no buffer: NULL + 0 is undefined in C */
        it->end = len ? it->p + len : it->p;
        it->error = 0;
}

bool pd_msg_next(struct pd_msg_iter *it, struct pd_attr *a)
{
        if (it->error || it->p >= it->end)
                return false;
        if ((size_t)(it->end - it->p) < 8) {
                it->error = -EPROTO;
                return false;
        }
        uint16_t t;
        uint32_t l;
        memcpy(&t, it->p, 2);
        memcpy(&l, it->p + 4, 4);
        t = be16toh(t);
        l = be32toh(l);
        size_t avail = (size_t)(it->end - it->p) - 8;
        if (l > avail) {
                it->error = -EPROTO;
                return false;
        }
        a->tag = t;
        a->len = l;
        a->data = it->p + 8;
        size_t padded = ((size_t)l + 3) & ~(size_t)3;
        it->p += 8 + (padded <= avail ? padded : avail);
        return true;
}

bool pd_attr_u32(const struct pd_attr *a, uint32_t *out)
{
        if (a->len != 4)
                return false;
        uint32_t v;
        memcpy(&v, a->data, 4);
        *out = be32toh(v);
        return true;
}

bool pd_attr_u64(const struct pd_attr *a, uint64_t *out)
{
        if (a->len != 8)
                return false;
        uint64_t v;
        memcpy(&v, a->data, 8);
        *out = be64toh(v);
        return true;
}

bool pd_attr_str(const struct pd_attr *a, char *out, size_t size)
{
        if (a->len >= size || memchr(a->data, '\0', a->len))
                return false;
        memcpy(out, a->data, a->len);
        out[a->len] = '\0';
        return true;
}

char *pd_attr_strdup(const struct pd_attr *a)
{
        if (memchr(a->data, '\0', a->len))
                return NULL;
        char *s = malloc((size_t)a->len + 1);
        if (!s)
                return NULL;
        memcpy(s, a->data, a->len);
        s[a->len] = '\0';
        return s;
}

bool pd_msg_find(const void *payload, size_t len, uint16_t tag, struct pd_attr *a)
{
        struct pd_msg_iter it;
        pd_msg_iter_init(&it, payload, len);
        while (pd_msg_next(&it, a))
                if (a->tag == tag)
                        return true;
        return false;
}
