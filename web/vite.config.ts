import { defineConfig } from 'vite'
import vue from '@vitejs/plugin-vue'

// The API is the same origin: `npm run dev` proxies /api and /v1 to the
// local runner (make run, port 5050); production builds are served by it.
export default defineConfig({
  plugins: [vue()],
  // assetsInlineLimit 0: no asset becomes a data: URL (KaTeX's fonts would, and the
  // page's CSP, default-src 'self', refuses data: fonts).
  build: { outDir: 'dist', assetsDir: 'assets', sourcemap: false, chunkSizeWarningLimit: 400, assetsInlineLimit: 0 },
  server: {
    proxy: {
      '/api': { target: 'http://127.0.0.1:5050', changeOrigin: false },
      '/v1': { target: 'http://127.0.0.1:5050', changeOrigin: false },
    },
  },
})
