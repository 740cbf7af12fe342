/* paddock-vm-relay: the host end of a microvm's channel multiplexer
 * (src/proto/vmmux.h). One per VM, outliving the process that started it
 * (like the agent of the container tier): it accepts connections on the
 * sandbox's agent socket (fd 3) and carries each as a channel over QEMU's
 * virtio-serial chardev socket. Writes one byte to fd 4 (then closes it)
 * once the guest answered SYNC: the agent is ready. With --net=HEX (the
 * PD_MUX_NETCFG payload in hex) it tells the guest its NIC's settings
 * right after every SYNC. It also keeps the VM's console log (console.log
 * beside SERIAL_SOCKET) under its cap (console_cap.c; 1 MiB unless
 * --console-max says otherwise).
 *   paddock-vm-relay SERIAL_SOCKET [--net=HEX] [--console-max=BYTES] */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vm/console_cap.h"
#include "proto/vmmux.h"

int main(int argc, char **argv)
{
        static uint8_t netcfg[PD_MUX_NETCFG_LEN];
        bool have_net = false;
        uint64_t console_max = PD_CONSOLE_LOG_MAX;
        if (argc < 2)
                goto usage;
        for (int a = 2; a < argc; a++) {
                if (strncmp(argv[a], "--net=", 6) == 0 && strlen(argv[a] + 6) == 2 * PD_MUX_NETCFG_LEN) {
                        for (unsigned i = 0; i < PD_MUX_NETCFG_LEN; i++) {
                                unsigned v;
                                if (sscanf(argv[a] + 6 + 2 * i, "%2x", &v) != 1)
                                        goto usage;
                                netcfg[i] = (uint8_t)v;
                        }
                        have_net = true;
                } else if (strncmp(argv[a], "--console-max=", 14) == 0) {
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(argv[a] + 14, &end, 10);
                        if (errno || *end || end == argv[a] + 14 || v < 4096)
                                goto usage;
                        console_max = v;
                } else {
usage:
                        fprintf(stderr, "usage: paddock-vm-relay SERIAL_SOCKET [--net=HEX] [--console-max=BYTES "
                                        "(>= 4096)] (listener on fd 3, ready fd 4)\n");
                        return 2;
                }
        }
        signal(SIGPIPE, SIG_IGN);
        char dir[PATH_MAX], console[PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s", argv[1]);
        snprintf(console, sizeof console, "%s/console.log", dirname(dir));
        int k = pd_console_cap_start(console, console_max);
        if (k < 0) {
                fprintf(stderr, "paddock-vm-relay: cap %s: %s\n", console, strerror(-k));
                return 1;
        }
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(argv[1]) >= sizeof a.sun_path) {
                fprintf(stderr, "paddock-vm-relay: socket path too long\n");
                return 2;
        }
        strcpy(a.sun_path, argv[1]);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                fprintf(stderr, "paddock-vm-relay: connect %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        fcntl(3, F_SETFL, O_NONBLOCK);
        fcntl(3, F_SETFD, FD_CLOEXEC);
        fcntl(4, F_SETFD, FD_CLOEXEC);
        struct pd_mux_cfg cfg = { .guest = false, .trunk_fd = fd, .listen_fd = 3, .hup_wait_fd = -1,
                                  .ready_fd = 4, .netcfg = have_net ? netcfg : NULL };
        struct pd_error err = { 0 };
        if (pd_mux_run(&cfg, &err) < 0) {
                fprintf(stderr, "paddock-vm-relay: %s\n", err.msg);
                return 1;
        }
        return 0;
}
