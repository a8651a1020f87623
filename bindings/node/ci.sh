#!/usr/bin/env bash
# CI for the Node package, run by .ci/run: rustfmt and clippy for the addon crate, then
# `npm ci` (which builds the addon from source through the package's install script) and
# `npm test` (node's own test runner, then the coach loop example), then the package as a
# dependency: `npm pack`, and fresh apps that install the tarball and the path and run
# test/fresh-app/installed.test.js (node --test, counted by .ci/run). Fails on any failure.
#
# Needs Node.js >= 20.17 (@napi-rs/cli 3 requires it; the `ai` 6 and MCP SDK packages need
# >= 18). This machine kind ships Node 20. Debian bookworm's own `nodejs` is 18, too old: when
# the Node found is older, Node 20 is installed from the npm registry's `node` package (a
# binary shipped inside a registry package) into ~/.cache/toolgate-node and put first on PATH.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="$(cd ../.. && pwd)"
# One target directory for the whole repository (the addon crate is its own workspace).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}
node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 17) ? 0 : 1)'
}
if ! node_ok; then
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  prefix="$HOME/.cache/toolgate-node"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error node@20.20.2
  export PATH="$prefix/node_modules/.bin:$PATH"
  node_ok || { echo "error: Node.js >= 20.17 is needed; found $(node --version)" >&2; exit 1; }
fi
echo "node $(node --version), npm $(npm --version)"

echo "-- cargo fmt --check (bindings/node)"
cargo fmt --manifest-path Cargo.toml -- --check
echo "-- cargo clippy (bindings/node)"
cargo clippy --manifest-path Cargo.toml --all-targets -- -D warnings

echo "-- npm ci (builds the addon)"
start=$(date +%s)
npm ci --no-audit --no-fund
echo "npm ci took $(($(date +%s) - start)) s"

echo "-- npm test"
npm test

echo "-- the package as a dependency: a fresh app installs the packed tarball, another the path"
# `npm pack` runs `prepack` (install.js: a source build here), so the tarball carries the addon
# just built and tested above, with native.js to load it; install.js in the tarball uses it.
# The path install is from a fresh checkout (a copy of the tracked files, with no node_modules:
# npm runs a linked path's install script but does not install its dependencies, so install.js
# installs the napi-rs CLI there first, then builds from source).
pack_dir="$(mktemp -d)"
npm pack --pack-destination "$pack_dir" --loglevel=error >/dev/null
tarball="$(ls "$pack_dir"/toolgate-*.tgz)"
packed="$(tar -tzf "$tarball")"
grep -qx 'package/native.js' <<<"$packed" || { echo "error: $tarball has no native.js" >&2; exit 1; }
if [ "$(uname -sm)" = "Linux x86_64" ]; then
  grep -qx 'package/toolgate.linux-x64-gnu.node' <<<"$packed" ||
    { echo "error: $tarball has no linux-x64 addon" >&2; exit 1; }
fi
pkg="$PWD"
checkout="$(mktemp -d)/toolgate"
mkdir -p "$checkout"
(cd "$ROOT" && git ls-files -z -- . ':!bindings/python' ':!fuzz' ':!bench' ':!tests/playground' \
  ':!cli/tests/mcp/node' | xargs -0 cp --parents -t "$checkout")
for from in "$tarball" "$checkout/bindings/node"; do
  app="$(mktemp -d)"
  (
    cd "$app"
    npm init -y >/dev/null
    npm install --no-audit --no-fund --loglevel=error "$from"
    if [ "$from" = "$tarball" ]; then expect="$app/node_modules/toolgate"; else expect="$from"; fi
    cp "$pkg/test/fresh-app/installed.test.js" .
    TOOLGATE_EXAMPLES="$ROOT/stdlib-rules/examples" TOOLGATE_EXPECT_AT="$(realpath "$expect")" \
      node --test installed.test.js
  )
done
