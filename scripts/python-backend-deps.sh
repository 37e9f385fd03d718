#!/usr/bin/env bash
# The Python backend's interpreter (docs/python-backend.md): Debian's python3 with numpy. Installs them
# with apt-get where they are missing and this user may (root, apt-get present); otherwise says what
# is missing and goes on (the Python backend's models then fail to load, saying why).
set -euo pipefail
PYTHON=${BATCHWISE_PYTHON:-/usr/bin/python3}
if "$PYTHON" -c 'import numpy' 2>/dev/null; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "python-backend-deps: installing python3 and python3-numpy with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-numpy >/dev/null
  "$PYTHON" -c 'import numpy'
else
  echo "python-backend-deps: $PYTHON with numpy is missing; install python3 and python3-numpy (apt-get install python3-numpy) for the Python backend" >&2
fi
