import { defineConfig } from "vitest/config";

// Four projects: `node` (pure helpers, and the voice protocol client over a real socket),
// `dom` (the hooks and the widget in happy-dom against the real daemon), `browser` (the
// voice hook in Debian's Chromium, driven by Playwright, against a daemon with speech) and
// `package` (both packages packed, installed into a fresh Vite app, built and run).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          environment: "node",
          include: ["src/**/*.test.ts", "test/node/**/*.test.ts"],
          globalSetup: ["test/support/global-daemon.ts"],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "dom",
          environment: "./test/support/happy-dom-node-fetch.ts",
          include: ["test/dom/**/*.test.tsx"],
          globalSetup: ["test/support/global-daemon.ts"],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "browser",
          environment: "node",
          include: ["test/browser/**/*.test.ts"],
          globalSetup: ["test/browser/global-setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 300_000,
        },
      },
      {
        test: {
          name: "package",
          environment: "node",
          include: ["test/package/**/*.test.ts"],
          testTimeout: 180_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
