// Global setup of the browser tests: Chromium and espeak-ng must be installed (the tests
// fail, never skip, without them); the test page is bundled with esbuild and served; a real
// daemon with speech (Whisper tiny.en in its data directory, espeak-ng on the PATH) is started
// with the page's origin allowed by CORS.

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";
import type { TestProject } from "vitest/node";

import { cairnBin, startDaemon } from "../support/daemon.js";

declare module "vitest" {
  export interface ProvidedContext {
    chromiumPath: string;
    pageUrl: string;
    voiceDaemonUrl: string;
  }
}

const here = dirname(fileURLToPath(import.meta.url));
const VOICE_MODEL_FILES = ["model.safetensors", "config.json", "tokenizer.json"];

/** Chromium: `$CHROMIUM_PATH`, else Debian's /usr/bin/chromium. */
export function chromiumPath(): string {
  const path = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
  if (!existsSync(path)) {
    throw new Error(
      `Chromium is not at ${path}: install Debian's (apt-get install -y chromium) or set CHROMIUM_PATH. ` +
        "The voice tests run in a real browser and are never skipped.",
    );
  }
  return path;
}

function requireEspeak(): void {
  try {
    execFileSync("espeak-ng", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error("espeak-ng is not installed (apt-get install -y espeak-ng): the voice tests speak with it, and the daemon answers with it.");
  }
}

function installed(dir: string): boolean {
  return VOICE_MODEL_FILES.every((file) => existsSync(join(dir, file)));
}

/**
 * A folder holding Whisper tiny.en: `$CAIRN_VOICE_MODEL_DIR`, else the Rust tests' cache
 * (`target/test-models/whisper-tiny-en` of the repository), else installed once with
 * `cairn model fetch --voice` into `target/test-models/react` and reused: nothing is kept
 * outside the clone.
 */
function voiceModelDir(): string {
  const models = join(here, "..", "..", "..", "..", "target", "test-models");
  const candidates = [process.env.CAIRN_VOICE_MODEL_DIR, join(models, "whisper-tiny-en")];
  for (const candidate of candidates) {
    if (candidate !== undefined && candidate !== "" && installed(candidate)) return candidate;
  }
  const cache = join(models, "react");
  const dir = join(cache, "models", "whisper-tiny-en");
  if (!installed(dir)) {
    mkdirSync(cache, { recursive: true });
    execFileSync(cairnBin(), ["model", "fetch", "--voice", "--data-dir", cache], { stdio: "inherit" });
  }
  return dir;
}

async function bundlePage(): Promise<string> {
  const result = await build({
    entryPoints: [join(here, "page", "main.tsx")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "chrome120",
    jsx: "automatic",
    sourcemap: "inline",
    define: { "process.env.NODE_ENV": '"development"' },
    logLevel: "silent",
  });
  return result.outputFiles[0]!.text;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const chromium = chromiumPath();
  requireEspeak();
  const model = voiceModelDir();
  const script = await bundlePage();
  const page = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (path === "/main.js") {
      response.writeHead(200, { "content-type": "text/javascript" }).end(script);
    } else if (path === "/") {
      response
        .writeHead(200, { "content-type": "text/html" })
        .end('<!doctype html><html><head><meta charset="utf-8"><title>voice</title></head><body><div id="root"></div><script type="module" src="/main.js"></script></body></html>');
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
  const pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
  const daemon = await startDaemon({
    args: ["--cors-origin", pageOrigin],
    prepare: (dataDir) => {
      mkdirSync(join(dataDir, "models"), { recursive: true });
      symlinkSync(model, join(dataDir, "models", "whisper-tiny-en"), "dir");
    },
  });
  project.provide("chromiumPath", chromium);
  project.provide("pageUrl", `${pageOrigin}/`);
  project.provide("voiceDaemonUrl", daemon.url);
  return async () => {
    await daemon.stop();
    await new Promise<void>((resolve) => page.close(() => resolve()));
  };
}
