/** Every failure the client reports is a `VibeError`: the API's stable error code and HTTP
 * status (DESIGN.md §5: `{"error": {"code", "message"}}`), or a client-side code with status 0
 * when no answer arrived (`network_error`, `timeout`, `stream_interrupted`, `bad_response`). */

/** The API's stable codes (shared/errors.py) plus the client's own; other strings may appear
 * as the API grows, so the type stays open. */
export type ErrorCode =
  | "invalid_params"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "payload_too_large"
  | "rate_limited"
  | "embedder_unavailable"
  | "dimension_mismatch"
  | "conflict"
  | "internal_error"
  | "network_error"
  | "timeout"
  | "stream_interrupted"
  | "bad_response"
  | (string & {});

export class VibeError extends Error {
  override readonly name = "VibeError";
  /** Seconds the server asked us to wait (`Retry-After`), when it said. */
  readonly retryAfter: number | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status: number,
    readonly details?: Record<string, unknown>,
    retryAfter?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.retryAfter = retryAfter;
  }
}

export function isVibeError(e: unknown): e is VibeError {
  return e instanceof VibeError;
}

/** `Retry-After` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value == null || value.trim() === "") return undefined;
  const secs = Number(value);
  if (Number.isFinite(secs)) return Math.max(0, secs);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}

/** The error an HTTP answer carries: the API's body when it is one, else a generic code per status. */
export async function errorFrom(response: Response): Promise<VibeError> {
  const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    body = undefined;
  }
  const err = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  if (err && typeof err.code === "string") {
    const message = typeof err.message === "string" ? err.message : err.code;
    const details = err.details && typeof err.details === "object" ? (err.details as Record<string, unknown>) : undefined;
    return new VibeError(err.code, message, response.status, details, retryAfter);
  }
  return new VibeError(fallbackCode(response.status), `HTTP ${response.status}`, response.status, undefined, retryAfter);
}

function fallbackCode(status: number): ErrorCode {
  const byStatus: Record<number, ErrorCode> = {
    400: "invalid_params", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 413: "payload_too_large", 429: "rate_limited", 503: "embedder_unavailable",
  };
  return byStatus[status] ?? (status >= 500 ? "internal_error" : "bad_response");
}
