"""The new mount API: fsopen("tmpfs"), fspick("/"), open_tree("/",
OPEN_TREE_CLONE), move_mount, fsmount, fsconfig, mount_setattr."""
# mode: batch
try_syscalls([("fsopen", NR["fsopen"], "tmpfs", 0),
              ("fspick", NR["fspick"], -100, "/", 0),
              ("open_tree", NR["open_tree"], -100, "/", 1),               # OPEN_TREE_CLONE
              ("move_mount", NR["move_mount"], -100, "/proc", -100, "/tmp", 0),
              ("fsmount", NR["fsmount"], 3, 0, 0),
              ("fsconfig", NR["fsconfig"], 3, 6, 0, 0, 0),
              ("mount_setattr", NR["mount_setattr"], -100, "/", 0, 0, 32)])
