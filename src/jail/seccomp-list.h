/* The syscalls paddock's seccomp filter allows unconditionally (DESIGN §5).
 *
 * Modelled on the list Docker's default profile allows without conditions
 * (moby profiles/seccomp/default.json), restricted to the native 64-bit ABIs
 * we build for, minus what we deny on purpose (see docs/seccomp.md):
 *   adjtimex, clock_adjtime      change the host clock (time is not namespaced)
 *   io_uring_*                   large kernel attack surface, bypasses seccomp
 *                                for the operations it submits
 *   name_to_handle_at            half of the open_by_handle_at escape pair
 *   landlock_*                   the sandbox's Landlock domain is ours to set
 *   epoll_ctl_old, *_wait_old    never implemented by the kernel
 * plus what Docker allows only with a capability and we allow anyway:
 *   chroot                       root inside has CAP_SYS_CHROOT in its own
 *                                user and mount namespace
 *   ptrace, process_vm_readv/writev  Docker allows them on kernels >= 4.8;
 *                                the agent is non-dumpable and workloads have
 *                                no capabilities, so they cannot reach it
 *
 * Syscalls with argument rules (clone, clone3, unshare, ioctl, socket,
 * personality, seccomp) are NOT here: seccomp.c adds them. The process tier
 * takes some entries out again (deny_ipc: SysV IPC and mq_*; deny_unix_names:
 * bind, and socketpair then gets argument rules): see seccomp.c.
 *
 * Each entry is X(name); SCMP_SYS(name) checks the name at compile time.
 * Changing this list changes the cache key by itself (the names are hashed),
 * but bump PD_SECCOMP_POLICY_VERSION in seccomp.c anyway. */
#pragma once

#define PD_SECCOMP_ALLOW_COMMON(X) \
        X(accept) X(accept4) X(bind) X(brk) X(capget) X(capset) X(chdir) \
        X(chroot) X(clock_getres) X(clock_gettime) X(clock_nanosleep) \
        X(close) X(close_range) X(connect) X(copy_file_range) X(dup) X(dup3) \
        X(epoll_create1) X(epoll_ctl) X(epoll_pwait) X(epoll_pwait2) \
        X(eventfd2) X(execve) X(execveat) X(exit) X(exit_group) X(faccessat) \
        X(faccessat2) X(fadvise64) X(fallocate) X(fanotify_mark) X(fchdir) \
        X(fchmod) X(fchmodat) X(fchown) X(fchownat) X(fcntl) X(fdatasync) \
        X(fgetxattr) X(flistxattr) X(flock) X(fremovexattr) X(fsetxattr) \
        X(fstat) X(fstatfs) X(fsync) X(ftruncate) X(futex) X(futex_waitv) \
        X(getcpu) X(getcwd) X(getdents64) X(getegid) X(geteuid) X(getgid) \
        X(getgroups) X(getitimer) X(getpeername) X(getpgid) X(getpid) \
        X(getppid) X(getpriority) X(getrandom) X(getresgid) X(getresuid) \
        X(getrlimit) X(get_robust_list) X(getrusage) X(getsid) \
        X(getsockname) X(getsockopt) X(gettid) X(gettimeofday) X(getuid) \
        X(getxattr) X(inotify_add_watch) X(inotify_init1) X(inotify_rm_watch) \
        X(io_cancel) X(io_destroy) X(io_getevents) X(io_pgetevents) \
        X(ioprio_get) X(ioprio_set) X(io_setup) X(io_submit) X(kill) \
        X(lgetxattr) X(linkat) X(listen) X(listxattr) X(llistxattr) \
        X(lremovexattr) X(lseek) X(lsetxattr) X(madvise) X(membarrier) \
        X(memfd_create) X(memfd_secret) X(mincore) X(mkdirat) X(mknodat) \
        X(mlock) X(mlock2) X(mlockall) X(mmap) X(mprotect) X(mq_getsetattr) \
        X(mq_notify) X(mq_open) X(mq_timedreceive) X(mq_timedsend) \
        X(mq_unlink) X(mremap) X(msgctl) X(msgget) X(msgrcv) X(msgsnd) \
        X(msync) X(munlock) X(munlockall) X(munmap) X(nanosleep) \
        X(newfstatat) X(openat) X(openat2) X(pidfd_open) \
        X(pidfd_send_signal) X(pipe2) X(pkey_alloc) X(pkey_free) \
        X(pkey_mprotect) X(ppoll) X(prctl) X(pread64) X(preadv) X(preadv2) \
        X(prlimit64) X(process_mrelease) X(process_vm_readv) \
        X(process_vm_writev) X(pselect6) X(ptrace) X(pwrite64) X(pwritev) \
        X(pwritev2) X(read) X(readahead) X(readlinkat) X(readv) X(recvfrom) \
        X(recvmmsg) X(recvmsg) X(remap_file_pages) X(removexattr) \
        X(renameat) X(renameat2) X(restart_syscall) X(rseq) X(rt_sigaction) \
        X(rt_sigpending) X(rt_sigprocmask) X(rt_sigqueueinfo) \
        X(rt_sigreturn) X(rt_sigsuspend) X(rt_sigtimedwait) \
        X(rt_tgsigqueueinfo) X(sched_getaffinity) X(sched_getattr) \
        X(sched_getparam) X(sched_get_priority_max) \
        X(sched_get_priority_min) X(sched_getscheduler) \
        X(sched_rr_get_interval) X(sched_setaffinity) X(sched_setattr) \
        X(sched_setparam) X(sched_setscheduler) X(sched_yield) X(semctl) \
        X(semget) X(semop) X(semtimedop) X(sendfile) X(sendmmsg) X(sendmsg) \
        X(sendto) X(setfsgid) X(setfsuid) X(setgid) X(setgroups) \
        X(setitimer) X(setpgid) X(setpriority) X(setregid) X(setresgid) \
        X(setresuid) X(setreuid) X(setrlimit) X(set_robust_list) X(setsid) \
        X(setsockopt) X(set_tid_address) X(setuid) X(setxattr) X(shmat) \
        X(shmctl) X(shmdt) X(shmget) X(shutdown) X(sigaltstack) \
        X(signalfd4) X(socketpair) X(splice) X(statfs) X(statx) \
        X(symlinkat) X(sync) X(sync_file_range) X(syncfs) X(sysinfo) X(tee) \
        X(tgkill) X(timer_create) X(timer_delete) X(timer_getoverrun) \
        X(timer_gettime) X(timer_settime) X(timerfd_create) \
        X(timerfd_gettime) X(timerfd_settime) X(times) X(tkill) \
        X(truncate) X(umask) X(uname) X(unlinkat) X(utimensat) X(vmsplice) \
        X(wait4) X(waitid) X(write) X(writev)

/* Legacy or arch-specific entry points that exist on x86_64 only. */
#if defined(__x86_64__)
#define PD_SECCOMP_ALLOW_ARCH(X) \
        X(access) X(alarm) X(arch_prctl) X(chmod) X(chown) X(creat) X(dup2) \
        X(epoll_create) X(epoll_wait) X(eventfd) X(fork) X(futimesat) \
        X(get_thread_area) X(getdents) X(getpgrp) X(inotify_init) \
        X(lchown) X(link) X(lstat) X(mkdir) X(mknod) X(modify_ldt) X(open) \
        X(pause) X(pipe) X(poll) X(readlink) X(rename) X(rmdir) X(select) \
        X(set_thread_area) X(signalfd) X(stat) X(symlink) X(time) \
        X(unlink) X(utime) X(utimes) X(vfork)
#elif defined(__aarch64__)
#define PD_SECCOMP_ALLOW_ARCH(X)
#else
#error "paddock's seccomp filter supports x86_64 and aarch64 only"
#endif
