/* One OCI layer (a tar, maybe gzip or zstd compressed) unpacked into an
 * empty directory that becomes an overlay lower layer (docs/templates.md,
 * docs/security.md "Templates from images").
 *
 * The tar is hostile input unpacked by host root, so:
 *   - every path is relative and has no ".." (else refused), and is
 *     resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *     RESOLVE_NO_MAGICLINKS): no symlink in the tree is ever followed, so
 *     one planted by an earlier entry cannot lead a later one out (refused);
 *   - device nodes and sockets are not created (counted, reported);
 *   - owners are the image's ids shifted into the store's range
 *     (PD_STORE_UID_BASE + id; ids above 65535 refused): nothing is host
 *     root's, a setuid file is setuid to an id no process has;
 *   - only user.* xattrs are kept, never user.overlay.* (which would forge
 *     overlay whiteouts or redirects), security.* or trusted.*;
 *   - OCI whiteouts become overlay's: ".wh.NAME" a 0/0 character device,
 *     ".wh..wh..opq" the user.overlay.opaque mark (the layer is mounted
 *     with userxattr);
 *   - the blob's digest (as stored) and the layer's diff_id (uncompressed)
 *     are computed while it streams and compared with what the manifest and
 *     config promise; the caller registers nothing unless both match.
 * Memory stays bounded: data streams through libarchive's buffers. */
#pragma once
#include <stdint.h>

#include "image/digest.h"
#include "lib/error.h"

struct pd_unpack_opts {
        uint32_t id_base;                       /* PD_STORE_UID_BASE */
        const char *want_blob;                  /* hex, or NULL: not checked */
        const char *want_diff;                  /* hex, or NULL: not checked */
        uint64_t total;                         /* the blob's size, for progress */
        /* called now and then with the blob bytes read so far */
        void (*progress)(uint64_t done, uint64_t total, void *arg);
        void *arg;
};

struct pd_unpack_result {
        char blob[PD_DIGEST_HEX + 1];           /* sha256 of the bytes read */
        char diff[PD_DIGEST_HEX + 1];           /* sha256 of the uncompressed tar */
        uint64_t blob_bytes, tar_bytes;
        uint64_t entries;
        uint64_t devices_skipped;               /* device nodes and sockets */
};

/* Unpack the blob on fd into the empty directory rootfd. */
int pd_unpack_layer(int fd, int rootfd, const struct pd_unpack_opts *o, struct pd_unpack_result *res,
                    struct pd_error *err);

/* Remove name below dirfd (a tree too), never following a symlink. */
int pd_unpack_remove(int dirfd, const char *name, unsigned depth);
