// Builds @cairn/client (../typescript), which this package links with `file:`, when its
// dist/ is missing: a fresh clone then needs only `npm ci && npm run build` here.

import { execSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const client = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "typescript");
if (!existsSync(join(client, "package.json"))) {
  console.error(`@cairn/client is not at ${client}: this package builds against it.`);
  process.exit(1);
}
if (!existsSync(join(client, "dist", "index.js")) || !existsSync(join(client, "dist", "index.d.ts"))) {
  console.log(`building @cairn/client in ${client}`);
  if (!existsSync(join(client, "node_modules"))) execSync("npm ci", { cwd: client, stdio: "inherit" });
  execSync("npm run build", { cwd: client, stdio: "inherit" });
}
