// Builds the console into crates/console/assets, the folder the daemon embeds. File names are
// fixed (no content hashes) so the Rust side can list them, the committed output changes only
// when the console does, and `cargo xtask ci` can rebuild and `git diff --exit-code` it.
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig, type Plugin } from "vite";

const daemon = process.env.CAIRN_URL ?? "http://127.0.0.1:8787";
const outDir = fileURLToPath(new URL("../../crates/console/assets", import.meta.url));

/**
 * The chat widget of @cairn/react styles itself with one inline <style> element. The
 * daemon's Content-Security-Policy allows no inline style but this one, by its hash, which
 * this plugin writes to `csp-style-hashes.txt` for crates/console to read (it is not served).
 */
function styleHashes(): Plugin {
  return {
    name: "cairn-csp-style-hashes",
    async generateBundle() {
      const { serviceChatWidgetCss } = await import("@cairn/react");
      const hash = createHash("sha256").update(serviceChatWidgetCss, "utf8").digest("base64");
      this.emitFile({ type: "asset", fileName: "csp-style-hashes.txt", source: `sha256-${hash}\n` });
    },
  };
}

export default defineConfig({
  plugins: [react(), styleHashes()],
  // @cairn/react and @cairn/client are linked from ../react and ../typescript; one React.
  resolve: { dedupe: ["react", "react-dom"] },
  build: {
    outDir,
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 1000,
    rolldownOptions: {
      output: {
        entryFileNames: "assets/console.js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: (asset) =>
          asset.names.some((name) => name.endsWith(".css")) ? "assets/console.css" : "assets/[name][extname]",
        codeSplitting: false,
      },
    },
  },
  server: {
    // `npm run dev` against a daemon on the default port (or $CAIRN_URL).
    proxy: { "/api": { target: daemon, ws: true }, "/openapi.json": daemon },
  },
});
