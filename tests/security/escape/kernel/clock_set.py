"""The host clock: settimeofday(NULL, NULL) (a no-op if it got through),
clock_settime with an invalid clock, adjtimex/clock_adjtime in read mode."""
# mode: batch
tx = ctypes.create_string_buffer(256)
try_syscalls([("settimeofday", NR["settimeofday"], 0, 0),
              ("clock_settime-bad", NR["clock_settime"], 1000, 0),
              ("adjtimex", 159, tx),
              ("clock_adjtime", 305, 0, tx)])
