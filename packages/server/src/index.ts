export { startServer, type RunningServer, type ServerOptions } from './server.ts';
export * from './core/index.ts';
export { parseModelConfig, printModelConfig } from './config/index.ts';
