/**
 * Triton's own protocol files (grpc_service.proto, health.proto and model_config.proto of
 * triton-inference-server/common), which the wire-compatibility tests compare our protos and
 * our gRPC frontend against. They are reference material kept beside the repository, not in it:
 * `<repository root>/../shared/reference/triton-protocol` (its README asks that they are not
 * copied into the project), or the folder BATCHWISE_TRITON_PROTOCOL_DIR names.
 *
 * Where they are missing, a test that needs them is skipped with a warning on a developer's
 * machine, and fails in CI (CI set, as GitHub Actions sets it), so that the claim that our
 * protos are wire-identical to Triton's is never silently left untested there.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const FILES = ['grpc_service.proto', 'health.proto', 'model_config.proto'] as const;

/** Where Triton's protocol files must be. */
export const TRITON_PROTOCOL_DIR = resolve(
  process.env['BATCHWISE_TRITON_PROTOCOL_DIR'] ?? fileURLToPath(new URL('../../../../shared/reference/triton-protocol/', import.meta.url)),
);

const missingFiles = FILES.filter((file) => !existsSync(join(TRITON_PROTOCOL_DIR, file)));

/** Whether every one of Triton's protocol files is there. */
export const tritonProtocolPresent = missingFiles.length === 0;

/** What is missing, where it must be, and how to provide it. */
export function tritonProtocolMissingMessage(): string {
  return (
    `Triton's protocol files ${missingFiles.join(', ')} are missing from ${TRITON_PROTOCOL_DIR}. ` +
    `They must be in <repository root>/../shared/reference/triton-protocol (grpc_service.proto, health.proto and ` +
    `model_config.proto of triton-inference-server/common, see .github/workflows/ci.yml), or in the folder ` +
    `BATCHWISE_TRITON_PROTOCOL_DIR names`
  );
}

/**
 * `describe(name, body)` for tests that need Triton's protocol files. Without them: in CI (CI
 * set) one failing test that says where the files must be; elsewhere a skipped test of that
 * name and a warning. `body` runs only when the files are there.
 */
export function describeWithTritonProtocol(name: string, body: () => void): void {
  if (tritonProtocolPresent) {
    describe(name, body);
    return;
  }
  const message = tritonProtocolMissingMessage();
  if (process.env['CI']) {
    describe(name, () => {
      it("has Triton's protocol files to compare against", () => {
        throw new Error(`${message}. CI must provide them: these tests may not be skipped there.`);
      });
    });
    return;
  }
  console.warn(`SKIPPED (Triton's protocol files missing): ${name}. ${message}; CI fails where they are missing.`);
  describe.skip(name, () => {
    it("needs Triton's protocol files", () => {});
  });
}
