// `ServiceApiError`: what every operation throws when the runtime answers with an error.

/** The daemon's error envelope: `{"error": {"code", "message", "status"}}`. */
export interface ServiceErrorBody {
  error: { code: string; message: string; status: number };
}

/**
 * A failed response. `message` is the error envelope's message when the body is one
 * (`conversation \`conv_…\` was not found`), else the status line; `body` is the parsed body
 * (JSON when it parses, else its text, else `undefined`); `response` the original response
 * (its body already read).
 */
export class ServiceApiError extends Error {
  override readonly name = "ServiceApiError";
  readonly status: number;
  readonly body: unknown;
  readonly response: Response;

  constructor(message: string, status: number, body: unknown, response: Response) {
    super(message);
    this.status = status;
    this.body = body;
    this.response = response;
  }

  /** The envelope's `code` (`CONVERSATION_NOT_FOUND`, `VALIDATION_ERROR`, …), when there is one. */
  get code(): string | undefined {
    return isErrorBody(this.body) ? this.body.error.code : undefined;
  }

  /** The request's id (`X-Request-Id`, also the envelope's `requestId`): quote it when reporting a failure. */
  get requestId(): string | undefined {
    const inBody = isErrorBody(this.body) ? (this.body.error as { requestId?: unknown }).requestId : undefined;
    return typeof inBody === "string" ? inBody : (this.response.headers.get("x-request-id") ?? undefined);
  }

  /** Reads a failed response's body and makes the error. */
  static async fromResponse(response: Response): Promise<ServiceApiError> {
    let body: unknown;
    try {
      const text = await response.text();
      body = parseBody(text);
    } catch {
      body = undefined;
    }
    return new ServiceApiError(errorMessage(body, response.status, response.statusText), response.status, body, response);
  }
}

/** Whether `body` is the daemon's error envelope. */
export function isErrorBody(body: unknown): body is ServiceErrorBody {
  if (typeof body !== "object" || body === null) return false;
  const error = (body as { error?: unknown }).error;
  return typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string";
}

export function errorMessage(body: unknown, status: number, statusText: string): string {
  if (isErrorBody(body)) return body.error.message;
  if (typeof body === "object" && body !== null) {
    const message = (body as { message?: unknown }).message;
    if (typeof message === "string" && message) return message;
  }
  if (typeof body === "string" && body.trim() && body.length <= 500) return body.trim();
  return `request failed with status ${status}${statusText ? ` ${statusText}` : ""}`;
}

function parseBody(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
