import { describe, expect, it } from 'vitest';
import { IMAGE_URI, REQUIRED, memo, only, synth } from './synth.ts';
import { SERVER_RUNTIME_RESERVE_MIB, hardLimitForModelsMiB } from '../lib/many-models.ts';
import { SERVE_FLAGS } from '../../packages/server/src/options/index.ts';
import { byteCountOf } from '../../packages/server/src/memory/memory-budget.ts';

const MIB = 1024 * 1024;
const plain = memo(() => synth({ ...REQUIRED, imageUri: IMAGE_URI }));
const onDemand = memo(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, loadOnDemand: 'true' }));
const containerOf = (s: ReturnType<typeof synth>) => only(s.template, 'AWS::ECS::TaskDefinition').props.ContainerDefinitions[0];
const flag = (command: string[], name: string) => (command.includes(name) ? command[command.indexOf(name) + 1] : undefined);
const rootVolumeGiB = (s: ReturnType<typeof synth>) =>
  only(s.template, 'AWS::EC2::LaunchTemplate').props.LaunchTemplateData.BlockDeviceMappings[0].Ebs.VolumeSize;
const evictionAlarms = (s: ReturnType<typeof synth>) =>
  Object.values(s.template.findResources('AWS::CloudWatch::Alarm')).filter((a: any) => JSON.stringify(a).includes('ModelEvictions'));

describe('many models per host (context loadOnDemand and the limits)', () => {
  it('leaves the serve command, the disk and the alarms as they were without it', () => {
    const command: string[] = containerOf(plain()).Command;
    for (const name of ['--load-on-demand', '--model-memory-limit', '--model-gpu-memory-limit', '--model-cache-disk-limit']) {
      expect(command).not.toContain(name);
    }
    expect(rootVolumeGiB(plain())).toBe(100);
    expect(evictionAlarms(plain())).toEqual([]);
  });

  it('sizes the limits from the task: the budget less the server reserve, 75% of the GPU, a 50 GiB cache on a disk grown for it', () => {
    const command: string[] = containerOf(onDemand()).Command;
    expect(command).toContain('--load-on-demand');
    const budget = Number(flag(command, '--memory-limit'));
    expect(Number(flag(command, '--model-memory-limit'))).toBe(budget - SERVER_RUNTIME_RESERVE_MIB * MIB);
    expect(Number(flag(command, '--model-gpu-memory-limit'))).toBe(Math.floor(16384 * 0.75) * MIB);
    expect(Number(flag(command, '--model-cache-disk-limit'))).toBe(50 * 1024 * MIB);
    // g4dn.xlarge runs one task: its cache, twice (a stopped task's layer stays until the agent cleans it up).
    expect(rootVolumeGiB(onDemand())).toBe(200);
    expect(onDemand().violations).toEqual([]);
    // Flags serve declares, with values its byte-count parser reads.
    const declared = SERVE_FLAGS.map((d) => d.flag as string);
    for (const name of ['--load-on-demand', '--model-memory-limit', '--model-gpu-memory-limit', '--model-cache-disk-limit']) {
      expect(declared).toContain(name);
    }
    for (const name of ['--model-memory-limit', '--model-gpu-memory-limit', '--model-cache-disk-limit']) {
      expect(byteCountOf(flag(command, name)!)).toBe(Number(flag(command, name)));
    }
  });

  it('alarms on eviction thrash: evictions per task per minute above the threshold in 3 of 5 minutes', () => {
    const [alarm] = evictionAlarms(onDemand()) as any[];
    expect(alarm.Properties).toMatchObject({
      Threshold: 30,
      EvaluationPeriods: 5,
      DatapointsToAlarm: 3,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    const queries = alarm.Properties.Metrics as any[];
    expect(queries.find((q) => q.Expression)?.Expression).toBe('IF(FILL(tasks, 0) > 0, FILL(evictions, 0) / tasks, FILL(evictions, 0))');
    expect(queries.find((q) => q.Id === 'evictions').MetricStat).toMatchObject({
      Metric: { Namespace: 'Batchwise', MetricName: 'ModelEvictions' },
      Stat: 'Sum',
    });
    const custom = synth({ ...REQUIRED, imageUri: IMAGE_URI, loadOnDemand: 'true', evictionsPerTaskPerMinute: '5' });
    expect((evictionAlarms(custom)[0] as any).Properties.Threshold).toBe(5);
  });

  it('passes given limits as bytes, and sizes a task outside the instance table from its model memory limit', () => {
    const given = synth({
      ...REQUIRED,
      imageUri: IMAGE_URI,
      loadOnDemand: 'true',
      modelMemoryLimitMiB: '4096',
      modelGpuMemoryLimitMiB: '8192',
      modelCacheDiskGiB: '20',
    });
    const command: string[] = containerOf(given).Command;
    expect(flag(command, '--model-memory-limit')).toBe(String(4096 * MIB));
    expect(flag(command, '--model-gpu-memory-limit')).toBe(String(8192 * MIB));
    expect(flag(command, '--model-cache-disk-limit')).toBe(String(20 * 1024 * MIB));
    expect(rootVolumeGiB(given)).toBe(140);

    const outside = synth({ ...REQUIRED, imageUri: IMAGE_URI, instanceType: 'p3.2xlarge', modelMemoryLimitMiB: '20000' });
    expect(containerOf(outside).Memory).toBe(hardLimitForModelsMiB(20000));
    // Without loadOnDemand the limit binds the models loaded at start-up; nothing is evicted.
    expect(containerOf(outside).Command).not.toContain('--load-on-demand');
    expect(flag(containerOf(outside).Command, '--model-memory-limit')).toBe(String(20000 * MIB));
  });

  it('refuses limits the task cannot hold, and an eviction alarm without loadOnDemand', () => {
    expect(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, loadOnDemand: 'true', modelMemoryLimitMiB: '12000' })).toThrow(
      /modelMemoryLimitMiB 12000 does not fit the task: its server budget is 12185 MiB \(85% of the 14336 MiB hard limit\), of which the server keeps 2048 MiB beside the models\. Set memoryLimitMiB to at least 16528/,
    );
    expect(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, modelGpuMemoryLimitMiB: '20000' })).toThrow(
      "modelGpuMemoryLimitMiB 20000 is more than the 16384 MiB of the task's GPU.",
    );
    expect(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, evictionsPerTaskPerMinute: '10' })).toThrow(
      "Context 'evictionsPerTaskPerMinute': only applies with loadOnDemand=true",
    );
    expect(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, modelCacheDiskGiB: '0' })).toThrow(
      "Context 'modelCacheDiskGiB': must be > 0, got 0.",
    );
  });
});
