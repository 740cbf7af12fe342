/* Attribute lists: the payload of control frames (see proto.h).
 * Each attribute: u16 tag, u16 zero, u32 len (BE), len bytes, zero pad to 4.
 * The builder owns a growing buffer capped at PD_FRAME_MAX; the reader walks
 * a received payload without copying and validates every length. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pd_msg {
        uint8_t *buf;
        size_t len, cap;
        int failed;     /* sticky: -ENOMEM or -EMSGSIZE once any put failed */
};

void pd_msg_init(struct pd_msg *m);
void pd_msg_free(struct pd_msg *m);
void pd_msg_reset(struct pd_msg *m);
int pd_msg_put(struct pd_msg *m, uint16_t tag, const void *data, size_t len);
int pd_msg_put_str(struct pd_msg *m, uint16_t tag, const char *s);
int pd_msg_put_u32(struct pd_msg *m, uint16_t tag, uint32_t v);
int pd_msg_put_u64(struct pd_msg *m, uint16_t tag, uint64_t v);
/* Nested list: put_nested_begin returns a mark; end patches the length. */
size_t pd_msg_nest_begin(struct pd_msg *m, uint16_t tag);
void pd_msg_nest_end(struct pd_msg *m, size_t mark);

struct pd_attr {
        uint16_t tag;
        uint32_t len;
        const uint8_t *data;
};

struct pd_msg_iter {
        const uint8_t *p, *end;
        int error;      /* -EPROTO once a malformed attribute was met */
};

void pd_msg_iter_init(struct pd_msg_iter *it, const void *payload, size_t len);
/* Next attribute; false at the end or on malformed input (it->error set). */
bool pd_msg_next(struct pd_msg_iter *it, struct pd_attr *a);
/* Typed views; return false (and leave *out alone) on a wrong size. */
bool pd_attr_u32(const struct pd_attr *a, uint32_t *out);
bool pd_attr_u64(const struct pd_attr *a, uint64_t *out);
/* Copy a string attribute into a NUL-terminated buffer. Refuses embedded
 * NULs and strings that do not fit: returns false. */
bool pd_attr_str(const struct pd_attr *a, char *out, size_t size);
/* Allocate a NUL-terminated copy (NULL on embedded NUL or no memory). */
char *pd_attr_strdup(const struct pd_attr *a);
/* Find the first attribute with `tag` in a payload. */
bool pd_msg_find(const void *payload, size_t len, uint16_t tag, struct pd_attr *a);
