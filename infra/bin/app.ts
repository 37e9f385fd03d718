import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { BatchwiseStack } from '../lib/batchwise-stack.ts';
import { applyEnvironmentFile, stackPropsFromContext } from '../lib/config.ts';

try {
  const app = new App();
  // infra/environments/<envName>.json: the environment's settings, the same for every deploy.
  applyEnvironmentFile(app.node);
  const props = stackPropsFromContext(app.node);
  // Account-agnostic always; region-specific when the CLI knows one (it does on deploy),
  // which turns on ALB access logs. Offline synth without a region stays fully agnostic.
  const region = process.env.CDK_DEFAULT_REGION;
  new BatchwiseStack(app, `Batchwise-${props.envName ?? 'dev'}`, { ...props, env: region ? { region } : undefined });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  app.synth();
} catch (error) {
  if (!isSettingError(error)) throw error;
  // A setting the stack cannot use (a context value, an environment file, a construct's check of
  // one) is the user's input, not a crash: its message alone, without the source line and frames.
  console.error(error.message);
  process.exitCode = 1;
}

/**
 * Errors a setting causes: ours (ConfigurationError and the constructs' checks, plain Errors) and
 * CDK's own validation errors. A TypeError, ReferenceError, RangeError or SyntaxError is a bug and
 * keeps its stack, as does every error under `cdk --debug` (CDK_DEBUG=true).
 */
function isSettingError(error: unknown): error is Error {
  if (!(error instanceof Error) || process.env.CDK_DEBUG === 'true') return false;
  return !(error instanceof TypeError || error instanceof ReferenceError || error instanceof RangeError || error instanceof SyntaxError);
}
