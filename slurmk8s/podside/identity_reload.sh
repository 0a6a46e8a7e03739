#!/bin/sh
# The declared users, groups and ssh keys of spec.identity, merged into a pod's own (POSIX sh, awk).
#
#   identity_reload.sh once    one pass (init-config: the files exist before any daemon starts)
#   identity_reload.sh watch   a pass every IDENTITY_INTERVAL seconds (the identity-reload sidecar)
#
# IDENTITY_SOURCE  the identity ConfigMap, mounted without subPath (the kubelet refreshes it)
# IDENTITY_OUT     where the merged passwd and group go (an emptyDir the daemons mount read-only)
# IDENTITY_BASE    the image's own passwd and group (/etc of this container, which never links them)
# IDENTITY_KEYS    optional: the directory sshd's AuthorizedKeysFile names (/etc/ssh/authorized_keys)
# IDENTITY_HOMES   optional: mount paths of home volumes; a declared user's missing home there is made
#
# Merge: the image's entries stay, except those whose name or id a declared entry takes (the profile
# is the authority for ids 1000 and up); then the declared ones. A changed file is written next to
# the old one and renamed over it, so a reader opens the old file or the new one, never half of one.
set -u
src=${IDENTITY_SOURCE:-/mnt/identity}
out=${IDENTITY_OUT:-/mnt/identity-files}
base=${IDENTITY_BASE:-/etc}
keys=${IDENTITY_KEYS:-}
homes=${IDENTITY_HOMES:-}
interval=${IDENTITY_INTERVAL:-5}
unmade=" "  # homes that could not be made: said once, not every pass

say() { echo "identity: $*" >&2; }

# Rename tmp over dest when they differ (0: replaced, 1: unchanged).
publish() {
    if [ -f "$2" ] && cmp -s "$1" "$2"; then
        rm -f "$1"
        return 1
    fi
    mv -f "$1" "$2"
}

merge() {
    f=$1
    tmp="$out/.$f.new"
    # FILENAME, not NR == FNR: a declared file without lines must not swallow the image's.
    if ! awk -F: -v declared="$src/$f" -v what="$base/$f" '
        FILENAME == declared { name[$1]; id[$3]; next }
        ($1 in name) || ($3 in id) { print "identity: the profile replaces the image entry " $1 " of " what > "/dev/stderr"; next }
        { print }' "$src/$f" "$base/$f" >"$tmp" 2>"$tmp.log" || ! cat "$src/$f" >>"$tmp" || ! chmod 0644 "$tmp"; then
        cat "$tmp.log" >&2
        rm -f "$tmp" "$tmp.log"
        say "cannot merge $src/$f into $base/$f"
        return 1
    fi
    if publish "$tmp" "$out/$f"; then
        cat "$tmp.log" >&2
        say "$out/$f written ($(wc -l <"$src/$f") declared entries)"
    fi
    rm -f "$tmp.log"
}

# Each user's keys in $keys/<user>, owned by the user and 0600 (sshd reads them as the user, StrictModes).
install_keys() {
    [ -n "$keys" ] || return 0
    mkdir -p -m 0755 "$keys" || return 1
    for k in "$src"/ssh-*; do
        [ -f "$k" ] || continue
        user=${k##*/ssh-}
        ids=$(awk -F: -v u="$user" '$1 == u { print $3 ":" $4; exit }' "$src/passwd")
        if [ -z "$ids" ]; then
            say "ssh keys of $user: no such declared user"
            continue
        fi
        dest="$keys/$user"
        if [ -f "$dest" ] && cmp -s "$k" "$dest" && [ "$(stat -c %u:%g "$dest")" = "$ids" ]; then
            continue
        fi
        if install -m 0600 -o "${ids%:*}" -g "${ids#*:}" "$k" "$keys/.$user.new" && mv -f "$keys/.$user.new" "$dest"; then
            say "ssh keys of $user written"
        else
            say "cannot write the ssh keys of $user"
        fi
    done
    # root's file is login-config's (spec.login.authorizedKeys), not the profile's users'.
    for dest in "$keys"/*; do
        [ -f "$dest" ] || continue
        user=${dest##*/}
        if [ "$user" != root ] && [ ! -f "$src/ssh-$user" ]; then
            rm -f "$dest" && say "ssh keys of $user removed"
        fi
    done
}

# Not fatal: an NFS export with root_squash refuses root's mkdir; the homes are then the export's business.
make_homes() {
    [ -n "$homes" ] || return 0
    while IFS=: read -r name _ uid gid _ home _; do
        [ -n "$home" ] || continue
        for root in $homes; do
            case "$home" in "${root%/}"/*) ;; *) continue ;; esac
            [ ! -d "$home" ] || continue
            case "$unmade" in *" $home "*) continue ;; esac
            if install -d -m 0700 -o "$uid" -g "$gid" "$home"; then
                say "made the home $home of $name"
            else
                say "cannot make the home $home of $name on $root"
                unmade="$unmade$home "
            fi
        done
    done <"$src/passwd"
}

pass() {
    # The kubelet makes an emptyDir 0777: closed, so no job can put a passwd of its own here.
    chmod 0755 "$out" || return 1
    merge passwd && merge group || return 1
    install_keys
    make_homes
}

case "${1:-}" in
    once)
        pass || exit 1
        ;;
    watch)
        trap 'exit 0' TERM INT  # PID 1 of its container: without a handler TERM would be ignored
        while :; do
            pass || say "pass failed; the files from the last good pass stay"
            sleep "$interval" &
            wait $!
        done
        ;;
    *)
        say "usage: $0 once|watch"
        exit 2
        ;;
esac
