import { fakeLibraryHost } from '../../test-support/library-host.ts';
import { describe, expect, it } from 'vitest';
import { findSharedLibrary, librarySearchDirs } from './library-search.ts';
import { vulkanMissing, vulkanSetup } from './vulkan-detect.ts';

const host = fakeLibraryHost;

const MULTIARCH = process.arch === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';

describe('finding a shared library as the dynamic loader does', () => {
  it('searches LD_LIBRARY_PATH, then /etc/ld.so.conf and what it includes, then the system folders', () => {
    const h = host(
      {
        '/etc/ld.so.conf': 'include /etc/ld.so.conf.d/*.conf\n',
        '/etc/ld.so.conf.d/nvidia.conf': '# the driver\n/usr/local/nvidia/lib64\n',
        '/etc/ld.so.conf.d/readme.txt': '/not/read\n',
      },
      { LD_LIBRARY_PATH: '/opt/vk/lib::/opt/other' },
    );
    expect(librarySearchDirs(h).slice(0, 4)).toEqual(['/opt/vk/lib', '/opt/other', '/usr/local/nvidia/lib64', `/lib/${MULTIARCH}`]);
    expect(librarySearchDirs(h)).not.toContain('/not/read');
  });

  it('finds the first folder that has the library, or none', () => {
    const h = host({ [`/usr/lib/${MULTIARCH}/libvulkan.so.1`]: '', '/opt/vk/libvulkan.so.1': '' }, { LD_LIBRARY_PATH: '/opt/vk' });
    expect(findSharedLibrary('libvulkan.so.1', h)).toBe('/opt/vk/libvulkan.so.1');
    expect(findSharedLibrary('libnvinfer.so.10', h)).toBeUndefined();
  });
});

describe('what a WebGPU session lacks, in words', () => {
  const loader = `/usr/lib/${MULTIARCH}/libvulkan.so.1`;

  it('names the missing Vulkan loader first', () => {
    expect(vulkanMissing(vulkanSetup(host({ '/etc/vulkan/icd.d/nvidia_icd.json': '{}' })))).toMatch(
      /^no Vulkan loader: libvulkan\.so\.1 is in neither LD_LIBRARY_PATH nor the system's library folders \(install Debian's libvulkan1/,
    );
  });

  it('names the missing driver manifest, where it looked, and the container setting that mounts NVIDIA’s', () => {
    const missing = vulkanMissing(vulkanSetup(host({ [loader]: '' })));
    expect(missing).toMatch(
      /^no Vulkan driver: no driver manifest \(ICD \.json\) in .*\/etc\/vulkan\/icd\.d, .*\/usr\/share\/vulkan\/icd\.d/,
    );
    expect(missing).toMatch(/NVIDIA_DRIVER_CAPABILITIES includes graphics/);
  });

  it('finds drivers where the NVIDIA runtime mounts them, or only those VK_DRIVER_FILES names', () => {
    const files = { [loader]: '', '/etc/vulkan/icd.d/nvidia_icd.json': '{}', '/opt/lvp/lvp_icd.x86_64.json': '{}' };
    const system = vulkanSetup(host(files));
    expect(system.drivers).toEqual(['/etc/vulkan/icd.d/nvidia_icd.json']);
    expect(vulkanMissing(system)).toBeUndefined();
    const named = vulkanSetup(host(files, { VK_DRIVER_FILES: '/opt/lvp/lvp_icd.x86_64.json:/opt/none.json' }));
    expect(named.drivers).toEqual(['/opt/lvp/lvp_icd.x86_64.json']);
    expect(vulkanMissing(vulkanSetup(host({ [loader]: '' }, { VK_ICD_FILENAMES: '/opt/none.json' })))).toMatch(
      /in VK_ICD_FILENAMES=\/opt\/none\.json/,
    );
  });
});
