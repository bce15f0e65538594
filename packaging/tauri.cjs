// Runs the Tauri command line (the prebuilt binding pinned in package.json) with this
// script's arguments: `node packaging/tauri.cjs bundle --bundles deb ...`.
const { run, logError } = require('@tauri-apps/cli-linux-x64-gnu')

run(process.argv.slice(2), 'tauri', (error) => {
  if (error) {
    logError(error.message)
    process.exit(1)
  }
})
