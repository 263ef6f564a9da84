import { describe, expect, test } from "bun:test";
import { answerHostRequest, NO_HOST_BRIDGE } from "./host_bridge.ts";

describe("answerHostRequest", () => {
  test("without a handler: the clear error", async () => {
    expect(await answerHostRequest(undefined, { q: 1 })).toEqual(NO_HOST_BRIDGE);
  });

  test("the handler's object, sync or async; anything else as {value}", async () => {
    expect(await answerHostRequest((d) => ({ echo: d }), { q: 1 })).toEqual({ echo: { q: 1 } });
    expect(await answerHostRequest(async () => ({ later: true }), {})).toEqual({ later: true });
    expect(await answerHostRequest(() => 42, {})).toEqual({ value: 42 });
    expect(await answerHostRequest(() => [1, 2], {})).toEqual({ value: [1, 2] });
    expect(await answerHostRequest(() => undefined, {})).toEqual({ value: null });
  });

  test("a handler that throws or rejects, or a reply JSON cannot carry, is an {error} naming why", async () => {
    expect(
      await answerHostRequest(() => {
        throw new Error("boom");
      }, {}),
    ).toEqual({ error: "the host's handler failed: boom" });
    expect(await answerHostRequest(() => Promise.reject(new Error("late boom")), {})).toEqual({ error: "the host's handler failed: late boom" });
    const reply = await answerHostRequest(() => ({ big: 1n }), {});
    expect(String(reply.error)).toStartWith("the host's reply is not JSON");
  });
});
