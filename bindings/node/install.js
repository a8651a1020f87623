// The package's install (and prepack) script: where the native addon comes from.
//
// - In a checkout of the repository (this package's Cargo.toml is here and the engine crate is
//   at ../../engine, as when an application runs `npm install /path/to/bindings/node`), the
//   addon is built from source with the napi-rs CLI, a dependency (not a devDependency) of the
//   package, installed here first if the checkout has no node_modules yet. This needs Rust
//   (cargo). It always builds, so a stale addon is never what gets tested.
// - In a tarball made by `npm pack`, the addon is the one `prepack` built (CI packs on
//   linux-x64 with glibc, tests the tarball from a fresh app, and that addon is the one the
//   tarball carries), with native.js to load it. The tarball has no Rust sources: the engine
//   crate lives outside this package. On a platform it has no addon for, the install fails
//   and says how to build from source instead.
'use strict';

const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const here = __dirname;
const checkout =
  existsSync(join(here, 'Cargo.toml')) && existsSync(join(here, '..', '..', 'engine', 'Cargo.toml'));

// The napi-rs CLI, installed first when it is missing. npm installs a path dependency as a
// link and runs this script in the checkout, but does not install the checkout's own
// dependencies, so on a fresh checkout they are installed here (production ones only, as the
// lock file pins them; `--ignore-scripts`, so this script does not run again).
function napiCli() {
  try {
    return require.resolve('@napi-rs/cli/package.json', { paths: [here] });
  } catch {
    const npm = process.env.npm_execpath;
    const args = ['install', '--omit=dev', '--ignore-scripts', '--no-save', '--no-audit', '--no-fund'];
    const run = npm
      ? spawnSync(process.execPath, [npm, ...args], { cwd: here, stdio: 'inherit' })
      : spawnSync('npm', args, { cwd: here, stdio: 'inherit' });
    if (run.error) throw run.error;
    if (run.status !== 0) process.exit(run.status === null ? 1 : run.status);
    return require.resolve('@napi-rs/cli/package.json', { paths: [here] });
  }
}

function build() {
  const cliPackage = napiCli();
  const cli = require(cliPackage);
  const bin = typeof cli.bin === 'string' ? cli.bin : cli.bin.napi;
  const args = ['build', '--platform', '--release', '--js', 'native.js', '--dts', 'native.d.ts', '--no-dts-header'];
  const run = spawnSync(process.execPath, [join(cliPackage, '..', bin), ...args], { cwd: here, stdio: 'inherit' });
  if (run.error) throw run.error;
  return run.status === null ? 1 : run.status;
}

function prebuilt() {
  try {
    require('./native.js');
    return true;
  } catch (e) {
    process.stderr.write(
      `toolgate: this package carries no addon that loads on ${process.platform}-${process.arch} ` +
        `(${e.message.split('\n')[0]}).\n` +
        'toolgate: its packed tarball carries the linux-x64 (glibc) addon; elsewhere install from a ' +
        'checkout of the repository, which builds it from source with Rust (cargo): ' +
        'npm install /path/to/toolgate/bindings/node\n',
    );
    return false;
  }
}

if (checkout) {
  process.exit(build());
}
process.exit(prebuilt() ? 0 : 1);
