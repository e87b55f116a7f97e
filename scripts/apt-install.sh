#!/usr/bin/env bash
# Install Debian/Ubuntu packages ("$@") when we may: as root, or with password-less sudo.
# Otherwise do nothing: the ensure-*.sh scripts that call this say what to install by hand.
command -v apt-get >/dev/null 2>&1 || exit 0
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    exit 0
fi
$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
