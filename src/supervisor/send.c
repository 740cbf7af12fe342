/* paddock-supervisor, the broker: sends (notified when the policy has
 * connect rules: sendmsg and sendmmsg always, sendto when it carries an
 * address). docs/security.md "`supervised` tier".
 *
 * The connect rules decide on every message's address (AF_INET/AF_INET6;
 * a named unix address follows the path rules like a connect); the broker
 * then sends what main copied — address, data, control part with the
 * caller's SCM_RIGHTS fds — on the caller's own socket (pidfd_getfd), under
 * the caller's ids (its real uid and gid too, for a receiver's
 * SCM_CREDENTIALS). The kernel never reads the caller's memory again. A
 * send that would block (the caller's socket blocking, not MSG_DONTWAIT)
 * finishes in a forked child, like a connect. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/broker.h"

#define PAD8(n) (((size_t)(n) + 7) & ~(size_t)7)

struct out_msg {
        struct sockaddr_storage addr;
        socklen_t alen;
        int opath;                      /* a named unix address: our fd of its socket inode */
        char text[PATH_MAX + 64];       /* the address, for the record */
        bool recorded;                  /* has an address: one audit line */
        int deny;                       /* errno of a denial, 0 if allowed */
};

static void format_addr(const struct sockaddr *sa, socklen_t len, const char *resolved, char *out, size_t size)
{
        char ip[INET6_ADDRSTRLEN] = "?";
        if (len < sizeof(sa_family_t))
                snprintf(out, size, "(none)");
        else if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *s = (const void *)sa;
                inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
                snprintf(out, size, "%s:%u", ip, ntohs(s->sin_port));
        } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *s = (const void *)sa;
                inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
                snprintf(out, size, "[%s]:%u", ip, ntohs(s->sin6_port));
        } else if (sa->sa_family == AF_UNIX) {
                const char *p = ((const struct sockaddr_un *)sa)->sun_path;
                if (len <= 2)
                        snprintf(out, size, "unix:(unnamed)");
                else if (p[0] == '\0')
                        snprintf(out, size, "unix-abstract:%.*s", (int)(len - 3), p + 1);
                else
                        snprintf(out, size, "unix:%s", resolved);
        } else {
                snprintf(out, size, "family:%u", sa->sa_family);
        }
}

static void audit_send(const struct sv_job *j, const struct out_msg *o, const char *decision, int e)
{
        bool deny = !strcmp(decision, "deny");
        if (!sv_audit_begin(&B.audit, deny ? "supervisor.deny" : "supervisor.send"))
                return;
        sv_audit_int(&B.audit, "pid", j->ns_pid);
        sv_audit_str(&B.audit, "syscall", sv_syscall_name(j->nr));
        sv_audit_str(&B.audit, "address", o->text);
        sv_audit_int(&B.audit, "uid", j->creds.fsuid);
        sv_audit_str(&B.audit, "decision", decision);
        if (e)
                sv_audit_int(&B.audit, "errno", e);
        sv_audit_end(&B.audit);
}

/* The caller's real uid and gid as ours (what SCM_CREDENTIALS reports),
 * or back to the namespace's root. */
static void real_ids(uint32_t uid, uint32_t gid)
{
        if (sv_b_capset_eff(B.permitted) == 0) {
                (void)syscall(SYS_setresgid, gid, -1, -1);
                (void)syscall(SYS_setresuid, uid, -1, -1);
        }
        (void)sv_b_capset_eff(B.cur.cap_eff & B.permitted);
}

/* Decide on one message's address; a named unix address is resolved
 * inside the sandbox (root or cwd from main) and opened as O_PATH. */
static void decide(struct sv_job *j, int root, int dir, const uint8_t *name, uint32_t namelen, struct out_msg *o)
{
        o->opath = -1;
        o->deny = 0;
        o->alen = namelen;
        o->recorded = namelen > 0;
        memset(&o->addr, 0, sizeof o->addr);
        memcpy(&o->addr, name, namelen);
        const struct sockaddr *sa = (const void *)&o->addr;
        char resolved[PATH_MAX] = "";
        if (namelen >= sizeof(sa_family_t) && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
                if (!sv_policy_connect(B.a->policy, sa, namelen))
                        o->deny = EACCES;
        } else if (namelen > 2 && sa->sa_family == AF_UNIX && name[2] != '\0') {
                char path[sizeof(struct sockaddr_un)];
                size_t plen = strnlen((const char *)name + 2, namelen - 2);
                memcpy(path, name + 2, plen);
                path[plen] = '\0';
                o->opath = sv_b_resolve(j, root, dir, path, 0);
                if (o->opath < 0) {
                        o->deny = errno;
                        snprintf(resolved, sizeof resolved, "%s", path);
                } else {
                        sv_b_fd_path(o->opath, resolved, sizeof resolved);
                        enum sv_access acc = sv_policy_path(B.a->policy, resolved);
                        if (acc == SV_ACC_RO || acc == SV_ACC_DENY)
                                o->deny = EACCES;
                        /* Send through our fd of the socket inode, named
                         * relative to our /proc/self/fd (the cwd then). */
                        struct sockaddr_un *su = (void *)&o->addr;
                        memset(su, 0, sizeof *su);
                        su->sun_family = AF_UNIX;
                        snprintf(su->sun_path, sizeof su->sun_path, "%d", o->opath);
                        o->alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(su->sun_path) + 1);
                }
        }
        format_addr((const struct sockaddr *)name, namelen, resolved, o->text, sizeof o->text);
}

void sv_do_send(struct sv_job *j, int root, int dir, int sock, const int *rights)
{
        static struct out_msg out[SV_SEND_MSGS];
        static struct mmsghdr mm[SV_SEND_MSGS];
        static struct iovec iov[SV_SEND_MSGS];
        unsigned nmsg = j->nmsg < SV_SEND_MSGS ? j->nmsg : SV_SEND_MSGS, ri = 0, allowed = nmsg;
        int e = 0;
        uint8_t *p = j->tail, *end = j->tail + j->tail_len;
        bool named_unix = false;
        for (unsigned k = 0; k < nmsg; k++) {
                struct sv_msg h;
                if (end - p < (ptrdiff_t)sizeof h) {
                        nmsg = k;
                        break;
                }
                memcpy(&h, p, sizeof h);
                uint8_t *name = p + PAD8(sizeof h), *data = name + PAD8(h.namelen), *ctl = data + PAD8(h.datalen);
                p = ctl + PAD8(h.controllen);
                if (p > end || h.namelen > sizeof(struct sockaddr_storage) || ri + h.nrights > j->nrights) {
                        nmsg = k;
                        break;
                }
                decide(j, root, dir, name, h.namelen, &out[k]);
                if (out[k].opath >= 0)
                        named_unix = true;
                if (out[k].deny && allowed == nmsg)
                        allowed = k;    /* what comes before is sent; the error shows then */
                /* The caller's fds in its control part become ours. */
                struct msghdr c = { .msg_control = ctl, .msg_controllen = h.controllen };
                for (struct cmsghdr *cm = h.controllen ? CMSG_FIRSTHDR(&c) : NULL; cm; cm = CMSG_NXTHDR(&c, cm)) {
                        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
                            cm->cmsg_len < CMSG_LEN(0) || (uint8_t *)cm + cm->cmsg_len > ctl + h.controllen)
                                continue;
                        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < n && ri < j->nrights; i++, ri++)
                                memcpy(CMSG_DATA(cm) + i * sizeof(int), &rights[ri], sizeof(int));
                }
                iov[k] = (struct iovec){ data, h.datalen };
                mm[k] = (struct mmsghdr){ .msg_hdr = { .msg_name = out[k].alen ? &out[k].addr : NULL,
                                                       .msg_namelen = out[k].alen,
                                                       .msg_iov = &iov[k],
                                                       .msg_iovlen = 1,
                                                       .msg_control = h.controllen ? ctl : NULL,
                                                       .msg_controllen = h.controllen } };
        }
        if (allowed > nmsg)
                allowed = nmsg;
        if (nmsg == 0) {
                e = EINVAL;
                goto done;
        }
        for (unsigned k = allowed; k < nmsg; k++)
                if (out[k].deny && out[k].recorded)
                        audit_send(j, &out[k], out[k].deny == EACCES ? "deny" : "error", out[k].deny);
        if (allowed == 0 && nmsg > 0) {
                e = out[0].deny;
                goto done;
        }
        int flags = (int)j->args[0] | MSG_NOSIGNAL;
        int fl = fcntl(sock, F_GETFL);
        bool blocking = !(flags & MSG_DONTWAIT) && fl >= 0 && !(fl & O_NONBLOCK);
        bool fastopen = (flags & MSG_FASTOPEN) != 0;
        if (named_unix && fchdir(B.selffd) < 0) {
                e = errno;
                goto done;
        }
        real_ids(j->creds.fsuid, j->creds.fsgid);
        int sent = -1;
        if (!(blocking && fastopen)) {
                sent = j->nr == SYS_sendmmsg ? sendmmsg(sock, mm, allowed, flags | MSG_DONTWAIT)
                                             : (int)sendmsg(sock, &mm[0].msg_hdr, flags | MSG_DONTWAIT);
                e = sent < 0 ? errno : 0;
        }
        bool more = blocking && ((sent < 0 && (e == EAGAIN || fastopen)) ||
                                 (j->nr != SYS_sendmmsg && j->sock_type == SOCK_STREAM && sent >= 0 &&
                                  (size_t)sent < iov[0].iov_len));
        if (more) {
                /* It would block: finish in a child, the rest blocking. */
                int fc = sv_b_fork_child();
                if (fc > 0) {
                        /* our own /proc/self/fd: the parent closes its fds */
                        int cfd = named_unix ? openat(B.hostproc, "self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
                        if (named_unix && (cfd < 0 || fchdir(cfd) < 0))
                                _exit(0);
                        int total = sent > 0 ? sent : 0;
                        if (j->nr == SYS_sendmmsg) {
                                sent = sendmmsg(sock, mm, allowed, flags);
                                total = sent;
                        } else {
                                iov[0].iov_base = (uint8_t *)iov[0].iov_base + total;
                                iov[0].iov_len -= (size_t)total;
                                sent = (int)sendmsg(sock, &mm[0].msg_hdr, flags);
                                if (sent >= 0)
                                        total += sent;
                                else if (total > 0)
                                        sent = total;
                        }
                        int ce = sent < 0 ? errno : 0;
                        if (sv_b_id_valid(j->id)) {
                                if (ce)
                                        sv_b_respond(j->id, ce);
                                else
                                        sv_b_respond_val(j->id, total);
                        }
                        for (unsigned k = 0; k < allowed; k++)
                                if (out[k].recorded)
                                        audit_send(j, &out[k], ce ? "error" : "allow", ce);
                        sv_audit_flush(&B.audit);
                        _exit(0);
                }
                real_ids(0, 0);
                if (named_unix)
                        (void)fchdir(B.sandroot);
                if (fc == 0) {
                        for (unsigned k = 0; k < nmsg; k++)
                                if (out[k].opath >= 0)
                                        close(out[k].opath);
                        return;
                }
                e = -fc;
        } else {
                real_ids(0, 0);
        }
        if (named_unix)
                (void)fchdir(B.sandroot);
        for (unsigned k = 0; k < allowed; k++)
                if (out[k].recorded)
                        audit_send(j, &out[k], e ? "error" : "allow", e);
        if (!e) {
                if (sv_b_id_valid(j->id))
                        sv_b_respond_val(j->id, sent);
                for (unsigned k = 0; k < nmsg; k++)
                        if (out[k].opath >= 0)
                                close(out[k].opath);
                return;
        }
done:
        for (unsigned k = 0; k < nmsg; k++)
                if (out[k].opath >= 0)
                        close(out[k].opath);
        if (sv_b_id_valid(j->id))
                sv_b_respond(j->id, e);
}
