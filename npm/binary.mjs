// Where the sluice binary is, for the helper (index.mjs), the `sluice` command (bin/sluice.mjs)
// and the install step (install.mjs). Binaries ship as esbuild's and biome's do: this package
// lists one package per platform as optionalDependencies, each with `os`/`cpu` set, so npm
// installs only the one that fits; its bin/sluice is the binary.
import { createRequire } from "node:module";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** The per-platform package for each `${process.platform}-${process.arch}` there is one for. */
export const PLATFORM_PACKAGES = {
  "linux-x64": "@sluice-server/linux-x64",
  "linux-arm64": "@sluice-server/linux-arm64",
  "darwin-x64": "@sluice-server/darwin-x64",
  "darwin-arm64": "@sluice-server/darwin-arm64",
};

/** The name of the package that carries the binary for this platform, or undefined. */
export function platformPackage(platform = process.platform, arch = process.arch) {
  return PLATFORM_PACKAGES[`${platform}-${arch}`];
}

function fromPlatformPackage() {
  const name = platformPackage();
  if (!name) return null;
  let dir;
  try {
    dir = dirname(require.resolve(`${name}/package.json`));
  } catch {
    return null; // not installed: --omit=optional, or not published for this platform
  }
  const bin = join(dir, "bin", "sluice");
  return existsSync(bin) ? bin : null;
}

/** The repository root when this package is the npm/ directory of a sluice checkout. */
export function checkoutRoot() {
  const root = join(here, "..");
  return existsSync(join(root, "Cargo.toml")) && existsSync(join(root, "src", "main.rs")) ? root : null;
}

// In a checkout: the binary cargo built last (release or debug).
function fromCheckout() {
  const root = checkoutRoot();
  if (!root) return null;
  const built = ["release", "debug"]
    .map((profile) => join(root, "target", profile, "sluice"))
    .filter((p) => existsSync(p))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  return built[0] ?? null;
}

/** The binary to run, or null: $SLUICE_BIN, else the platform package's, else a checkout's. */
export function findBinary() {
  return process.env.SLUICE_BIN || fromPlatformPackage() || fromCheckout();
}

/** Why there is no binary, and what to do about it. */
export function missingMessage() {
  const target = `${process.platform}-${process.arch}`;
  const name = platformPackage();
  const why = name
    ? `its package ${name} is not installed (an install with --omit=optional or --no-optional, ` +
      `or a platform it was not published for)`
    : `no binary is published for ${target}`;
  return (
    `sluice-server: no sluice binary for ${target}: ${why}. Set SLUICE_BIN to the path of a ` +
    `sluice binary, e.g. one built from the source with \`cargo build --release\` ` +
    `(SLUICE_BIN=/path/to/sluice/target/release/sluice).`
  );
}

/** The path of the sluice binary; throws an Error naming SLUICE_BIN when there is none. */
export function binaryPath() {
  const found = findBinary();
  if (!found) throw new Error(missingMessage());
  if (!existsSync(found)) {
    throw new Error(`sluice-server: SLUICE_BIN=${found} does not exist. Set SLUICE_BIN to the path of a sluice binary.`);
  }
  return found;
}
