// The background supervisor (filled in next).
import type { ClientOptions } from "./supervisor_paths.ts";

export async function runSupervisor(_options: ClientOptions = {}): Promise<number> {
  throw new Error("The supervisor is not written yet");
}
