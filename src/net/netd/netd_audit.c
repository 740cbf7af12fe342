/* Audit: one JSON line per decision, appended to the sandbox's audit file
 * (the server reads these into its audit log). */
#include <jansson.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/netd/netd.h"
#include "lib/util.h"

static void write_line(struct netd_sandbox *sb, json_t *o);

/* The head of every line, in the shape of the server's own audit lines
 * (src/server/core/audit_log.c): ts as RFC 3339 UTC with milliseconds, sandbox,
 * key ("netd": no API key made the decision), event "net.<kind>". */
static json_t *line_head(const struct netd_sandbox *sb, const char *kind)
{
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        time_t t = now.tv_sec;
        struct tm tm;
        gmtime_r(&t, &tm);
        char ts[32], event[32];
        size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(ts + n, sizeof ts - n, ".%03uZ", (unsigned)(now.tv_nsec / 1000000));
        snprintf(event, sizeof event, "net.%s", kind);
        return json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "sandbox", sb->id, "key", "netd", "event", event);
}

/* A sandbox that floods (a query loop, a port scan through the proxy)
 * must not fill the disk: past NETD_AUDIT_RATE lines/s (burst
 * NETD_AUDIT_BURST) lines are counted, and one "suppressed" line with the
 * count is written when the bucket refills. */
static bool take_token(struct netd_sandbox *sb)
{
        uint64_t now = pd_now_ms();
        if (sb->audit_refill_ms == 0) {
                sb->audit_tokens = NETD_AUDIT_BURST;
                sb->audit_refill_ms = now;
        }
        sb->audit_tokens += (double)(now - sb->audit_refill_ms) * NETD_AUDIT_RATE / 1000.0;
        if (sb->audit_tokens > NETD_AUDIT_BURST)
                sb->audit_tokens = NETD_AUDIT_BURST;
        sb->audit_refill_ms = now;
        if (sb->audit_tokens < 1) {
                sb->audit_suppressed++;
                return false;
        }
        sb->audit_tokens -= 1;
        if (sb->audit_suppressed && sb->audit_tokens >= 1) {
                json_t *o = line_head(sb, "suppressed");
                if (o)
                        json_object_set_new(o, "count", json_integer((json_int_t)sb->audit_suppressed));
                sb->audit_suppressed = 0;
                sb->audit_tokens -= 1;
                if (o)
                        write_line(sb, o);
        }
        return true;
}

void netd_audit(struct netd_sandbox *sb, const struct netd_audit *a)
{
        if (!sb || sb->audit_fd < 0 || !take_token(sb))
                return;
        json_t *o = line_head(sb, a->kind);
        if (!o)
                return;
        json_object_set_new(o, "decision", json_string(a->allow ? "allow" : "deny"));
        if (a->name)
                json_object_set_new(o, "name", json_string(a->name));
        if (a->qtype)
                json_object_set_new(o, "qtype", json_string(a->qtype));
        if (a->addr) {
                char buf[64];
                json_object_set_new(o, "addr", json_string(netd_addr_str(a->addr, buf, sizeof buf)));
        }
        if (a->port)
                json_object_set_new(o, "port", json_integer(a->port));
        if (a->proto)
                json_object_set_new(o, "proto", json_string(a->proto));
        if (a->ttl)
                json_object_set_new(o, "ttl", json_integer(a->ttl));
        if (a->bytes) {
                json_object_set_new(o, "bytes_out", json_integer((json_int_t)a->bytes_out));
                json_object_set_new(o, "bytes_in", json_integer((json_int_t)a->bytes_in));
                json_object_set_new(o, "duration_ms", json_integer((json_int_t)a->duration_ms));
        }
        if (a->repeats)
                json_object_set_new(o, "repeats", json_integer((json_int_t)a->repeats));
        if (a->rule_kind) {
                json_object_set_new(o, "rule", json_string(a->rule_kind));
        } else if (a->rule) {
                char r[PD_NETPOL_RULE_TEXT_MAX + 1];
                pd_netpol_rule_format(a->rule, r, sizeof r);
                json_object_set_new(o, "rule", json_string(r));
        } else {
                json_object_set_new(o, "rule", json_null());
        }
        if (a->reason)
                json_object_set_new(o, "reason", json_string(a->reason));
        write_line(sb, o);
}

static void write_line(struct netd_sandbox *sb, json_t *o)
{
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s)
                return;
        size_t n = strlen(s);
        s[n] = '\n';            /* json_dumps's NUL becomes the newline */
        /* one write with O_APPEND: lines from concurrent writers never
         * interleave; a short write on a full disk loses the line, not the
         * daemon */
        ssize_t w = write(sb->audit_fd, s, n + 1);
        (void)w;
        free(s);
}
