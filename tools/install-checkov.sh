#!/usr/bin/env bash
# Install checkov in its own virtualenv (its pins clash with ours) and link it as
# $PREFIX/bin/checkov. Tests find it through $SLURMK8S_CHECKOV or this default path.
# Usage: tools/install-checkov.sh [PREFIX]   (default /opt/slurmk8s-checkov; idempotent)
set -euo pipefail
PREFIX="${1:-/opt/slurmk8s-checkov}"
VERSION="${CHECKOV_VERSION:-3.3.30}"
if [ -x "$PREFIX/bin/checkov" ] && "$PREFIX/bin/checkov" --version 2>/dev/null | grep -qx "$VERSION"; then
  echo "checkov $VERSION already in $PREFIX"; exit 0
fi
python3 -m venv "$PREFIX"
"$PREFIX/bin/pip" install -q --upgrade pip
"$PREFIX/bin/pip" install -q "checkov==$VERSION"
echo "installed checkov $("$PREFIX/bin/checkov" --version) in $PREFIX"
