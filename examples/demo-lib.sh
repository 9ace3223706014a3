# Sourced by the demo scripts: headings, and the copy of the sample tree.

# Headings in bold on a terminal only: piped or redirected, plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]; then
  demo_bold=$'\033[1m' demo_plain=$'\033[0m'
else
  demo_bold='' demo_plain=''
fi
step() { printf '\n%s$ %s%s\n' "$demo_bold" "$*" "$demo_plain"; }
say() { printf '\n%s== %s%s\n' "$demo_bold" "$*" "$demo_plain"; }

# demo_copy_sample DEST: copies examples/sample/sglang to DEST, the files
# git tracks when the demo runs from a clone (everything, from a tarball).
# A sample carrying a journal (.smpatch/: a command patched it in place)
# is refused: the demo would start from a patched tree.
demo_copy_sample() {
  local root sample dest="$1"
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  sample="$root/examples/sample/sglang"
  if [ -e "$sample/.smpatch" ]; then
    echo "demo: examples/sample/sglang carries a journal (.smpatch/): it was patched in place; put it back with: smpatch revert --repo examples/sample/sglang && rm -rf examples/sample/sglang/.smpatch" >&2
    exit 1
  fi
  mkdir -p "$dest"
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    if ! git -C "$root" diff --quiet -- examples/sample/sglang; then
      echo "demo: note: examples/sample/sglang differs from the last commit (git diff examples/sample/sglang); the demo copies it as it is" >&2
    fi
    (cd "$root/examples/sample/sglang" && git ls-files -z -- . | while IFS= read -r -d '' f; do
      mkdir -p "$dest/$(dirname "$f")" && cp -p "$f" "$dest/$f"
    done)
  else
    cp -R "$sample/." "$dest"
  fi
}
