// Starts a real `cairn serve` for the tests: a free loopback port (or a given one, to
// restart on the same address), a fresh temporary data directory, rate limits off (the
// whole suite is one caller), and stops it afterwards.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

/** The daemon binary: `$CAIRN_BIN`, else the workspace's debug build. */
export function cairnBinary(): string {
  const binary = process.env.CAIRN_BIN || join(repoRoot, "target/debug/cairn");
  if (!existsSync(binary)) {
    throw new Error(
      `The tests need the cairn daemon and found none at ${binary}. Build it (cargo build -p cairn-cli) ` +
        `or point CAIRN_BIN at a cairn binary, e.g. CAIRN_BIN=/path/to/cairn npm test.`,
    );
  }
  return binary;
}

export interface DaemonOptions {
  profile?: "solo" | "production";
  /** Reuse a data directory (a restart); a fresh temporary one by default. */
  dataDir?: string;
  /** Listen on this port (a restart on the same address); a free one by default. */
  port?: number;
  /** Extra `cairn serve` flags. */
  args?: string[];
}

export interface Daemon {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The runtime handler's base: `<url>/api/runtime`. */
  runtimeUrl: string;
  port: number;
  dataDir: string;
  profile: "solo" | "production";
  /** Stops the daemon (SIGTERM, then SIGKILL after 5 s). Keeps the data directory. */
  stop(): Promise<void>;
  /** Stops it and removes its data directory. */
  dispose(): Promise<void>;
  /** What the daemon printed, for failure messages. */
  output(): string;
}

/** Runs `cairn keys create --role <role>` on the data directory and returns the key. */
export function createKey(dataDir: string, role: "read" | "write" | "admin" | "runtime"): string {
  const result = spawnSync(cairnBinary(), ["keys", "create", "--role", role, "--data-dir", dataDir], {
    encoding: "utf8",
    env: cleanEnv(),
  });
  if (result.status !== 0) throw new Error(`cairn keys create failed: ${result.stderr}`);
  const key = result.stdout.trim().split("\n").pop()!.trim();
  if (!key.startsWith("cairn_")) throw new Error(`cairn keys create printed no key: ${result.stdout}`);
  return key;
}

export function freshDataDir(): string {
  return mkdtempSync(join(tmpdir(), "cairn-client-test-"));
}

export async function startDaemon(options: DaemonOptions = {}): Promise<Daemon> {
  const dataDir = options.dataDir ?? freshDataDir();
  try {
    return await start(options, dataDir);
  } catch (error) {
    if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

async function start(options: DaemonOptions, dataDir: string): Promise<Daemon> {
  const binary = cairnBinary();
  const profile = options.profile ?? "solo";
  const ownsDataDir = options.dataDir === undefined;
  // The production profile refuses to start without a key; this one checks its health.
  const healthKey = profile === "production" ? createKey(dataDir, "read") : undefined;
  const args = [
    "serve",
    "--host", "127.0.0.1",
    "--port", String(options.port ?? 0),
    "--data-dir", dataDir,
    "--profile", profile,
    "--embedder", "none",
    "--rate-limit-read", "0",
    "--rate-limit-write", "0",
    "--rate-limit-context", "0",
    ...(options.args ?? []),
  ];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"], env: cleanEnv() });
  let output = "";
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`cairn serve did not start within 30 s:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/[^\s]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`cairn serve exited with ${code} before listening:\n${output}`));
    });
  }).catch(async (error: unknown) => {
    await stopProcess(child);
    throw error;
  });
  const port = Number(new URL(url).port);
  try {
    await waitForHealth(url, healthKey);
  } catch (error) {
    await stopProcess(child);
    throw error;
  }

  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= stopProcess(child));
  return {
    url,
    runtimeUrl: `${url}/api/runtime`,
    port,
    dataDir,
    profile,
    stop,
    async dispose() {
      await stop();
      if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
    output: () => output,
  };
}

async function waitForHealth(url: string, key: string | undefined): Promise<void> {
  const deadline = Date.now() + 30_000;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${url}/api/health`, { headers: key ? { "x-api-key": key } : {} });
      if (response.ok) return;
      last = `status ${response.status}`;
    } catch (error) {
      last = error;
    }
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error(`cairn serve at ${url} never answered /api/health: ${String(last)}`);
}

function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 5_000);
    child.once("exit", () => {
      clearTimeout(kill);
      done();
    });
    child.kill("SIGTERM");
  });
}

/** The environment without `SERVICE_*` settings of the machine, so flags alone decide. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("SERVICE_") && !name.startsWith("CAIRN_")) env[name] = value;
  }
  env.RUST_LOG ??= "warn,cairn=info";
  return env;
}
