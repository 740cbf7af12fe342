/* paddock-lsm-audit: the process tier's host-side reader of the kernel's
 * Landlock audit records (lsm_audit.h, docs/security.md "`process` tier").
 *
 *   paddock-lsm-audit --sandbox ID --pid AGENT_PID [--uid UID]
 *                     --audit FILE --ready-fd N
 *
 * Started by the sandbox's creator (src/jail/lsm_audit.c) before the
 * sandbox's first process enforces its Landlock domain; ends when told to
 * (SIGTERM, at teardown) or when the agent is gone, after draining what the
 * kernel still has queued.
 *
 * It binds a NETLINK_AUDIT socket to the read-only multicast group
 * (AUDIT_NLGRP_READLOG, needs CAP_AUDIT_READ; works beside auditd, which
 * owns the unicast channel) and receives every audit record of the host.
 * Records of one audit event share a serial ("audit(SEC.MS:SERIAL)"); they
 * are grouped by serial and an event is decided when it is complete (its
 * AUDIT_EOE record, or 150 ms without one: events of tasks without a syscall
 * audit context have no EOE). An AUDIT_LANDLOCK_ACCESS record belongs to the
 * sandbox when its domain= is the sandbox's: learned from the
 * AUDIT_LANDLOCK_DOMAIN "status=allocated" record that follows a domain's
 * first logged denial in the same event, whose pid= is the process that
 * called landlock_restrict_self() — the agent — and whose uid= is the
 * sandbox's uid; or, failing that, when the event's SYSCALL record names the
 * sandbox's own host uid (unique per sandbox when paddock runs as root).
 *
 * Each denial is one JSON line appended to FILE (O_APPEND, one write() per
 * line, the file the server and the supervisor append to):
 *   {"ts","sandbox","key":"landlock","event":"landlock.deny","domain",
 *    "blockers":[...], the object's fields (path, dev, ino, daddr, dest,
 *    opid, ocomm, ...), and from the SYSCALL record when the kernel wrote
 *    one: "pid","uid","syscall","comm","exe"}
 * At most RATE lines a second; the rest are counted and reported in one
 * "landlock.suppressed" line. A receive-buffer overflow (records the kernel
 * could not deliver to us) is reported as "landlock.overflow".
 *
 * Ready protocol: "on" on the ready fd once the socket is bound and the
 * kernel's audit is enabled; "off:REASON" when records cannot arrive (the
 * process then exits 0). No libraries beyond libc. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"

#ifndef AUDIT_NLGRP_READLOG
#define AUDIT_NLGRP_READLOG 1
#endif
#ifndef AUDIT_LANDLOCK_ACCESS
#define AUDIT_LANDLOCK_ACCESS 1423
#endif
#ifndef AUDIT_LANDLOCK_DOMAIN
#define AUDIT_LANDLOCK_DOMAIN 1424
#endif

#define RATE 200                /* lines per second, then counted */
#define EVENT_AGE_MS 150        /* an event without EOE is complete after this */
#define DRAIN_QUIET_MS 20       /* at exit: stop after this long without a record */
#define DRAIN_MAX_MS 1000
#define MAX_EVENTS 64
#define MAX_ACC 8               /* access records kept per event */
#define MAX_DOMAINS 16
#define REC_MAX 9000            /* MAX_AUDIT_MESSAGE_LENGTH is 8970 */

struct event {
        bool used, complete;
        uint64_t serial, sec;
        unsigned ms;
        uint64_t arrived_ms;
        int n_acc;
        char *acc[MAX_ACC];     /* AUDIT_LANDLOCK_ACCESS record texts */
        char *dom;              /* AUDIT_LANDLOCK_DOMAIN status=allocated text */
        char *sys;              /* SYSCALL text */
};

static const char *sandbox_id, *audit_path;
static long agent_pid = -1, sandbox_uid = -1;
static int audit_fd = -1;
static struct event events[MAX_EVENTS];
static char domains[MAX_DOMAINS][24];
static int n_domains;
static uint64_t rate_sec, rate_count, suppressed, overflows;

static void die(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "paddock-lsm-audit: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

/* ---- JSON line ---- */

static char line[4 * REC_MAX];
static size_t line_len;

static void put(const char *s)
{
        size_t n = strlen(s);
        if (line_len + n >= sizeof line - 4)
                n = sizeof line - 4 - line_len;
        memcpy(line + line_len, s, n);
        line_len += n;
}

static void put_str(const char *s, size_t n)
{
        static const char hex[] = "0123456789abcdef";
        put("\"");
        for (size_t i = 0; i < n && line_len < sizeof line - 12; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '"' || c == '\\') {
                        line[line_len++] = '\\';
                        line[line_len++] = (char)c;
                } else if (c < 0x20 || c >= 0x7f) {
                        /* bytes, not characters: paths need not be UTF-8 */
                        memcpy(line + line_len, "\\u00", 4);
                        line_len += 4;
                        line[line_len++] = hex[c >> 4];
                        line[line_len++] = hex[c & 15];
                } else {
                        line[line_len++] = (char)c;
                }
        }
        put("\"");
}

static void put_key(const char *k)
{
        put(",");
        put_str(k, strlen(k));
        put(":");
}

static void begin(uint64_t sec, unsigned ms, const char *event)
{
        char ts[64];
        struct tm tm;
        time_t t = (time_t)sec;
        gmtime_r(&t, &tm);
        size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(ts + n, sizeof ts - n, ".%03uZ", ms);
        line_len = 0;
        put("{\"ts\":");
        put_str(ts, strlen(ts));
        put_key("sandbox");
        put_str(sandbox_id, strlen(sandbox_id));
        put(",\"key\":\"landlock\",\"event\":");
        put_str(event, strlen(event));
}

static void finish(void)
{
        put("}\n");
        /* One write per line, O_APPEND: lines of concurrent writers never
         * interleave. A line that cannot be written (disk full) is dropped. */
        ssize_t w;
        do
                w = write(audit_fd, line, line_len);
        while (w < 0 && errno == EINTR);
}

static void wall(uint64_t *sec, unsigned *ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        *sec = (uint64_t)ts.tv_sec;
        *ms = (unsigned)(ts.tv_nsec / 1000000);
}

static void report_suppressed(void)
{
        if (!suppressed)
                return;
        uint64_t sec;
        unsigned ms;
        wall(&sec, &ms);
        begin(sec, ms, "landlock.suppressed");
        char n[32];
        snprintf(n, sizeof n, ",\"count\":%llu", (unsigned long long)suppressed);
        put(n);
        finish();
        suppressed = 0;
}

/* Rate cap: RATE denial lines per wall-clock second. */
static bool rate_ok(void)
{
        uint64_t sec;
        unsigned ms;
        wall(&sec, &ms);
        if (sec != rate_sec) {
                report_suppressed();
                rate_sec = sec;
                rate_count = 0;
        }
        if (rate_count >= RATE) {
                suppressed++;
                return false;
        }
        rate_count++;
        return true;
}

/* ---- audit record fields ---- */

/* The value of field `key` in record text `rec` (fields are "key=value",
 * space separated; a value is "quoted" or runs to the next space). */
static bool field(const char *rec, const char *key, char *out, size_t size, bool *quoted)
{
        size_t kl = strlen(key);
        for (const char *p = rec; (p = strstr(p, key)); p += kl) {
                if ((p != rec && p[-1] != ' ') || p[kl] != '=')
                        continue;
                const char *v = p + kl + 1, *end;
                bool q = *v == '"';
                if (q) {
                        v++;
                        end = strchr(v, '"');
                        if (!end)
                                end = v + strlen(v);
                } else {
                        end = strchr(v, ' ');
                        if (!end)
                                end = v + strlen(v);
                }
                size_t n = (size_t)(end - v);
                if (n >= size)
                        n = size - 1;
                memcpy(out, v, n);
                out[n] = '\0';
                if (quoted)
                        *quoted = q;
                return true;
        }
        return false;
}

/* Untrusted strings (paths, comm, exe) are logged quoted, or as hex when
 * they hold a space, a quote or a control character. */
static bool untrusted(const char *key)
{
        static const char *const k[] = { "path", "comm", "exe", "ocomm", "name", "cwd", NULL };
        for (int i = 0; k[i]; i++)
                if (!strcmp(key, k[i]))
                        return true;
        return false;
}

static size_t decode(const char *key, char *v, bool quoted)
{
        size_t n = strlen(v);
        if (quoted || !untrusted(key) || n == 0 || n % 2)
                return n;
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char)v[i]))
                        return n;
        for (size_t i = 0; i < n / 2; i++) {
                char b[3] = { v[2 * i], v[2 * i + 1], 0 };
                v[i] = (char)strtoul(b, NULL, 16);
        }
        return n / 2;
}

static bool is_number(const char *v)
{
        if (!*v || strlen(v) > 18)
                return false;
        for (; *v; v++)
                if (!isdigit((unsigned char)*v))
                        return false;
        return true;
}

static bool known_domain(const char *d)
{
        for (int i = 0; i < n_domains; i++)
                if (!strcmp(domains[i], d))
                        return true;
        return false;
}

static void learn_domain(const char *d)
{
        if (!*d || known_domain(d))
                return;
        if (n_domains < MAX_DOMAINS)
                snprintf(domains[n_domains++], sizeof domains[0], "%s", d);
}

/* ---- events ---- */

static void event_free(struct event *e)
{
        for (int i = 0; i < e->n_acc; i++)
                free(e->acc[i]);
        free(e->dom);
        free(e->sys);
        memset(e, 0, sizeof *e);
}

static void emit_denial(const struct event *e, const char *acc)
{
        if (!rate_ok())
                return;
        char v[REC_MAX];
        begin(e->sec, e->ms, "landlock.deny");
        if (field(acc, "domain", v, sizeof v, NULL)) {
                put_key("domain");
                put_str(v, strlen(v));
        }
        put_key("blockers");
        put("[");
        if (field(acc, "blockers", v, sizeof v, NULL)) {
                bool first = true;
                for (char *save = NULL, *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                        if (!first)
                                put(",");
                        put_str(t, strlen(t));
                        first = false;
                }
        }
        put("]");
        /* The object's fields, whatever the blocker type logs. */
        for (const char *p = acc; *p;) {
                while (*p == ' ')
                        p++;
                const char *eq = strchr(p, '=');
                const char *sp = strchr(p, ' ');
                if (!eq || (sp && sp < eq))
                        break;
                char key[32];
                size_t kl = (size_t)(eq - p);
                if (kl >= sizeof key)
                        kl = sizeof key - 1;
                memcpy(key, p, kl);
                key[kl] = '\0';
                bool q = false;
                if (!field(p, key, v, sizeof v, &q))
                        break;
                /* advance past this value */
                const char *nx = eq + 1;
                if (*nx == '"') {
                        const char *c = strchr(nx + 1, '"');
                        nx = c ? c + 1 : nx + strlen(nx);
                } else {
                        const char *c = strchr(nx, ' ');
                        nx = c ? c : nx + strlen(nx);
                }
                p = nx;
                if (!strcmp(key, "domain") || !strcmp(key, "blockers"))
                        continue;
                size_t n = decode(key, v, q);
                put_key(key);
                if (!q && is_number(v))
                        put(v);
                else
                        put_str(v, n);
        }
        if (e->sys) {
                static const char *const num[] = { "pid", "uid", "syscall" };
                for (size_t i = 0; i < 3; i++)
                        if (field(e->sys, num[i], v, sizeof v, NULL) && is_number(v)) {
                                put_key(num[i]);
                                put(v);
                        }
                static const char *const str[] = { "comm", "exe" };
                for (size_t i = 0; i < 2; i++) {
                        bool q = false;
                        if (field(e->sys, str[i], v, sizeof v, &q)) {
                                size_t n = decode(str[i], v, q);
                                put_key(str[i]);
                                put_str(v, n);
                        }
                }
        }
        finish();
}

static void event_decide(struct event *e)
{
        char v[64], d[32];
        if (e->dom && field(e->dom, "pid", v, sizeof v, NULL) && strtol(v, NULL, 10) == agent_pid &&
            field(e->dom, "domain", d, sizeof d, NULL)) {
                bool uid_ok = sandbox_uid < 0 ||
                              (field(e->dom, "uid", v, sizeof v, NULL) && strtol(v, NULL, 10) == sandbox_uid);
                if (uid_ok)
                        learn_domain(d);
        }
        bool uid_match = sandbox_uid >= 0 && e->sys && field(e->sys, "uid", v, sizeof v, NULL) &&
                         strtol(v, NULL, 10) == sandbox_uid;
        for (int i = 0; i < e->n_acc; i++) {
                if (!field(e->acc[i], "domain", d, sizeof d, NULL))
                        continue;
                if (!known_domain(d)) {
                        if (!uid_match)
                                continue;
                        learn_domain(d);
                }
                emit_denial(e, e->acc[i]);
        }
        event_free(e);
}

static void flush_events(bool all)
{
        uint64_t now = pd_now_ms();
        /* oldest serial first: the allocated record precedes later denials */
        for (;;) {
                struct event *best = NULL;
                for (int i = 0; i < MAX_EVENTS; i++) {
                        struct event *e = &events[i];
                        if (!e->used || !(all || e->complete || now - e->arrived_ms >= EVENT_AGE_MS))
                                continue;
                        if (!best || e->serial < best->serial)
                                best = e;
                }
                if (!best)
                        break;
                event_decide(best);
        }
        report_suppressed();
}

static bool any_pending(void)
{
        for (int i = 0; i < MAX_EVENTS; i++)
                if (events[i].used)
                        return true;
        return false;
}

static struct event *event_get(uint64_t serial, uint64_t sec, unsigned ms, bool create)
{
        struct event *free_slot = NULL, *oldest = NULL;
        for (int i = 0; i < MAX_EVENTS; i++) {
                struct event *e = &events[i];
                if (e->used && e->serial == serial)
                        return e;
                if (!e->used && !free_slot)
                        free_slot = e;
                if (e->used && (!oldest || e->serial < oldest->serial))
                        oldest = e;
        }
        if (!create)
                return NULL;
        if (!free_slot) {
                event_decide(oldest);
                free_slot = oldest;
        }
        free_slot->used = true;
        free_slot->serial = serial;
        free_slot->sec = sec;
        free_slot->ms = ms;
        free_slot->arrived_ms = pd_now_ms();
        return free_slot;
}

/* Returns whether the record belongs to a Landlock event. */
static bool on_record(int type, char *text)
{
        unsigned long long sec, serial;
        unsigned ms;
        int off = 0;
        if (sscanf(text, "audit(%llu.%u:%llu): %n", &sec, &ms, &serial, &off) != 3 || !off)
                return false;
        char *body = text + off;
        struct event *e;
        switch (type) {
        case AUDIT_LANDLOCK_ACCESS:
                e = event_get(serial, sec, ms, true);
                if (e->n_acc < MAX_ACC)
                        e->acc[e->n_acc++] = strdup(body);
                break;
        case AUDIT_LANDLOCK_DOMAIN:
                if (!strstr(body, "status=allocated"))
                        return true;
                e = event_get(serial, sec, ms, true);
                if (!e->dom)
                        e->dom = strdup(body);
                break;
        case AUDIT_SYSCALL:
                if (!(e = event_get(serial, sec, ms, false)))
                        return false;
                if (!e->sys)
                        e->sys = strdup(body);
                break;
        case AUDIT_EOE:
                if (!(e = event_get(serial, sec, ms, false)))
                        return false;
                e->complete = true;
                break;
        default:
                return false;
        }
        return true;
}

/* Read every queued datagram; returns how many records of Landlock events
 * were seen. */
static int drain_socket(int s)
{
        static char buf[REC_MAX + 256];
        int n_rec = 0;
        for (;;) {
                ssize_t n = recv(s, buf, sizeof buf - 1, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ENOBUFS) {
                                /* the kernel dropped records meant for us */
                                overflows++;
                                uint64_t sec;
                                unsigned ms;
                                wall(&sec, &ms);
                                begin(sec, ms, "landlock.overflow");
                                put(",\"reason\":\"the audit socket's receive buffer overflowed; denials may be missing\"");
                                finish();
                                continue;
                        }
                        return n_rec;
                }
                if (n == 0)
                        return n_rec;
                /* One record per datagram; its text is not NUL-terminated
                 * and its aligned length may exceed what was received, so
                 * no NLMSG_NEXT walk. */
                if (n < (ssize_t)NLMSG_HDRLEN)
                        continue;
                struct nlmsghdr *h = (struct nlmsghdr *)buf;
                size_t len = h->nlmsg_len < (size_t)n ? h->nlmsg_len : (size_t)n;
                len = len > NLMSG_HDRLEN ? len - NLMSG_HDRLEN : 0;
                char *text = buf + NLMSG_HDRLEN;
                text[len] = '\0';
                if (on_record(h->nlmsg_type, text))
                        n_rec++;
        }
}

/* AUDIT_GET on a unicast socket: 1 enabled, 0 disabled, -errno unknown. */
static int audit_enabled(void)
{
        int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
        if (s < 0)
                return -errno;
        struct {
                struct nlmsghdr h;
                char pad[16];
        } req = { 0 };
        req.h.nlmsg_len = NLMSG_LENGTH(0);
        req.h.nlmsg_type = AUDIT_GET;
        req.h.nlmsg_flags = NLM_F_REQUEST;
        req.h.nlmsg_seq = 1;
        struct sockaddr_nl k = { .nl_family = AF_NETLINK };
        int r = -EIO;
        if (sendto(s, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&k, sizeof k) < 0) {
                r = -errno;
                goto out;
        }
        for (int tries = 0; tries < 4; tries++) {
                struct pollfd p = { s, POLLIN, 0 };
                if (poll(&p, 1, 1000) <= 0)
                        break;
                char buf[8192];
                ssize_t n = recv(s, buf, sizeof buf, 0);
                if (n < (ssize_t)NLMSG_HDRLEN)
                        break;
                struct nlmsghdr *h = (struct nlmsghdr *)buf;
                if (h->nlmsg_type == NLMSG_ERROR) {
                        struct nlmsgerr *e = NLMSG_DATA(h);
                        if (e->error) {
                                r = e->error;
                                break;
                        }
                        continue;
                }
                if (h->nlmsg_type == AUDIT_GET) {
                        struct audit_status st;
                        memset(&st, 0, sizeof st);
                        size_t len = h->nlmsg_len - NLMSG_HDRLEN;
                        memcpy(&st, NLMSG_DATA(h), len < sizeof st ? len : sizeof st);
                        r = st.enabled ? 1 : 0;
                        break;
                }
        }
out:
        close(s);
        return r;
}

/* After setup nothing here needs a privilege: drop them all. */
static void drop_privileges(void)
{
        for (int c = 0; c < 64; c++)
                (void)prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
        struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);
        (void)syscall(SYS_capset, &hdr, data);
        (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static void ready(int fd, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (n > (int)sizeof msg - 1)
                n = (int)sizeof msg - 1;
        if (fd >= 0) {
                (void)!write(fd, msg, (size_t)n);
                close(fd);
        }
}

int main(int argc, char **argv)
{
        int ready_fd = -1;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!v)
                        die("option %s needs a value", a);
                if (!strcmp(a, "--sandbox"))
                        sandbox_id = v;
                else if (!strcmp(a, "--pid"))
                        agent_pid = strtol(v, NULL, 10);
                else if (!strcmp(a, "--uid"))
                        sandbox_uid = strtol(v, NULL, 10);
                else if (!strcmp(a, "--audit"))
                        audit_path = v;
                else if (!strcmp(a, "--ready-fd"))
                        ready_fd = (int)strtol(v, NULL, 10);
                else
                        die("unknown option %s", a);
                i++;
        }
        if (!sandbox_id || !audit_path || agent_pid <= 0)
                die("usage: paddock-lsm-audit --sandbox ID --pid AGENT_PID [--uid UID] --audit FILE --ready-fd N");
        if (ready_fd >= 0)
                (void)fcntl(ready_fd, F_SETFD, FD_CLOEXEC);

        /* SIGTERM (teardown) arrives on a signalfd: the loop drains first. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)agent_pid, 0);
        if (sfd < 0 || pidfd < 0) {
                ready(ready_fd, "off:%s: %s", sfd < 0 ? "signalfd" : "pidfd of the agent", strerror(errno));
                return 0;
        }

        int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
        if (s < 0) {
                ready(ready_fd, "off:NETLINK_AUDIT socket: %s", strerror(errno));
                return 0;
        }
        int rcv = 4 << 20;
        if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv) < 0)
                (void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1) };
        if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
                ready(ready_fd,
                      "off:cannot join the kernel's audit multicast group (AUDIT_NLGRP_READLOG): %s%s",
                      strerror(errno),
                      errno == EPERM ? " (needs CAP_AUDIT_READ in the initial user namespace)" : "");
                return 0;
        }
        int en = audit_enabled();
        if (en == 0) {
                ready(ready_fd, "off:the kernel's audit is disabled (AUDIT_GET: enabled=0; no audit daemon "
                                "enabled it and audit=1 is not on the kernel command line), so Landlock logs "
                                "no denial");
                return 0;
        }
        audit_fd = open(audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (audit_fd < 0) {
                ready(ready_fd, "off:open '%s': %s", audit_path, strerror(errno));
                return 0;
        }
        drop_privileges();
        if (en < 0)
                ready(ready_fd, "on:audit status unknown (AUDIT_GET: %s)", strerror(-en));
        else
                ready(ready_fd, "on");

        bool stopping = false;
        uint64_t drain_start = 0, last_rec = 0;
        for (;;) {
                struct pollfd p[3] = { { s, POLLIN, 0 }, { sfd, POLLIN, 0 }, { pidfd, POLLIN, 0 } };
                int timeout = -1;
                if (stopping)
                        timeout = DRAIN_QUIET_MS;
                else if (any_pending())
                        timeout = 50;
                int pr = poll(p, stopping ? 1 : 3, timeout);
                if (pr < 0 && errno != EINTR)
                        die("poll: %s", strerror(errno));
                uint64_t now = pd_now_ms();
                if (pr > 0 && (p[0].revents & POLLIN) && drain_socket(s) > 0)
                        last_rec = now;
                if (!stopping && pr > 0 && ((p[1].revents & POLLIN) || (p[2].revents & (POLLIN | POLLHUP)))) {
                        /* Told to stop, or the agent is gone: what the kernel
                         * queued before that still comes; read until quiet. */
                        stopping = true;
                        drain_start = last_rec = now;
                }
                flush_events(false);
                if (stopping && (now - last_rec >= DRAIN_QUIET_MS || now - drain_start >= DRAIN_MAX_MS))
                        break;
        }
        flush_events(true);
        return 0;
}
