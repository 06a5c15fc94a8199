// The packages as an app developer gets them: `npm pack` of @cairn/client and @cairn/react,
// installed from the two tarballs into a fresh Vite + React 19 app (no link to this
// repository), imported by Node as ES modules, type-checked against their exported types,
// built by Vite, and run: the built page, served on its own origin, holds the chat widget
// talking to a real daemon in Debian's Chromium, through a handoff and a close.

import { execFileSync } from "node:child_process";
import { lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

import { chromiumPath } from "../browser/global-setup.js";
import { startDaemon, type Daemon } from "../support/daemon.js";

const react = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const client = resolve(react, "..", "typescript");
const app = mkdtempSync(join(tmpdir(), "cairn-fresh-app-"));

function run(command: string, args: string[], cwd: string): string {
  try {
    return execFileSync(command, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    throw new Error(`\`${command} ${args.join(" ")}\` failed in ${cwd}:\n${failed.stdout ?? ""}\n${failed.stderr ?? ""}`);
  }
}

/** `npm pack` of the package in `dir` into the app's folder: the tarball's file name. */
function pack(dir: string): string {
  const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", app], dir)) as { filename: string }[];
  return packed!.filename;
}

const MAIN = `
import { createServiceClient } from "@cairn/client";
import { ServiceChatWidget } from "@cairn/react";
import { createRoot } from "react-dom/client";

const daemon = new URLSearchParams(location.search).get("daemon") ?? location.origin;
const client = createServiceClient({ baseUrl: \`\${daemon}/api/runtime\` });
createRoot(document.getElementById("root")!).render(
  <ServiceChatWidget client={client} channel="web" title="Support" />,
);
`;

let daemon: Daemon | undefined;
let site: Server | undefined;

beforeAll(() => {
  const clientTarball = pack(client);
  const reactTarball = pack(react);
  const manifest = {
    name: "fresh-app",
    private: true,
    type: "module",
    scripts: { build: "tsc --noEmit && vite build" },
    dependencies: {
      "@cairn/client": `file:./${clientTarball}`,
      "@cairn/react": `file:./${reactTarball}`,
      react: "^19.0.0",
      "react-dom": "^19.0.0",
    },
    devDependencies: {
      "@types/react": "^19.0.0",
      "@types/react-dom": "^19.0.0",
      "@vitejs/plugin-react": "^6.0.0",
      typescript: "^5.9.0",
      vite: "^8.0.0",
    },
  };
  writeFileSync(join(app, "package.json"), JSON.stringify(manifest, null, 2));
  writeFileSync(
    join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2022", "DOM", "DOM.Iterable"],
        module: "ESNext",
        moduleResolution: "bundler",
        jsx: "react-jsx",
        strict: true,
        skipLibCheck: false,
        noEmit: true,
      },
      include: ["src"],
    }),
  );
  writeFileSync(
    join(app, "vite.config.js"),
    'import react from "@vitejs/plugin-react";\nimport { defineConfig } from "vite";\nexport default defineConfig({ plugins: [react()] });\n',
  );
  writeFileSync(
    join(app, "index.html"),
    '<!doctype html><html><head><meta charset="utf-8"><title>fresh app</title></head><body><div id="root"></div><script type="module" src="/src/main.tsx"></script></body></html>',
  );
  mkdirSync(join(app, "src"));
  writeFileSync(join(app, "src", "main.tsx"), MAIN);
  run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline"], app);
}, 300_000);

afterAll(async () => {
  await daemon?.stop();
  if (site) await new Promise<void>((done) => site!.close(() => done()));
  rmSync(app, { recursive: true, force: true });
});

describe("the packed packages in a fresh Vite + React 19 app", () => {
  test("install as packages: real folders, @cairn/react's dependency on the client by version", () => {
    for (const name of ["client", "react"]) {
      const installed = join(app, "node_modules", "@cairn", name);
      expect(lstatSync(installed).isSymbolicLink(), `${installed} is a link`).toBe(false);
      expect(lstatSync(join(installed, "dist", "index.js")).isFile()).toBe(true);
      expect(lstatSync(join(installed, "dist", "index.d.ts")).isFile()).toBe(true);
    }
    const manifest = JSON.parse(readFileSync(join(app, "node_modules", "@cairn", "react", "package.json"), "utf8"));
    expect(manifest.dependencies["@cairn/client"]).toMatch(/^\^\d+\.\d+\.\d+$/);
  });

  test("Node imports both as ES modules", () => {
    const script =
      'const c = await import("@cairn/client"); const r = await import("@cairn/react");' +
      "console.log(typeof c.createServiceClient, typeof r.ServiceChatWidget, typeof r.useServiceChat);";
    expect(run("node", ["--input-type=module", "-e", script], app).trim()).toBe("function function function");
  });

  test("type-checks against the exported types and builds with Vite, then the widget talks in Chromium", async () => {
    run("npm", ["run", "build"], app);
    const files = join(app, "dist");
    site = createServer((request, response) => {
      const path = (request.url ?? "/").split("?")[0]!;
      const file = join(files, path === "/" ? "index.html" : path);
      try {
        const body = readFileSync(file);
        const type = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" }[extname(file)] ?? "application/octet-stream";
        response.writeHead(200, { "content-type": type }).end(body);
      } catch {
        response.writeHead(404).end();
      }
    });
    await new Promise<void>((done) => site!.listen(0, "127.0.0.1", done));
    const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    daemon = await startDaemon({ args: ["--cors-origin", origin] });

    const browser = await chromium.launch({
      executablePath: chromiumPath(),
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
    });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on("pageerror", (error) => problems.push(error.message));
      await page.goto(`${origin}/?daemon=${encodeURIComponent(daemon.url)}`);
      const chat = page.getByRole("region", { name: "Support" });
      await chat.getByRole("textbox").fill("hello");
      await chat.getByRole("button", { name: "Send" }).click();
      await expect.poll(() => chat.textContent(), { timeout: 30_000 }).toContain("Hi!");

      // The widget's states as a visitor sees them: a person taking over, then the close.
      await chat.getByRole("textbox").fill("Can I talk to a human please?");
      await chat.getByRole("button", { name: "Send" }).click();
      const notice = chat.getByText("A person from the team is joining this conversation. They will reply here.");
      await notice.waitFor({ timeout: 30_000 });
      const listed = (await (await fetch(`${daemon.url}/api/runtime/conversations?limit=1`)).json()) as {
        conversations: { id: string }[];
      };
      const id = listed.conversations[0]!.id;
      const closed = await fetch(`${daemon.url}/api/runtime/conversations/${id}/close`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ reason: "solved" }),
      });
      expect(closed.status).toBe(200);
      await chat.getByText("This conversation has ended.").waitFor({ timeout: 30_000 });
      expect(await chat.getByRole("textbox").isDisabled()).toBe(true);
      expect(await chat.textContent()).not.toMatch(/conv_|resume it first/);
      await chat.getByRole("button", { name: "Start a new conversation" }).click();
      expect(await chat.getByRole("textbox").isDisabled()).toBe(false);
      await chat.getByRole("textbox").fill("hello");
      await chat.getByRole("button", { name: "Send" }).click();
      await expect.poll(() => chat.getByText("Hi! I can book a demo for you, or put you through to a person.").count(), { timeout: 30_000 }).toBe(1);
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
