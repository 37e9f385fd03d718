import type { LibraryHost } from '../src/backends/library-search.ts';

/** A stand-in host made of a few files (path -> contents) and an environment, for library and Vulkan lookups. */
export function fakeLibraryHost(files: Record<string, string>, env: Record<string, string> = {}, home = '/home/u'): LibraryHost {
  return {
    env: { HOME: home, ...env },
    readText: (path) => files[path],
    list: (dir) =>
      Object.keys(files)
        .filter((path) => path.startsWith(`${dir}/`) && !path.slice(dir.length + 1).includes('/'))
        .map((path) => path.slice(dir.length + 1)),
    exists: (path) => path in files,
  };
}
