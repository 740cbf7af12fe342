"""Kernel keyrings (not namespaced): add_key to the session keyring,
keyctl(KEYCTL_GET_KEYRING_ID), request_key."""
# mode: batch
try_syscalls([("add_key", NR["add_key"], "user", "pd-esc", "x", 1, -3),      # KEY_SPEC_SESSION_KEYRING
              ("keyctl", NR["keyctl"], 0, -3, 1, 0, 0),                       # KEYCTL_GET_KEYRING_ID
              ("request_key", NR["request_key"], "user", "pd-esc", 0, 0)])
