#!/bin/sh
# paddock-vm-mkroot: the microvm base template's root tree (DESIGN §4): a
# minimal tree with bash, coreutils, busybox (for the rest of the usual
# tools), python3 and the shared libraries they need, copied from the
# host's installed Debian packages. The host's /usr is far too big for a
# disk image.
#   paddock-vm-mkroot --inputs       what the tree is made of (for the cache key)
#   paddock-vm-mkroot DIR AGENT      build the tree in DIR (must not exist)
set -eu
umask 022
PKGS="libc6 bash coreutils busybox-static python3.11-minimal libpython3.11-minimal libpython3.11-stdlib"

if [ "${1:-}" = "--inputs" ]; then
  dpkg-query -W $PKGS
  exit 0
fi
[ $# -eq 2 ] || { echo "usage: paddock-vm-mkroot DIR AGENT" >&2; exit 2; }
dir=$1 agent=$2
mkdir "$dir"
chmod 0755 "$dir"
cd "$dir"
mkdir -p usr/bin usr/sbin usr/lib usr/lib64 etc root home/user tmp var/tmp dev proc sys run mnt opt
ln -s usr/bin bin; ln -s usr/sbin sbin; ln -s usr/lib lib; ln -s usr/lib64 lib64

# Copy a host path (file, symlink, or directory) into the tree as it is.
put() { cp -a --parents "$1" "$dir" 2>/dev/null || true; }
# Shared libraries of an ELF file, and their targets.
libs() { ldd "$1" 2>/dev/null | awk '/=> \// {print $3} /^\t\/lib/ {print $1}'; }

bins="/bin/bash /usr/bin/python3.11"
for f in $(dpkg -L coreutils | grep -E '^/(usr/)?bin/'); do [ -f "$f" ] && bins="$bins $f"; done
for f in $bins; do cp -a "$f" "usr/bin/$(basename "$f")"; done
ln -sf bash usr/bin/sh
ln -sf python3.11 usr/bin/python3
ln -sf python3 usr/bin/python
cp /bin/busybox usr/bin/busybox
# the usual tools coreutils does not have, from busybox
for t in ps grep egrep fgrep sed awk find xargs less vi tar gzip gunzip zcat diff which kill \
         free top ip ping hostname more file uptime pgrep pkill killall wc clear reset; do
  [ -e "usr/bin/$t" ] || ln -s busybox "usr/bin/$t"
done
# python's standard library without tests and tools nobody runs in here
tar -C / --exclude='python3.11/test' --exclude='python3.11/idlelib' --exclude='python3.11/tkinter' \
    --exclude='python3.11/ensurepip' --exclude='python3.11/lib2to3' --exclude='python3.11/turtledemo' \
    --exclude='python3.11/config-3.11-x86_64-linux-gnu' --exclude='python3.11/dist-packages' \
    -cf - usr/lib/python3.11 | tar -xf -
mkdir -p usr/lib/python3/dist-packages usr/local/lib/python3.11/dist-packages

objs="$bins $(find usr/lib/python3.11/lib-dynload -name '*.so')"
for o in $objs; do
  for l in $(libs "$o"); do
    put "$l"
    [ -L "$l" ] && put "$(readlink -f "$l")"
  done
done
put /lib64/ld-linux-x86-64.so.2
put "$(readlink -f /lib64/ld-linux-x86-64.so.2)"
put /usr/lib/x86_64-linux-gnu/gconv/gconv-modules
for f in /usr/lib/x86_64-linux-gnu/libnss_files.so.2 /usr/lib/x86_64-linux-gnu/libnss_dns.so.2; do put "$f"; done

# the agent doubles as sudo inside (it asks the agent)
cp "$agent" usr/bin/sudo
chmod 0755 usr/bin/sudo

cat > etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/bash
user:x:1000:1000:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat > etc/group <<'EOF'
root:x:0:
user:x:1000:
nogroup:x:65534:
EOF
printf 'hosts: files dns\npasswd: files\ngroup: files\n' > etc/nsswitch.conf
printf '127.0.0.1 localhost paddock\n::1 localhost\n' > etc/hosts
: > etc/resolv.conf
echo paddock > etc/hostname
# directories made by cp --parents carry the creator's umask; everything is
# world-readable here except root's home
find . -type d -exec chmod go+rx {} +
chown 1000:1000 home/user
chmod 0700 root
chmod 1777 tmp var/tmp
