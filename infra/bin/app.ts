import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { BatchwiseStack } from '../lib/batchwise-stack.ts';
import { applyEnvironmentFile, stackPropsFromContext } from '../lib/config.ts';

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
