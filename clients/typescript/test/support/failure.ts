// The error an operation that should fail throws.

import { expect } from "vitest";
import { ServiceApiError } from "../../src/index.js";

/** Awaits `promise`, which must reject with a ServiceApiError, and returns that error. */
export async function failure(promise: Promise<unknown>): Promise<ServiceApiError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceApiError);
    return error as ServiceApiError;
  }
  throw new Error("the operation succeeded but should have failed");
}
