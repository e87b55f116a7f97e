#!/usr/bin/env bash
# Make sure a headless Chromium and its WebDriver are on PATH, for the test
# that steps through the backward-frames player (index.html) in a real
# browser. Installs Debian's `chromium` and `chromium-driver` when we may (as
# root or with password-less sudo); otherwise says how, and lets the caller go
# on: that one test then skips, saying why.
have() { command -v "$1" >/dev/null 2>&1; }
browser() { have chromium || have chromium-browser; }
driver() { have chromedriver; }
if browser && driver; then
    exit 0
fi
echo "Chromium and chromedriver are not both installed; trying to install them (for the player's browser test)..."
if have apt-get; then
    if [ "$(id -u)" = 0 ]; then
        SUDO=""
    elif have sudo && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        SUDO=none
    fi
    if [ "$SUDO" != none ]; then
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
    fi
fi
if browser && driver; then
    echo "Installed: $( (chromium --version || chromium-browser --version) 2>/dev/null | head -1)"
    exit 0
fi
cat >&2 <<'MSG'
Could not install Chromium automatically. The browser test of the frames player
will be skipped. To run it, install a headless Chromium and its driver:
    Debian/Ubuntu:  sudo apt-get install chromium chromium-driver
MSG
exit 0
