"""Write "h" (help: harmless) to /proc/sysrq-trigger; a writable trigger
would let the sandbox reboot or crash the host."""
# mode: batch
try:
    with open("/proc/sysrq-trigger", "w") as f:
        f.write("h")
    st = os.stat("/proc/sysrq-trigger")
    # masked by a bind of /dev/null: the write "works" and goes nowhere
    if (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 3):
        blocked("masked (/dev/null)", "the write went to /dev/null")
    escaped("wrote /proc/sysrq-trigger", "")
except OSError as e:
    blocked(en(e.errno), "")
