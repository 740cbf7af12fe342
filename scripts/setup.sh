#!/usr/bin/env bash
# Install what paddock needs on Debian 12 and build it. Safe to run again.
# Everything comes from Debian's packages (DESIGN §10); nothing is downloaded
# at run time.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential meson ninja-build pkg-config libc6-dev
  libseccomp-dev libjansson-dev libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev libssl-dev zlib1g-dev
  python3 python3-pytest iproute2 procps coreutils util-linux e2fsprogs
  bubblewrap crun runc curl
  # the code interpreter's kernel, inside sandboxes of the base template
  # (which share the host's /usr)
  python3-jupyter-client python3-ipykernel python3-matplotlib python3-pandas python3-pip
  # network tier: nftables through netlink, and the fake internet the tests build
  libmnl-dev libnftnl-dev nftables dnsutils openssl
  # the default uplink: a user-mode network process (docs/network.md, "The default uplink")
  passt slirp4netns
  # microvm tier: QEMU, the guest's root image, the tree its template is built from
  qemu-system-x86 erofs-utils busybox-static cpio xz-utils liblzma-dev
  # gvisor tier: gVisor's runsc (docs/gvisor.md)
  runsc
  # OCI runtime: the engines the tests drive, and the validation suite's toolchain
  podman containerd golang-go
  # templates from images and recipes (docs/templates.md): skopeo pulls,
  # libarchive unpacks; the tests' local registry and the benchmark's peers
  skopeo libarchive-dev docker-registry buildah
  # the libFuzzer targets (tests/fuzz/, scripts/fuzz.sh): clang with its
  # runtimes (libclang-rt is only a recommendation of clang), and
  # llvm-symbolizer for readable reports
  clang libclang-rt-14-dev llvm
  # sandbox port URLs: http://<port>-<id>.localhost:<server port>/ resolves
  # here (nss myhostname answers *.localhost; docs/api.md "Ports")
  libnss-myhostname
  # the web console's browser tests (tests/console): Debian's chromium,
  # driven by puppeteer-core from tests/console/package-lock.json (npm:
  # below, only where the host has none)
  chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ... and its hosts-line entry, put back if nsswitch.conf was edited since
./scripts/nss-myhostname.sh /etc/nsswitch.conf

# microvm tier: the guest kernel and its modules, unpacked from Debian's
# linux-image package (never installed on the host) into a cache dir that
# paddock reads (PADDOCK_GUEST_DIR overrides it).
guest_dir=${PADDOCK_GUEST_DIR:-/var/cache/paddock/guest}
if ! ls "$guest_dir"/boot/vmlinuz-* >/dev/null 2>&1; then
  kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-6/ {print $2; exit}')
  echo "setup: unpacking $kpkg into $guest_dir" >&2
  mkdir -p "$guest_dir"
  (cd "$guest_dir" && apt-get download -qq "$kpkg" && dpkg -x "$kpkg"_*.deb . && rm -f "$kpkg"_*.deb)
fi

# Debian's docker-registry starts a registry on :5000 when installed where
# services run; the templates tests run their own (tests/templates/_reg.py)
# and it must not be left listening.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
  systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi

# The web console's front-end packages (src/console: @xterm/xterm, served by
# paddock serve) and its browser tests' driver (tests/console:
# puppeteer-core), both pinned in their package-lock.json; npm ci installs
# exactly that, once. Before meson setup: the install rules look for xterm.js.
# A host without npm gets Debian's (a host with its own node and npm, e.g.
# NodeSource's, keeps them: Debian's npm would conflict with it).
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing Debian's nodejs and npm (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
for d in src/console tests/console; do
  if [ ! -d "$d/node_modules" ] || [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
    if command -v npm >/dev/null 2>&1; then
      echo "setup: npm ci in $d" >&2
      (cd "$d" && npm ci --silent --no-audit --no-fund >/dev/null)
    else
      echo "setup: no npm: $d/node_modules not installed (scripts/setup-node.sh installs npm)" >&2
    fi
  fi
done

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=debugoptimized >/dev/null
fi
ninja -C build >/dev/null
echo "setup: built build/src/paddock and build/src/agent/paddock-agent" >&2
