/** vibe-semantic-client: `import { Client } from "vibe-semantic-client"`. */
export { Client } from "./client.js";
export type { BulkOptions, BulkProgress, CallOptions, ClientOptions, FetchLike } from "./client.js";
export { VibeError, isVibeError, parseRetryAfter } from "./errors.js";
export type { ErrorCode } from "./errors.js";
export type * from "./types.js";
export type { components, paths } from "./schema.js";
