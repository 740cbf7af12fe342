#include "proto/proto.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

void pd_frame_hdr_encode(const struct pd_frame_hdr *h, uint8_t out[PD_FRAME_HDR_LEN])
{
        uint32_t len = htobe32(h->len), id = htobe32(h->id), aux = htobe32(h->aux);
        uint16_t type = htobe16(h->type), flags = htobe16(h->flags);
        memcpy(out, &len, 4);
        memcpy(out + 4, &type, 2);
        memcpy(out + 6, &flags, 2);
        memcpy(out + 8, &id, 4);
        memcpy(out + 12, &aux, 4);
}

void pd_frame_hdr_decode(const uint8_t in[PD_FRAME_HDR_LEN], struct pd_frame_hdr *h)
{
        uint32_t len, id, aux;
        uint16_t type, flags;
        memcpy(&len, in, 4);
        memcpy(&type, in + 4, 2);
        memcpy(&flags, in + 6, 2);
        memcpy(&id, in + 8, 4);
        memcpy(&aux, in + 12, 4);
        h->len = be32toh(len);
        h->type = be16toh(type);
        h->flags = be16toh(flags);
        h->id = be32toh(id);
        h->aux = be32toh(aux);
}

const char *pd_frame_type_name(uint16_t type)
{
        switch (type) {
        case PD_T_HELLO: return "HELLO";
        case PD_T_REPLY: return "REPLY";
        case PD_T_ERROR: return "ERROR";
        case PD_T_LIST: return "LIST";
        case PD_T_SPAWN: return "SPAWN";
        case PD_T_SIGNAL: return "SIGNAL";
        case PD_T_STDIN_CLOSE: return "STDIN_CLOSE";
        case PD_T_RESIZE: return "RESIZE";
        case PD_T_ATTACH: return "ATTACH";
        case PD_T_DETACH: return "DETACH";
        case PD_T_PING: return "PING";
        case PD_T_FILE_STAT: return "FILE_STAT";
        case PD_T_FILE_LIST: return "FILE_LIST";
        case PD_T_FILE_MKDIR: return "FILE_MKDIR";
        case PD_T_FILE_MOVE: return "FILE_MOVE";
        case PD_T_FILE_REMOVE: return "FILE_REMOVE";
        case PD_T_FILE_READ: return "FILE_READ";
        case PD_T_FILE_WRITE: return "FILE_WRITE";
        case PD_T_WATCH: return "WATCH";
        case PD_T_UNWATCH: return "UNWATCH";
        case PD_T_TUNNEL_OPEN: return "TUNNEL_OPEN";
        case PD_T_TUNNEL_CLOSE: return "TUNNEL_CLOSE";
        case PD_T_SHUTDOWN: return "SHUTDOWN";
        case PD_T_DATA: return "DATA";
        case PD_T_STDIN: return "STDIN";
        case PD_T_OUTPUT: return "OUTPUT";
        case PD_T_GAP: return "GAP";
        case PD_T_EXIT: return "EXIT";
        case PD_T_WATCH_EVENT: return "WATCH_EVENT";
        case PD_T_FILE_OPENED: return "FILE_OPENED";
        default: return NULL;
        }
}

int pd_frame_hdr_check(const struct pd_frame_hdr *h, uint32_t cap)
{
        if (h->len > cap)
                return -EMSGSIZE;
        if (!pd_frame_type_name(h->type))
                return -EPROTO;
        return 0;
}
