/* run.oci.paddock.isolation=microvm (docs/oci.md#microvm): the bundle's
 * rootfs becomes a QEMU guest's disk and paddock's agent, the guest's init,
 * runs the config's process. The pid the engine sees is a host-side shim
 * (vm_shim.c) that runs the process through the agent, forwards every
 * signal to it and exits with its status. */
#pragma once
#include "oci/init.h"
#include "oci/oci.h"

/* true if a config (or its saved copy) asks for microvm isolation */
bool oci_vm_is(json_t *config);

/* vm_create.c: create with the guest booted and the shim waiting on
 * exec.fifo; *out_pid is the shim. */
int oci_vm_create(const struct oci_global *g, const char *id, const struct create_opts_pub *po, struct oci_config *cfg,
                  pid_t *out_pid, struct pd_error *err);
/* delete: QEMU, its relay, its uid range and its runtime dir. */
void oci_vm_cleanup(const struct oci_state *st);
/* pause/resume: QMP stop/cont, recorded by <dir>/vm.paused. */
int oci_vm_pause(const struct oci_state *st, bool pause, struct pd_error *err);
bool oci_vm_paused(const struct oci_state *st);

/* vm_shim.c */
/* Connect to the guest's agent (HELLO done); returns the fd in c. */
struct pd_client;
int oci_vm_connect(const struct oci_state *st, struct pd_client *c, struct pd_error *err);
/* The shim of the container's init: waits on exec.fifo, then runs p. */
__attribute__((noreturn)) void oci_vm_shim_init(const char *dir, const char *sock, const struct oci_process *p);
/* exec: a shim child running p; its pid (our child) in *out_pid. */
int oci_vm_exec(const struct oci_state *st, const struct oci_process *p, const char *pid_file, pid_t *out_pid,
                struct pd_error *err);
/* kill: through the agent to the guest process (all: every guest process).
 * 1 if not applicable (not started yet): signal the shim instead. */
int oci_vm_kill(const struct oci_state *st, int sig, bool all, struct pd_error *err);
/* ps table: the guest's processes. */
int oci_vm_ps(const struct oci_state *st, struct pd_error *err);
