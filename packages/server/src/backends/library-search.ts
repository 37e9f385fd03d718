import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What the dynamic loader reads to find a library, as parameters so tests can stand in a host. */
export interface LibraryHost {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The contents of a file, or undefined when it cannot be read. */
  readonly readText: (path: string) => string | undefined;
  /** The names in a folder; none when it cannot be read. */
  readonly list: (dir: string) => string[];
  readonly exists: (path: string) => boolean;
}

export const THIS_HOST: LibraryHost = {
  env: process.env,
  readText: (path) => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return undefined;
    }
  },
  list: (dir) => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  },
  exists: existsSync,
};

const MULTIARCH = process.arch === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';

/**
 * The folders the dynamic loader searches, in its order: LD_LIBRARY_PATH, the folders of
 * /etc/ld.so.conf and the files it includes, then the system's. Not its cache: a library the
 * cache names lives in one of these on every distribution we run on.
 */
export function librarySearchDirs(host: LibraryHost = THIS_HOST): string[] {
  const fromEnv = (host.env['LD_LIBRARY_PATH'] ?? '').split(':').filter((d) => d !== '');
  const conf = confDirs('/etc/ld.so.conf', host, 0);
  const system = [`/lib/${MULTIARCH}`, `/usr/lib/${MULTIARCH}`, '/lib64', '/usr/lib64', '/lib', '/usr/lib'];
  return [...new Set([...fromEnv, ...conf, ...system])];
}

function confDirs(file: string, host: LibraryHost, depth: number): string[] {
  const text = depth > 4 ? undefined : host.readText(file);
  if (text === undefined) return [];
  return text.split('\n').flatMap((raw) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return [];
    const include = /^include\s+(.+)$/.exec(line);
    if (!include) return [line];
    // `include /etc/ld.so.conf.d/*.conf`: a folder and a file pattern.
    const pattern = include[1]!.trim();
    const slash = pattern.lastIndexOf('/');
    const dir = pattern.slice(0, slash);
    const glob = new RegExp(
      `^${pattern
        .slice(slash + 1)
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')}$`,
    );
    return host
      .list(dir)
      .filter((name) => glob.test(name))
      .sort()
      .flatMap((name) => confDirs(join(dir, name), host, depth + 1));
  });
}

/** Where the dynamic loader would find `name` (libvulkan.so.1, libnvinfer.so.10), or undefined. */
export function findSharedLibrary(name: string, host: LibraryHost = THIS_HOST): string | undefined {
  return librarySearchDirs(host)
    .map((dir) => join(dir, name))
    .find((path) => host.exists(path));
}
