// Builds the console into crates/console/assets, the folder the daemon embeds. File names are
// fixed (no content hashes) so the Rust side can list them, the committed output changes only
// when the console does, and `cargo xtask ci` can rebuild and `git diff --exit-code` it.
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../../crates/console/assets", import.meta.url));

export default defineConfig({
  plugins: [react()],
  // @cairn/react and @cairn/client are linked from ../react and ../typescript; one React.
  resolve: { dedupe: ["react", "react-dom"] },
  build: {
    outDir,
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 1000,
    rollupOptions: {
      output: {
        entryFileNames: "assets/console.js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: (asset) =>
          asset.names.some((name) => name.endsWith(".css")) ? "assets/console.css" : "assets/[name][extname]",
        inlineDynamicImports: true,
      },
    },
  },
  server: {
    // `npm run dev` against a daemon on the default port.
    proxy: { "/api": { target: "http://127.0.0.1:8787", ws: true }, "/openapi.json": "http://127.0.0.1:8787" },
  },
});
