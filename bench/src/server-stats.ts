// The scenarios' server statistics live with the load generator, which `batchwise tune` shares.
export { breakdown, readStats, type ServerBreakdown } from '@batchwise/client/load';
