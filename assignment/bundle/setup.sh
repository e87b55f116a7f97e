#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (the zip is
# unpacked in $AUTOGRADER/source). It installs microtape from the wheel in this bundle
# into its own virtual environment, and bubblewrap, which boxes the students' code.
# `make grade-sample` runs it locally with AUTOGRADER and PYTHON set.
set -euo pipefail
AUTOGRADER=${AUTOGRADER:-/autograder}
SOURCE="$AUTOGRADER/source"
if [ -z "${PYTHON:-}" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip bubblewrap >/dev/null
    PYTHON=python3
fi
"$PYTHON" -m venv "$AUTOGRADER/venv"
"$AUTOGRADER/venv/bin/pip" install --quiet "$SOURCE"/microtape-*.whl
