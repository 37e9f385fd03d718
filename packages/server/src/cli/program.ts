/** The `batchwise` CLI (main.ts runs it, as a child of itself when it is PID 1). */
import { buildProgram } from './build-program.ts';

// Under Node 20 the AWS SDK prints a 7-line NodeVersionSupportWarning (its releases from 2027 need
// Node 22) on every command that makes an AWS client: S3 repositories, doctor --region, canaries
// watched in CloudWatch. The Node versions Batchwise supports are stated in README; this is the SDK's
// own switch (set it to false to see the warning).
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

buildProgram()
  .parseAsync(process.argv)
  .catch((error: Error) => {
    process.stderr.write(`${JSON.stringify({ level: 'fatal', msg: error.message })}\n`);
    process.exit(1);
  });
