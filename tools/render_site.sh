#!/usr/bin/env bash
# Render the Quarto site into _docs/ with nbdev_docs: the one command CI and the deploy workflow both use.
#
#   bash tools/render_site.sh
#
# - Quarto: the one on PATH; else ../shared/quarto/install.sh (machines without GitHub access) into
#   $QUARTO_PREFIX (default ~/.local/quarto); else it stops with a message saying how to get Quarto.
# - nbdev_docs runs with tools/ on PYTHONPATH, so settings.ini's `procs = site_procs:...` (render-time notebook
#   processors, tools/site_procs.py) can be imported.
# - Its output (kept in _proc/render.log, git-ignored) is scanned: a Quarto or pandoc warning (WARN, WARNING,
#   [WARNING], ERROR) fails the render, except the benign ones listed in BENIGN below with their reasons.
# - nbdev_docs rewrites README.md (and may drop index_files/ beside it): both are restored, and rendering must
#   leave the working tree as it found it (`git status --porcelain`, and the contents of the files it lists).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

fail() { echo "render_site.sh: $*" >&2; exit 1; }

# 1. Quarto.
if ! command -v quarto >/dev/null 2>&1; then
  prefix=${QUARTO_PREFIX:-$HOME/.local/quarto}
  if [ -x "$prefix/bin/quarto" ]; then
    export PATH="$prefix/bin:$PATH"
  elif [ -f ../shared/quarto/install.sh ]; then
    echo "render_site.sh: no quarto on PATH: installing it with ../shared/quarto/install.sh into $prefix"
    bash ../shared/quarto/install.sh "$prefix" >/dev/null || fail "../shared/quarto/install.sh failed"
    export PATH="$prefix/bin:$PATH"
  else
    fail "no quarto on PATH and no ../shared/quarto/install.sh to install one: install Quarto
  (https://quarto.org/docs/get-started/, or quarto-dev/quarto-actions/setup in GitHub Actions) and run this again."
  fi
fi
command -v nbdev_docs >/dev/null 2>&1 || fail "nbdev_docs not found: pip install -e \".[dev]\" first"
echo "render_site.sh: $(quarto --version 2>/dev/null | head -1 | sed 's/^/quarto /'), $(python3 -c 'import nbdev; print("nbdev", nbdev.__version__)')"

# 2. Render. What rendering may change is saved first; the processors' cache (_proc/) is dropped, because nbdev
#    only invalidates it when settings.ini or nbdev itself changes, not when tools/site_procs.py does.
snapshot() {  # one line per changed or untracked file: path, git status, a hash of its contents
  git status --porcelain --untracked-files=all | while IFS= read -r line; do
    path=${line:3}
    if [ -f "$path" ]; then sum=$(sha1sum <"$path" | cut -c1-12); else sum=-; fi
    printf '%s\t%s %s\n' "$path" "${line:0:2}" "$sum"
  done | sort
}
before=$(snapshot)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f README.md ] && cp -p README.md "$tmp/README.md"
had_index_files=0; [ -e index_files ] && had_index_files=1
rm -rf _proc

log="$tmp/render.log"
start=$(date +%s)
set +e
PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}" nbdev_docs >"$log" 2>&1
status=$?
set -e
elapsed=$(( $(date +%s) - start ))

# Restore what nbdev_docs rewrote, whatever happened.
[ -f "$tmp/README.md" ] && cp -p "$tmp/README.md" README.md
[ "$had_index_files" = 0 ] && rm -rf index_files
mkdir -p _proc && cp "$log" _proc/render.log   # the last render's full output (_proc/ is git-ignored)

if [ "$status" != 0 ]; then
  tail -n 40 "$log" >&2
  fail "nbdev_docs exited with status $status after ${elapsed}s (full output above and in _proc/render.log)"
fi

# 3. Warnings, compared without ANSI colour codes: Quarto prints WARN / WARNING / ERROR lines, pandoc [WARNING] ones.
#    BENIGN is an extended regex of allowed warning lines; none is needed today ('^$' allows none). The pandoc
#    "[WARNING] Could not convert TeX math" lines came from the `commonmark` format, now gone from _quarto.yml.
#    Not scanned: nbdev's Python "UserWarning: Found cells containing imports and other code" (counted in a note
#    at the end): to document the API nbdev runs every cell with an import, the rest of the cell too.
BENIGN='^$'   # an extended regex of allowed warning lines; '^$' allows none
warnings=$(sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" \
  | grep -E '^[[:space:]]*(WARN|WARNING|ERROR)([[:space:]:(]|$)|\[(WARN|WARNING|ERROR)\]' \
  | grep -Ev "$BENIGN" || true)
if [ -n "$warnings" ]; then
  echo "$warnings" >&2
  fail "Quarto/pandoc printed the warnings above while rendering (full output in _proc/render.log)"
fi

# 4. Rendering must not change the working tree (README.md is restored above; anything else is a defect).
after=$(snapshot)
if [ "$before" != "$after" ]; then
  changed=$(comm -3 <(echo "$before") <(echo "$after") | sed 's/^\t//' | cut -f1 | sort -u | paste -sd' ')
  fail "rendering changed the working tree: $changed (git status: $(git status --porcelain -- $changed | paste -sd' '))"
fi

mixed=$(grep -c 'UserWarning: Found cells containing imports and other code' "$log" || true)
if [ "${mixed:-0}" -gt 0 ]; then
  echo "render_site.sh: note: nbdev executed $mixed notebook cells that mix imports with other code while rendering" \
       "(to document the API it runs every cell with an import, the rest of the cell too; see _proc/render.log)"
fi
pages=$(find _docs -name '*.html' -not -path '_docs/site_libs/*' | wc -l)
echo "render_site.sh: rendered $pages pages into _docs/ in ${elapsed}s, no warnings, working tree unchanged"
