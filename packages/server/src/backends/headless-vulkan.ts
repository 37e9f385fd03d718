import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { findSharedLibrary, THIS_HOST, type LibraryHost } from './library-search.ts';
import { vulkanSetup } from './vulkan-detect.ts';

export const NVIDIA_GLX_DRIVER = 'libGLX_nvidia.so.0';
export const NVIDIA_EGL_DRIVER = 'libEGL_nvidia.so.0';

/** The Vulkan driver manifests to use instead of the host's, when it has no display. */
export interface HeadlessVulkanDrivers {
  /** The NVIDIA manifest naming libGLX_nvidia.so.0 that the EGL one replaces. */
  readonly replaces: string;
  /** libEGL_nvidia.so.0 where the dynamic loader finds it. */
  readonly library: string;
  /** The manifest naming it, with the replaced one's api_version. */
  readonly manifest: string;
  /** The host's other manifests (another GPU's, lavapipe's), kept after the EGL one. */
  readonly others: readonly string[];
}

/**
 * The NVIDIA driver's Vulkan manifest (nvidia_icd.json, as the container runtime mounts it) names
 * libGLX_nvidia.so.0, whose vkCreateInstance is not found without a display: on a headless host or
 * container the loader then finds no driver and WebGPU no adapter (seen on an H200, driver 580).
 * libEGL_nvidia.so.0 carries the same Vulkan driver without one (nvidia-container-toolkit#191).
 * Undefined where nothing is to change: the drivers were chosen (VK_DRIVER_FILES, VK_ICD_FILENAMES),
 * there is a display, no manifest names the GLX library, or the EGL library is absent.
 */
export function headlessVulkanDrivers(host: LibraryHost = THIS_HOST): HeadlessVulkanDrivers | undefined {
  const env = host.env;
  if (env['VK_DRIVER_FILES'] || env['VK_ICD_FILENAMES'] || env['DISPLAY'] || env['WAYLAND_DISPLAY']) return undefined;
  const manifests = vulkanSetup(host).drivers.map((path) => ({ path, icd: icdOf(host.readText(path)) }));
  const glx = manifests.find((m) => m.icd !== undefined && basename(m.icd.libraryPath) === NVIDIA_GLX_DRIVER);
  if (glx === undefined) return undefined;
  const library = findSharedLibrary(NVIDIA_EGL_DRIVER, host);
  if (library === undefined) return undefined;
  const manifest = JSON.stringify({
    file_format_version: '1.0.1',
    ICD: { library_path: library, api_version: glx.icd!.apiVersion ?? '1.3.0' },
  });
  // The GLX manifest's library may be mounted twice (nvidia_icd.json in two folders): none of them kept.
  const others = manifests.filter((m) => m.icd === undefined || basename(m.icd.libraryPath) !== NVIDIA_GLX_DRIVER).map((m) => m.path);
  return { replaces: glx.path, library, manifest, others };
}

/**
 * Points this process's Vulkan loader at the headless NVIDIA driver where headlessVulkanDrivers finds
 * one to use: writes its manifest under the temporary folder and sets VK_DRIVER_FILES. Run on the main
 * thread before any WebGPU session: the loader reads the process's environment when a session creates
 * its Vulkan instance, and a worker thread's process.env is its own copy.
 */
export function useHeadlessVulkanDrivers(host: LibraryHost = THIS_HOST): HeadlessVulkanDrivers | undefined {
  const drivers = headlessVulkanDrivers(host);
  if (drivers === undefined) return undefined;
  const dir = join(tmpdir(), `batchwise-vulkan-${process.getuid?.() ?? 'user'}`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'nvidia_egl_icd.json');
  writeFileSync(path, `${drivers.manifest}\n`);
  process.env['VK_DRIVER_FILES'] = [path, ...drivers.others].join(':');
  return drivers;
}

function icdOf(text: string | undefined): { libraryPath: string; apiVersion: string | undefined } | undefined {
  if (text === undefined) return undefined;
  try {
    const icd = (JSON.parse(text) as { ICD?: { library_path?: unknown; api_version?: unknown } }).ICD;
    if (typeof icd?.library_path !== 'string') return undefined;
    return { libraryPath: icd.library_path, apiVersion: typeof icd.api_version === 'string' ? icd.api_version : undefined };
  } catch {
    return undefined;
  }
}

/**
 * Why the NVIDIA Vulkan driver cannot start here, in words, where the loader is left with the manifest
 * naming libGLX_nvidia.so.0 and there is no display: libEGL_nvidia.so.0 missing, or the drivers chosen
 * by VK_DRIVER_FILES. Undefined otherwise.
 */
export function glxDriverWithoutDisplay(host: LibraryHost = THIS_HOST): string | undefined {
  if (host.env['DISPLAY'] || host.env['WAYLAND_DISPLAY']) return undefined;
  const glx = vulkanSetup(host).drivers.find((path) => {
    const icd = icdOf(host.readText(path));
    return icd !== undefined && basename(icd.libraryPath) === NVIDIA_GLX_DRIVER;
  });
  if (glx === undefined) return undefined;
  const egl = findSharedLibrary(NVIDIA_EGL_DRIVER, host);
  return (
    `the Vulkan driver manifest ${glx} names ${NVIDIA_GLX_DRIVER}, which finds no driver without a display; ` +
    (egl === undefined
      ? `${NVIDIA_EGL_DRIVER}, the same driver without one, is not in the library folders (a container needs NVIDIA_DRIVER_CAPABILITIES with graphics)`
      : `name a manifest for ${egl} in VK_DRIVER_FILES, or leave VK_DRIVER_FILES unset for Batchwise to do it`)
  );
}
