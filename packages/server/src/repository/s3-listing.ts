import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { checkModelName } from './model-folder.ts';
import { formatRepositoryLocation, type S3RepositoryLocation } from './repository-url.ts';
import { isNotFound } from './s3-client.ts';
import { groupRepositoryObjects, unquoteEtag, type ModelListing, type RepositorySnapshot } from './snapshot.ts';

/** Reads what an S3 prefix holds in Triton layout: listings (keys, sizes, ETags) and config.pbtxt texts, nothing cached. */
export class S3Listing {
  constructor(
    private readonly client: S3Client,
    private readonly target: S3RepositoryLocation,
    /** Keys per ListObjectsV2 page (tests of pagination). @default - the server's (1000 on S3) */
    private readonly pageSize?: number,
  ) {}

  /** One ListObjectsV2 pagination pass over the repository prefix. */
  list(): Promise<RepositorySnapshot> {
    return this.listUnder(this.target.prefix);
  }

  /** One model's entry, listing only its prefix (for a localize without a snapshot). */
  async listModel(modelName: string): Promise<ModelListing | undefined> {
    checkModelName(modelName);
    const snapshot = await this.listUnder(`${this.target.prefix}${modelName}/`);
    return snapshot.models.find((m) => m.name === modelName);
  }

  /** config.pbtxt of a model, or undefined when it has none (auto-complete). */
  async readConfigText(modelName: string, listing?: ModelListing): Promise<string | undefined> {
    checkModelName(modelName);
    if (listing && !listing.config) return undefined;
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.target.bucket, Key: `${this.target.prefix}${modelName}/config.pbtxt` }),
      );
      return await res.Body!.transformToString('utf8');
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  private async listUnder(prefix: string): Promise<RepositorySnapshot> {
    const files: { relativePath: string; key: string; size: number; etag: string }[] = [];
    let token: string | undefined;
    let requests = 0;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.target.bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: this.pageSize }),
      );
      requests++;
      for (const o of page.Contents ?? []) {
        if (o.Key === undefined) continue;
        files.push({ relativePath: o.Key.slice(this.target.prefix.length), key: o.Key, size: o.Size ?? 0, etag: unquoteEtag(o.ETag) });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return groupRepositoryObjects(formatRepositoryLocation(this.target), files, requests);
  }
}
