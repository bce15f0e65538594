import { svelte } from "@sveltejs/vite-plugin-svelte";
import tailwindcss from "@tailwindcss/vite";
import { svelteTesting } from "@testing-library/svelte/vite";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [tailwindcss(), svelte(), svelteTesting()],
  // The window loads the built files through Tauri's asset protocol; paths stay relative.
  base: "./",
  clearScreen: false,
  build: {
    target: "safari16",
    outDir: "dist",
    emptyOutDir: true,
    // Inline nothing: the CSP allows no inline script and no data: script.
    assetsInlineLimit: 0,
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.ts"],
  },
});
