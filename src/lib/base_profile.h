/* The base template's own /etc/profile, one text for the two places that
 * need it: src/lib/template.c writes it into the base template, and the
 * agent's login fast path (src/agent/login_fast.c) runs `bash -l -c CMD`
 * without bash only where /etc/profile is exactly this text, whose effect
 * it knows (docs/templates.md). */
#ifndef PD_LIB_BASE_PROFILE_H
#define PD_LIB_BASE_PROFILE_H

/* The base template's own /etc/profile (docs/templates.md, "The base
 * template's login profile"). Every E2B command runs as `bash -l -c`, so
 * this file is on the hot path of each one: no subshells and nothing from
 * the host's /etc/profile.d (vendor scripts of whatever host built the
 * template). It gives what Debian's /etc/profile gives: PATH by effective
 * uid (bash's $EUID; `id -u` only in a shell without it), PS1 and
 * bash.bashrc for interactive shells, and whatever the sandbox itself puts
 * in /etc/profile.d (empty in the template). Then the template's own
 * commands in /opt/paddock/bin (/usr is the host's, grafted read-only, so
 * nothing of ours can go there): `python`, which E2B's templates have and
 * code written for them calls, as python3; after the system's directories,
 * so a python the sandbox installs wins. */
static const char pd_base_profile[] =
        "# /etc/profile: paddock's base template (docs/templates.md). No subshells:\n"
        "# every `bash -l -c` command reads this file.\n"
        "if [ \"${EUID:-$(id -u)}\" -eq 0 ]; then\n"
        "  PATH=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n"
        "else\n"
        "  PATH=\"/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\"\n"
        "fi\n"
        "export PATH\n"
        "if [ \"${PS1-}\" ]; then\n"
        "  if [ \"${BASH-}\" ] && [ \"$BASH\" != \"/bin/sh\" ]; then\n"
        "    [ -f /etc/bash.bashrc ] && . /etc/bash.bashrc\n"
        "  elif [ \"${EUID:-$(id -u)}\" -eq 0 ]; then\n"
        "    PS1='# '\n"
        "  else\n"
        "    PS1='$ '\n"
        "  fi\n"
        "fi\n"
        "for i in /etc/profile.d/*.sh; do\n"
        "  [ -r \"$i\" ] && . \"$i\"\n"
        "done\n"
        "unset i\n"
        "# the base template's own commands (python -> python3), after the system's\n"
        "case \":$PATH:\" in *:/opt/paddock/bin:*) ;; *) PATH=\"$PATH:/opt/paddock/bin\" ;; esac\n";

#endif
