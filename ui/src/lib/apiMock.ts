// UI tests put this in place of api.ts: each command a typed mock that refuses until answered.
import { vi, type Mock } from "vitest";
import type * as Api from "./api";

type Commands = typeof Api;

/**
 * api.ts with every function a typed `vi.fn`, so a test answers with the real types
 * (`api.listProviders.mockResolvedValue([...])`) and a Rust change that the generated
 * bindings carry fails svelte-check in the tests too.
 */
export type ApiMock = {
  [Name in keyof Commands]: Commands[Name] extends (...args: infer Args) => infer Result
    ? Mock<(...args: Args) => Result>
    : Commands[Name];
};

/** The helpers in api.ts that call no command keep their real code. */
const PURE = new Set<string>(["mediaUrl", "mediaPathUrl", "samplingImageUrl", "commandError", "errorMessage"]);

function refuse(name: string) {
  return () => Promise.reject(new Error(`unexpected command ${name}`));
}

/** The mocked module, for `vi.mock("…/lib/api", (importOriginal) => mockedApi(importOriginal))`. */
export async function mockedApi(importOriginal: () => Promise<Commands>): Promise<ApiMock> {
  const real = await importOriginal();
  const mocked: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(real)) {
    mocked[name] = PURE.has(name) || typeof value !== "function" ? value : vi.fn(refuse(name));
  }
  return mocked as ApiMock;
}

/** Makes every command refuse again, forgetting its calls (between tests). */
export function resetApi(api: ApiMock): void {
  for (const [name, value] of Object.entries(api as Record<string, unknown>)) {
    if (!PURE.has(name) && vi.isMockFunction(value)) {
      value.mockReset();
      value.mockImplementation(refuse(name));
    }
  }
}
