// Types of the data the backend sends; they mirror conduit-host's serialised structs.

/** Where Conduit keeps its files (conduit_host::Paths). */
export interface Paths {
  dataDir: string;
  configDir: string;
  settingsFile: string;
  mcpConfigFile: string;
  logDir: string;
  logFile: string;
}

/** The app's version and paths (conduit_host::AppInfo). */
export interface AppInfo {
  version: string;
  paths: Paths;
}
