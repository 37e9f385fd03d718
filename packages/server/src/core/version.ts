/** The server's name and version, as server metadata and `batchwise --version` give them. */
export const SERVER_NAME = 'batchwise';
export const SERVER_VERSION = '0.1.0';
