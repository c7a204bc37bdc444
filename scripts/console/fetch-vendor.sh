#!/usr/bin/env bash
# Re-fetches the console's vendored front-end files from the npm registry (`npm pack`, the
# registry's own client), checks each package tarball against the sha256 recorded here and each
# extracted file against crates/console/assets/vendor/SHA256SUMS, then copies them in place.
#   scripts/console/fetch-vendor.sh          fetch, verify, install
#   scripts/console/fetch-vendor.sh --check  verify the files in the tree only (no network)
# The console needs no build step: these are plain ES modules served as they are.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
vendor="$root/crates/console/assets/vendor"

# package@version  tarball sha256  file in the tarball -> name in assets/vendor
PACKAGES=(
  "preact@10.27.2 f1d9cb453deb8d922c2f21702d719d23d24aaa3cab1a89a3dd326d0d8f6b3c70"
  "htm@3.1.1 2425b9bee11409177bcabc7f32e319926fc6690c1701c0b257c88bdff2d5ba90"
  "uplot@1.6.32 4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d"
)
FILES=(
  "preact@10.27.2 package/dist/preact.module.js preact.module.js"
  "preact@10.27.2 package/hooks/dist/hooks.module.js hooks.module.js"
  "htm@3.1.1 package/dist/htm.module.js htm.module.js"
  "uplot@1.6.32 package/dist/uPlot.esm.js uPlot.esm.js"
  "uplot@1.6.32 package/dist/uPlot.min.css uPlot.min.css"
)

if [ "${1:-}" = "--check" ]; then
  (cd "$vendor" && sha256sum --check --strict SHA256SUMS)
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for entry in "${PACKAGES[@]}"; do
  set -- $entry
  pkg="$1" want="$2"
  (cd "$work" && npm pack --silent "$pkg" >/dev/null)
  tgz="$work/$(echo "${pkg%@*}-${pkg##*@}" | tr -d '@').tgz"
  got="$(sha256sum "$tgz" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    echo "fetch-vendor: $pkg tarball sha256 $got, expected $want" >&2
    exit 1
  fi
  mkdir -p "$work/x/$pkg"
  tar xzf "$tgz" -C "$work/x/$pkg"
done
staged="$work/staged"
mkdir -p "$staged"
for entry in "${FILES[@]}"; do
  set -- $entry
  cp "$work/x/$1/$2" "$staged/$3"
done
(cd "$staged" && cp "$vendor/SHA256SUMS" . && sha256sum --check --strict SHA256SUMS)
for entry in "${FILES[@]}"; do
  set -- $entry
  cp "$staged/$3" "$vendor/$3"
done
echo "fetch-vendor: every file verified and installed in $vendor"
