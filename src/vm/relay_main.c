/* paddock-vm-relay: the host end of a microvm's channel multiplexer
 * (src/proto/vmmux.h). One per VM, outliving the process that started it
 * (like the agent of the container tier): it accepts connections on the
 * sandbox's agent socket (fd 3) and carries each as a channel over QEMU's
 * virtio-serial chardev socket. Writes one byte to fd 4 (then closes it)
 * once the guest answered SYNC: the agent is ready. With --net=HEX (the
 * PD_MUX_NETCFG payload in hex) it tells the guest its NIC's settings
 * right after every SYNC.
 *   paddock-vm-relay SERIAL_SOCKET [--net=HEX] */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vmmux.h"

int main(int argc, char **argv)
{
        static uint8_t netcfg[PD_MUX_NETCFG_LEN];
        bool have_net = false;
        if (argc == 3 && strncmp(argv[2], "--net=", 6) == 0 && strlen(argv[2] + 6) == 2 * PD_MUX_NETCFG_LEN) {
                for (unsigned i = 0; i < PD_MUX_NETCFG_LEN; i++) {
                        unsigned v;
                        if (sscanf(argv[2] + 6 + 2 * i, "%2x", &v) != 1)
                                goto usage;
                        netcfg[i] = (uint8_t)v;
                }
                have_net = true;
        } else if (argc != 2) {
usage:
                fprintf(stderr, "usage: paddock-vm-relay SERIAL_SOCKET [--net=HEX] (listener on fd 3, ready fd 4)\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
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
