// The API's error envelope ({"error":{"code","message"}}) as a thrown value,
// so a caller can branch on `code` (job_not_found, idempotency_key_reused, …)
// instead of parsing messages.

export class ShellctlError extends Error {
  /** The HTTP status of the answer. */
  readonly status: number;
  /** The API's error code, or `http_<status>` when the answer had no envelope. */
  readonly code: string;
  /** The server's X-Request-Id, to find the request in its log. */
  readonly requestId: string | null;
  /** The envelope's other fields, e.g. `count` of edit_ambiguous. */
  readonly details: Record<string, unknown>;

  constructor(status: number, code: string, message: string, requestId: string | null, details: Record<string, unknown> = {}) {
    super(`${status} ${code}: ${message}`);
    this.name = "ShellctlError";
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.details = details;
  }

  /** Builds the error from an answer whose body was already read (or not). */
  static fromAnswer(response: Response, body: unknown, text?: string): ShellctlError {
    return ShellctlError.fromParts(response.status, response.headers.get("X-Request-Id"), body, text);
  }

  /** The same from a status, a request id and a body (parsed JSON, or text). */
  static fromParts(status: number, requestId: string | null, body: unknown, text?: string): ShellctlError {
    if (typeof body === "string" && text === undefined) {
      try {
        body = JSON.parse(body);
      } catch {
        text = body as string;
      }
    }
    const env = body as { error?: Record<string, unknown> } | undefined;
    if (env && typeof env === "object" && env.error && typeof env.error.code === "string") {
      const { code, message, ...details } = env.error;
      if (code === "input_backpressure") return new InputBackpressureError(status, String(message ?? ""), requestId, details);
      return new ShellctlError(status, code as string, String(message ?? ""), requestId, details);
    }
    const msg = (text ?? (typeof body === "string" ? body : JSON.stringify(body ?? ""))).trim();
    return new ShellctlError(status, `http_${status}`, msg, requestId);
  }
}

/**
 * 409 input_backpressure: the job did not read its stdin pipe in time.
 * `taken` bytes of the input (its first ones) were written; the rest were
 * not, and `eof` was not applied: send the rest again.
 */
export class InputBackpressureError extends ShellctlError {
  readonly taken: number;

  constructor(status: number, message: string, requestId: string | null, details: Record<string, unknown>) {
    super(status, "input_backpressure", message, requestId, details);
    this.name = "InputBackpressureError";
    this.taken = Number(details.taken ?? 0);
  }
}
