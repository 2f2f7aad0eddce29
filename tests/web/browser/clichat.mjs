// `yuxi chat`'s local page in a real Chromium: tests/web/clichat_test.go
// starts the platform with a scripted model and `yuxi chat --no-open`, and
// this script opens the address the CLI printed, sends a message, sees the
// answer stream in (partial text before the end), runs /state, starts a new
// session, and checks the API key is nowhere in the page or its traffic.
//
// Environment: CHAT_URL (the address yuxi chat printed), API_KEY (must not
// appear), CONTROL_URL (POST /release/<name> lets a held answer go on),
// SHOTS (screenshot folder), CHROMIUM.
import { chromium } from 'playwright-core'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

const shots = process.env.SHOTS
const key = process.env.API_KEY
mkdirSync(shots, { recursive: true })
const fail = (msg) => { throw new Error(msg) }
const consoleErrors = []
const seen = [] // every response body the page received

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
})
let page
try {
  for (const scheme of ['light', 'dark']) {
    const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 }, colorScheme: scheme })
    page = await ctx.newPage()
    page.setDefaultTimeout(20000)
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()) })
    page.on('pageerror', (e) => consoleErrors.push('pageerror: ' + e.message))
    page.on('response', async (r) => {
      if ((r.headers()['content-type'] ?? '').includes('event-stream')) return
      try { seen.push(await r.text()) } catch {}
    })
    await page.goto(process.env.CHAT_URL)
    await page.getByText('default-chatbot').first().waitFor()

    // A held answer: its first words must show before it ends.
    await page.locator('#input').fill(`tell me a story (${scheme})`)
    await page.keyboard.press('Enter')
    await page.locator('.row.ai .bubble', { hasText: 'Once upon a time' }).waitFor()
    const partial = await page.locator('.row.ai .bubble').last().textContent()
    if (partial.includes('THE END')) fail('the answer was not streamed: it arrived whole')
    await page.screenshot({ path: join(shots, `clichat-streaming-${scheme}.png`) })
    await fetch(`${process.env.CONTROL_URL}/release/story-${scheme}`, { method: 'POST' })
    await page.locator('.row.ai .bubble', { hasText: 'THE END.' }).waitFor()
    // The text can arrive before the run's end event; /state is asked after it.
    await page.locator('.row.ai .bubble[data-status="completed"]').waitFor()
    const full = await page.locator('.row.ai .bubble').last().textContent()
    if ((full.match(/Once upon a time/g) ?? []).length !== 1) fail(`the answer is duplicated: ${full}`)

    await page.locator('#input').fill('/state')
    await page.getByRole('button', { name: 'Send' }).click()
    await page.locator('.row.sys .bubble', { hasText: 'latest run: completed' }).waitFor()
    await page.screenshot({ path: join(shots, `clichat-state-${scheme}.png`) })

    await page.getByRole('button', { name: 'New session' }).click()
    await page.locator('.row.sys .bubble', { hasText: 'new session' }).waitFor()
    if (await page.locator('.row.ai').count() !== 0) fail('a new session kept the old messages')
    await page.locator('#input').fill('/state')
    await page.keyboard.press('Enter')
    await page.locator('.row.sys .bubble', { hasText: 'latest run: none' }).waitFor()

    const html = await page.content()
    if (html.includes(key)) fail('the page contains the API key')
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie)
    if (stored.includes(key)) fail('the browser stores the API key')
    await ctx.close()
  }
  if (seen.some((b) => b.includes(key))) fail('a response to the page contains the API key')
  if (consoleErrors.length) fail('console errors: ' + consoleErrors.join(' | '))
  console.log('clichat: ok')
} catch (e) {
  if (page) await page.screenshot({ path: join(shots, 'clichat-failure.png') }).catch(() => {})
  console.error('clichat failed:', e.message)
  process.exitCode = 1
} finally {
  await browser.close()
}
