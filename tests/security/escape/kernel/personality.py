"""personality(): ADDR_NO_RANDOMIZE (turns off ASLR for exploits),
READ_IMPLIES_EXEC, and a query (allowed)."""
# mode: batch
try_syscalls([("ADDR_NO_RANDOMIZE", NR["personality"], 0x0040000),
              ("READ_IMPLIES_EXEC", NR["personality"], 0x0400000)], paddock_errnos=(errno.EPERM,))
