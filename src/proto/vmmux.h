/* The microvm tier's channel multiplexer (docs/protocol.md, "microvm
 * transport"). A guest has ONE byte stream to the host (a virtio-serial
 * port), but the agent protocol allows many host connections. So each host
 * connection becomes a channel on that stream:
 *
 *   host relay (per VM, paddock-vm-relay)      guest demux (agent's child)
 *   accepts unix connections on the sandbox's  turns each channel into a
 *   agent socket, one channel each      <-->   connection to the agent's
 *                                              own unix listener
 *
 * Frames: a 12-byte big-endian header {u32 channel, u8 type, u8 0, u16 0,
 * u32 length} and a payload of at most PD_MUX_MAX_PAYLOAD bytes. Each side
 * may have at most PD_MUX_WINDOW unacknowledged DATA bytes in flight per
 * channel (CREDIT returns them), so one slow reader never stalls the
 * others. The host opens every trunk connection with SYNC (a nonce, the
 * wall clock, fresh random bytes); the guest closes every channel it had
 * (they belonged to an earlier host, or to the template a clone came
 * from), sets its clock, reseeds its RNG and answers SYNC_ACK with the
 * nonce; the host drops every byte before that answer. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define PD_MUX_HDR 12u
#define PD_MUX_MAX_PAYLOAD (64u << 10)
#define PD_MUX_WINDOW (256u << 10)
#define PD_MUX_MAX_CHANNELS 256u
#define PD_MUX_NONCE 16u
#define PD_MUX_ENTROPY 64u

enum pd_mux_type {
        PD_MUX_OPEN = 1,        /* host -> guest: a new channel */
        PD_MUX_DATA = 2,
        PD_MUX_CLOSE = 3,       /* either way: the channel is finished */
        PD_MUX_CREDIT = 4,      /* payload u32: bytes the sender may send again */
        PD_MUX_SYNC = 5,        /* host -> guest: nonce, u64 sec, u32 nsec, entropy */
        PD_MUX_SYNC_ACK = 6,    /* guest -> host: the nonce */
        PD_MUX_RESET = 7,       /* guest -> host: a new demux; every channel is gone */
        PD_MUX_NETCFG = 8,      /* host -> guest, right after SYNC: eth0's settings */
};

#define PD_MUX_SYNC_LEN (PD_MUX_NONCE + 8 + 4 + PD_MUX_ENTROPY)
/* NETCFG payload (a guest with a NIC; docs/network.md "microvm"): MAC[6],
 * IPv4 address[4], gateway[4], resolver[4], prefix length u8, MTU u16 BE.
 * Sent on every trunk connection, so a clone restored from a template
 * (whose NIC was never configured) gets its own MAC and address. */
#define PD_MUX_NETCFG_LEN 21u

struct pd_mux_cfg {
        bool guest;
        int trunk_fd;           /* the serial stream (host: QEMU's chardev socket) */
        int listen_fd;          /* host: unix listener of host clients; guest: -1 */
        const char *agent_path; /* guest: the agent's unix socket */
        /* guest: the serial port reports "no host" (POLLHUP): wait on this
         * fd (a signalfd for SIGIO) instead of spinning; -1 = host */
        int hup_wait_fd;
        /* host: written to (one byte) and closed once the guest answered
         * SYNC; -1 = none */
        int ready_fd;
        /* guest: apply SYNC (clock + entropy); NULL = ignore */
        void (*on_sync)(uint64_t sec, uint32_t nsec, const uint8_t *entropy, size_t n);
        /* host: PD_MUX_NETCFG_LEN bytes sent after SYNC; NULL = no NIC */
        const uint8_t *netcfg;
        /* guest: apply NETCFG; NULL = ignore */
        void (*on_netcfg)(const uint8_t *p, size_t n);
};

/* Run until the trunk ends (host: QEMU went away). Returns 0 or -errno. */
int pd_mux_run(const struct pd_mux_cfg *cfg, struct pd_error *err);
