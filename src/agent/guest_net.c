/* microvm guest: eth0 (virtio-net) configured from the host's NETCFG
 * frame (src/proto/vmmux.h), which follows every SYNC. The template a
 * clone is restored from booted with this NIC unconfigured, so every
 * clone sets its own MAC, address, route and resolver here; a resumed or
 * re-synced guest applies the same values again (idempotent). Runs in the
 * demux process (root in the guest, after the switch to the real root). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "proto/vmmux.h"

#define GUEST_IF "eth0"

static void sin_put(struct sockaddr *sa, const uint8_t a[4])
{
        struct sockaddr_in *in = (struct sockaddr_in *)sa;
        memset(in, 0, sizeof *in);
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, a, 4);
}

static int ifreq_ioctl(int s, unsigned long req, struct ifreq *ifr, const char *what)
{
        if (ioctl(s, req, ifr) == 0)
                return 0;
        fprintf(stderr, "paddock-agent: eth0: %s: %m\n", what);
        return -errno;
}

/* The NIC probes asynchronously at boot; a clone's exists already. */
static int wait_nic(int s, struct ifreq *ifr)
{
        struct timespec d = { 0, 5 * 1000 * 1000 };
        for (int i = 0; i < 400; i++) {
                memset(ifr, 0, sizeof *ifr);
                snprintf(ifr->ifr_name, sizeof ifr->ifr_name, "%s", GUEST_IF);
                if (ioctl(s, SIOCGIFFLAGS, ifr) == 0)
                        return 0;
                nanosleep(&d, NULL);
        }
        fprintf(stderr, "paddock-agent: no %s (virtio_net not loaded?)\n", GUEST_IF);
        return -ENODEV;
}

static void write_resolv(const uint8_t dns[4])
{
        char text[128], ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, dns, ip, sizeof ip);
        int n = snprintf(text, sizeof text, "# paddock: the sandbox's resolver (docs/network.md)\nnameserver %s\n", ip);
        /* replaced whole (a symlink in the image is replaced, not followed) */
        int fd = open("/etc/.resolv.conf.paddock", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, (size_t)n) != n || close(fd) < 0 ||
            rename("/etc/.resolv.conf.paddock", "/etc/resolv.conf") < 0)
                fprintf(stderr, "paddock-agent: write /etc/resolv.conf: %m\n");
}

void ag_guest_net_apply(const uint8_t *p, size_t n)
{
        if (n != PD_MUX_NETCFG_LEN)
                return;
        const uint8_t *mac = p, *addr = p + 6, *gw = p + 10, *dns = p + 14;
        unsigned prefix = p[18], mtu = (unsigned)p[19] << 8 | p[20];
        if (prefix > 32 || mtu < 576)
                return;
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return;
        struct ifreq ifr;
        if (wait_nic(s, &ifr) < 0)
                goto out;
        short flags = ifr.ifr_flags;
        /* the MAC first: virtio-net tells QEMU (CTRL_MAC_ADDR), whose
         * receive filter then passes frames for it */
        ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
        memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
        if (ifreq_ioctl(s, SIOCSIFHWADDR, &ifr, "set MAC") < 0)
                goto out;
        ifr.ifr_mtu = (int)mtu;
        (void)ifreq_ioctl(s, SIOCSIFMTU, &ifr, "set MTU");
        /* replaces the address a fork or an earlier sync set (its routes go with it) */
        sin_put(&ifr.ifr_addr, addr);
        if (ifreq_ioctl(s, SIOCSIFADDR, &ifr, "set address") < 0)
                goto out;
        uint32_t mask = prefix ? htonl(~0u << (32 - prefix)) : 0;
        sin_put(&ifr.ifr_netmask, (const uint8_t *)&mask);
        if (ifreq_ioctl(s, SIOCSIFNETMASK, &ifr, "set netmask") < 0)
                goto out;
        ifr.ifr_flags = (short)(flags | IFF_UP);
        if (ifreq_ioctl(s, SIOCSIFFLAGS, &ifr, "up") < 0)
                goto out;
        struct rtentry rt;
        memset(&rt, 0, sizeof rt);
        uint8_t any[4] = { 0 };
        sin_put(&rt.rt_dst, any);
        sin_put(&rt.rt_genmask, any);
        sin_put(&rt.rt_gateway, gw);
        rt.rt_flags = RTF_UP | RTF_GATEWAY;
        rt.rt_dev = (char *)GUEST_IF;
        if (ioctl(s, SIOCADDRT, &rt) < 0 && errno != EEXIST)
                fprintf(stderr, "paddock-agent: eth0: default route: %m\n");
        write_resolv(dns);
out:
        close(s);
}
