// Starts the real daemon (`cairn serve`) for the tests: a free loopback port, a fresh
// temporary data directory, killed afterwards. The binary is `$CAIRN_BIN`, else the
// workspace's `target/debug/cairn`.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repository's root: clients/react/test/support → four levels up. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

/** The daemon binary, or an error saying how to get one. */
export function cairnBin(): string {
  const fromEnv = process.env.CAIRN_BIN;
  const bin = fromEnv !== undefined && fromEnv !== "" ? resolve(fromEnv) : join(repoRoot, "target", "debug", "cairn");
  if (!existsSync(bin)) {
    throw new Error(
      `the daemon binary ${bin} does not exist: build it (cargo build -p cairn-cli) or set CAIRN_BIN to a cairn binary. ` +
        "These tests run against the real daemon and are never skipped.",
    );
  }
  return bin;
}

export interface Daemon {
  /** `http://127.0.0.1:<port>` */
  url: string;
  dataDir: string;
  /** Kills the daemon and removes its data directory (unless it was given). */
  stop(): Promise<void>;
}

export interface StartDaemonOptions {
  /** Extra `cairn serve` arguments. */
  args?: string[];
  /** Use this data directory (kept afterwards) instead of a fresh temporary one. */
  dataDir?: string;
  /** Called with the fresh data directory before the daemon starts (to install models). */
  prepare?: (dataDir: string) => void | Promise<void>;
}

/** Starts `cairn serve --port 0` and waits for its listening line. */
export async function startDaemon(options: StartDaemonOptions = {}): Promise<Daemon> {
  const bin = cairnBin();
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "cairn-react-test-"));
  await options.prepare?.(dataDir);
  const logPath = join(dataDir, "daemon.log");
  const log = openSync(logPath, "a");
  const child: ChildProcess = spawn(bin, ["serve", "--port", "0", "--data-dir", dataDir, ...(options.args ?? [])], {
    stdio: ["ignore", "pipe", log],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "info" },
  });
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`cairn serve did not say where it listens within 30 s; its log:\n${readLog(logPath)}`)), 30_000);
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (line) => {
      clearTimeout(timer);
      const match = /^cairn listening on (\S+)/.exec(line.trim());
      if (match?.[1] === undefined) reject(new Error(`unexpected first line from cairn serve: ${JSON.stringify(line)}; its log:\n${readLog(logPath)}`));
      else resolveUrl(match[1]);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`cairn serve exited (${code}) before listening; its log:\n${readLog(logPath)}`));
    });
  });
  return {
    url,
    dataDir,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((done) => child.once("exit", done));
        child.kill("SIGKILL");
        await exited;
      }
      if (ownDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8").slice(-4000);
  } catch {
    return "(no log)";
  }
}
