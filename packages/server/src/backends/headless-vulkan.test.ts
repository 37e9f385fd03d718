import { readFileSync } from 'node:fs';
import { fakeLibraryHost } from '../../test-support/library-host.ts';
import { describe, expect, it, afterEach } from 'vitest';
import { glxDriverWithoutDisplay, headlessVulkanDrivers, useHeadlessVulkanDrivers } from './headless-vulkan.ts';

const MULTIARCH = process.arch === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';
const GLX_ICD = '{ "file_format_version" : "1.0.1", "ICD": { "library_path": "libGLX_nvidia.so.0", "api_version" : "1.4.312" } }';
const LVP_ICD = '{ "file_format_version": "1.0.0", "ICD": { "library_path": "/usr/lib/libvulkan_lvp.so", "api_version": "1.3.0" } }';
const EGL = `/usr/lib/${MULTIARCH}/libEGL_nvidia.so.0`;

const host = (files: Record<string, string>, env: Record<string, string> = {}) => fakeLibraryHost(files, env, '/root');

const DRIVER = {
  '/usr/share/vulkan/icd.d/nvidia_icd.json': GLX_ICD,
  '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json': LVP_ICD,
  [EGL]: '',
};

describe('the NVIDIA Vulkan driver on a host without a display', () => {
  const before = process.env['VK_DRIVER_FILES'];
  afterEach(() => {
    if (before === undefined) delete process.env['VK_DRIVER_FILES'];
    else process.env['VK_DRIVER_FILES'] = before;
  });

  it("names the EGL library in a manifest with the GLX manifest's api_version, keeping the host's other drivers", () => {
    const drivers = headlessVulkanDrivers(host(DRIVER));
    expect(drivers).toEqual({
      replaces: '/usr/share/vulkan/icd.d/nvidia_icd.json',
      library: EGL,
      manifest: JSON.stringify({ file_format_version: '1.0.1', ICD: { library_path: EGL, api_version: '1.4.312' } }),
      others: ['/usr/share/vulkan/icd.d/lvp_icd.x86_64.json'],
    });
  });

  it('changes nothing with a display, with drivers chosen, without the GLX manifest or without the EGL library', () => {
    expect(headlessVulkanDrivers(host(DRIVER, { DISPLAY: ':0' }))).toBeUndefined();
    expect(headlessVulkanDrivers(host(DRIVER, { WAYLAND_DISPLAY: 'wayland-0' }))).toBeUndefined();
    expect(headlessVulkanDrivers(host(DRIVER, { VK_DRIVER_FILES: '/usr/share/vulkan/icd.d/nvidia_icd.json' }))).toBeUndefined();
    expect(headlessVulkanDrivers(host(DRIVER, { VK_ICD_FILENAMES: '/usr/share/vulkan/icd.d/nvidia_icd.json' }))).toBeUndefined();
    expect(headlessVulkanDrivers(host({ '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json': LVP_ICD, [EGL]: '' }))).toBeUndefined();
    expect(headlessVulkanDrivers(host({ '/usr/share/vulkan/icd.d/nvidia_icd.json': GLX_ICD }))).toBeUndefined();
    expect(headlessVulkanDrivers(host({ '/usr/share/vulkan/icd.d/nvidia_icd.json': 'not json', [EGL]: '' }))).toBeUndefined();
  });

  it('finds the manifest where the driver is mounted once XDG_DATA_DIRS names it (/usr/local/nvidia/share)', () => {
    const h = host(
      { '/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json': GLX_ICD, '/usr/local/nvidia/lib64/libEGL_nvidia.so.0': '' },
      { XDG_DATA_DIRS: '/usr/local/nvidia/share:/usr/share', LD_LIBRARY_PATH: '/usr/local/nvidia/lib64' },
    );
    expect(headlessVulkanDrivers(h)?.library).toBe('/usr/local/nvidia/lib64/libEGL_nvidia.so.0');
  });

  it('writes the manifest and points VK_DRIVER_FILES at it, then the others', () => {
    const drivers = useHeadlessVulkanDrivers(host(DRIVER));
    const [manifest, ...others] = process.env['VK_DRIVER_FILES']!.split(':');
    expect(readFileSync(manifest!, 'utf8').trim()).toBe(drivers!.manifest);
    expect(others).toEqual(['/usr/share/vulkan/icd.d/lvp_icd.x86_64.json']);
    expect(useHeadlessVulkanDrivers(host(DRIVER, { DISPLAY: ':1' }))).toBeUndefined();
  });

  it('says why the driver cannot start where the GLX manifest is left without a display', () => {
    expect(glxDriverWithoutDisplay(host({ '/usr/share/vulkan/icd.d/nvidia_icd.json': GLX_ICD }))).toMatch(
      /nvidia_icd.json names libGLX_nvidia.so.0, which finds no driver without a display; libEGL_nvidia.so.0, .* is not in the library folders .*NVIDIA_DRIVER_CAPABILITIES with graphics/,
    );
    expect(glxDriverWithoutDisplay(host(DRIVER, { VK_DRIVER_FILES: '/usr/share/vulkan/icd.d/nvidia_icd.json' }))).toMatch(
      new RegExp(`name a manifest for ${EGL} in VK_DRIVER_FILES`),
    );
    expect(glxDriverWithoutDisplay(host(DRIVER, { DISPLAY: ':0' }))).toBeUndefined();
    expect(glxDriverWithoutDisplay(host({ '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json': LVP_ICD }))).toBeUndefined();
  });
});
