#!/usr/bin/env bash
# Make *.localhost names resolve to this machine (the sandbox port URLs
# paddock serve hands out: http://<port>-<id>.localhost:<server port>/,
# docs/api.md "Ports"): Debian's libnss-myhostname answers them, once
# `myhostname` is on the hosts line of nsswitch.conf. The package's own
# install script adds it; this puts it back if the file was edited since.
# Idempotent: a file that has it is left byte for byte as it was.
#   scripts/nss-myhostname.sh [FILE]       (default /etc/nsswitch.conf)
set -euo pipefail
f=${1:-/etc/nsswitch.conf}
[ -f "$f" ] || { echo "nss-myhostname: $f: no such file" >&2; exit 1; }
if grep -Eq '^[[:space:]]*hosts:([^#]*[[:space:]])?myhostname([[:space:]]|$|#)' "$f"; then
  exit 0
fi
tmp=$(mktemp "$f.XXXXXX")
trap 'rm -f "$tmp"' EXIT
if grep -Eq '^[[:space:]]*hosts:' "$f"; then
  # after "files" (so /etc/hosts still wins), else first
  awk '
    !done && /^[ \t]*hosts:/ {
      n = split($0, w, /[ \t]+/); line = ""; put = 0
      for (i = 1; i <= n; i++) {
        if (w[i] == "") continue
        line = line (line == "" ? "" : " ") w[i]
        if (w[i] == "files" && !put) { line = line " myhostname"; put = 1 }
      }
      if (!put) sub(/hosts:/, "hosts: myhostname", line)
      print line; done = 1; next
    }
    { print }' "$f" >"$tmp"
else
  cat "$f" >"$tmp"
  echo "hosts:          files myhostname dns" >>"$tmp"
fi
chmod --reference="$f" "$tmp"
mv -f "$tmp" "$f"
trap - EXIT
echo "nss-myhostname: added myhostname to the hosts line of $f" >&2
