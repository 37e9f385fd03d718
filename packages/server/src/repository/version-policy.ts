import type { ModelVersionPolicy } from '../config/model-config.ts';

/** The versions a policy selects from those present (Triton semantics; default latest 1). */
export function selectVersions(available: readonly number[], policy: ModelVersionPolicy | undefined): number[] {
  const sorted = [...available].sort((a, b) => a - b);
  if (policy?.all) return sorted;
  if (policy?.specific) {
    const wanted = new Set(policy.specific.versions ?? []);
    return sorted.filter((v) => wanted.has(v));
  }
  const n = policy?.latest?.num_versions ?? 1;
  return sorted.slice(Math.max(0, sorted.length - Math.max(1, n)));
}
