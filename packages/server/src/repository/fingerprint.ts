import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';

/**
 * A cheap identity of a folder's contents: every file's relative path, size and mtime.
 * Changes when a file is added, removed, rewritten or touched; reading file bytes is not needed.
 */
export async function fingerprintFolder(dir: string): Promise<string> {
  const hash = createHash('sha256');
  const walk = async (current: string): Promise<void> => {
    const entries = await readdir(current, { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) {
        await walk(path);
      } else {
        const s = await stat(path);
        hash.update(`${relative(dir, path)}\0${s.size}\0${s.mtimeMs}\n`);
      }
    }
  };
  await walk(dir);
  return hash.digest('hex');
}

export function fingerprintText(text: string | undefined): string {
  return createHash('sha256')
    .update(text ?? '\0none')
    .digest('hex');
}
