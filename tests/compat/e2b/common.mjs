// Shared by the E2B compatibility tests: run.sh sets E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY for a private `paddock serve`.
import assert from 'node:assert/strict'

export const API = process.env.E2B_API_URL
export const KEY = process.env.E2B_API_KEY
assert.ok(API && KEY && process.env.E2B_SANDBOX_URL, 'run through run.sh (E2B_* variables)')

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// Poll fn() until it returns a truthy value (or time runs out).
export async function until(fn, ms = 10000, step = 100) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) return v
    await sleep(step)
  }
}

// Kill every sandbox a test made, even when it failed.
export function tracker() {
  const made = []
  return {
    add(sbx) { made.push(sbx); return sbx },
    async cleanup() { await Promise.allSettled(made.map((s) => s.kill())) },
  }
}
