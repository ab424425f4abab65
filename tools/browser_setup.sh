#!/usr/bin/env bash
# A real browser for tests/test_site.py: Debian's Chromium, driven by the Playwright Python package (Playwright's own
# browser download cannot be reached from these machines, so it is launched with executable_path=/usr/bin/chromium).
set -euo pipefail
if [ -z "${CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null && { [ -z "$sudo" ] || command -v sudo >/dev/null; }; then
    $sudo apt-get update -q >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
  else
    echo "no /usr/bin/chromium: install Debian's chromium package, or set CHROMIUM to a Chromium or Chrome binary" >&2; exit 1
  fi
fi
python3 -m pip install -q playwright 2>&1 | grep -vE "^WARNING: (Location|Running pip)" || true
"${CHROMIUM:-/usr/bin/chromium}" --version
