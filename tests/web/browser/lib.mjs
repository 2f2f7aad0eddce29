// What the browser scripts share: Chromium (Debian's, through
// playwright-core), a page that records console errors and failed requests,
// screenshots light and dark with an axe-core check of each, and the
// closing verdict. journey.mjs and extras.mjs use it.
import { chromium } from 'playwright-core'
import { mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

// axe-core is evaluated in the page over the DevTools protocol (the page's
// CSP, default-src 'self', would refuse an injected script tag).
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

export const fail = (msg) => { throw new Error(msg) }

/**
 * Runs steps(s) with s = { page, log, shot, a11y, allowErrors(on), fail };
 * exits non-zero (process.exitCode) on the first failed step, on a console
 * error or on a failed request the script did not provoke (allowErrors).
 */
export async function run(name, shots, steps) {
  mkdirSync(shots, { recursive: true })
  const started = Date.now()
  const log = (msg) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`)
  const consoleErrors = []
  const failedRequests = []
  let allowHTTPErrors = false // set while a step provokes an error answer on purpose
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  })
  let page
  try {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })
    page = await ctx.newPage()
    page.setDefaultTimeout(20000)
    page.on('console', (m) => {
      if (m.type() !== 'error') return
      if (allowHTTPErrors && /status of [45]\d\d/.test(m.text())) return
      consoleErrors.push(m.text())
    })
    page.on('pageerror', (e) => consoleErrors.push('pageerror: ' + e.message))
    page.on('response', (r) => {
      if (r.status() >= 400 && !allowHTTPErrors) failedRequests.push(`${r.request().method()} ${r.url()} ${r.status()}`)
    })
    page.on('requestfailed', (r) => {
      // Streams the page closes itself (navigation, reload, a finished stream) end as aborted.
      if ((r.failure()?.errorText ?? '').includes('ERR_ABORTED')) return
      failedRequests.push(`${r.method()} ${r.url()} ${r.failure()?.errorText}`)
    })

    // a11y runs axe-core on the page as it is; serious and critical
    // violations fail the script, the others are printed.
    const a11yChecked = []
    async function a11y(what) {
      if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource)
      const violations = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
        .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) })))
      const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      for (const v of violations) if (!bad.includes(v)) log(`a11y ${what}: ${v.impact} ${v.id} (${v.help}) ${v.nodes.join(', ')}`)
      if (bad.length) fail(`axe-core on ${what}: ${bad.length} serious violations:\n` + bad.map((v) => `${v.impact} ${v.id}: ${v.help} — ${v.nodes.join(', ')}`).join('\n'))
      a11yChecked.push(what)
    }
    let shotNo = 0
    async function shot(what) {
      shotNo++
      const stem = join(shots, `${String(shotNo).padStart(2, '0')}-${what}`)
      await page.evaluate(() => document.documentElement.classList.remove('dark'))
      await page.screenshot({ path: `${stem}-light.png` })
      await a11y(what + ' (light)')
      await page.evaluate(() => document.documentElement.classList.add('dark'))
      await page.screenshot({ path: `${stem}-dark.png` })
      await a11y(what + ' (dark)')
      await page.evaluate(() => document.documentElement.classList.toggle('dark', localStorage.getItem('yuxi.theme') === 'dark'))
    }
    await steps({ page, log, shot, a11y, fail, allowErrors: (on) => { allowHTTPErrors = on } })
    log(`axe-core: ${a11yChecked.length} checks without serious violations`)
    if (consoleErrors.length) fail('console errors:\n' + consoleErrors.join('\n'))
    if (failedRequests.length) fail('failed requests:\n' + failedRequests.join('\n'))
    log(`${name} passed`)
  } catch (e) {
    if (page) await page.screenshot({ path: join(shots, 'failure.png') }).catch(() => {})
    console.error(`${name} failed:`, e?.stack ?? e)
    if (consoleErrors.length) console.error('console errors:\n' + consoleErrors.join('\n'))
    if (failedRequests.length) console.error('failed requests:\n' + failedRequests.join('\n'))
    process.exitCode = 1
  } finally {
    await browser.close()
  }
}

/** fetch in the page with the signed-in user's token. */
export function authed(page, path, init = {}) {
  return page.evaluate(async ([path, init]) => {
    const r = await fetch(path, { ...init, headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + localStorage.getItem('yuxi.token'), ...(init.headers ?? {}) } })
    return { status: r.status, body: await r.json().catch(() => null) }
  }, [path, init])
}
