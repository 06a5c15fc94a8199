// Starts two real daemons for the browser tests, each on a free loopback port with a fresh
// data directory: one in the solo profile, one in the production profile with an admin key
// made by `cairn keys create`. The binary is $CAIRN_BIN, else <repo>/target/debug/cairn.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const root = resolve(import.meta.dirname, "../../..");

export function cairnBinary(): string {
  const binary = process.env.CAIRN_BIN ?? join(root, "target/debug/cairn");
  if (!existsSync(binary)) {
    throw new Error(
      `the cairn binary is missing at ${binary}: build it with \`cargo build -p cairn-cli\` or set CAIRN_BIN`,
    );
  }
  return binary;
}

function start(binary: string, args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(binary, ["serve", "--port", "0", ...args], {
    env: {
      ...process.env,
      SERVICE_EMBEDDER: "none",
      SERVICE_RATE_LIMIT_READ: "0",
      SERVICE_RATE_LIMIT_WRITE: "0",
      SERVICE_RATE_LIMIT_CONTEXT: "0",
      RUST_LOG: "warn",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    if (process.env.CAIRN_LOG) process.stderr.write(chunk);
  });
  return new Promise((resolveStart, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`the daemon did not listen within 60 s:\n${stderr}`)), 60_000);
    lines.on("line", (line) => {
      const match = /^cairn listening on (\S+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolveStart({ child, url: match[1] });
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the daemon exited (${code}) before it listened:\n${stderr}`));
    });
  });
}

export default async function globalSetup() {
  const binary = cairnBinary();
  const base = mkdtempSync(join(tmpdir(), "cairn-console-"));
  // A folder the connector test imports; connectors may read only under --connector-root.
  const docs = join(base, "docs");
  mkdirSync(docs);
  writeFileSync(join(docs, "deploy.md"), "# Deploying\n\nDeploy the shop with `make release`, never by hand.\n");

  const solo = await start(binary, ["--data-dir", join(base, "solo"), "--connector-root", base], {});
  const productionData = join(base, "production");
  const created = execFileSync(binary, ["keys", "create", "--role", "admin", "--name", "console-test", "--data-dir", productionData], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const key = created.trim().split("\n").pop()!.trim();
  if (!key.startsWith("cairn_")) throw new Error(`cairn keys create printed no key:\n${created}`);
  const production = await start(binary, ["--profile", "production", "--data-dir", productionData], {});

  process.env.CAIRN_URL = solo.url;
  process.env.CAIRN_PRODUCTION_URL = production.url;
  process.env.CAIRN_PRODUCTION_KEY = key;
  process.env.CAIRN_DOCS_DIR = docs;

  return async () => {
    for (const child of [solo.child, production.child]) {
      child.kill("SIGTERM");
    }
    await Promise.all(
      [solo.child, production.child].map(
        (child) =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            const timer = setTimeout(() => {
              child.kill("SIGKILL");
              done();
            }, 5_000);
            child.on("exit", () => {
              clearTimeout(timer);
              done();
            });
          }),
      ),
    );
    rmSync(base, { recursive: true, force: true });
  };
}
