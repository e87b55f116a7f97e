#!/usr/bin/env bash
# Make sure Graphviz's `dot` program is on PATH (the Python package `graphviz`
# only writes DOT text; `dot` turns it into SVG/PNG). Installs the Debian/Ubuntu
# package when we may; otherwise says how, and lets the caller go on without it.
if command -v dot >/dev/null 2>&1; then
    exit 0
fi
echo "Graphviz's 'dot' is not installed; trying to install it..."
if command -v apt-get >/dev/null 2>&1; then
    bash "$(dirname "$0")/apt-install.sh" graphviz
elif command -v brew >/dev/null 2>&1; then
    brew install graphviz
fi
if command -v dot >/dev/null 2>&1; then
    echo "Installed: $(dot -V 2>&1)"
    exit 0
fi
cat >&2 <<'MSG'
Could not install Graphviz automatically. Pictures of graphs will be written as
.dot text files only. To get SVG/PNG, install Graphviz and run again:
    Debian/Ubuntu:  sudo apt-get install graphviz
    macOS:          brew install graphviz
    conda:          conda install -c conda-forge graphviz
MSG
exit 0
