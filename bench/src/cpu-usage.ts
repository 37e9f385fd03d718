// The scenarios' CPU readings live with the load generator, which `batchwise tune` shares.
export { cpuShare, cpuSnapshot, type CpuShare, type CpuSnapshot } from '@batchwise/client/load';
