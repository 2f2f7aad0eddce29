// The web UI journey in a real Chromium (Debian's, through playwright-core).
// tests/web/web_test.go starts the platform with a scripted model and runs
// this script; it exits non-zero with a message on the first failed step.
//
// Environment: BASE_URL (the platform), CONTROL_URL (the test's control
// server: POST /release/<name> lets a held model answer go on), SHOTS (the
// folder for screenshots), MD_FILE (a Markdown file to upload), CHROMIUM.
import { chromium } from 'playwright-core'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

const base = process.env.BASE_URL
const control = process.env.CONTROL_URL
const shots = process.env.SHOTS
const mdFile = process.env.MD_FILE
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
    if (allowHTTPErrors && /status of 401/.test(m.text())) return
    consoleErrors.push(m.text())
  })
  page.on('pageerror', (e) => consoleErrors.push('pageerror: ' + e.message))
  page.on('requestfailed', (r) => {
    // Streams the page closes itself (navigation, reload, a finished stream) end as aborted.
    if ((r.failure()?.errorText ?? '').includes('ERR_ABORTED')) return
    failedRequests.push(`${r.method()} ${r.url()} ${r.failure()?.errorText}`)
  })

  let shotNo = 0
  async function shot(name) {
    shotNo++
    const stem = join(shots, `${String(shotNo).padStart(2, '0')}-${name}`)
    await page.evaluate(() => document.documentElement.classList.remove('dark'))
    await page.screenshot({ path: `${stem}-light.png` })
    await page.evaluate(() => document.documentElement.classList.add('dark'))
    await page.screenshot({ path: `${stem}-dark.png` })
    await page.evaluate(() => document.documentElement.classList.toggle('dark', localStorage.getItem('yuxi.theme') === 'dark'))
  }
  const release = (name) => fetch(`${control}/release/${name}`, { method: 'POST' }).then((r) => { if (!r.ok) throw new Error('release ' + r.status) })
  const fail = (msg) => { throw new Error(msg) }

  // 1. First run: the superadmin is created on the first-run screen.
  log('first run')
  await page.goto(base + '/')
  await page.waitForURL('**/login**')
  await page.getByRole('heading', { name: 'Create the superadmin' }).waitFor()
  await shot('first-run')
  await page.fill('#uid', 'admin')
  await page.fill('#password', 'admin-password-1')
  await page.getByRole('button', { name: 'Create' }).click()
  await page.waitForURL('**/chat**')

  // 2. Login: a wrong password gets the generic message; then keyboard-only sign-in.
  log('login')
  await page.evaluate(() => localStorage.removeItem('yuxi.token'))
  await page.goto(base + '/login')
  await page.getByRole('heading', { name: 'Sign in' }).waitFor()
  allowHTTPErrors = true
  await page.fill('#uid', 'admin')
  await page.fill('#password', 'wrong-password')
  await page.keyboard.press('Enter')
  await page.getByTestId('login-error').filter({ hasText: 'Wrong account or password.' }).waitFor()
  allowHTTPErrors = false
  await shot('login-failed')
  await page.focus('#uid')
  await page.keyboard.press('Tab')
  await page.keyboard.press('Control+A')
  await page.keyboard.type('admin-password-1')
  await page.keyboard.press('Enter')
  await page.waitForURL('**/chat**')
  await shot('chat-empty')

  // 3. Knowledge base: create, upload a Markdown file, watch it reach indexed.
  log('knowledge base')
  await page.getByRole('link', { name: 'Knowledge' }).click()
  await page.getByTestId('kb-new').click()
  await page.fill('#kb-name', 'Handbook')
  await page.fill('#kb-desc', 'Company handbook')
  await page.getByTestId('kb-create').click()
  await page.waitForURL(/\/knowledge\/[^/]+$/)
  await page.getByTestId('kb-upload').setInputFiles(mdFile)
  await page.locator('[data-testid=kb-files] tr[data-status=indexed]').waitFor({ timeout: 60000 })
  await shot('kb-indexed')

  // 4. Chat: a new thread, an answer streams in (partial text before the end).
  log('chat')
  await page.getByRole('link', { name: 'Chat' }).click()
  await page.getByTestId('new-thread').click()
  await page.waitForURL('**/chat/*')
  await page.getByTestId('composer').fill('Tell me a story')
  await page.getByTestId('composer').press('Enter')
  const live = page.locator('[data-testid=msg-ai][data-live=true]')
  await live.filter({ hasText: 'Once upon a time' }).waitFor()
  if (await page.locator('[data-testid=messages]').getByText('THE END.').count()) fail('the whole answer was there before it was released')
  await page.getByTestId('stop').waitFor()
  await shot('streaming-partial')

  // 5. Reload mid-stream: the answer continues from the run's stream, once.
  log('reload mid-stream')
  await page.reload()
  await live.filter({ hasText: 'Once upon a time' }).waitFor()

  // 6. Queue a second message while the first runs; it shows its position.
  log('queue')
  await page.getByTestId('composer').fill('And a second question')
  await page.getByTestId('send').click()
  await page.getByTestId('queued-item').filter({ hasText: 'position 1' }).waitFor()
  await shot('queued')
  await release('story')
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'THE END.' }).waitFor()
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'Second answer.' }).waitFor()
  await page.getByTestId('queued-item').waitFor({ state: 'detached' })
  const text = await page.getByTestId('messages').innerText()
  const count = (s) => text.split(s).length - 1
  if (count('Once upon a time') !== 1 || count('THE END.') !== 1 || count('Second answer.') !== 1) {
    fail(`each answer must appear exactly once, got:\n${text}`)
  }
  await shot('answers-complete')

  // 7. ask_user_question: the form answers the question and the run resumes.
  log('ask_user_question')
  await page.getByTestId('composer').fill('Plan my trip')
  await page.getByTestId('composer').press('Enter')
  const form = page.getByTestId('ask-form')
  await form.waitFor()
  await shot('question')
  await form.getByLabel('Kyoto').check()
  await form.getByRole('button', { name: 'Submit answer' }).click()
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'You chose kyoto.' }).waitFor()
  await form.waitFor({ state: 'detached' })

  // 8. Cancel a slow run with the stop button.
  log('cancel')
  await page.getByTestId('composer').fill('Think slowly')
  await page.getByTestId('composer').press('Enter')
  await live.filter({ hasText: 'Thinking slowly' }).waitFor()
  await page.getByTestId('stop').click()
  await page.getByTestId('stop').waitFor({ state: 'detached' })
  await page.getByText('Stopped').first().waitFor()
  await shot('cancelled')

  // 9. The language switch (zh) on the main screen.
  await page.getByTestId('lang').click()
  await page.getByRole('link', { name: '知识库' }).waitFor()
  await shot('chat-zh')

  if (consoleErrors.length) fail('console errors:\n' + consoleErrors.join('\n'))
  if (failedRequests.length) fail('failed requests:\n' + failedRequests.join('\n'))
  log('journey passed')
} catch (e) {
  if (page) await page.screenshot({ path: join(shots, 'failure.png') }).catch(() => {})
  console.error('journey failed:', e?.stack ?? e)
  if (consoleErrors.length) console.error('console errors:\n' + consoleErrors.join('\n'))
  process.exitCode = 1
} finally {
  await browser.close()
}
