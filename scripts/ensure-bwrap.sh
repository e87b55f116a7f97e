#!/usr/bin/env bash
# Make sure bubblewrap's `bwrap` is on PATH: the exercise checker and `microtape grade`
# run students' code inside it (own namespaces, a file system holding only Python's
# standard library and numpy). Installs the Debian/Ubuntu package when we may;
# otherwise says how, and lets the caller go on: the checker then runs students'
# code with resource limits only and says so (as root it refuses to run it at all).
if command -v bwrap >/dev/null 2>&1 || [ "$(uname -s)" != Linux ]; then
    exit 0
fi
echo "bubblewrap (bwrap) is not installed; trying to install it..."
bash "$(dirname "$0")/apt-install.sh" bubblewrap
if command -v bwrap >/dev/null 2>&1; then
    echo "Installed: $(bwrap --version 2>&1)"
    exit 0
fi
cat >&2 <<'MSG'
Could not install bubblewrap automatically. Graded code will run with resource
limits only (it can read the file system). To box it fully:
    Debian/Ubuntu:  sudo apt-get install bubblewrap
MSG
exit 0
