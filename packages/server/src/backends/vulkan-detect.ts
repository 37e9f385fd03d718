import { basename, join } from 'node:path';
import { findSharedLibrary, THIS_HOST, type LibraryHost } from './library-search.ts';

/** What a WebGPU (Dawn on Vulkan) session needs from the host, as found. */
export interface VulkanSetup {
  /** The Vulkan loader, libvulkan.so.1, where the dynamic loader would find it. */
  readonly loader: string | undefined;
  /** The Vulkan driver manifests (ICD .json files) the loader would read. */
  readonly drivers: readonly string[];
  /** Where the manifests were looked for, in words. */
  readonly driverSearch: string;
}

export const VULKAN_LOADER = 'libvulkan.so.1';

/**
 * The Vulkan loader and driver manifests of this host, found as the Vulkan loader finds them:
 * VK_DRIVER_FILES (or the older VK_ICD_FILENAMES) when set, each a manifest or a folder of them;
 * else the icd.d folders under XDG_CONFIG_DIRS, /etc and XDG_DATA_DIRS. An NVIDIA container
 * runtime mounts nvidia_icd.json there when the container's driver capabilities include graphics.
 */
export function vulkanSetup(host: LibraryHost = THIS_HOST): VulkanSetup {
  const loader = findSharedLibrary(VULKAN_LOADER, host);
  const manifestsIn = (dir: string) =>
    host
      .list(dir)
      .filter((name) => name.endsWith('.json'))
      .sort()
      .map((name) => join(dir, name));
  const listed = host.env['VK_DRIVER_FILES'] ?? host.env['VK_ICD_FILENAMES'];
  if (listed !== undefined && listed.trim() !== '') {
    const variable = host.env['VK_DRIVER_FILES'] !== undefined ? 'VK_DRIVER_FILES' : 'VK_ICD_FILENAMES';
    const entries = listed.split(':').filter((e) => e !== '');
    const drivers = entries.flatMap((entry) => (entry.endsWith('.json') ? (host.exists(entry) ? [entry] : []) : manifestsIn(entry)));
    return { loader, drivers, driverSearch: `${variable}=${listed}` };
  }
  const home = host.env['HOME'] ?? '';
  const configDirs = [host.env['XDG_CONFIG_HOME'] ?? join(home, '.config'), ...(host.env['XDG_CONFIG_DIRS'] ?? '/etc/xdg').split(':')];
  const dataDirs = [
    host.env['XDG_DATA_HOME'] ?? join(home, '.local/share'),
    ...(host.env['XDG_DATA_DIRS'] ?? '/usr/local/share:/usr/share').split(':'),
  ];
  const dirs = [...new Set([...configDirs, '/etc', ...dataDirs].filter((d) => d !== '').map((d) => join(d, 'vulkan/icd.d')))];
  return { loader, drivers: dirs.flatMap(manifestsIn), driverSearch: dirs.join(', ') };
}

/** What this host lacks for WebGPU, in words; undefined when it has a loader and a driver. */
export function vulkanMissing(setup: VulkanSetup): string | undefined {
  if (setup.loader === undefined) {
    return (
      `no Vulkan loader: ${VULKAN_LOADER} is in neither LD_LIBRARY_PATH nor the system's library folders ` +
      "(install Debian's libvulkan1; the Dockerfile's webgpu image has it)"
    );
  }
  if (setup.drivers.length === 0) {
    return (
      `no Vulkan driver: no driver manifest (ICD .json) in ${setup.driverSearch}; on an NVIDIA GPU in a container the ` +
      'runtime mounts nvidia_icd.json only when NVIDIA_DRIVER_CAPABILITIES includes graphics (compute,utility,graphics)'
    );
  }
  return undefined;
}

/** The driver manifests' file names, for messages: `nvidia_icd.json, lvp_icd.x86_64.json`. */
export function driverNames(setup: VulkanSetup): string {
  return setup.drivers.map((d) => basename(d)).join(', ');
}
