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

  constructor(status: number, code: string, message: string, requestId: string | null) {
    super(`${status} ${code}: ${message}`);
    this.name = "ShellctlError";
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }

  /** Builds the error from an answer whose body was already read (or not). */
  static fromAnswer(response: Response, body: unknown, text?: string): ShellctlError {
    const env = body as { error?: { code?: unknown; message?: unknown } } | undefined;
    const requestId = response.headers.get("X-Request-Id");
    if (env && typeof env === "object" && env.error && typeof env.error.code === "string") {
      return new ShellctlError(response.status, env.error.code, String(env.error.message ?? ""), requestId);
    }
    const msg = (text ?? (typeof body === "string" ? body : JSON.stringify(body ?? ""))).trim();
    return new ShellctlError(response.status, `http_${response.status}`, msg, requestId);
  }
}
