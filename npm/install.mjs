// postinstall: nothing to do when a binary is found (the platform package's, or $SLUICE_BIN).
// Installed from a checkout (`npm install ./npm`) with none built yet, it builds one with
// cargo. It never fails the install: without a binary, the helper's error says what to do.
import { spawnSync } from "node:child_process";
import { checkoutRoot, findBinary, missingMessage } from "./binary.mjs";

if (!findBinary()) {
  const root = checkoutRoot();
  const cargo = root && spawnSync("cargo", ["--version"], { stdio: "ignore" }).status === 0;
  if (cargo) {
    console.error(`sluice-server: building sluice in ${root} (cargo build --release --bin sluice)`);
    const built = spawnSync("cargo", ["build", "--release", "--locked", "--bin", "sluice"], { cwd: root, stdio: "inherit" });
    if (built.status !== 0) console.error(`sluice-server: the build failed. ${missingMessage()}`);
  } else {
    console.error(missingMessage());
  }
}
