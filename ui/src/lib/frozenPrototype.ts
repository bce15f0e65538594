// Test support: runs code with Object.prototype's members read-only, as tauri.conf.json's
// freezePrototype leaves them in the window, and undoes it afterwards.
//
// Object.freeze itself cannot be undone and would also freeze the test runner's prototype for
// good; making each inherited data property non-writable is the part that matters here:
// assigning `toString` or `constructor` to a plain object then throws a TypeError in strict
// code, exactly as in the window.

/**
 * `run()`'s result, with every data property of Object.prototype read-only while it runs.
 * Synchronous code only: the prototype is writable again once `run` returns.
 */
export function withFrozenPrototype<T>(run: () => T): T {
  const descriptors = Object.getOwnPropertyDescriptors(Object.prototype);
  const frozen = Object.entries(descriptors).filter(
    ([, descriptor]) => "value" in descriptor && descriptor.writable === true,
  );
  for (const [name, descriptor] of frozen) {
    Object.defineProperty(Object.prototype, name, { ...descriptor, writable: false });
  }
  try {
    return run();
  } finally {
    for (const [name, descriptor] of frozen) Object.defineProperty(Object.prototype, name, descriptor);
  }
}
