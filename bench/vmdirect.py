"""The microvm benchmarks' peer: QEMU booting the same guest kernel directly
(`qemu-system-x86_64 -kernel vmlinux -initrd ... -append ...`, TCG, the
same `microvm` machine and kernel command line paddock uses) to the first
output of an `echo hi` run by the guest's init: no paddock, no template, no
jail. The initramfs is made here: a static busybox as /init, whose script
echoes to the serial console and powers the guest off.

Imported by bench/microvm.py and bench/microvm_pool.py. Standard library only."""
import glob
import os
import select
import shutil
import subprocess
import time

QEMU = "/usr/bin/qemu-system-x86_64"
APPEND = ("console=ttyS0 reboot=t panic=-1 quiet cryptomgr.notests i8042.noaux i8042.nomux i8042.nopnp "
          "i8042.dumbkbd no_timer_check random.trust_cpu=on 8250.nr_uarts=1 rdinit=/init")


def _tsc_khz():
    """As paddock passes it (src/vm/qemu.c): without a PIT the guest cannot
    calibrate its TSC and would hang."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return int(float(line.split(":")[1]) * 1000)
    return 0


def _cpio_newc(entries):
    """entries: (name, mode, data) in order; a newc archive with its trailer."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], 1):
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join("%08X" % v for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        out += hdr.encode() + nb
        out += b"\0" * ((4 - len(out) % 4) % 4)
        out += data
        out += b"\0" * ((4 - len(out) % 4) % 4)
    return bytes(out)


class DirectBoot:
    def __init__(self, state_vmdir, tmp):
        """state_vmdir: a paddock state dir's vm/ (its extracted vmlinux)."""
        kernels = sorted(glob.glob(os.path.join(state_vmdir, "vmlinux-*")))
        if not kernels:
            raise SystemExit("no vmlinux in %s: run a microvm once first" % state_vmdir)
        self.kernel = kernels[-1]
        self.initrd = os.path.join(tmp, "direct-initrd.cpio")
        with open("/bin/busybox", "rb") as f:
            bb = f.read()
        init = b"#!/bin/busybox sh\n/bin/busybox echo hi\n/bin/busybox poweroff -f\n"
        with open(self.initrd, "wb") as f:
            f.write(_cpio_newc([("bin", 0o40755, b""), ("bin/busybox", 0o100755, bb),
                                ("init", 0o100755, init)]))

    def run(self, memory_mb=512):
        """Seconds from QEMU's exec to 'hi' on the guest's serial console."""
        argv = [QEMU, "-accel", "tcg", "-cpu", "qemu64,+arat", "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
                "-m", str(memory_mb), "-smp", "1", "-M", "microvm,isa-serial=on,pit=off,pic=off",
                "-kernel", self.kernel, "-initrd", self.initrd, "-append",
                APPEND + (" tsc_early_khz=%d tsc=reliable" % _tsc_khz() if _tsc_khz() else ""), "-serial", "stdio"]
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        buf = b""
        try:
            while b"hi\r\n" not in buf and b"hi\n" not in buf.replace(b"\r", b""):
                r, _, _ = select.select([p.stdout], [], [], 120)
                if not r:
                    raise SystemExit("direct boot: no output in 120 s")
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    raise SystemExit("direct boot: QEMU exited before 'hi': %r" % buf[-500:])
                buf += chunk
            return time.perf_counter() - t0
        finally:
            p.kill()
            p.wait()
