#!/usr/bin/env bash
# A real browser for tests/test_site.py: Debian's Chromium, driven by the Playwright Python package (Playwright's own
# browser download cannot be reached from these machines, so it is launched with executable_path=/usr/bin/chromium).
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
  else
    echo "no /usr/bin/chromium: install Debian's chromium package (apt-get install chromium)" >&2; exit 1
  fi
fi
python3 -m pip install -q playwright 2>&1 | grep -vE "^WARNING: (Location|Running pip)" || true
/usr/bin/chromium --version
