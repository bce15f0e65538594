import { describe, expect, it } from "vitest";
import { commandError, errorMessage } from "./api";
import type { CommandError } from "./types";

describe("commandError", () => {
  it("reads the host's typed error with its action", () => {
    const rejected: CommandError = { message: "No API key for work", action: "open_settings" };
    expect(commandError(rejected)).toEqual(rejected);
    expect(errorMessage(rejected)).toBe("No API key for work");
  });

  it("keeps only actions the window knows", () => {
    expect(commandError({ message: "x", action: "format_disk" })).toEqual({ message: "x" });
  });

  it("gives anything else its text", () => {
    expect(commandError("plain")).toEqual({ message: "plain" });
    expect(commandError(new Error("thrown"))).toEqual({ message: "thrown" });
    expect(commandError(42)).toEqual({ message: "42" });
  });
});
